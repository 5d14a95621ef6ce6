//! The agent side: [`AcpServer`] (and the [`serve`] shorthand) runs Boitata's agent as
//! an ACP agent over a byte stream: TCP, stdio, anything that reads and writes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AuthMethod, AuthMethodAgent, AuthenticateRequest, AuthenticateResponse,
    CancelNotification, ContentBlock, Implementation, InitializeRequest, InitializeResponse,
    NewSessionRequest, NewSessionResponse, PromptRequest, PromptResponse, SessionId,
    SessionNotification, StopReason,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, ErrorCode};
use boitata_core::agent::{AgentError, AgentOutcome, AgentStop};
use boitata_core::config::Config;
use boitata_core::event::SinkError;
use boitata_core::runtime::Runtime;
use boitata_core::{Emitter, Event, EventSink, Redactor};
use boitata_provider::ProviderError;
use boitata_tools::workspace::Workspace;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::AcpError;
use crate::limits::{Limits, LogThrottle, Peer, REPEATED_LOG_INTERVAL};
use crate::meta::{
    max_turns_from_meta, secret_from_meta, turn_summary_meta, TurnSummary, AUTH_METHOD_ID,
};
use crate::secret::RunSecret;
use crate::update::session_update;
use crate::wire::line_transport;

/// How long running turns get to answer `cancelled` when their connection closes or
/// the server shuts down.
pub const TURN_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Wrong secrets allowed per connection before every later attempt is refused.
const MAX_FAILED_AUTHENTICATIONS: u32 = 3;

/// The name the agent gives in `initialize`'s `agentInfo`.
const AGENT_NAME: &str = "boitata-agent";

/// Runs Boitata's agent as an ACP agent on `stream` until the client disconnects.
///
/// The shorthand for [`AcpServer::new`], [`AcpServer::with_secret`] and
/// [`AcpServer::serve`]. `workspace_root` bounds every session's `cwd`; `secret`, when
/// set, must be presented before any session starts.
///
/// # Errors
/// [`AcpError::WorkspaceRoot`] when the root does not resolve to a directory;
/// [`AcpError::Protocol`] when the connection fails.
pub async fn serve<S>(
    stream: S,
    runtime: Runtime,
    workspace_root: &Path,
    secret: Option<String>,
) -> Result<(), AcpError>
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    AcpServer::new(runtime, workspace_root)?
        .with_secret(secret)
        .serve(stream)
        .await
}

/// An ACP agent server: a runtime (provider, tools, limits), the workspace root its
/// sessions must stay within, an optional per-run secret and a shutdown token. Cheap to
/// clone; clones share everything.
///
/// # Protocol
///
/// Per connection:
/// - `initialize` answers with protocol v1 and, when the server has a secret, the
///   [`AUTH_METHOD_ID`] authentication method. A secret in `_meta.boitata.secret` of
///   `initialize` authenticates the connection at once.
/// - `authenticate` (method [`AUTH_METHOD_ID`]) checks `_meta.boitata.secret` in
///   constant time. Three wrong secrets close the door for the rest of the connection.
/// - `session/new` is refused (`-32000`, authentication required) until the connection
///   is authenticated, and refused (`-32602`) unless `cwd` resolves to the workspace root
///   or a directory beneath it (compared by path components, after resolving links).
/// - `session/prompt` runs one [`Agent::run`](boitata_core::agent::Agent::run) on the
///   prompt's text, in its own task so the connection keeps reading (a
///   `session/cancel` must get through while the turn runs). Every event of the turn is
///   sent as a `session/update` (see [`crate::update`]) the moment it is emitted, on the
///   connection's single ordered outgoing queue; the response is queued after the last
///   of them, so every update of a turn is on the wire before the turn's response.
///   Stop reasons: `end_turn`, `max_turn_requests` (the agent's `max_turns`, or
///   `_meta.boitata.max_turns` of the request), `cancelled`.
/// - `session/cancel` cancels the session's running turn.
/// - A server made with [`AcpServer::unavailable`] (its provider cannot be built)
///   refuses `session/new` and `session/prompt` with the reason, after the
///   authentication check.
///
/// When the client disconnects, or the server's shutdown token fires, running turns are
/// cancelled and given [`TURN_SHUTDOWN_GRACE`] to answer.
///
/// # Limits
///
/// A line longer than [`MAX_LINE_BYTES`](crate::MAX_LINE_BYTES) closes the connection;
/// with a secret, a connection not authenticated within
/// [`AUTH_TIMEOUT`](crate::AUTH_TIMEOUT) is closed; [`AcpServer::serve_tcp`] serves at
/// most [`MAX_CONNECTIONS`](crate::MAX_CONNECTIONS) connections at once. The `with_*`
/// methods change them.
#[derive(Clone)]
pub struct AcpServer {
    inner: Arc<ServerInner>,
}

