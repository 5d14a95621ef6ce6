//! Starting and stopping a server: options, the start-up checks, the router.

use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use axum::Router;
use boitata_blueprint::RuntimeSource;
use boitata_core::config::{Config, EnvSource, ProcessEnv};
use boitata_core::store::{RunStore, SqliteStore, StoreError};
use tokio::net::TcpListener;
use tower_http::trace::TraceLayer;

use crate::auth::{self, ApiToken};
use crate::backends::Backends;
use crate::catalog::{BlueprintCatalog, CatalogError, Rejected};
use crate::host_guard::{self, HostPolicy};
use crate::recovery::{recover_interrupted, Recovery};
use crate::request_log::RequestSpan;
use crate::scheduler::{Scheduler, SchedulerParts};
use crate::state::AppState;
use crate::{api, sse, ui};

/// The default address: loopback only.
pub const DEFAULT_BIND: &str = "127.0.0.1:8420";

/// The largest request body accepted, in bytes (a run request is a few hundred).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Everything a server needs to start.
#[derive(Clone)]
pub struct ServerOptions {
    /// Where to listen (port 0: any free port; see [`Server::local_addr`]).
    pub bind: SocketAddr,
    /// The trusted blueprints directory.
    pub blueprints_dir: PathBuf,
    /// Where the run store (`boitata.db`) and run workspaces live.
    pub data_dir: PathBuf,
    /// Settings: the provider for agent nodes, `server.api_token`,
    /// `server.max_concurrent_runs`.
    pub config: Config,
    /// The environment runs see (API keys, the allowlisted command variables).
    pub env: Arc<dyn EnvSource + Send + Sync>,
    /// Host names served besides IP literals and `localhost` (a reverse proxy's name).
    pub allowed_hosts: Vec<String>,
    /// What runs the nodes.
    pub backends: Backends,
    /// The interval between SSE keep-alive comments.
    pub keep_alive: Duration,
    /// How long shutting down waits for cancelled runs to end.
    pub shutdown_grace: Duration,
}

impl std::fmt::Debug for ServerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the config: it holds the token and the provider key.
        f.debug_struct("ServerOptions")
            .field("bind", &self.bind)
            .field("blueprints_dir", &self.blueprints_dir)
            .field("data_dir", &self.data_dir)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("backends", &self.backends)
            .finish_non_exhaustive()
    }
}

impl ServerOptions {
    /// Options with the defaults: bind [`DEFAULT_BIND`], the process environment,
    /// [`Backends::standard`], keep-alives every 15 s, 30 s to shut down.
    pub fn new(
        blueprints_dir: impl Into<PathBuf>,
        data_dir: impl Into<PathBuf>,
        config: Config,
    ) -> Self {
        ServerOptions {
            bind: SocketAddr::from(([127, 0, 0, 1], 8420)),
            blueprints_dir: blueprints_dir.into(),
            data_dir: data_dir.into(),
            config,
            env: Arc::new(ProcessEnv),
            allowed_hosts: Vec::new(),
            backends: Backends::standard(),
            keep_alive: sse::DEFAULT_KEEP_ALIVE,
            shutdown_grace: Duration::from_secs(30),
        }
    }

