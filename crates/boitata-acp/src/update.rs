//! How a Boitata [`Event`] becomes an ACP `session/update`
//! ([Prompt Turn](https://agentclientprotocol.com/protocol/prompt-turn),
//! [Tool Calls](https://agentclientprotocol.com/protocol/tool-calls)).
//!
//! | event | update |
//! |---|---|
//! | `agent_message` | `agent_message_chunk` with the text |
//! | `tool_call` | `tool_call`: status `in_progress`, a kind from the tool, a title, `rawInput` = the arguments |
//! | `tool_result` | `tool_call_update`: status `completed` (or `failed`), content = the output text |
//! | anything else (`usage`, …) | `session_info_update` with `updatedAt` = the event's time |
//!
//! Every update carries the event itself in its `_meta.boitata`
//! ([`event_meta`]), so a Boitata client loses nothing and any other client
//! still sees an ordinary ACP session.

use std::path::Path;

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, SessionInfoUpdate, SessionUpdate, ToolCall, ToolCallLocation,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use boitata_core::{Event, EventPayload};

use crate::meta::{event_meta, Meta};

/// The longest tool call title, in characters, before it is cut with `…`.
const MAX_TITLE_CHARS: usize = 100;

/// The `session/update` that reports `event` (see the module docs). `cwd` is the
/// session's directory: tool paths are shown joined to it.
pub fn session_update(event: &Event, cwd: &Path) -> SessionUpdate {
    let meta = event_meta(event);
    match &event.payload {
        EventPayload::AgentMessage { text } => SessionUpdate::AgentMessageChunk(
            ContentChunk::new(ContentBlock::from(text.as_str())).meta(meta),
        ),
        EventPayload::ToolCall {
            call_id,
            tool,
            arguments,
        } => SessionUpdate::ToolCall(
            ToolCall::new(call_id.clone(), tool_title(tool, arguments))
                .name(tool.clone())
                .kind(tool_kind(tool))
                .status(ToolCallStatus::InProgress)
                .locations(tool_locations(tool, arguments, cwd))
                .raw_input(arguments.clone())
                .meta(meta),
        ),
        EventPayload::ToolResult {
            call_id,
            ok,
            output,
            ..
        } => SessionUpdate::ToolCallUpdate(
            ToolCallUpdate::new(
                call_id.clone(),
                ToolCallUpdateFields::new()
                    .status(if *ok {
                        ToolCallStatus::Completed
                    } else {
                        ToolCallStatus::Failed
                    })
                    .content(vec![ContentBlock::from(output.as_str()).into()]),
            )
            .meta(meta),
        ),
        _ => SessionUpdate::SessionInfoUpdate(info_update(event, meta)),
    }
}

fn info_update(event: &Event, meta: Meta) -> SessionInfoUpdate {
    // The event's own `ts` string, so the update and the event agree to the millisecond.
    let ts = serde_json::to_value(event)
        .ok()
        .and_then(|v| v.get("ts").and_then(|ts| ts.as_str()).map(str::to_owned));
    let update = SessionInfoUpdate::new().meta(meta);
    match ts {
        Some(ts) => update.updated_at(ts),
        None => update,
    }
}

/// The `_meta` of an update, wherever its variant keeps it.
pub(crate) fn update_meta(update: &SessionUpdate) -> Option<&Meta> {
    match update {
        SessionUpdate::AgentMessageChunk(chunk)
        | SessionUpdate::AgentThoughtChunk(chunk)
        | SessionUpdate::UserMessageChunk(chunk) => chunk.meta.as_ref(),
        SessionUpdate::ToolCall(call) => call.meta.as_ref(),
        SessionUpdate::ToolCallUpdate(update) => update.meta.as_ref(),
        SessionUpdate::SessionInfoUpdate(info) => info.meta.as_ref(),
        _ => None,
    }
}

/// The ACP tool kind of a Boitata tool: how a client may show it.
pub fn tool_kind(tool: &str) -> ToolKind {
    match tool {
        "file_read" | "list_dir" | "git_status" | "git_diff" | "git_log" => ToolKind::Read,
        "file_write" | "file_edit" => ToolKind::Edit,
        "search" => ToolKind::Search,
        "execute_command" | "git_commit" => ToolKind::Execute,
        _ => ToolKind::Other,
    }
}

