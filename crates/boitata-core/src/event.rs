//! The [`Event`] type: the single record of what happened in a run.
//!
//! The CLI's `--json` output, the run store (audit log), the server's SSE stream and
//! the ACP `_meta.boitata` payload all carry this type, serialized the same way: JSON,
//! internally tagged by `type`, e.g.
//!
//! ```json
//! {"run_id":"0193…","seq":3,"ts":"2026-11-29T13:04:20.123Z","node":"test",
//!  "type":"exec_output","stream":"stdout","chunk":"ok\n"}
//! ```
//!
//! Events are made by an [`Emitter`], which numbers them densely from 1 per run,
//! stamps them, redacts secrets, truncates large strings, stores them and only then
//! hands them to observers (printers, SSE subscribers).

use std::sync::{Arc, Mutex, RwLock};

use chrono::{DateTime, SecondsFormat, SubsecRound, Utc};
use serde::{Deserialize, Serialize};

use crate::redact::Redactor;

/// One thing that happened in a run. See the module docs for the wire shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The run this event belongs to.
    pub run_id: String,
    /// Position in the run, dense and starting at 1.
    pub seq: u64,
    /// When the event was emitted (RFC 3339, UTC).
    #[serde(with = "rfc3339")]
    pub ts: DateTime<Utc>,
    /// The blueprint node that emitted it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// What happened.
    #[serde(flatten)]
    pub payload: EventPayload,
}

