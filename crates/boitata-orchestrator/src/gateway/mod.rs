//! The model gateway: agents inside sandboxes call the model through the orchestrator,
//! so the provider's API key never enters a sandbox.
//!
//! One [`ModelGateway`] serves a whole orchestrator process (the CLI for local runs,
//! the server for remote ones). Each run that drives an agent in a sandbox gets a
//! **grant** ([`ModelGateway::grant`]): the run's real provider endpoint and API key,
//! its [`BudgetMeter`] and its [`Emitter`], under a fresh random **gateway token**.
//! The agent inside is configured with the gateway's URL and that token only.
//!
//! The gateway speaks the provider's own API, streaming and not:
//! - OpenAI Chat Completions, `POST /v1/chat/completions`, token in
//!   `Authorization: Bearer TOKEN`;
//! - Anthropic Messages, `POST /v1/messages`, token in `x-api-key: TOKEN`.
//!
//! The token is compared in constant time. A request is admitted by the run's budget
//! meter, forwarded to the real provider with the real key ([`reqwest`]), and the
//! answer streamed back as it arrives. The gateway reads the provider's own usage
//! report from the answer (for OpenAI streaming it asks for one with
//! `stream_options.include_usage`), emits the run's `usage` event and charges the
//! meter: the agent's own count is not trusted. A spent budget refuses further
//! requests with HTTP 402 and the provider's error shape, whose message is the run's
//! (`budget exceeded: tokens 120034 > 120000`), after one `budget_exceeded` event.
//! When the run ends its grant is revoked ([`ModelGateway::revoke`]): the token is
//! then refused with 401.
//!
//! Listeners: [`ModelGateway::serve_on`] makes the gateway listen on an address a
//! sandbox can reach, its Docker network's gateway address on the host, on a port the
//! system picks. Listeners are shared and counted: one per address for as long as a
//! grant uses it. An unspecified address (`0.0.0.0`, `::`) is refused: the gateway
//! never listens on every interface.
//!
//! ```no_run
//! use boitata_orchestrator::gateway::{ModelGateway, RunGrant, Upstream};
//! # async fn demo(grant: RunGrant) -> Result<(), boitata_orchestrator::gateway::GatewayError> {
//! let gateway = ModelGateway::new()?;
//! let token = gateway.grant(grant)?;
//! let addr = gateway.serve_on(&token, "172.17.0.1".parse().unwrap()).await?;
//! // the agent: base_url http://{addr}/v1, api key = token
//! gateway.revoke(&token);
//! # let _ = addr; Ok(()) }
//! ```

mod forward;
mod usage;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, RwLock};

use axum::extract::DefaultBodyLimit;
use axum::routing::post;
use axum::Router;
use boitata_core::budget::BudgetMeter;
use boitata_core::config::{Config, ProviderKind};
use boitata_core::Emitter;
use boitata_provider::anthropic::Anthropic;
use boitata_provider::openai::OpenAi;
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

/// The most a request body to the gateway may be, in bytes (a long conversation with
/// large tool results is several MiB).
pub const MAX_REQUEST_BYTES: usize = 64 << 20;

/// The prefix of every gateway token, so that one is recognisable in a log.
pub const TOKEN_PREFIX: &str = "bgw-";

/// Which provider API a grant forwards to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamApi {
    /// OpenAI Chat Completions (and compatible servers).
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

impl UpstreamApi {
    /// The path the gateway serves this API on.
    pub fn path(self) -> &'static str {
        match self {
            UpstreamApi::OpenAi => "/v1/chat/completions",
            UpstreamApi::Anthropic => "/v1/messages",
        }
    }

    /// The `base_url` an agent configured for this API uses to reach a gateway
    /// listening on `addr` (the provider appends its own path to it).
    pub fn base_url(self, addr: SocketAddr) -> String {
        match self {
            UpstreamApi::OpenAi => format!("http://{addr}/v1"),
            UpstreamApi::Anthropic => format!("http://{addr}"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            UpstreamApi::OpenAi => "openai",
            UpstreamApi::Anthropic => "anthropic",
        }
    }
}

/// Where a run's model requests really go: the provider's endpoint and the real key.
#[derive(Clone)]
pub struct Upstream {
    /// The API.
    pub api: UpstreamApi,
    /// The full endpoint URL (`https://api.openai.com/v1/chat/completions`).
    pub url: String,
    /// The real API key, if the endpoint needs one.
    pub api_key: Option<String>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("api", &self.api)
            .field("url", &self.url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .finish()
    }
}

impl Upstream {
    /// The upstream of `config`'s provider with `api_key`: the same endpoint URL the
    /// provider itself would call. `None` for a provider that calls no model API
    /// (`scripted`).
    ///
    /// # Errors
    /// [`GatewayError::Provider`] when the provider settings are invalid (a key that
    /// cannot be a header value, a missing key for the vendor's URL).
    pub fn from_config(
        config: &Config,
        api_key: Option<String>,
    ) -> Result<Option<Self>, GatewayError> {
        let mut provider = config.provider.clone();
        provider.api_key = api_key.clone();
        let (api, url) = match provider.kind {
            ProviderKind::Scripted => return Ok(None),
            ProviderKind::Openai => (
                UpstreamApi::OpenAi,
                OpenAi::from_config(&provider)?.url().to_owned(),
            ),
            ProviderKind::Anthropic => (
                UpstreamApi::Anthropic,
                Anthropic::from_config(&provider)?.url().to_owned(),
            ),
        };
        Ok(Some(Upstream { api, url, api_key }))
    }
}

