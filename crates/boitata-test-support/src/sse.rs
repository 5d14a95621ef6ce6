//! Server-Sent Events framing for faked streaming responses.

use wiremock::ResponseTemplate;

/// One Server-Sent Event: an optional `event:` name and its `data:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` payload (split over several `data:` lines if it holds newlines).
    pub data: String,
}

impl SseEvent {
    /// An unnamed event carrying `data` as is.
    pub fn data(data: impl Into<String>) -> Self {
        SseEvent {
            event: None,
            data: data.into(),
        }
    }

    /// An unnamed event carrying `json`.
    pub fn json(json: &serde_json::Value) -> Self {
        SseEvent::data(json.to_string())
    }

    /// An event named `event` carrying `json`.
    pub fn named(event: impl Into<String>, json: &serde_json::Value) -> Self {
        SseEvent {
            event: Some(event.into()),
            data: json.to_string(),
        }
    }

    /// The event as it goes on the wire, ending with its blank line.
    pub fn to_frame(&self) -> String {
        let mut frame = String::new();
        if let Some(event) = &self.event {
            frame.push_str(&format!("event: {event}\n"));
        }
        for line in self.data.split('\n') {
            frame.push_str(&format!("data: {line}\n"));
        }
        frame.push('\n');
        frame
    }
}

/// The events as one `text/event-stream` body.
pub fn sse_body(events: &[SseEvent]) -> String {
    events.iter().map(SseEvent::to_frame).collect()
}

/// A 200 response streaming `events` (`content-type: text/event-stream`).
pub fn sse_response(events: &[SseEvent]) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(sse_body(events), "text/event-stream")
}