struct ServerInner {
    /// The provider and tools; `None` when the provider cannot be built (see
    /// [`AcpServer::unavailable`]).
    runtime: Option<Runtime>,
    /// Why sessions are refused when there is no runtime.
    unavailable: Option<Unavailable>,
    workspace_root: PathBuf,
    secret: Option<RunSecret>,
    redactor: Redactor,
    shutdown: CancellationToken,
    limits: Limits,
}

impl std::fmt::Debug for AcpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpServer")
            .field("runtime", &self.inner.runtime)
            .field("workspace_root", &self.inner.workspace_root)
            .field("secret", &self.inner.secret)
            .finish_non_exhaustive()
    }
}

impl AcpServer {
    /// A server for `runtime`, whose sessions must stay within `workspace_root`. No
    /// secret; a shutdown token of its own.
    ///
    /// # Errors
    /// [`AcpError::WorkspaceRoot`] when `workspace_root` does not resolve to a directory.
    pub fn new(runtime: Runtime, workspace_root: &Path) -> Result<Self, AcpError> {
        let redactor = runtime.redactor();
        Self::build(Some(runtime), None, redactor, workspace_root)
    }

    /// A server whose provider cannot be built (`problem`: no API key in its launch
    /// environment, say). It answers `initialize` (and `authenticate`) as usual, so a
    /// client can connect and show what is wrong, and refuses `session/new` and
    /// `session/prompt` with `problem` in a JSON-RPC error: ACP's `auth_required`
    /// (`-32000`) for a missing key, `-32603` for anything else. `config` supplies the
    /// redactor.
    ///
    /// # Errors
    /// [`AcpError::WorkspaceRoot`] when `workspace_root` does not resolve to a directory.
    pub fn unavailable(
        config: &Config,
        problem: &ProviderError,
        workspace_root: &Path,
    ) -> Result<Self, AcpError> {
        let unavailable = Unavailable {
            code: match problem {
                ProviderError::MissingApiKey { .. } => ErrorCode::AUTH_REQUIRED,
                _ => ErrorCode::INTERNAL_ERROR,
            },
            message: format!("this agent cannot serve sessions: {problem}"),
        };
        Self::build(None, Some(unavailable), config.redactor(), workspace_root)
    }

