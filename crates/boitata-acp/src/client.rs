//! The client side: [`run_prompt`] drives one prompt turn of an ACP agent (a
//! `boitata-agent` in a sandbox, usually) and hands its events to a callback.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AuthenticateRequest, CancelNotification, ContentBlock, Implementation, InitializeRequest,
    NewSessionRequest, PromptRequest, PromptResponse, SessionId, SessionNotification,
    SessionUpdate,
};
use agent_client_protocol::{Client, ErrorCode};
use boitata_core::{Event, EventPayload};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::error::{describe, AcpError};
use crate::limits::{Peer, MAX_LINE_BYTES};
use crate::meta::{
    event_from_meta, final_message_from_meta, max_turns_meta, secret_meta, AUTH_METHOD_ID,
};
use crate::update::update_meta;
use crate::wire::line_transport;

/// How long a turn gets to end after `session/cancel`, unless the [`Prompt`] says.
pub const DEFAULT_CANCEL_GRACE: Duration = Duration::from_secs(30);

/// One prompt to send: the text, where the session works, and how to get in.
#[derive(Clone)]
pub struct Prompt {
    /// The prompt's text.
    pub text: String,
    /// The session's working directory, as the agent sees it (absolute; within the
    /// agent's workspace root).
    pub cwd: PathBuf,
    /// The agent's per-run secret, if it has one.
    pub secret: Option<String>,
    /// The most model requests for this turn (`_meta.boitata.max_turns`); `None` keeps
    /// the agent's own limit.
    pub max_turns: Option<u32>,
    /// How long the turn gets to end after `session/cancel`.
    pub cancel_grace: Duration,
}

impl std::fmt::Debug for Prompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prompt")
            .field("text", &self.text)
            .field("cwd", &self.cwd)
            .field("secret", &self.secret.as_ref().map(|_| "[REDACTED]"))
            .field("max_turns", &self.max_turns)
            .field("cancel_grace", &self.cancel_grace)
            .finish()
    }
}

impl Prompt {
    /// `text` for a session in `cwd`; no secret, the agent's own turn limit,
    /// [`DEFAULT_CANCEL_GRACE`].
    pub fn new(text: impl Into<String>, cwd: impl Into<PathBuf>) -> Self {
        Prompt {
            text: text.into(),
            cwd: cwd.into(),
            secret: None,
            max_turns: None,
            cancel_grace: DEFAULT_CANCEL_GRACE,
        }
    }

    /// With the agent's per-run secret.
    pub fn secret(mut self, secret: impl Into<String>) -> Self {
        self.secret = Some(secret.into());
        self
    }

    /// With a turn limit of `max_turns` model requests.
    pub fn max_turns(mut self, max_turns: u32) -> Self {
        self.max_turns = Some(max_turns);
        self
    }

    /// With `grace` to end the turn after `session/cancel`.
    pub fn cancel_grace(mut self, grace: Duration) -> Self {
        self.cancel_grace = grace;
        self
    }
}

/// Why a turn ended: ACP's stop reasons
/// ([Prompt Turn](https://agentclientprotocol.com/protocol/prompt-turn#stop-reasons)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// The model ended its turn: the work is done.
    EndTurn,
    /// The model hit its output token limit.
    MaxTokens,
    /// The agent used its `max_turns` model requests.
    MaxTurnRequests,
    /// The agent refused to go on.
    Refusal,
    /// The turn was cancelled.
    Cancelled,
    /// A stop reason this client does not know, as the agent spelled it.
    Other(String),
}

impl StopReason {
    /// The wire name: `end_turn`, `max_tokens`, `max_turn_requests`, `refusal`,
    /// `cancelled`, or the unknown one.
    pub fn as_str(&self) -> &str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::MaxTokens => "max_tokens",
            StopReason::MaxTurnRequests => "max_turn_requests",
            StopReason::Refusal => "refusal",
            StopReason::Cancelled => "cancelled",
            StopReason::Other(other) => other,
        }
    }

    fn from_acp(reason: agent_client_protocol::v1::schema::StopReason) -> Self {
        use agent_client_protocol::v1::schema::StopReason as Acp;
        match reason {
            Acp::EndTurn => StopReason::EndTurn,
            Acp::MaxTokens => StopReason::MaxTokens,
            Acp::MaxTurnRequests => StopReason::MaxTurnRequests,
            Acp::Refusal => StopReason::Refusal,
            Acp::Cancelled => StopReason::Cancelled,
            other => StopReason::Other(
                serde_json::to_value(other)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| format!("{other:?}")),
            ),
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a turn went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptOutcome {
    /// The agent's last message: `_meta.boitata.final_message` of the response, else
    /// the last `agent_message` event, else all streamed message text.
    pub final_message: String,
    /// Why the turn ended.
    pub stop_reason: StopReason,
    /// How many [`Event`]s were decoded and passed to the callback.
    pub events_seen: u64,
}

/// Opens a TCP connection to an agent at `addr`.
///
/// # Errors
/// [`AcpError::Connect`] naming the address when nothing accepts there.
pub async fn connect(addr: SocketAddr) -> Result<TcpStream, AcpError> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|source| AcpError::Connect { addr, source })?;
    // Updates are small and many: do not let Nagle hold them back.
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// How long [`wait_ready`] pauses between attempts.
const READY_RETRY: Duration = Duration::from_millis(100);