/// A one-line title: the tool and the arguments that matter
/// ([`boitata_tools::tool::call_summary`]), e.g. `execute_command: cargo test`.
pub fn tool_title(tool: &str, arguments: &serde_json::Value) -> String {
    let summary = boitata_tools::tool::call_summary(tool, arguments);
    let title = if summary.is_empty() {
        tool.to_owned()
    } else {
        format!("{tool}: {summary}")
    };
    if title.chars().count() <= MAX_TITLE_CHARS {
        return title;
    }
    let mut cut: String = title.chars().take(MAX_TITLE_CHARS).collect();
    cut.push('…');
    cut
}

/// The file a file tool touches, joined to the session's directory.
fn tool_locations(tool: &str, arguments: &serde_json::Value, cwd: &Path) -> Vec<ToolCallLocation> {
    if !matches!(tool, "file_read" | "file_write" | "file_edit" | "list_dir") {
        return Vec::new();
    }
    arguments
        .get("path")
        .and_then(|p| p.as_str())
        .map(|path| vec![ToolCallLocation::new(joined(cwd, path))])
        .unwrap_or_default()
}

/// `cwd` joined with `path`, without the `.` components (`list_dir .` is `cwd` itself).
fn joined(cwd: &Path, path: &str) -> std::path::PathBuf {
    Path::new(path)
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .fold(cwd.to_path_buf(), |acc, c| acc.join(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use boitata_core::{Emitter, Redactor};
    use serde_json::json;

    fn emit(payload: EventPayload) -> Event {
        Emitter::new("r", None, Redactor::default())
            .emit(None, payload)
            .unwrap()
    }

    #[test]
    fn each_event_kind_maps_to_its_update_with_the_event_in_meta() {
        let cwd = Path::new("/ws");
        let call = emit(EventPayload::ToolCall {
            call_id: "c1".into(),
            tool: "execute_command".into(),
            arguments: json!({"command": "cargo test"}),
        });
        let wire = serde_json::to_value(session_update(&call, cwd)).unwrap();
        assert_eq!(wire["sessionUpdate"], "tool_call");
        assert_eq!(wire["toolCallId"], "c1");
        assert_eq!(wire["kind"], "execute");
        assert_eq!(wire["status"], "in_progress");
        assert_eq!(wire["title"], "execute_command: cargo test");
        assert_eq!(wire["rawInput"]["command"], "cargo test");
        assert_eq!(wire["_meta"]["boitata"]["type"], "tool_call");
        let list = emit(EventPayload::ToolCall {
            call_id: "c2".into(),
            tool: "list_dir".into(),
            arguments: json!({"path": "./src"}),
        });
        let wire = serde_json::to_value(session_update(&list, cwd)).unwrap();
        assert_eq!(wire["locations"][0]["path"], "/ws/src");

        let result = emit(EventPayload::ToolResult {
            call_id: "c1".into(),
            tool: "execute_command".into(),
            ok: false,
            output: "exit 1".into(),
        });
        let wire = serde_json::to_value(session_update(&result, cwd)).unwrap();
        assert_eq!(wire["sessionUpdate"], "tool_call_update");
        assert_eq!(wire["status"], "failed");
        assert_eq!(wire["content"][0]["content"]["text"], "exit 1");

        let usage = emit(EventPayload::Usage {
            input_tokens: 3,
            output_tokens: 4,
        });
        let update = session_update(&usage, cwd);
        let wire = serde_json::to_value(&update).unwrap();
        assert_eq!(wire["sessionUpdate"], "session_info_update");
        assert_eq!(wire["_meta"]["boitata"]["input_tokens"], 3);
        let back = crate::meta::event_from_meta(update_meta(&update).unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(back, usage);
    }

    #[test]
    fn titles_are_one_line_and_bounded() {
        assert_eq!(tool_title("list_dir", &json!({"path": "."})), "list_dir: .");
        assert_eq!(tool_title("git_status", &json!({})), "git_status");
        let long = tool_title("execute_command", &json!({"command": "x\n".repeat(200)}));
        assert!(!long.contains('\n'));
        assert_eq!(long.chars().count(), MAX_TITLE_CHARS + 1);
    }
}