    fn build(
        runtime: Option<Runtime>,
        unavailable: Option<Unavailable>,
        redactor: Redactor,
        workspace_root: &Path,
    ) -> Result<Self, AcpError> {
        let root_error = |source| AcpError::WorkspaceRoot {
            path: workspace_root.to_path_buf(),
            source,
        };
        let root = std::fs::canonicalize(workspace_root).map_err(root_error)?;
        if !root.is_dir() {
            return Err(root_error(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                "not a directory",
            )));
        }
        Ok(AcpServer {
            inner: Arc::new(ServerInner {
                runtime,
                unavailable,
                workspace_root: root,
                secret: None,
                redactor,
                shutdown: CancellationToken::new(),
                limits: Limits::default(),
            }),
        })
    }

    /// The same server requiring `secret` (when `Some`) before any session starts. The
    /// secret is also scrubbed from every event.
    pub fn with_secret(self, secret: Option<String>) -> Self {
        self.rebuild(|inner| {
            let secret = secret.filter(|s| !s.is_empty()).map(RunSecret::new);
            let redactor = match &secret {
                Some(secret) => inner.redactor.with_secrets([secret.expose()]),
                None => inner.redactor.clone(),
            };
            ServerInner {
                secret,
                redactor,
                ..inner
            }
        })
    }

    /// The same server stopping when `shutdown` fires: it accepts no more connections,
    /// cancels running turns, lets them answer (up to [`TURN_SHUTDOWN_GRACE`]) and
    /// closes every connection.
    pub fn with_shutdown(self, shutdown: CancellationToken) -> Self {
        self.rebuild(|inner| ServerInner { shutdown, ..inner })
    }

    /// The same server closing a connection whose client sends a line longer than
    /// `max_line_bytes` (without its newline). Default
    /// [`MAX_LINE_BYTES`](crate::MAX_LINE_BYTES).
    pub fn with_max_line_bytes(self, max_line_bytes: usize) -> Self {
        self.with_limits(|limits| Limits {
            max_line_bytes,
            ..limits
        })
    }

    /// The same server closing a connection that has not authenticated within
    /// `auth_timeout` of connecting (only when the server has a secret). Default
    /// [`AUTH_TIMEOUT`](crate::AUTH_TIMEOUT).
    pub fn with_auth_timeout(self, auth_timeout: Duration) -> Self {
        self.with_limits(|limits| Limits {
            auth_timeout,
            ..limits
        })
    }

    /// The same server serving at most `max_connections` connections at once in
    /// [`AcpServer::serve_tcp`]; one more is accepted and closed at once. Default
    /// [`MAX_CONNECTIONS`](crate::MAX_CONNECTIONS).
    pub fn with_max_connections(self, max_connections: usize) -> Self {
        self.with_limits(|limits| Limits {
            max_connections,
            ..limits
        })
    }

    fn with_limits(self, change: impl FnOnce(Limits) -> Limits) -> Self {
        self.rebuild(|inner| ServerInner {
            limits: change(inner.limits),
            ..inner
        })
    }

    fn rebuild(self, change: impl FnOnce(ServerInner) -> ServerInner) -> Self {
        let inner = match Arc::try_unwrap(self.inner) {
            Ok(inner) => inner,
            Err(shared) => ServerInner {
                runtime: shared.runtime.clone(),
                unavailable: shared.unavailable.clone(),
                workspace_root: shared.workspace_root.clone(),
                secret: shared.secret.clone(),
                redactor: shared.redactor.clone(),
                shutdown: shared.shutdown.clone(),
                limits: shared.limits,
            },
        };
        AcpServer {
            inner: Arc::new(change(inner)),
        }
    }

    /// The workspace root, resolved.
    pub fn workspace_root(&self) -> &Path {
        &self.inner.workspace_root
    }

    /// True when clients must present a secret.
    pub fn requires_secret(&self) -> bool {
        self.inner.secret.is_some()
    }

    /// Serves one connection on `stream` until the client disconnects or the shutdown
    /// token fires, the client sends a line that is too long, or (with a secret) it has
    /// not authenticated in time. Newline-delimited JSON-RPC, ACP protocol v1.
    ///
    /// # Errors
    /// [`AcpError::Protocol`] when the connection fails (a broken pipe, an I/O error, a
    /// line longer than the limit).
    pub async fn serve<S>(&self, stream: S) -> Result<(), AcpError>
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let transport = line_transport(stream, self.inner.limits.max_line_bytes, Peer::Client);
        let conn = Arc::new(Connection::new(self.inner.clone()));
        let result = Agent
            .v1()
            .name(AGENT_NAME)
            .on_receive_request(
                {
                    let conn = conn.clone();
                    async move |request: InitializeRequest, responder, _cx| {
                        conn.initialize(request, responder)
                    }
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                {
                    let conn = conn.clone();
                    async move |request: AuthenticateRequest, responder, _cx| {
                        conn.authenticate(request, responder)
                    }
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                {
                    let conn = conn.clone();
                    async move |request: NewSessionRequest, responder, _cx| {
                        conn.new_session(request, responder)
                    }
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                {
                    let conn = conn.clone();
                    async move |request: PromptRequest, responder, cx| {
                        conn.prompt(request, responder, cx)
                    }
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_notification(
                {
                    let conn = conn.clone();
                    async move |notification: CancelNotification, _cx| {
                        conn.cancel(&notification);
                        Ok(())
                    }
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .connect_with(transport, async |cx| {
                tokio::select! {
                    _ = cx.incoming_closed() => tracing::debug!("client closed the connection"),
                    _ = conn.cancel.cancelled() => tracing::debug!("shutting down the connection"),
                    () = conn.authentication_deadline() => tracing::warn!(
                        "the client did not authenticate within {:?}: closing the connection",
                        conn.server.limits.auth_timeout
                    ),
                }
                conn.close().await;
                Ok(())
            })
            .await;
        // Whatever ended the connection, no turn of it may outlive it.
        conn.cancel.cancel();
        result.map_err(|e| AcpError::protocol(&e))
    }

    /// Accepts connections on `listener` and serves each in its own task, at most
    /// [`MAX_CONNECTIONS`](crate::MAX_CONNECTIONS) at once (one more is closed as soon
    /// as it is accepted), until the shutdown token fires; then waits for the
    /// connections to close.
    ///
    /// # Errors
    /// None today: a failed accept or connection is logged and the server goes on. A
    /// repeated accept failure (out of file descriptors, say) or refused connection is
    /// logged once, then counted and logged at most every ten seconds.
    pub async fn serve_tcp(&self, listener: TcpListener) -> Result<(), AcpError> {
        let connections = TaskTracker::new();
        let max_connections = self.inner.limits.max_connections;
        let slots = Arc::new(Semaphore::new(max_connections));
        let mut accept_failures = LogThrottle::new(REPEATED_LOG_INTERVAL);
        let mut refusals = LogThrottle::new(REPEATED_LOG_INTERVAL);
        loop {
            let accepted = tokio::select! {
                _ = self.inner.shutdown.cancelled() => break,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, peer)) => {
                    let Ok(slot) = slots.clone().try_acquire_owned() else {
                        drop(stream);
                        if let Some(unlogged) = refusals.occurred(Instant::now()) {
                            tracing::warn!(
                                %peer,
                                "refused a connection: {max_connections} connections are open \
                                 (the limit){}",
                                and_more(unlogged, "refused")
                            );
                        }
                        continue;
                    };
                    tracing::info!(%peer, "client connected");
                    let server = self.clone();
                    connections.spawn(async move {
                        let _slot = slot;
                        match server.serve(stream).await {
                            Ok(()) => tracing::info!(%peer, "client disconnected"),
                            Err(e) => tracing::warn!(%peer, "connection failed: {e}"),
                        }
                    });
                }
                Err(e) => {
                    if let Some(unlogged) = accept_failures.occurred(Instant::now()) {
                        tracing::warn!("accept failed: {e}{}", and_more(unlogged, "failed"));
                    }
                    // Out of file descriptors and the like: back off, do not spin.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        connections.close();
        connections.wait().await;
        Ok(())
    }
}

/// `" (and N more failed/refused since the last report)"`, or nothing when N is 0.
fn and_more(unlogged: u64, what: &str) -> String {
    if unlogged == 0 {
        String::new()
    } else {
        format!(" (and {unlogged} more {what} since the last report)")
    }
}

/// One client connection's state.
struct Connection {
    server: Arc<ServerInner>,
    /// True once the client has authenticated (from the start without a secret).
    authenticated: watch::Sender<bool>,
    failed_authentications: AtomicU32,
    sessions: Mutex<HashMap<SessionId, Session>>,
    /// Fires when the connection ends; every turn's token is a child of it.
    cancel: CancellationToken,
    turns: TaskTracker,
}

struct Session {
    cwd: PathBuf,
    workspace: Workspace,
    /// The running turn's cancellation token.
    turn: Option<CancellationToken>,
}

impl Connection {
    fn new(server: Arc<ServerInner>) -> Self {
        let authenticated = server.secret.is_none();
        let cancel = server.shutdown.child_token();
        Connection {
            server,
            authenticated: watch::Sender::new(authenticated),
            failed_authentications: AtomicU32::new(0),
            sessions: Mutex::new(HashMap::new()),
            cancel,
            turns: TaskTracker::new(),
        }
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Session>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `initialize`: protocol v1, our auth method if we have a secret, and a secret in
    /// `_meta.boitata.secret` checked on the spot.
    fn initialize(
        &self,
        request: InitializeRequest,
        responder: Responder<InitializeResponse>,
    ) -> Result<(), agent_client_protocol::Error> {
        if let Some(presented) = secret_from_meta(request.meta.as_ref()) {
            if let Err(refusal) = self.check_secret(presented) {
                return responder.respond_with_error(refusal);
            }
        }
        let mut response = InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(AgentCapabilities::new())
            .agent_info(
                Implementation::new(AGENT_NAME, env!("CARGO_PKG_VERSION"))
                    .title("Boitata".to_owned()),
            );
        if self.server.secret.is_some() {
            response = response.auth_methods(vec![AuthMethod::Agent(
                AuthMethodAgent::new(AUTH_METHOD_ID, "Boitata run secret").description(
                    "present the per-run secret in _meta.boitata.secret of authenticate".to_owned(),
                ),
            )]);
        }
        responder.respond(response)
    }

    /// `authenticate`: method [`AUTH_METHOD_ID`], secret in `_meta.boitata.secret`.
    fn authenticate(
        &self,
        request: AuthenticateRequest,
        responder: Responder<AuthenticateResponse>,
    ) -> Result<(), agent_client_protocol::Error> {
        if self.server.secret.is_none() {
            return responder.respond(AuthenticateResponse::new());
        }
        if request.method_id.0.as_ref() != AUTH_METHOD_ID {
            return responder.respond_with_error(invalid_params(format!(
                "unknown authentication method {:?}: this agent offers {AUTH_METHOD_ID:?}",
                request.method_id.0.as_ref()
            )));
        }
        let Some(presented) = secret_from_meta(request.meta.as_ref()) else {
            return responder.respond_with_error(auth_error(
                "no secret presented: put the run secret in _meta.boitata.secret of authenticate",
            ));
        };
        match self.check_secret(presented) {
            Ok(()) => responder.respond(AuthenticateResponse::new()),
            Err(refusal) => responder.respond_with_error(refusal),
        }
    }

    fn check_secret(&self, presented: &str) -> Result<(), agent_client_protocol::Error> {
        let Some(secret) = &self.server.secret else {
            return Ok(());
        };
        if self.failed_authentications.load(Ordering::SeqCst) >= MAX_FAILED_AUTHENTICATIONS {
            return Err(auth_error(
                "authentication refused: too many wrong secrets on this connection; reconnect",
            ));
        }
        if secret.matches(presented) {
            self.authenticated.send_replace(true);
            Ok(())
        } else {
            self.failed_authentications.fetch_add(1, Ordering::SeqCst);
            tracing::warn!("a client presented a wrong secret");
            Err(auth_error(
                "authentication refused: the secret does not match this agent's run secret",
            ))
        }
    }

    fn require_authenticated(&self, method: &str) -> Result<(), agent_client_protocol::Error> {
        if !*self.authenticated.borrow() {
            return Err(auth_error(format!(
                "authentication required: present the run secret with authenticate (method \
                 {AUTH_METHOD_ID:?}, _meta.boitata.secret) before {method}"
            )));
        }
        match &self.server.unavailable {
            Some(unavailable) => Err(agent_client_protocol::Error::new(
                unavailable.code,
                unavailable.message.clone(),
            )),
            None => Ok(()),
        }
    }

    /// `session/new`: authenticated, and `cwd` within the workspace root.
    fn new_session(
        &self,
        request: NewSessionRequest,
        responder: Responder<NewSessionResponse>,
    ) -> Result<(), agent_client_protocol::Error> {
        if let Err(refusal) = self.require_authenticated("session/new") {
            return responder.respond_with_error(refusal);
        }
        let cwd = match self.resolve_cwd(&request.cwd) {
            Ok(cwd) => cwd,
            Err(refusal) => return responder.respond_with_error(refusal),
        };
        let workspace = match Workspace::open(&cwd) {
            Ok(workspace) => workspace,
            Err(e) => {
                return responder.respond_with_error(invalid_params(format!(
                    "session cwd {}: {e}",
                    cwd.display()
                )))
            }
        };
        if !request.mcp_servers.is_empty() {
            tracing::info!(
                count = request.mcp_servers.len(),
                "ignoring the client's MCP servers: boitata-agent uses its own tools"
            );
        }
        let id = SessionId::new(uuid::Uuid::now_v7().to_string());
        tracing::info!(session = %id, cwd = %cwd.display(), "session started");
        self.sessions().insert(
            id.clone(),
            Session {
                cwd,
                workspace,
                turn: None,
            },
        );
        responder.respond(NewSessionResponse::new(id))
    }

    /// `cwd` resolved (links followed) and checked to be the root or beneath it, by
    /// path components: `/ws-evil` is not beneath `/ws`.
    fn resolve_cwd(&self, cwd: &Path) -> Result<PathBuf, agent_client_protocol::Error> {
        if !cwd.is_absolute() {
            return Err(invalid_params(format!(
                "session cwd {:?} is not absolute: ACP requires an absolute path",
                cwd.display()
            )));
        }
        let resolved = std::fs::canonicalize(cwd)
            .map_err(|e| invalid_params(format!("session cwd {}: {e}", cwd.display())))?;
        if !resolved.starts_with(&self.server.workspace_root) {
            return Err(invalid_params(format!(
                "session cwd {} is outside the workspace root {} this agent serves",
                cwd.display(),
                self.server.workspace_root.display()
            )));
        }
        if !resolved.is_dir() {
            return Err(invalid_params(format!(
                "session cwd {} is not a directory",
                cwd.display()
            )));
        }
        Ok(resolved)
    }

    /// `session/prompt`: starts the turn in its own task and returns at once, so the
    /// dispatch loop goes on reading (`session/cancel` above all).
    fn prompt(
        self: &Arc<Self>,
        request: PromptRequest,
        responder: Responder<PromptResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), agent_client_protocol::Error> {
        if let Err(refusal) = self.require_authenticated("session/prompt") {
            return responder.respond_with_error(refusal);
        }
        let task = prompt_text(&request.prompt);
        if task.trim().is_empty() {
            return responder.respond_with_error(invalid_params(
                "the prompt has no text: send at least one text content block",
            ));
        }
        let session_id = request.session_id.clone();
        let (workspace, cwd, turn) = {
            let mut sessions = self.sessions();
            let Some(session) = sessions.get_mut(&session_id) else {
                return responder.respond_with_error(
                    agent_client_protocol::v1::schema::Error::session_not_found(session_id).into(),
                );
            };
            if session.turn.is_some() {
                return responder.respond_with_error(agent_client_protocol::Error::new(
                    ErrorCode::INVALID_REQUEST,
                    format!(
                        "a turn is already running in session {session_id}: wait for its \
                         response or send session/cancel"
                    ),
                ));
            }
            let turn = self.cancel.child_token();
            session.turn = Some(turn.clone());
            (session.workspace.clone(), session.cwd.clone(), turn)
        };

        let Some(runtime) = &self.server.runtime else {
            // require_authenticated refused it already; never reached.
            return responder.respond_with_error(agent_client_protocol::Error::internal_error());
        };
        let mut agent = runtime.agent();
        if let Some(max_turns) = max_turns_from_meta(request.meta.as_ref()) {
            agent = agent.with_max_turns(max_turns);
        }
        let run_id = uuid::Uuid::now_v7().to_string();
        tracing::info!(session = %session_id, run = %run_id, "turn started");
        let emitter = Emitter::new(run_id, None, self.server.redactor.clone());
        emitter.observe(Arc::new(UpdateSender {
            cx: cx.clone(),
            session_id: session_id.clone(),
            cwd,
        }));

        let conn = self.clone();
        let cancellation = responder.cancellation();
        let turn_task = self.turns.track_future(async move {
            let run = agent.run(&task, &workspace, &emitter, None, &turn);
            tokio::pin!(run);
            // `$/cancel_request` for the prompt request cancels the turn like
            // `session/cancel` does.
            let result = tokio::select! {
                result = &mut run => result,
                _ = cancellation.cancelled() => {
                    turn.cancel();
                    run.await
                }
            };
            conn.end_turn(&session_id);
            // Every update was queued as its event was emitted, so this response goes
            // out after all of them.
            let reply = conn.prompt_response(result);
            if let Err(e) = responder.respond_with_result(reply) {
                tracing::debug!(session = %session_id, "could not send the prompt response: {e}");
            }
            Ok(())
        });
        cx.spawn(turn_task)
    }

    fn prompt_response(
        &self,
        result: Result<AgentOutcome, AgentError>,
    ) -> Result<PromptResponse, agent_client_protocol::Error> {
        let redactor = &self.server.redactor;
        match result {
            Ok(outcome) => {
                let stop_reason = match outcome.stop {
                    AgentStop::EndTurn => StopReason::EndTurn,
                    AgentStop::MaxTurns => StopReason::MaxTurnRequests,
                    AgentStop::Cancelled => StopReason::Cancelled,
                };
                tracing::info!(?stop_reason, turns = outcome.turns, "turn ended");
                let final_message = redactor.redact(&outcome.final_message);
                Ok(
                    PromptResponse::new(stop_reason).meta(turn_summary_meta(&TurnSummary {
                        final_message: &final_message,
                        turns: outcome.turns,
                        input_tokens: outcome.usage.input_tokens,
                        output_tokens: outcome.usage.output_tokens,
                    })),
                )
            }
            Err(e) => {
                let message = redactor.redact(&format!("the agent failed: {e}"));
                tracing::warn!("{message}");
                Err(agent_client_protocol::Error::new(
                    ErrorCode::INTERNAL_ERROR,
                    message,
                ))
            }
        }
    }

    fn end_turn(&self, session_id: &SessionId) {
        if let Some(session) = self.sessions().get_mut(session_id) {
            session.turn = None;
        }
    }

    /// `session/cancel`: cancels the session's running turn, if any.
    fn cancel(&self, notification: &CancelNotification) {
        match self.sessions().get(&notification.session_id) {
            Some(Session {
                turn: Some(turn), ..
            }) => {
                tracing::info!(session = %notification.session_id, "cancelling the turn");
                turn.cancel();
            }
            Some(_) => {
                tracing::debug!(session = %notification.session_id, "session/cancel with no turn running")
            }
            None => {
                tracing::debug!(session = %notification.session_id, "session/cancel for an unknown session")
            }
        }
    }

    /// Resolves when the client has been connected for the auth timeout without
    /// authenticating; never once it has (or when the server has no secret).
    async fn authentication_deadline(&self) {
        let mut authenticated = self.authenticated.subscribe();
        let timeout = self.server.limits.auth_timeout;
        if tokio::time::timeout(timeout, authenticated.wait_for(|done| *done))
            .await
            .is_ok()
        {
            std::future::pending::<()>().await;
        }
    }

    /// Cancels running turns and waits (bounded) for them to answer.
    async fn close(&self) {
        self.cancel.cancel();
        self.turns.close();
        if tokio::time::timeout(TURN_SHUTDOWN_GRACE, self.turns.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "a turn did not end within {TURN_SHUTDOWN_GRACE:?} of being cancelled; dropping it"
            );
        }
    }
}

/// The text of a prompt: its text blocks, and its resource links as `name <uri>` (ACP
/// requires every agent to accept both), joined by blank lines.
fn prompt_text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.clone()),
            ContentBlock::ResourceLink(link) => Some(format!("{} <{}>", link.name, link.uri)),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Sends each event of a turn as a `session/update`, the moment it is emitted.
///
/// The SDK's outgoing queue is one ordered channel drained by one writer, so updates
/// leave in `seq` order and before anything queued after them (the prompt response).
struct UpdateSender {
    cx: ConnectionTo<Client>,
    session_id: SessionId,
    cwd: PathBuf,
}

impl EventSink for UpdateSender {
    fn accept(&self, event: &Event) -> Result<(), SinkError> {
        let update = session_update(event, &self.cwd);
        self.cx
            .send_notification(SessionNotification::new(self.session_id.clone(), update))
            .map_err(|e| SinkError {
                run_id: event.run_id.clone(),
                seq: event.seq,
                message: format!("cannot send session/update: {e}"),
            })
    }
}

/// Why a server without a runtime refuses sessions.
#[derive(Debug, Clone)]
struct Unavailable {
    code: ErrorCode,
    message: String,
}

fn auth_error(message: impl Into<String>) -> agent_client_protocol::Error {
    agent_client_protocol::Error::new(ErrorCode::AUTH_REQUIRED, message)
}

fn invalid_params(message: impl Into<String>) -> agent_client_protocol::Error {
    agent_client_protocol::Error::new(ErrorCode::INVALID_PARAMS, message)
}
