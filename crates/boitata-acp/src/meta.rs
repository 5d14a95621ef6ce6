//! The `_meta.boitata` encoding: what Boitata puts in ACP's extension fields.
//!
//! ACP reserves `_meta` on every message for implementation data
//! ([Extensibility](https://agentclientprotocol.com/protocol/extensibility)). Boitata uses
//! one key there, [`META_KEY`] (`boitata`):
//!
//! | message | `_meta.boitata` |
//! |---|---|
//! | each `session/update`'s `update` | the [`Event`] it reports, exactly as the CLI's `--json` prints it |
//! | `initialize` / `authenticate` request | `{"secret": "…"}`: the per-run secret |
//! | `session/prompt` request | optional `{"max_turns": N}` |
//! | `session/prompt` response | `{"final_message": "…", "turns": N, "usage": {"input_tokens": N, "output_tokens": N}}` |

use boitata_core::Event;
use serde_json::{json, Map, Value};

/// The key under `_meta` that holds Boitata's data.
pub const META_KEY: &str = "boitata";

/// The id of the authentication method a Boitata agent advertises when it has a secret.
pub const AUTH_METHOD_ID: &str = "boitata-secret";

/// ACP's `_meta` object.
pub type Meta = Map<String, Value>;

/// `{"boitata": EVENT}`: the `_meta` of the update that reports `event`.
pub fn event_meta(event: &Event) -> Meta {
    let mut meta = Meta::new();
    // An Event always serializes: every field is a plain value.
    let value = serde_json::to_value(event).unwrap_or(Value::Null);
    meta.insert(META_KEY.to_owned(), value);
    meta
}

/// The [`Event`] in `_meta.boitata`, if there is one.
///
/// `None` when `meta` has no `boitata` key (an update from an agent that is not
/// Boitata); `Some(Err)` when it has one that is not an event.
pub fn event_from_meta(meta: &Meta) -> Option<Result<Event, serde_json::Error>> {
    meta.get(META_KEY)
        .map(|value| serde_json::from_value(value.clone()))
}

/// `{"boitata": {"secret": SECRET}}`.
pub(crate) fn secret_meta(secret: &str) -> Meta {
    let mut meta = Meta::new();
    meta.insert(META_KEY.to_owned(), json!({ "secret": secret }));
    meta
}

/// `_meta.boitata.secret`, if present and a string.
pub(crate) fn secret_from_meta(meta: Option<&Meta>) -> Option<&str> {
    meta?.get(META_KEY)?.get("secret")?.as_str()
}

/// `{"boitata": {"max_turns": N}}`.
pub(crate) fn max_turns_meta(max_turns: u32) -> Meta {
    let mut meta = Meta::new();
    meta.insert(META_KEY.to_owned(), json!({ "max_turns": max_turns }));
    meta
}

/// `_meta.boitata.max_turns`, if present and a positive integer that fits a `u32`.
pub(crate) fn max_turns_from_meta(meta: Option<&Meta>) -> Option<u32> {
    let n = meta?.get(META_KEY)?.get("max_turns")?.as_u64()?;
    u32::try_from(n).ok().filter(|n| *n > 0)
}

/// What the agent reports with the prompt response.
pub(crate) struct TurnSummary<'a> {
    pub(crate) final_message: &'a str,
    pub(crate) turns: u32,
    pub(crate) input_tokens: u64,
    pub(crate) output_tokens: u64,
}

/// `{"boitata": {"final_message", "turns", "usage"}}` for the prompt response.
pub(crate) fn turn_summary_meta(summary: &TurnSummary<'_>) -> Meta {
    let mut meta = Meta::new();
    meta.insert(
        META_KEY.to_owned(),
        json!({
            "final_message": summary.final_message,
            "turns": summary.turns,
            "usage": {
                "input_tokens": summary.input_tokens,
                "output_tokens": summary.output_tokens,
            },
        }),
    );
    meta
}

/// `_meta.boitata.final_message` of a prompt response, if present.
pub(crate) fn final_message_from_meta(meta: Option<&Meta>) -> Option<String> {
    Some(
        meta?
            .get(META_KEY)?
            .get("final_message")?
            .as_str()?
            .to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use boitata_core::{Emitter, EventPayload, Redactor};

    #[test]
    fn an_event_survives_the_meta_round_trip() {
        let emitter = Emitter::new("run-1", None, Redactor::default());
        let event = emitter
            .emit(
                None,
                EventPayload::ToolCall {
                    call_id: "c1".into(),
                    tool: "list_dir".into(),
                    arguments: json!({"path": "."}),
                },
            )
            .unwrap();
        let meta = event_meta(&event);
        assert_eq!(meta["boitata"]["type"], "tool_call");
        assert_eq!(event_from_meta(&meta).unwrap().unwrap(), event);
        assert!(event_from_meta(&Meta::new()).is_none());
    }

    #[test]
    fn secret_and_max_turns_are_read_back() {
        let meta = secret_meta("s3cret-value");
        assert_eq!(secret_from_meta(Some(&meta)), Some("s3cret-value"));
        assert_eq!(secret_from_meta(None), None);
        assert_eq!(max_turns_from_meta(Some(&max_turns_meta(7))), Some(7));
        assert_eq!(max_turns_from_meta(Some(&max_turns_meta(0))), None);
    }
}
