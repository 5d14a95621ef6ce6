//! `scripted`: replays a file of model turns, with no network. For tests, demos and
//! offline use; the model it reports is `scripted`.
//!
//! The file is JSON: an optional `description` (for people; not replayed) and a list of
//! turns, each with the text the "model" says and the tool calls it makes. Unknown
//! fields are errors.
//!
//! ```json
//! {
//!   "description": "creates hello.txt",
//!   "turns": [
//!     {
//!       "text": "I'll create the file.",
//!       "tool_calls": [
//!         {"name": "file_write", "arguments": {"path": "hello.txt", "content": "hi\n"}}
//!       ]
//!     },
//!     {"text": "Done: hello.txt says hi."}
//!   ]
//! }
//! ```
//!
//! - Turn N answers the Nth request, whatever the request says: replay is
//!   deterministic. A request after the last turn is a [`ProviderError::Script`] saying
//!   how many turns the script has.
//! - `text` (default empty) and `tool_calls` (default none) are both optional. Tool call
//!   ids are made up in script order across all turns: `call_1`, `call_2`, ….
//! - A turn streams its text as a few [`StreamEvent::TextDelta`]s, then its
//!   [`StreamEvent::ToolCall`]s, then a [`StreamEvent::Usage`] *estimate* (bytes / 4,
//!   rounded up, of the request for input and of the turn for output: no tokenizer is
//!   involved), then [`StreamEvent::Finished`]: [`StopReason::ToolUse`] when the turn has
//!   tool calls, else [`StopReason::EndTurn`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{
    Message, ModelRequest, ModelStream, Provider, ProviderError, StopReason, StreamEvent, ToolCall,
    Usage,
};
use crate::config::ProviderConfig;

/// The provider's name, and the model it reports.
const NAME: &str = "scripted";
/// Text is streamed in pieces of about this many bytes (cut after whitespace).
const PIECE_BYTES: usize = 24;

/// A script: the turns to replay, in order.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// What the session does, for people reading the file (not replayed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Turn N answers the Nth request.
    pub turns: Vec<ScriptTurn>,
}

/// One model turn.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptTurn {
    /// What the model says (may be empty).
    #[serde(default)]
    pub text: String,
    /// The tool calls it makes, in order.
    #[serde(default)]
    pub tool_calls: Vec<ScriptToolCall>,
}

/// One scripted tool call (its id is made up: `call_1`, `call_2`, … in script order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptToolCall {
    /// The tool's name.
    pub name: String,
    /// Its arguments (normally a JSON object).
    #[serde(default = "empty_object")]
    pub arguments: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::json!({})
}

/// A provider replaying a [`Script`]. See the [module docs](self).
#[derive(Debug)]
pub struct Scripted {
    /// Each turn as the calls it makes, ids assigned.
    turns: Vec<(String, Vec<ToolCall>)>,
    /// Where the script came from, for messages (`None` when built in memory).
    source: Option<PathBuf>,
    /// How many requests were answered.
    next: AtomicUsize,
    /// The conversation measured so far for the input-token estimate: how many
    /// messages, and their bytes. A conversation only grows between requests (the agent
    /// loop appends to it), so each request measures only its new messages.
    measured: Mutex<(usize, usize)>,
}

impl Scripted {
    /// A provider replaying `script`.
    pub fn new(script: Script) -> Self {
        Scripted::with_source(script, None)
    }

    fn with_source(script: Script, source: Option<PathBuf>) -> Self {
        let mut numbered = 0usize;
        let turns = script
            .turns
            .into_iter()
            .map(|turn| {
                let calls = turn
                    .tool_calls
                    .into_iter()
                    .map(|call| {
                        numbered += 1;
                        ToolCall {
                            id: format!("call_{numbered}"),
                            name: call.name,
                            arguments: call.arguments,
                        }
                    })
                    .collect();
                (turn.text, calls)
            })
            .collect();
        Scripted {
            turns,
            source,
            next: AtomicUsize::new(0),
            measured: Mutex::new((0, 0)),
        }
    }

