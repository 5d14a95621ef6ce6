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
//! Events are made by `boitata_core::Emitter`, which numbers them densely from 1 per
//! run, stamps them, redacts secrets, truncates large strings, stores them and only then
//! hands them to observers (printers, SSE subscribers).

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

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
    /// A budget of the run was spent: no further model request is admitted and the
    /// run fails. Emitted once per run.
    BudgetExceeded {
        /// Which limit: `tokens`, `requests` or `wall`.
        budget: BudgetKind,
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

impl EventPayload {
    /// Calls `visit` on every text this payload carries (every `String` field, and
    /// every string inside a JSON field such as a tool call's `arguments`), so it can be
    /// rewritten in place: how the emitter redacts and truncates an event without a
    /// round trip through JSON. Enum fields (outcome, stream, status) are not text.
    ///
    /// Every variant is matched field by field, so a new field cannot be added without
    /// deciding here whether it is text.
    pub fn visit_text_mut(&mut self, visit: &mut dyn FnMut(&mut String)) {
        fn opt(text: &mut Option<String>, visit: &mut dyn FnMut(&mut String)) {
            if let Some(text) = text {
                visit(text);
            }
        }
        match self {
            EventPayload::RunStarted {
                task,
                blueprint,
                workspace,
                provider,
                model,
            } => {
                visit(task);
                opt(blueprint, visit);
                opt(workspace, visit);
                opt(provider, visit);
                opt(model, visit);
            }
            EventPayload::NodeStarted { node_type, detail } => {
                visit(node_type);
                opt(detail, visit);
            }
            EventPayload::NodeFinished {
                outcome: _,
                exit_code: _,
                output_preview,
                error,
            } => {
                visit(output_preview);
                opt(error, visit);
            }
            EventPayload::SandboxProvisioned {
                sandbox_id,
                backend,
                image,
                network,
            } => {
                visit(sandbox_id);
                visit(backend);
                visit(image);
                opt(network, visit);
            }
            EventPayload::SandboxDestroyed { sandbox_id } => visit(sandbox_id),
            EventPayload::ExecOutput { stream: _, chunk } => visit(chunk),
            EventPayload::AgentMessage { text } => visit(text),
            EventPayload::ToolCall {
                call_id,
                tool,
                arguments,
            } => {
                visit(call_id);
                visit(tool);
                visit_json_text_mut(arguments, visit);
            }
            EventPayload::ToolResult {
                call_id,
                tool,
                ok: _,
                output,
            } => {
                visit(call_id);
                visit(tool);
                visit(output);
            }
            EventPayload::Usage {
                input_tokens: _,
                output_tokens: _,
            } => {}
            EventPayload::Note { message } => visit(message),
            EventPayload::Egress {
                host,
                port: _,
                allowed: _,
                reason,
                bytes_up: _,
                bytes_down: _,
            } => {
                visit(host);
                visit(reason);
            }
            EventPayload::BudgetExceeded {
                budget: _,
                used: _,
                limit: _,
                message,
            } => visit(message),
            EventPayload::RunFinished { status: _, error } => opt(error, visit),
        }
    }
}

/// Calls `visit` on every string value inside `value` (object keys are left alone).
pub fn visit_json_text_mut(value: &mut serde_json::Value, visit: &mut dyn FnMut(&mut String)) {
    match value {
        serde_json::Value::String(text) => visit(text),
        serde_json::Value::Array(items) => {
            for item in items {
                visit_json_text_mut(item, visit);
            }
        }
        serde_json::Value::Object(map) => {
            for (_, item) in map.iter_mut() {
                visit_json_text_mut(item, visit);
            }
        }
        _ => {}
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

    #[test]
    fn an_event_round_trips_with_its_type_tag_and_millisecond_time() {
        let line = r#"{"run_id":"r1","seq":3,"ts":"2026-11-29T13:04:20.123Z","node":"test","type":"exec_output","stream":"stdout","chunk":"ok\n"}"#;
        let event: Event = serde_json::from_str(line).unwrap();
        assert_eq!(event.seq, 3);
        assert_eq!(event.payload.kind(), "exec_output");
        assert_eq!(event.to_json_line(), line);
    }

    #[test]
    fn run_status_text_parses_back_and_maps_to_exit_codes() {
        for status in [
            RunStatus::Queued,
            RunStatus::Running,
            RunStatus::Succeeded,
            RunStatus::Failed,
            RunStatus::Cancelled,
        ] {
            assert_eq!(RunStatus::parse(status.as_str()), Some(status));
            let json = serde_json::to_string(&status).unwrap();
            assert_eq!(json, format!("\"{status}\""));
        }
        assert_eq!(RunStatus::parse("done"), None);
        assert_eq!(RunStatus::Succeeded.exit_code(), 0);
        assert_eq!(RunStatus::Failed.exit_code(), 1);
        assert_eq!(RunStatus::Cancelled.exit_code(), 130);
    }

    #[test]
    fn every_text_of_a_payload_is_visited_and_enums_are_not() {
        let mut payload = EventPayload::ToolCall {
            call_id: "c1".into(),
            tool: "execute_command".into(),
            arguments: serde_json::json!({"command": "echo", "env": ["A", {"k": "B"}], "n": 1}),
        };
        let mut seen = Vec::new();
        payload.visit_text_mut(&mut |text| {
            seen.push(text.clone());
            text.make_ascii_uppercase();
        });
        assert_eq!(seen, ["c1", "execute_command", "echo", "A", "B"]);
        let EventPayload::ToolCall { arguments, .. } = &payload else {
            unreachable!()
        };
        assert_eq!(
            arguments,
            &serde_json::json!({"command": "ECHO", "env": ["A", {"k": "B"}], "n": 1})
        );
        let mut finished = EventPayload::RunFinished {
            status: RunStatus::Failed,
            error: None,
        };
        let mut count = 0;
        finished.visit_text_mut(&mut |_| count += 1);
        assert_eq!(count, 0);
    }
}

/// Which limit of a run's budget was spent (in a `budget_exceeded` event).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetKind {
    /// The most model tokens (prompt plus completion) of the run.
    Tokens,
    /// The most model requests of the run.
    Requests,
    /// The most wall time from the run's start.
    Wall,
}

impl BudgetKind {
    /// `tokens`, `requests` or `wall`: the field's name.
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetKind::Tokens => "tokens",
            BudgetKind::Requests => "requests",
            BudgetKind::Wall => "wall",
        }
    }
}

impl std::fmt::Display for BudgetKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