/// What a run is granted: where its requests go, what they are charged to, where its
/// events go.
#[derive(Debug, Clone)]
pub struct RunGrant {
    /// The run.
    pub run_id: String,
    /// The real provider.
    pub upstream: Upstream,
    /// The run's budget meter.
    pub budget: BudgetMeter,
    /// The run's emitter: `usage` and `budget_exceeded` events go there.
    pub emitter: Emitter,
}

/// A grant as the gateway keeps it.
struct Grant {
    run: RunGrant,
    token: String,
    /// The node whose agent is calling, to tag events with.
    node: Mutex<Option<String>>,
    /// The listeners this grant keeps open.
    leases: Mutex<HashMap<IpAddr, ListenerLease>>,
}

impl Grant {
    fn node(&self) -> Option<String> {
        self.node.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// What can go wrong setting the gateway up.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The gateway would listen on every interface.
    #[error(
        "the model gateway never listens on an unspecified address ({ip}): give it the \
         sandbox network's gateway address"
    )]
    Unspecified {
        /// The address refused.
        ip: IpAddr,
    },
    /// The address cannot be bound on this machine.
    #[error(
        "the model gateway cannot listen on {ip}: {source} (the sandbox network's gateway \
         address must be an address of this machine: is the Docker daemon remote?)"
    )]
    Bind {
        /// The address.
        ip: IpAddr,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// The token names no grant (revoked, or never made).
    #[error("no model gateway grant for this token: the run has ended")]
    UnknownToken,
    /// No token could be made.
    #[error("cannot make a model gateway token: {0}")]
    Random(String),
    /// The provider settings are unusable.
    #[error(transparent)]
    Provider(#[from] boitata_provider::ProviderError),
    /// The HTTP client could not be built.
    #[error("cannot build the model gateway's HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

/// The model gateway of one orchestrator process. Cheap to clone (`Arc`). See the
/// module docs.
#[derive(Clone)]
pub struct ModelGateway {
    shared: Arc<Shared>,
}

struct Shared {
    grants: RwLock<Vec<Arc<Grant>>>,
    listeners: Mutex<HashMap<IpAddr, Listener>>,
    client: reqwest::Client,
}

/// One listening socket and how many grants use it.
struct Listener {
    addr: SocketAddr,
    users: usize,
    stop: CancellationToken,
}

impl std::fmt::Debug for ModelGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let grants = self.read_grants().len();
        let listeners: Vec<SocketAddr> = self.lock_listeners().values().map(|l| l.addr).collect();
        f.debug_struct("ModelGateway")
            .field("grants", &grants)
            .field("listeners", &listeners)
            .finish()
    }
}