    /// A provider replaying the script file at `path`.
    ///
    /// # Errors
    /// [`ProviderError::Script`] naming the path when it cannot be read, or is not a
    /// valid script (with the parser's line and column).
    pub fn load(path: &Path) -> Result<Self, ProviderError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ProviderError::Script(format!("cannot read script {}: {e}", path.display()))
        })?;
        let script: Script = serde_json::from_str(&text).map_err(|e| {
            ProviderError::Script(format!(
                "invalid script {}: {e} (expected {{\"turns\": [{{\"text\": ..., \"tool_calls\": [{{\"name\": ..., \"arguments\": {{...}}}}]}}]}})",
                path.display()
            ))
        })?;
        Ok(Scripted::with_source(script, Some(path.to_path_buf())))
    }

    /// The provider `config.script` names.
    ///
    /// # Errors
    /// [`ProviderError::Script`] when no script is set, or as [`Scripted::load`].
    pub fn from_config(config: &ProviderConfig) -> Result<Self, ProviderError> {
        let path = config.script.as_deref().ok_or_else(|| {
            ProviderError::Script(
                "no script file: pass --script FILE, or set provider.script in the config or BOITATA_SCRIPT"
                    .to_owned(),
            )
        })?;
        Scripted::load(path)
    }

    /// How many turns the script has.
    pub fn turn_count(&self) -> usize {
        self.turns.len()
    }

    /// The script file, when loaded from one.
    pub fn source(&self) -> Option<&Path> {
        self.source.as_deref()
    }

    fn describe(&self) -> String {
        match &self.source {
            Some(path) => format!("script {}", path.display()),
            None => "the script".to_owned(),
        }
    }
}

#[async_trait]
impl Provider for Scripted {
    fn name(&self) -> &str {
        NAME
    }

    fn model(&self) -> &str {
        NAME
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ProviderError> {
        let turn = self.next.fetch_add(1, Ordering::SeqCst);
        let Some((text, calls)) = self.turns.get(turn) else {
            let count = self.turns.len();
            return Err(ProviderError::Script(format!(
                "{} has {count} turn{}, all used; request {} has no answer: add turns to the script",
                self.describe(),
                if count == 1 { "" } else { "s" },
                turn + 1,
            )));
        };
        let mut events: Vec<StreamEvent> = text_pieces(text)
            .map(|piece| StreamEvent::TextDelta(piece.to_owned()))
            .collect();
        events.extend(calls.iter().cloned().map(StreamEvent::ToolCall));
        let output_bytes = text.len()
            + calls
                .iter()
                .map(|c| c.name.len() + c.arguments.to_string().len())
                .sum::<usize>();
        events.push(StreamEvent::Usage(Usage {
            input_tokens: estimate_tokens(self.request_bytes(request)),
            output_tokens: estimate_tokens(output_bytes),
        }));
        events.push(StreamEvent::Finished(if calls.is_empty() {
            StopReason::EndTurn
        } else {
            StopReason::ToolUse
        }));
        Ok(Box::pin(futures::stream::iter(events.into_iter().map(Ok))))
    }
}

/// `text` in pieces of about [`PIECE_BYTES`], each cut just after whitespace when
/// possible; the pieces join back to `text`.
fn text_pieces(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = rest.len();
        if rest.len() > PIECE_BYTES {
            end = rest
                .char_indices()
                .skip_while(|(i, _)| *i < PIECE_BYTES)
                .find(|(_, c)| c.is_whitespace())
                .map(|(i, c)| i + c.len_utf8())
                .unwrap_or(rest.len());
        }
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

impl Scripted {
    /// The size of `request` in bytes (system prompt, messages, tool specs), measuring
    /// only the messages added since the last request; a conversation that shrank (a
    /// new one) is measured whole.
    fn request_bytes(&self, request: &ModelRequest) -> usize {
        let mut measured = self.measured.lock().unwrap_or_else(|p| p.into_inner());
        let (count, bytes) = *measured;
        let (from, base) = if request.messages.len() >= count {
            (count, bytes)
        } else {
            (0, 0)
        };
        let messages = base
            + request.messages[from..]
                .iter()
                .map(message_bytes)
                .sum::<usize>();
        *measured = (request.messages.len(), messages);
        let tools: usize = request
            .tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
            .sum();
        request.system.len() + messages + tools
    }
}

fn message_bytes(message: &Message) -> usize {
    match message {
        Message::User { content } => content.len(),
        Message::Assistant {
            content,
            tool_calls,
        } => {
            content.len()
                + tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.to_string().len())
                    .sum::<usize>()
        }
        Message::Tool { content, .. } => content.len(),
    }
}

/// A rough token count: bytes / 4, rounded up.
fn estimate_tokens(bytes: usize) -> u64 {
    u64::try_from(bytes.div_ceil(4)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_pieces_join_back_and_split_long_text() {
        let text = "The quick brown fox jumps over the lazy dog, then naps in the warm sun.";
        let pieces: Vec<&str> = text_pieces(text).collect();
        assert!(pieces.len() >= 2, "{pieces:?}");
        assert_eq!(pieces.concat(), text);
        assert_eq!(text_pieces("").count(), 0);
        let unbroken = "é".repeat(40);
        assert_eq!(
            text_pieces(&unbroken).collect::<Vec<_>>(),
            vec![unbroken.as_str()]
        );
    }
}
