//! Builders for the OpenAI Chat Completions stream (`chat.completion.chunk` events).
//!
//! ```
//! use boitata_test_support::openai::*;
//!
//! let _response = openai_sse(vec![
//!     text_chunk("Let me look."),
//!     tool_call_chunk(0, Some("call_1"), Some("file_"), ""),
//!     tool_call_chunk(0, None, Some("read"), "{\"path\":"),
//!     tool_call_chunk(0, None, None, "\"a.txt\"}"),
//!     finish_chunk("tool_calls"),
//!     usage_chunk(12, 5),
//!     done(),
//! ]);
//! ```

use serde_json::{json, Value};
use wiremock::ResponseTemplate;

pub use crate::sse::SseEvent;

/// A 200 `text/event-stream` response streaming `events`.
pub fn openai_sse(events: Vec<SseEvent>) -> ResponseTemplate {
    crate::sse::sse_response(&events)
}

/// A whole answer: `text` in one chunk, `finish_reason: stop`, usage, `[DONE]`.
pub fn text_reply(text: &str) -> ResponseTemplate {
    openai_sse(vec![
        text_chunk(text),
        finish_chunk("stop"),
        usage_chunk(10, 5),
        done(),
    ])
}

/// A whole (non-streamed) `chat.completion` answer: one choice with `message` and
/// `finish_reason`, and usage (12 prompt tokens, 4 completion tokens).
pub fn completion(message: Value, finish_reason: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 4},
    }))
}

/// A chunk with these `choices`.
pub fn chunk(choices: Value) -> SseEvent {
    SseEvent::json(&json!({
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "gpt-test",
        "choices": choices,
    }))
}

/// A chunk whose first choice's delta is `delta`.
pub fn delta_chunk(delta: Value) -> SseEvent {
    chunk(json!([{"index": 0, "delta": delta, "finish_reason": null}]))
}

/// A chunk adding `text` to the answer.
pub fn text_chunk(text: &str) -> SseEvent {
    delta_chunk(json!({"role": "assistant", "content": text}))
}

/// A chunk with one tool call delta at `index`: the `id` and a piece of the name (as
/// the first delta of a call has), and a piece of the argument string.
pub fn tool_call_chunk(
    index: u32,
    id: Option<&str>,
    name: Option<&str>,
    arguments: &str,
) -> SseEvent {
    let mut function = json!({"arguments": arguments});
    if let Some(name) = name {
        function["name"] = json!(name);
    }
    let mut call = json!({"index": index, "function": function});
    if let Some(id) = id {
        call["id"] = json!(id);
        call["type"] = json!("function");
    }
    delta_chunk(json!({"tool_calls": [call]}))
}

/// A chunk ending the choice with `reason` (`stop`, `tool_calls`, `length`, …).
pub fn finish_chunk(reason: &str) -> SseEvent {
    chunk(json!([{"index": 0, "delta": {}, "finish_reason": reason}]))
}

/// The usage-only last chunk `stream_options.include_usage` asks for: `choices: []`.
pub fn usage_chunk(prompt_tokens: u64, completion_tokens: u64) -> SseEvent {
    SseEvent::json(&json!({
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "gpt-test",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }))
}

/// `data: [DONE]`, the end of the stream.
pub fn done() -> SseEvent {
    SseEvent::data("[DONE]")
}

/// A `data:` line with anything in it (for malformed streams).
pub fn raw(data: &str) -> SseEvent {
    SseEvent::data(data)
}

/// An error response as OpenAI sends it: `{"error": {"message", "type", "code"}}`.
pub fn error_response(status: u16, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(json!({
        "error": {"message": message, "type": "invalid_request_error", "code": null}
    }))
}