impl ModelGateway {
    /// A gateway with no grant and no listener.
    ///
    /// # Errors
    /// [`GatewayError::Client`] when the HTTP client cannot be built.
    pub fn new() -> Result<Self, GatewayError> {
        // No overall timeout: an answer streams for as long as the model writes; the
        // agent's own provider timeouts bound it from the other side.
        let client = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(30))
            .build()
            .map_err(GatewayError::Client)?;
        Ok(ModelGateway {
            shared: Arc::new(Shared {
                grants: RwLock::new(Vec::new()),
                listeners: Mutex::new(HashMap::new()),
                client,
            }),
        })
    }

    /// Grants `run` access to its provider through the gateway and returns its token
    /// (`bgw-` and 64 hex digits). The token is added to the run's redactor.
    ///
    /// # Errors
    /// [`GatewayError::Random`] when no token can be made.
    pub fn grant(&self, run: RunGrant) -> Result<String, GatewayError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| GatewayError::Random(e.to_string()))?;
        let token: String = std::iter::once(TOKEN_PREFIX.to_owned())
            .chain(bytes.iter().map(|b| format!("{b:02x}")))
            .collect();
        run.emitter.add_secrets([token.clone()]);
        if let Some(key) = &run.upstream.api_key {
            run.emitter.add_secrets([key.clone()]);
        }
        let grant = Arc::new(Grant {
            run,
            token: token.clone(),
            node: Mutex::new(None),
            leases: Mutex::new(HashMap::new()),
        });
        self.write_grants().push(grant);
        Ok(token)
    }

    /// Tags the grant's later events with `node` (the node whose agent calls now).
    pub fn set_node(&self, token: &str, node: Option<&str>) {
        if let Some(grant) = self.find(token) {
            *grant.node.lock().unwrap_or_else(|p| p.into_inner()) = node.map(str::to_owned);
        }
    }

    /// Revokes the grant of `token`: later requests with it are refused (401), and the
    /// listeners it alone kept open close. Revoking twice is harmless.
    pub fn revoke(&self, token: &str) {
        let removed: Vec<Arc<Grant>> = {
            let mut grants = self.write_grants();
            let (gone, kept) = grants.drain(..).partition(|g| g.token == token);
            *grants = kept;
            gone
        };
        for grant in removed {
            grant
                .leases
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clear();
        }
    }

    /// Makes the gateway listen on `ip` (if it does not already) for as long as the
    /// grant of `token` lasts, and returns the address it listens on there.
    ///
    /// # Errors
    /// [`GatewayError::Unspecified`] for `0.0.0.0` or `::`; [`GatewayError::Bind`];
    /// [`GatewayError::UnknownToken`].
    pub async fn serve_on(&self, token: &str, ip: IpAddr) -> Result<SocketAddr, GatewayError> {
        let grant = self.find(token).ok_or(GatewayError::UnknownToken)?;
        if let Some(lease) = grant
            .leases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&ip)
        {
            return Ok(lease.addr);
        }
        let lease = self.listen(ip).await?;
        let addr = lease.addr;
        grant
            .leases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(ip)
            .or_insert(lease);
        Ok(addr)
    }

    /// A lease on a listener on `ip`: binds one (on a port the system picks) if there
    /// is none yet. The listener closes when its last lease is dropped.
    ///
    /// # Errors
    /// [`GatewayError::Unspecified`], [`GatewayError::Bind`].
    pub async fn listen(&self, ip: IpAddr) -> Result<ListenerLease, GatewayError> {
        if ip.is_unspecified() {
            return Err(GatewayError::Unspecified { ip });
        }
        if let Some(listener) = self.lock_listeners().get_mut(&ip) {
            listener.users += 1;
            return Ok(self.lease(ip, listener.addr));
        }
        let socket = tokio::net::TcpListener::bind(SocketAddr::new(ip, 0))
            .await
            .map_err(|source| GatewayError::Bind { ip, source })?;
        let addr = socket
            .local_addr()
            .map_err(|source| GatewayError::Bind { ip, source })?;
        let mut listeners = self.lock_listeners();
        if let Some(listener) = listeners.get_mut(&ip) {
            // Another caller bound it meanwhile: use theirs, drop ours.
            listener.users += 1;
            return Ok(self.lease(ip, listener.addr));
        }
        let stop = CancellationToken::new();
        let app = self.router();
        let stopped = stop.clone();
        tokio::spawn(async move {
            let serve = axum::serve(socket, app).with_graceful_shutdown(stopped.cancelled_owned());
            if let Err(e) = serve.await {
                tracing::error!("model gateway on {addr} stopped: {e}");
            }
        });
        tracing::debug!("model gateway listening on {addr}");
        listeners.insert(
            ip,
            Listener {
                addr,
                users: 1,
                stop,
            },
        );
        Ok(self.lease(ip, addr))
    }

    /// The gateway's HTTP routes, for a listener of one's own (tests drive it on
    /// loopback).
    pub fn router(&self) -> Router {
        Router::new()
            .route(UpstreamApi::OpenAi.path(), post(forward::openai))
            .route(UpstreamApi::Anthropic.path(), post(forward::anthropic))
            .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
            .with_state(self.clone())
    }

    /// The grant whose token is `presented`, compared in constant time with every
    /// grant's token.
    fn authorize(&self, presented: &str) -> Option<Arc<Grant>> {
        let grants = self.read_grants();
        let mut found = None;
        for grant in grants.iter() {
            let same: bool = grant.token.as_bytes().ct_eq(presented.as_bytes()).into();
            if same {
                found = Some(grant.clone());
            }
        }
        found
    }

    fn find(&self, token: &str) -> Option<Arc<Grant>> {
        self.read_grants()
            .iter()
            .find(|g| g.token == token)
            .cloned()
    }

    fn lease(&self, ip: IpAddr, addr: SocketAddr) -> ListenerLease {
        ListenerLease {
            gateway: Arc::downgrade(&self.shared),
            ip,
            addr,
        }
    }

    fn read_grants(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<Grant>>> {
        self.shared.grants.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_grants(&self) -> std::sync::RwLockWriteGuard<'_, Vec<Arc<Grant>>> {
        self.shared
            .grants
            .write()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn lock_listeners(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Listener>> {
        self.shared
            .listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }
}

/// A share of a gateway listener; the listener closes when its last lease drops.
#[derive(Debug)]
pub struct ListenerLease {
    gateway: std::sync::Weak<Shared>,
    ip: IpAddr,
    addr: SocketAddr,
}

impl ListenerLease {
    /// Where the listener is.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for ListenerLease {
    fn drop(&mut self) {
        let Some(shared) = self.gateway.upgrade() else {
            return;
        };
        let mut listeners = shared.listeners.lock().unwrap_or_else(|p| p.into_inner());
        let last = match listeners.get_mut(&self.ip) {
            Some(listener) => {
                listener.users = listener.users.saturating_sub(1);
                listener.users == 0
            }
            None => false,
        };
        if last {
            if let Some(listener) = listeners.remove(&self.ip) {
                listener.stop.cancel();
                tracing::debug!("model gateway on {} closed", listener.addr);
            }
        }
    }
}