/// Waits until an ACP agent at `addr` answers `initialize`, trying again every 100 ms
/// for up to `timeout`.
///
/// A TCP accept alone proves little: a container's published port accepts (and at once
/// closes) connections before anything listens inside. This waits for the protocol.
///
/// # Errors
/// [`AcpError::NotReady`] with the last failure (a refused connection, a connection
/// closed during `initialize`, …) when `timeout` passes first.
pub async fn wait_ready(addr: SocketAddr, timeout: Duration) -> Result<(), AcpError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let last_error = match tokio::time::timeout_at(deadline, probe(addr)).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "no answer to initialize".to_owned(),
        };
        if tokio::time::Instant::now() + READY_RETRY >= deadline {
            return Err(AcpError::NotReady {
                addr,
                waited: timeout,
                last_error,
            });
        }
        tokio::time::sleep(READY_RETRY).await;
    }
}

/// One `initialize` exchange with the agent at `addr`.
async fn probe(addr: SocketAddr) -> Result<(), AcpError> {
    let transport = line_transport(connect(addr).await?, MAX_LINE_BYTES, Peer::Agent);
    Client
        .v1()
        .name("boitata-probe")
        .connect_with(transport, async |cx| {
            let init = InitializeRequest::new(ProtocolVersion::V1)
                .client_info(Implementation::new("boitata", env!("CARGO_PKG_VERSION")));
            cx.send_request(init).block_task().await.map(|_| ())
        })
        .await
        .map_err(|e| {
            if is_closed(&e) {
                AcpError::Closed {
                    stage: "initialize",
                }
            } else {
                AcpError::protocol(&e)
            }
        })
}

/// [`connect`]s to `addr`, then [`run_prompt`]s on the connection.
///
/// # Errors
/// As [`connect`] and [`run_prompt`].
pub async fn run_prompt_at(
    addr: SocketAddr,
    prompt: Prompt,
    on_event: impl FnMut(Event) + Send,
    cancel: CancellationToken,
) -> Result<PromptOutcome, AcpError> {
    let stream = connect(addr).await?;
    run_prompt(stream, prompt, on_event, cancel).await
}

/// Runs one prompt turn on an ACP agent over `stream`: initialize, authenticate, open a
/// session in `prompt.cwd`, prompt, and pass each [`Event`] of the turn to `on_event` in
/// order. Returns when the turn has ended; the connection is then closed.
///
/// The exchange ([ACP v1](https://agentclientprotocol.com/protocol/overview)):
/// `initialize` → `authenticate` (method `boitata-secret`, the secret in
/// `_meta.boitata.secret`; only when the agent offers that method) → `session/new`
/// (the given `cwd`) → `session/prompt`. Each `session/update` whose update carries an
/// [`Event`] in `_meta.boitata` is decoded and passed to the callback, in arrival order,
/// all before `run_prompt` returns. Updates are handled by the connection's dispatch
/// loop before the prompt response is, so none is lost to the race between them.
///
/// If `cancel` fires before the turn starts, returns at once with stop reason
/// `cancelled`; during the turn, sends `session/cancel` and waits (up to
/// `prompt.cancel_grace`) for the turn to end.
///
/// # Errors
/// - [`AcpError::AuthenticationRefused`]: the agent wants a secret and none was given,
///   or it refused the one given;
/// - [`AcpError::ClosedDuringTurn`] / [`AcpError::Closed`]: the agent hung up;
/// - [`AcpError::Refused`]: the agent answered a request with an error (a `cwd`
///   outside its workspace, a failed model request, …);
/// - [`AcpError::CancelTimeout`]: the turn did not end after `session/cancel`;
/// - [`AcpError::Protocol`]: anything else the connection failed with.
pub async fn run_prompt<S>(
    stream: S,
    prompt: Prompt,
    on_event: impl FnMut(Event) + Send,
    cancel: CancellationToken,
) -> Result<PromptOutcome, AcpError>
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let transport = line_transport(stream, MAX_LINE_BYTES, Peer::Agent);
    let (updates_tx, updates_rx) = mpsc::unbounded_channel::<SessionNotification>();
    // The step under way, to name it when the connection fails underneath it.
    let stage: Mutex<&'static str> = Mutex::new("initialize");
    let result = Client
        .v1()
        .name("boitata")
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                // The receiver goes away only once run_prompt is done with the turn.
                let _ = updates_tx.send(notification);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(transport, async |cx| {
            let turn = Turn {
                cx,
                stage: &stage,
                cancel: &cancel,
                updates: updates_rx,
                collector: Collector::new(on_event),
            };
            Ok(turn.run(prompt).await)
        })
        .await;
    match result {
        Ok(outcome) => outcome,
        Err(e) => {
            let stage = *stage.lock().unwrap_or_else(|p| p.into_inner());
            Err(if stage == "session/prompt" {
                AcpError::ClosedDuringTurn
            } else if is_closed(&e) {
                AcpError::Closed { stage }
            } else {
                AcpError::protocol(&e)
            })
        }
    }
}

