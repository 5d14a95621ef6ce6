//! Builders for the Anthropic Messages API stream.
//!
//! ```
//! use boitata_test_support::anthropic::*;
//!
//! let _response = anthropic_sse(vec![
//!     message_start(20),
//!     text_block_start(0),
//!     text_delta(0, "Let me look."),
//!     block_stop(0),
//!     tool_use_start(1, "toolu_1", "file_read"),
//!     input_json_delta(1, "{\"path\":"),
//!     input_json_delta(1, "\"a.txt\"}"),
//!     block_stop(1),
//!     message_delta("tool_use", 9),
//!     message_stop(),
//! ]);
//! ```

use serde_json::{json, Value};
use wiremock::ResponseTemplate;

pub use crate::sse::SseEvent;

/// A 200 `text/event-stream` response streaming `events`.
pub fn anthropic_sse(events: Vec<SseEvent>) -> ResponseTemplate {
    crate::sse::sse_response(&events)
}

/// A whole answer: `text` in one block, `end_turn`, usage.
pub fn text_reply(text: &str) -> ResponseTemplate {
    anthropic_sse(vec![
        message_start(10),
        text_block_start(0),
        text_delta(0, text),
        block_stop(0),
        message_delta("end_turn", 5),
        message_stop(),
    ])
}

/// An event whose `event:` name is its data's `type`.
pub fn event(data: Value) -> SseEvent {
    let name = data
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message")
        .to_owned();
    SseEvent::named(name, &data)
}

/// `message_start`, reporting `input_tokens` (and 1 output token, as the API does).
pub fn message_start(input_tokens: u64) -> SseEvent {
    event(json!({
        "type": "message_start",
        "message": {
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1},
        }
    }))
}

/// `content_block_start` of an empty text block.
pub fn text_block_start(index: u32) -> SseEvent {
    event(json!({
        "type": "content_block_start",
        "index": index,
        "content_block": {"type": "text", "text": ""},
    }))
}

/// `content_block_delta` adding `text` to block `index`.
pub fn text_delta(index: u32, text: &str) -> SseEvent {
    event(json!({
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "text_delta", "text": text},
    }))
}

/// `content_block_start` of a `tool_use` block (its `input` is `{}`, as streamed).
pub fn tool_use_start(index: u32, id: &str, name: &str) -> SseEvent {
    event(json!({
        "type": "content_block_start",
        "index": index,
        "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}},
    }))
}

/// `content_block_delta` adding a piece of block `index`'s input JSON.
pub fn input_json_delta(index: u32, partial_json: &str) -> SseEvent {
    event(json!({
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "input_json_delta", "partial_json": partial_json},
    }))
}

/// `content_block_stop` of block `index`.
pub fn block_stop(index: u32) -> SseEvent {
    event(json!({"type": "content_block_stop", "index": index}))
}

/// `message_delta` with the stop reason and the cumulative output tokens.
pub fn message_delta(stop_reason: &str, output_tokens: u64) -> SseEvent {
    event(json!({
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": null},
        "usage": {"output_tokens": output_tokens},
    }))
}

/// `message_stop`, the end of the stream.
pub fn message_stop() -> SseEvent {
    event(json!({"type": "message_stop"}))
}

/// A keep-alive `ping`.
pub fn ping() -> SseEvent {
    event(json!({"type": "ping"}))
}

/// An `error` event in the stream (e.g. `overloaded_error`).
pub fn error_event(kind: &str, message: &str) -> SseEvent {
    event(json!({"type": "error", "error": {"type": kind, "message": message}}))
}

/// An event named `event_name` with anything as its data (for malformed streams).
pub fn raw(event_name: &str, data: &str) -> SseEvent {
    SseEvent {
        event: Some(event_name.to_owned()),
        data: data.to_owned(),
    }
}

/// An error response as Anthropic sends it: `{"type": "error", "error": {"type",
/// "message"}}`.
pub fn error_response(status: u16, kind: &str, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(json!({
        "type": "error",
        "error": {"type": kind, "message": message},
    }))
}