    /// The API token from the config (already overridden by `BOITATA_API_TOKEN`).
    pub fn token(&self) -> Option<ApiToken> {
        self.config
            .server
            .api_token
            .as_deref()
            .and_then(ApiToken::new)
    }
}

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A non-loopback address without a token.
    #[error(
        "refusing to listen on {bind} without an API token: anyone who can reach it could run commands on this machine. \
         Set BOITATA_API_TOKEN (or server.api_token in the config) to a long random secret, or bind to 127.0.0.1"
    )]
    TokenRequired {
        /// The address asked for.
        bind: SocketAddr,
    },
    /// The address could not be bound.
    #[error("cannot listen on {bind}: {source}")]
    Bind {
        /// The address.
        bind: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The blueprints directory cannot be read.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The run store cannot be opened or recovered.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Serving failed.
    #[error("server error: {0}")]
    Serve(#[source] std::io::Error),
}

/// A started server: listening, not yet serving.
pub struct Server {
    listener: TcpListener,
    local_addr: SocketAddr,
    state: AppState,
    scheduler: Scheduler,
    rejected: Vec<Rejected>,
    recovery: Recovery,
    shutdown_grace: Duration,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("local_addr", &self.local_addr)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Checks the options, opens the store, marks interrupted runs failed and reaps
    /// their sandboxes, loads the blueprints (logging the ones left out), and binds.
    ///
    /// # Errors
    /// [`ServerError::TokenRequired`] for a non-loopback `bind` without a token; the
    /// others as their names say.
    pub async fn start(options: ServerOptions) -> Result<Server, ServerError> {
        let token = options.token();
        if !options.bind.ip().is_loopback() && token.is_none() {
            return Err(ServerError::TokenRequired { bind: options.bind });
        }
        if token.is_none() {
            tracing::warn!(
                "no API token is set: every program and user of this machine can use the API on {} (set BOITATA_API_TOKEN to require one)",
                options.bind
            );
        }

        // The one redactor of everything the server writes: its store, its runs'
        // events, their recovery.
        let store: Arc<dyn RunStore> = Arc::new(SqliteStore::open(
            &options.data_dir,
            options.config.redactor(),
        )?);
        let recovery = {
            let store = store.clone();
            tokio::task::spawn_blocking(move || recover_interrupted(&store))
                .await
                .map_err(|e| StoreError::Corrupt {
                    path: options.data_dir.clone(),
                    message: format!("recovery task failed: {e}"),
                })??
        };
        for run in &recovery.interrupted {
            tracing::warn!(run = %run.id, "run was {} when the server stopped: marked failed (interrupted)", run.status);
        }
        if let Some(reaper) = &options.backends.reaper {
            match reaper.reap(store.as_ref()).await {
                Ok(report) => {
                    if report.removed > 0 {
                        tracing::info!(
                            "reaped {} orphaned {} sandboxes",
                            report.removed,
                            reaper.name()
                        );
                    }
                    for failure in report.failed {
                        tracing::warn!("could not reap sandbox {failure}");
                    }
                }
                Err(e) if recovery.interrupted.is_empty() => {
                    tracing::debug!("sandbox reaper ({}) skipped: {e}", reaper.name());
                }
                Err(e) => tracing::warn!("could not reap the sandboxes of interrupted runs: {e}"),
            }
        }

        let (mut catalog, mut rejected) = BlueprintCatalog::load(&options.blueprints_dir)?;
        let executor = options.backends.executor.clone();
        let unrunnable: Vec<(String, PathBuf, String)> = catalog
            .iter()
            .filter_map(|entry| {
                executor.check(&entry.blueprint).err().map(|e| {
                    (
                        entry.blueprint.name.clone(),
                        entry.file.clone(),
                        e.to_string(),
                    )
                })
            })
            .collect();
        for (name, file, reason) in unrunnable {
            catalog.remove(&name);
            rejected.push(Rejected {
                file,
                reason: format!("blueprint {name:?} cannot run on this server: {reason}"),
            });
        }
        for r in &rejected {
            tracing::warn!(
                "blueprint {} is not offered:\n{}",
                r.file.display(),
                r.reason
            );
        }
        tracing::info!(
            "offering {} blueprints from {}",
            catalog.len(),
            options.blueprints_dir.display()
        );

        let listener =
            TcpListener::bind(options.bind)
                .await
                .map_err(|source| ServerError::Bind {
                    bind: options.bind,
                    source,
                })?;
        let local_addr = listener.local_addr().map_err(|source| ServerError::Bind {
            bind: options.bind,
            source,
        })?;

        let scheduler = Scheduler::new(SchedulerParts {
            store: store.clone(),
            executor,
            runtime: RuntimeSource::Config {
                config: options.config.clone(),
                env: options.env.clone(),
            },
            workspaces_dir: options.data_dir.join("workspaces"),
            max_concurrent_runs: options.config.server.max_concurrent_runs,
        });
        let state = AppState::new(
            store,
            catalog,
            scheduler.clone(),
            token,
            HostPolicy::new(&options.allowed_hosts),
            options.keep_alive,
        );
        Ok(Server {
            listener,
            local_addr,
            state,
            scheduler,
            rejected,
            recovery,
            shutdown_grace: options.shutdown_grace,
        })
    }

    /// The address it listens on (with the real port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The state its router uses.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// The blueprint files left out, and why.
    pub fn rejected_blueprints(&self) -> &[Rejected] {
        &self.rejected
    }

    /// The runs marked interrupted at start.
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// Serves until `shutdown` resolves, then cancels every live run and waits (up to
    /// the shutdown grace) for runs and connections to end.
    ///
    /// # Errors
    /// [`ServerError::Serve`] when accepting connections fails.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let scheduler = self.scheduler.clone();
        let grace = self.shutdown_grace;
        let (stopping_tx, stopping_rx) = tokio::sync::oneshot::channel::<()>();
        let router = app(self.state.clone());
        let serve = axum::serve(self.listener, router).with_graceful_shutdown(async move {
            shutdown.await;
            tracing::info!("shutting down");
            // Runs end first (their SSE streams close after run_finished).
            scheduler.shutdown(grace).await;
            let _ = stopping_tx.send(());
        });
        let mut serve = std::pin::pin!(serve.into_future());
        tokio::select! {
            result = &mut serve => return result.map_err(ServerError::Serve),
            _ = stopping_rx => {}
        }
        // Connections still open (SSE of other runs, idle keep-alive) get a moment.
        match tokio::time::timeout(Duration::from_secs(5), serve).await {
            Ok(result) => result.map_err(ServerError::Serve),
            Err(_) => Ok(()),
        }
    }
}

/// The router: the API under `/api` (token-checked), `/healthz`, the web UI; every
/// route behind the `Host`/`Origin` guard.
pub fn app(state: AppState) -> Router {
    let api = Router::new()
        .route("/blueprints", get(api::list_blueprints))
        .route("/runs", get(api::list_runs).post(api::create_run))
        .route("/runs/{id}", get(api::get_run))
        .route("/runs/{id}/events", get(sse::run_events))
        .route("/runs/{id}/cancel", post(api::cancel_run))
        .route("/openapi.json", get(api::openapi))
        .fallback(api::not_found)
        .layer(from_fn_with_state(
            state.token().cloned().map(Arc::new),
            auth::require_token,
        ));
    Router::new()
        .route("/healthz", get(api::healthz))
        .merge(ui::routes())
        .nest("/api", api)
        .fallback(api::not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(from_fn_with_state(
            Arc::new(state.host_policy().clone()),
            host_guard::check_host,
        ))
        .layer(TraceLayer::new_for_http().make_span_with(RequestSpan))
        .with_state(state)
}