/// One run of [`run_prompt`]'s exchange, inside the connection.
struct Turn<'a, F> {
    cx: agent_client_protocol::v1::ConnectionTo<agent_client_protocol::Agent>,
    stage: &'a Mutex<&'static str>,
    cancel: &'a CancellationToken,
    updates: mpsc::UnboundedReceiver<SessionNotification>,
    collector: Collector<F>,
}

/// What a step of the exchange came to.
enum Step<T> {
    Done(T),
    Cancelled,
}

impl<F: FnMut(Event) + Send> Turn<'_, F> {
    async fn run(mut self, prompt: Prompt) -> Result<PromptOutcome, AcpError> {
        let init = InitializeRequest::new(ProtocolVersion::V1)
            .client_info(Implementation::new("boitata", env!("CARGO_PKG_VERSION")));
        let init = match self
            .step("initialize", self.cx.send_request(init).block_task())
            .await?
        {
            Step::Done(init) => init,
            Step::Cancelled => return Ok(self.cancelled_early()),
        };

        let offers_secret = init
            .auth_methods
            .iter()
            .any(|method| method.id().0.as_ref() == AUTH_METHOD_ID);
        if offers_secret {
            let Some(secret) = &prompt.secret else {
                return Err(AcpError::AuthenticationRefused {
                    message: "the agent requires a run secret and none was given".to_owned(),
                });
            };
            let auth = AuthenticateRequest::new(AUTH_METHOD_ID).meta(secret_meta(secret));
            if let Step::Cancelled = self
                .step("authenticate", self.cx.send_request(auth).block_task())
                .await?
            {
                return Ok(self.cancelled_early());
            }
        }

        let new_session = NewSessionRequest::new(prompt.cwd.clone());
        let session_id = match self
            .step(
                "session/new",
                self.cx.send_request(new_session).block_task(),
            )
            .await?
        {
            Step::Done(session) => session.session_id,
            Step::Cancelled => return Ok(self.cancelled_early()),
        };
        self.collector.session_id = Some(session_id.clone());

        let mut request =
            PromptRequest::new(session_id.clone(), vec![ContentBlock::from(prompt.text)]);
        if let Some(max_turns) = prompt.max_turns {
            request = request.meta(max_turns_meta(max_turns));
        }
        self.set_stage("session/prompt");
        let response = self.cx.send_request(request).block_task();
        tokio::pin!(response);

        let cancel = self.cancel.clone();
        let mut pumped = pump(
            &mut response,
            &mut self.updates,
            &mut self.collector,
            cancel.cancelled(),
        )
        .await;
        if pumped.is_none() {
            tracing::info!(session = %session_id, "cancelling the turn");
            // A failure to send shows up as the response failing.
            let _ = self
                .cx
                .send_notification(CancelNotification::new(session_id.clone()));
            pumped = pump(
                &mut response,
                &mut self.updates,
                &mut self.collector,
                tokio::time::sleep(prompt.cancel_grace),
            )
            .await;
        }
        let Some(response) = pumped else {
            return Err(AcpError::CancelTimeout {
                grace: prompt.cancel_grace,
            });
        };
        // Every update of the turn was dispatched before its response: take them all.
        while let Ok(notification) = self.updates.try_recv() {
            self.collector.take(notification);
        }
        let response = response.map_err(|e| turn_error(&e))?;
        Ok(self.collector.finish(&response))
    }

    /// Awaits one request of the handshake, unless `cancel` fires first.
    async fn step<T>(
        &self,
        method: &'static str,
        request: impl Future<Output = Result<T, agent_client_protocol::Error>>,
    ) -> Result<Step<T>, AcpError> {
        self.set_stage(method);
        tokio::select! {
            _ = self.cancel.cancelled() => Ok(Step::Cancelled),
            result = request => result.map(Step::Done).map_err(|e| step_error(method, &e)),
        }
    }

    fn set_stage(&self, stage: &'static str) {
        *self.stage.lock().unwrap_or_else(|p| p.into_inner()) = stage;
    }

    fn cancelled_early(&self) -> PromptOutcome {
        PromptOutcome {
            final_message: String::new(),
            stop_reason: StopReason::Cancelled,
            events_seen: 0,
        }
    }
}