impl Event {
    /// The event as one line of JSON (no trailing newline).
    pub fn to_json_line(&self) -> String {
        // Serializing this type cannot fail: every field is a plain value.
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// The payload of an [`Event`], tagged by `type` on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventPayload {
    /// The run began.
    RunStarted {
        /// The task string the run was given.
        task: String,
        /// The blueprint's name, for a blueprint run.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        blueprint: Option<String>,
        /// The host workspace, for runs that use one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        workspace: Option<String>,
        /// The provider name (`openai`, `anthropic`, `scripted`), if the run uses a model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider: Option<String>,
        /// The model name, if the run uses a model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// A blueprint node began; `Event::node` names it.
    NodeStarted {
        /// The node's type (`exec`, `agent`, `provision`, …).
        node_type: String,
        /// What the node runs, placeholders substituted: the command of an `exec`,
        /// the prompt of an agent, the image of a `provision`, the repository of a
        /// `checkout` (cut to a few KiB). Absent when the node's placeholders could not
        /// be substituted, and in events recorded before this field existed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// A blueprint node ended.
    NodeFinished {
        /// Whether the node succeeded.
        outcome: Outcome,
        /// The exit code, for nodes that run a command.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i64>,
        /// The start of the node's output (truncated).
        #[serde(default)]
        output_preview: String,
        /// Why the node failed, when it did not run to an outcome of its own.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A sandbox was created.
    SandboxProvisioned {
        /// The backend's id for the sandbox (a container id for Docker).
        sandbox_id: String,
        /// The backend (`docker`).
        backend: String,
        /// The image it runs.
        image: String,
        /// The network it is on: `boitata-run-RUN` (the run's own, isolated), `none`,
        /// or `bridge` (Docker's shared bridge: **not isolated** from other runs and
        /// the host). Absent in events recorded before this field existed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        network: Option<String>,
    },
    /// A sandbox was destroyed.
    SandboxDestroyed {
        /// The backend's id for the sandbox.
        sandbox_id: String,
    },
    /// A chunk of a command's output.
    ExecOutput {
        /// Which stream it came from.
        stream: OutputStream,
        /// The text (lossy UTF-8), possibly truncated with a marker.
        chunk: String,
    },
    /// Text from the model, addressed to the user.
    AgentMessage {
        /// The message.
        text: String,
    },
    /// The model asked for a tool call.
    ToolCall {
        /// The provider's id for the call.
        call_id: String,
        /// The tool's name.
        tool: String,
        /// The arguments, as the model sent them.
        arguments: serde_json::Value,
    },
    /// A tool call finished.
    ToolResult {
        /// The id of the call this answers.
        call_id: String,
        /// The tool's name.
        tool: String,
        /// False when the tool refused or failed; the output then says why.
        ok: bool,
        /// The output the model sees (possibly truncated).
        output: String,
    },
    /// Tokens used by one model request.
    Usage {
        /// Prompt tokens.
        input_tokens: u64,
        /// Completion tokens.
        output_tokens: u64,
    },
    /// Something the user should know about how the run is carried out that is not
    /// an error (a provider falling back to non-streaming requests, …).
    Note {
        /// The note, one line.
        message: String,
    },
    /// The egress proxy decided on a connection a sandbox asked for (one event per
    /// request or tunnel, when it ends; a refusal at once).
    Egress {
        /// The host asked for (a name or an address), as the client wrote it.
        host: String,
        /// The TCP port asked for.
        port: u16,
        /// Whether the connection was let through.
        allowed: bool,
        /// Why: the rule that allowed it, or what refused it.
        reason: String,
        /// Bytes sent from the sandbox to the destination.
        #[serde(default)]
        bytes_up: u64,
        /// Bytes received from the destination by the sandbox.
        #[serde(default)]
        bytes_down: u64,
    },
    /// A budget of the run was spent ([`crate::budget`]): no further model request is
    /// admitted and the run fails. Emitted once per run.
    BudgetExceeded {
        /// Which limit: `tokens`, `requests` or `wall`.
        budget: crate::budget::BudgetKind,
        /// What was used: tokens, requests, or whole seconds of wall time.
        used: u64,
        /// The limit, in the same unit.
        limit: u64,
        /// The message the run fails with (`budget exceeded: tokens 120034 > 120000`).
        message: String,
    },
    /// The run ended.
    RunFinished {
        /// How it ended.
        status: RunStatus,
        /// Why it failed, if it did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

impl EventPayload {
    /// The `type` tag of this payload, as it appears on the wire.
    pub fn kind(&self) -> &'static str {
        match self {
            EventPayload::RunStarted { .. } => "run_started",
            EventPayload::NodeStarted { .. } => "node_started",
            EventPayload::NodeFinished { .. } => "node_finished",
            EventPayload::SandboxProvisioned { .. } => "sandbox_provisioned",
            EventPayload::SandboxDestroyed { .. } => "sandbox_destroyed",
            EventPayload::ExecOutput { .. } => "exec_output",
            EventPayload::AgentMessage { .. } => "agent_message",
            EventPayload::ToolCall { .. } => "tool_call",
            EventPayload::ToolResult { .. } => "tool_result",
            EventPayload::Usage { .. } => "usage",
            EventPayload::Note { .. } => "note",
            EventPayload::Egress { .. } => "egress",
            EventPayload::BudgetExceeded { .. } => "budget_exceeded",
            EventPayload::RunFinished { .. } => "run_finished",
        }
    }
}

/// A node's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The node did what it was asked (exit 0, the agent ended its turn).
    Success,
    /// It did not.
    Failure,
}

/// A command output stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// A run's status. `Queued` and `Running` are live; the rest are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Accepted, waiting for a slot.
    Queued,
    /// In progress.
    Running,
    /// Ended well.
    Succeeded,
    /// Ended badly.
    Failed,
    /// Stopped on request.
    Cancelled,
}

impl RunStatus {
    /// The status as stored and shown: `queued`, `running`, `succeeded`, `failed`, `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }

    /// Parses [`RunStatus::as_str`]'s output.
    pub fn parse(s: &str) -> Option<RunStatus> {
        Some(match s {
            "queued" => RunStatus::Queued,
            "running" => RunStatus::Running,
            "succeeded" => RunStatus::Succeeded,
            "failed" => RunStatus::Failed,
            "cancelled" => RunStatus::Cancelled,
            _ => return None,
        })
    }

    /// True for `succeeded`, `failed` and `cancelled`.
    pub fn is_final(self) -> bool {
        !matches!(self, RunStatus::Queued | RunStatus::Running)
    }

    /// The CLI exit code for a final status: 0 succeeded, 1 failed, 130 cancelled.
    pub fn exit_code(self) -> i32 {
        match self {
            RunStatus::Succeeded => 0,
            RunStatus::Cancelled => 130,
            _ => 1,
        }
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Something that receives every event of a run, in order.
///
/// The run store is one (it must accept an event before anyone sees it); printers and
/// SSE fan-out are others. Called with the emitter's lock held: keep it quick.
pub trait EventSink: Send + Sync {
    /// Takes one event. An error from the *store* sink aborts the emit: an event that
    /// could not be recorded is not shown.
    fn accept(&self, event: &Event) -> Result<(), SinkError>;
}

/// An event sink failed (the store could not write, say).
#[derive(Debug, thiserror::Error)]
#[error("could not record event {seq} of run {run_id}: {message}")]
pub struct SinkError {
    /// The run.
    pub run_id: String,
    /// The event's `seq`.
    pub seq: u64,
    /// What went wrong.
    pub message: String,
}

/// Default cap on any one string inside an event, in bytes.
pub const DEFAULT_MAX_EVENT_STRING_BYTES: usize = 64 * 1024;

/// Numbers, stamps, sanitizes, records and dispatches a run's events.
///
/// Cheap to clone; all clones share one sequence. Emitting holds a lock across
/// numbering, recording and dispatch, so observers see events in `seq` order.
#[derive(Clone)]
pub struct Emitter {
    inner: Arc<EmitterInner>,
}

struct EmitterInner {
    run_id: String,
    state: Mutex<EmitterState>,
    /// Grows when a node learns a secret of its own ([`Emitter::add_secrets`]).
    redactor: RwLock<Redactor>,
    max_string_bytes: usize,
}

struct EmitterState {
    next_seq: u64,
    recorder: Option<Arc<dyn EventSink>>,
    observers: Vec<Arc<dyn EventSink>>,
}

impl std::fmt::Debug for Emitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emitter")
            .field("run_id", &self.inner.run_id)
            .finish_non_exhaustive()
    }
}

impl Emitter {
    /// An emitter for `run_id` whose first event gets `seq` 1.
    ///
    /// `recorder` (the run store) accepts each event first; if it fails, the event is
    /// dropped and the error returned. `redactor` scrubs secrets from every string.
    pub fn new(
        run_id: impl Into<String>,
        recorder: Option<Arc<dyn EventSink>>,
        redactor: Redactor,
    ) -> Self {
        Self::resuming(run_id, 1, recorder, redactor)
    }

    /// Like [`Emitter::new`] but the next event gets `next_seq` (for a run whose
    /// earlier events are already stored).
    pub fn resuming(
        run_id: impl Into<String>,
        next_seq: u64,
        recorder: Option<Arc<dyn EventSink>>,
        redactor: Redactor,
    ) -> Self {
        Emitter {
            inner: Arc::new(EmitterInner {
                run_id: run_id.into(),
                state: Mutex::new(EmitterState {
                    next_seq,
                    recorder,
                    observers: Vec::new(),
                }),
                redactor: RwLock::new(redactor),
                max_string_bytes: DEFAULT_MAX_EVENT_STRING_BYTES,
            }),
        }
    }

    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.inner.run_id
    }

    /// The redactor applied to every event (also useful for scrubbing logs), as it is
    /// now: [`Emitter::add_secrets`] extends it.
    pub fn redactor(&self) -> Redactor {
        self.inner
            .redactor
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Adds exact secret values to the redactor of this emitter and all its clones:
    /// every later event has them replaced by `[REDACTED]`. For secrets made during
    /// a run (a per-run agent secret, say). Values shorter than 6 bytes are ignored,
    /// as [`Redactor::new`] says.
    pub fn add_secrets<I, S>(&self, secrets: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut redactor = self
            .inner
            .redactor
            .write()
            .unwrap_or_else(|p| p.into_inner());
        *redactor = redactor.with_secrets(secrets);
    }

    /// Adds an observer that sees every later event, after it is recorded.
    pub fn observe(&self, sink: Arc<dyn EventSink>) {
        let mut state = self.inner.state.lock().unwrap_or_else(|p| p.into_inner());
        state.observers.push(sink);
    }

    /// Emits `payload` for `node`: assigns `seq` and `ts`, redacts secrets, truncates
    /// strings over the cap (with a marker saying how much was cut), records it, then
    /// hands it to each observer. Returns the event as recorded.
    ///
    /// # Errors
    /// [`SinkError`] if the recorder refused the event; observers' errors are logged
    /// and ignored.
    pub fn emit(&self, node: Option<&str>, payload: EventPayload) -> Result<Event, SinkError> {
        let payload = self.sanitize(payload);
        let mut state = self.inner.state.lock().unwrap_or_else(|p| p.into_inner());
        let event = Event {
            run_id: self.inner.run_id.clone(),
            seq: state.next_seq,
            ts: Utc::now().trunc_subsecs(3),
            node: node.map(str::to_owned),
            payload,
        };
        if let Some(recorder) = &state.recorder {
            recorder.accept(&event)?;
        }
        state.next_seq += 1;
        for observer in &state.observers {
            if let Err(e) = observer.accept(&event) {
                tracing::warn!("event observer failed: {e}");
            }
        }
        Ok(event)
    }

    /// Emits and logs (rather than returns) a recording failure. For call sites that
    /// cannot do anything better than go on.
    pub fn emit_or_log(&self, node: Option<&str>, payload: EventPayload) {
        if let Err(e) = self.emit(node, payload) {
            tracing::error!("{e}");
        }
    }

    fn sanitize(&self, payload: EventPayload) -> EventPayload {
        let Ok(mut value) = serde_json::to_value(&payload) else {
            return payload;
        };
        let redactor = self.redactor();
        sanitize_value(&mut value, &redactor, self.inner.max_string_bytes);
        serde_json::from_value(value).unwrap_or(payload)
    }
}

fn sanitize_value(value: &mut serde_json::Value, redactor: &Redactor, max_bytes: usize) {
    match value {
        serde_json::Value::String(s) => {
            let redacted = redactor.redact(s);
            *s = truncate_with_marker(&redacted, max_bytes);
        }
        serde_json::Value::Array(items) => {
            for item in items {
                sanitize_value(item, redactor, max_bytes);
            }
        }
        serde_json::Value::Object(map) => {
            for (_, item) in map.iter_mut() {
                sanitize_value(item, redactor, max_bytes);
            }
        }
        _ => {}
    }
}

/// Cuts `text` to at most `max_bytes` (on a char boundary) and, if anything was cut,
/// appends `…[truncated N bytes]` where N is the number of bytes removed.
pub fn truncate_with_marker(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_owned();
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[truncated {} bytes]", &text[..end], text.len() - end)
}

mod rfc3339 {
    use super::*;

    pub(super) fn serialize<S: serde::Serializer>(
        ts: &DateTime<Utc>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_str(&ts.to_rfc3339_opts(SecondsFormat::Millis, true))
    }

    pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<DateTime<Utc>, D::Error> {
        let text = String::deserialize(d)?;
        DateTime::parse_from_rfc3339(&text)
            .map(|t| t.with_timezone(&Utc))
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Collect(Mutex<Vec<Event>>);
    impl EventSink for Collect {
        fn accept(&self, event: &Event) -> Result<(), SinkError> {
            self.0.lock().unwrap().push(event.clone());
            Ok(())
        }
    }

    #[test]
    fn events_round_trip_with_type_tag_and_dense_seq() {
        let sink = Arc::new(Collect(Mutex::new(Vec::new())));
        let emitter = Emitter::new("r1", Some(sink.clone()), Redactor::new(["sk-secret-value"]));
        emitter
            .emit(
                None,
                EventPayload::AgentMessage {
                    text: "key is sk-secret-value".into(),
                },
            )
            .unwrap();
        emitter
            .emit(
                Some("n"),
                EventPayload::RunFinished {
                    status: RunStatus::Succeeded,
                    error: None,
                },
            )
            .unwrap();
        let events = sink.0.lock().unwrap().clone();
        assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2]);
        let line = events[0].to_json_line();
        assert!(line.contains(r#""type":"agent_message""#), "{line}");
        assert!(!line.contains("sk-secret-value"), "{line}");
        let back: Event = serde_json::from_str(&events[1].to_json_line()).unwrap();
        assert_eq!(back, events[1]);
    }

    #[test]
    fn secrets_added_later_are_redacted_from_then_on_in_every_clone() {
        let sink = Arc::new(Collect(Mutex::new(Vec::new())));
        let emitter = Emitter::new("r", Some(sink.clone()), Redactor::default());
        let clone = emitter.clone();
        let say = |e: &Emitter, text: &str| {
            e.emit(None, EventPayload::AgentMessage { text: text.into() })
                .unwrap()
        };
        say(&emitter, "run secret 9f8e7d6c5b4a");
        emitter.add_secrets(["9f8e7d6c5b4a"]);
        say(&clone, "run secret 9f8e7d6c5b4a");
        let texts: Vec<String> = sink
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|e| match &e.payload {
                EventPayload::AgentMessage { text } => text.clone(),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(
            texts,
            vec!["run secret 9f8e7d6c5b4a", "run secret [REDACTED]"]
        );
        assert_eq!(clone.redactor().redact("9f8e7d6c5b4a"), "[REDACTED]");
    }

    #[test]
    fn long_strings_are_truncated_with_a_marker() {
        let emitter = Emitter::new("r", None, Redactor::default());
        let big = "é".repeat(DEFAULT_MAX_EVENT_STRING_BYTES);
        let event = emitter
            .emit(
                None,
                EventPayload::ExecOutput {
                    stream: OutputStream::Stdout,
                    chunk: big,
                },
            )
            .unwrap();
        let EventPayload::ExecOutput { chunk, .. } = event.payload else {
            panic!()
        };
        assert!(chunk.ends_with(&format!(
            "…[truncated {} bytes]",
            DEFAULT_MAX_EVENT_STRING_BYTES
        )));
    }
}