/// Hands updates to the collector until `response` resolves (`Some`) or `stop` does
/// (`None`).
async fn pump<R, F>(
    response: &mut Pin<&mut impl Future<Output = R>>,
    updates: &mut mpsc::UnboundedReceiver<SessionNotification>,
    collector: &mut Collector<F>,
    stop: impl Future<Output = ()>,
) -> Option<R>
where
    F: FnMut(Event) + Send,
{
    tokio::pin!(stop);
    loop {
        tokio::select! {
            biased;
            Some(notification) = updates.recv() => collector.take(notification),
            result = response.as_mut() => return Some(result),
            _ = &mut stop => return None,
        }
    }
}

/// Decodes updates into events for the callback, and keeps what the outcome needs.
struct Collector<F> {
    on_event: F,
    session_id: Option<SessionId>,
    events_seen: u64,
    last_message: Option<String>,
    streamed_text: String,
}

impl<F: FnMut(Event) + Send> Collector<F> {
    fn new(on_event: F) -> Self {
        Collector {
            on_event,
            session_id: None,
            events_seen: 0,
            last_message: None,
            streamed_text: String::new(),
        }
    }

    fn take(&mut self, notification: SessionNotification) {
        if self.session_id.as_ref() != Some(&notification.session_id) {
            tracing::debug!(session = %notification.session_id, "update for another session");
            return;
        }
        if let SessionUpdate::AgentMessageChunk(chunk) = &notification.update {
            if let ContentBlock::Text(text) = &chunk.content {
                self.streamed_text.push_str(&text.text);
            }
        }
        let meta = update_meta(&notification.update).or(notification.meta.as_ref());
        match meta.and_then(event_from_meta) {
            Some(Ok(event)) => {
                self.events_seen += 1;
                if let EventPayload::AgentMessage { text } = &event.payload {
                    self.last_message = Some(text.clone());
                }
                (self.on_event)(event);
            }
            Some(Err(e)) => {
                tracing::warn!("ignoring an update whose _meta.boitata is not an event: {e}")
            }
            None => tracing::debug!("update without a Boitata event"),
        }
    }

    fn finish(self, response: &PromptResponse) -> PromptOutcome {
        let final_message = final_message_from_meta(response.meta.as_ref())
            .or(self.last_message)
            .unwrap_or(self.streamed_text);
        PromptOutcome {
            final_message,
            stop_reason: StopReason::from_acp(response.stop_reason),
            events_seen: self.events_seen,
        }
    }
}

/// True for the SDK's own "the connection is gone" errors.
fn is_closed(error: &agent_client_protocol::Error) -> bool {
    agent_client_protocol::is_incoming_transport_closed(error)
        || agent_client_protocol::is_connection_terminated(error)
}

fn step_error(method: &'static str, error: &agent_client_protocol::Error) -> AcpError {
    if is_closed(error) {
        AcpError::Closed { stage: method }
    } else if error.code == ErrorCode::AUTH_REQUIRED {
        AcpError::AuthenticationRefused {
            message: describe(error),
        }
    } else {
        AcpError::Refused {
            method,
            message: describe(error),
        }
    }
}

fn turn_error(error: &agent_client_protocol::Error) -> AcpError {
    if is_closed(error) {
        AcpError::ClosedDuringTurn
    } else {
        step_error("session/prompt", error)
    }
}
