//! `openai`: the OpenAI Chat Completions API, streamed, and every server that speaks
//! it (Ollama, vLLM, llama.cpp's `llama-server`, …).
//!
//! Each request is `POST {base_url}/chat/completions` with `stream: true` and
//! `stream_options: {"include_usage": true}`; the answer is Server-Sent Events, one
//! `chat.completion.chunk` per `data:` line, ended by `data: [DONE]`. With
//! `provider.stream = false` (or after a refusal in `auto`, see
//! [`StreamMode`](crate::config::StreamMode)) it is `stream: false` and the answer one
//! `chat.completion` whose `choices[].message` is read like a delta. A request that
//! offers tools says `tool_choice: "auto"`.
//!
//! - `base_url` defaults to `https://api.openai.com/v1`; point it at a local server
//!   (`http://127.0.0.1:11434/v1` for Ollama) to use that instead.
//! - The key (`OPENAI_API_KEY`) is sent as `Authorization: Bearer KEY`. It is required
//!   for the default URL; other servers may need none, and then no header is sent.
//! - Tool calls stream as deltas keyed by `index`: the first delta of a call carries its
//!   `id` and name, later ones only pieces of the name or of the JSON argument string,
//!   and several calls may interleave. They are joined per `index` and delivered whole,
//!   in `index` order, when the choice finishes.
//! - The last chunk, with `include_usage`, has `choices: []` and only `usage`.
//! - `finish_reason`: `stop` → [`StopReason::EndTurn`] (or [`StopReason::ToolUse`] when
//!   the turn made tool calls, as some compatible servers say `stop` there),
//!   `tool_calls` / `function_call` → [`StopReason::ToolUse`], `length` →
//!   [`StopReason::MaxTokens`], anything else → [`StopReason::Other`].
//!
//! Events come in this order: text deltas, tool calls, one [`StreamEvent::Usage`] (if
//! the server reported usage), [`StreamEvent::Finished`].

use std::collections::{BTreeMap, VecDeque};

use async_trait::async_trait;
use eventsource_stream::Event as SseEvent;
use reqwest::header::{HeaderMap, AUTHORIZATION};
use serde::Deserialize;
use serde_json::{json, Value};

use super::http::{self, Decoder, Flow, HttpApi, HttpOptions};
use super::surrogate::{resolve_markers, SurrogateJoiner};
use super::{
    Message, ModelRequest, ModelStream, Provider, ProviderError, StopReason, StreamEvent, ToolCall,
    Usage,
};
use crate::config::ProviderConfig;

/// The provider's name, as in errors and config.
const NAME: &str = "openai";
/// The variable holding the key.
const KEY_VARIABLE: &str = "OPENAI_API_KEY";
/// OpenAI's own endpoint.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// A Chat Completions client. See the [module docs](self).
#[derive(Debug)]
pub struct OpenAi {
    api: HttpApi,
    model: String,
    /// True when talking to OpenAI itself (it wants `max_completion_tokens`).
    is_openai: bool,
}

impl OpenAi {
    /// A client with these options.
    ///
    /// # Errors
    /// [`ProviderError::MissingApiKey`] naming `OPENAI_API_KEY` when the URL is the
    /// default and no key is set; [`ProviderError::InvalidApiKey`];
    /// [`ProviderError::Connect`] when the HTTP client cannot be built.
    pub fn new(options: HttpOptions) -> Result<Self, ProviderError> {
        let base_url = http::base_url_or(&options, DEFAULT_BASE_URL);
        let is_openai = base_url == DEFAULT_BASE_URL;
        let mut headers = HeaderMap::new();
        if let Some(key) = http::required_api_key(&options, NAME, KEY_VARIABLE, is_openai)? {
            let value = http::secret_header(NAME, KEY_VARIABLE, &format!("Bearer {key}"))?;
            headers.insert(AUTHORIZATION, value);
        }
        let url = format!("{base_url}/chat/completions");
        Ok(OpenAi {
            api: HttpApi::new(NAME, KEY_VARIABLE, url, headers, &options)?,
            model: options.model,
            is_openai,
        })
    }

    /// A client as `config` says (`kind` is not checked).
    ///
    /// # Errors
    /// As [`OpenAi::new`].
    pub fn from_config(config: &ProviderConfig) -> Result<Self, ProviderError> {
        OpenAi::new(HttpOptions::from_config(config))
    }

    /// The URL requests go to (`{base_url}/chat/completions`).
    pub fn url(&self) -> &str {
        self.api.url()
    }

    /// The JSON body sent for `request`, asking for a streamed answer or not.
    fn body(&self, request: &ModelRequest, stream: bool) -> Value {
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if !request.system.is_empty() {
            messages.push(json!({"role": "system", "content": request.system}));
        }
        messages.extend(request.messages.iter().map(message_json));
        let mut body = json!({
            "model": self.model,
            "messages": messages,
            "stream": stream,
        });
        if stream {
            body["stream_options"] = json!({"include_usage": true});
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "type": "function",
                        "function": {
                            "name": tool.name,
                            "description": tool.description,
                            "parameters": tool.parameters,
                        }
                    })
                })
                .collect();
            // Said outright: some servers take its absence as `none`.
            body["tool_choice"] = json!("auto");
        }
        if let Some(max) = request.max_output_tokens {
            // OpenAI deprecated `max_tokens` (its reasoning models refuse it); the
            // compatible servers know `max_tokens`.
            let field = if self.is_openai {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            body[field] = json!(max);
        }
        body
    }
}

/// One message in the API's shape.
fn message_json(message: &Message) -> Value {
    match message {
        Message::User { content } => json!({"role": "user", "content": content}),
        Message::Assistant {
            content,
            tool_calls,
        } => {
            let mut out = json!({"role": "assistant", "content": content});
            if !tool_calls.is_empty() {
                if content.is_empty() {
                    out["content"] = Value::Null;
                }
                out["tool_calls"] = tool_calls
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": arguments_string(&call.arguments)},
                        })
                    })
                    .collect();
            }
            out
        }
        // The API has no error flag: the agent already words failures as such.
        Message::Tool {
            call_id, content, ..
        } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
    }
}

/// The arguments as the API's JSON-encoded string (an unparsable string the model sent
/// earlier goes back as it was).
fn arguments_string(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

#[async_trait]
impl Provider for OpenAi {
    fn name(&self) -> &str {
        NAME
    }

    fn model(&self) -> &str {
        &self.model
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ProviderError> {
        self.api
            .request(
                |stream| self.body(request, stream),
                !request.tools.is_empty(),
                ChunkDecoder::default(),
            )
            .await
    }
}

/// A `chat.completion.chunk` (only the fields read).
#[derive(Debug, Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<ChunkUsage>,
    /// Some compatible servers report failures inside the stream.
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    /// `message` in a whole (non-streamed) answer, which has the same fields.
    #[serde(default, alias = "message")]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Debug, Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Debug, Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ChunkUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

/// A tool call being assembled.
#[derive(Debug, Default)]
struct PartialCall {
    index: u32,
    id: String,
    name: String,
    arguments: String,
}

/// Assembles chunks into [`StreamEvent`]s.
#[derive(Debug, Default)]
struct ChunkDecoder {
    /// Calls in the order they started.
    calls: Vec<PartialCall>,
    /// For each `index`, the position in `calls` of its current call.
    by_index: BTreeMap<u32, usize>,
    stop: Option<StopReason>,
    usage: Option<Usage>,
    /// Whether any tool call was delivered this turn.
    made_calls: bool,
    /// The text deltas' surrogate halves.
    content: SurrogateJoiner,
}

impl ChunkDecoder {
    fn tool_delta(&mut self, delta: ToolCallDelta) {
        let id = delta.id.filter(|id| !id.is_empty());
        // Deltas without an index (a few servers) continue the latest call unless
        // they start a new one with an id.
        let index = delta.index.unwrap_or_else(|| {
            let last = self.calls.last().map(|c| c.index);
            match (last, &id) {
                (Some(last), None) => last,
                (Some(last), Some(_)) => last + 1,
                (None, _) => 0,
            }
        });
        // A new id at a known index is a new call (servers that number every call 0).
        let slot = self.by_index.get(&index).copied().filter(|&at| {
            let current = &self.calls[at].id;
            id.as_ref()
                .is_none_or(|id| current.is_empty() || current == id)
        });
        let at = match slot {
            Some(at) => at,
            None => {
                self.calls.push(PartialCall {
                    index,
                    ..PartialCall::default()
                });
                self.by_index.insert(index, self.calls.len() - 1);
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[at];
        if let Some(id) = id {
            if call.id.is_empty() {
                call.id = id;
            }
        }
        if let Some(function) = delta.function {
            if let Some(name) = function.name {
                call.name.push_str(&name);
            }
            if let Some(arguments) = function.arguments {
                call.arguments.push_str(&arguments);
            }
        }
    }

    /// Delivers the assembled calls, by `index` then start order.
    fn flush_calls(&mut self, out: &mut VecDeque<StreamEvent>) -> Result<(), ProviderError> {
        let mut calls = std::mem::take(&mut self.calls);
        self.by_index.clear();
        calls.sort_by_key(|c| c.index);
        for call in calls {
            if call.name.is_empty() {
                return Err(http::malformed(
                    NAME,
                    format!("tool call at index {} has no function name", call.index),
                ));
            }
            let id = if call.id.is_empty() {
                format!("call_{}", call.index)
            } else {
                call.id
            };
            out.push_back(StreamEvent::ToolCall(ToolCall {
                id,
                name: resolve_markers(&call.name).into_owned(),
                arguments: http::tool_arguments(call.arguments, None),
            }));
            self.made_calls = true;
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut VecDeque<StreamEvent>) -> Result<(), ProviderError> {
        let held = self.content.finish();
        if !held.is_empty() {
            out.push_back(StreamEvent::TextDelta(held));
        }
        self.flush_calls(out)?;
        if let Some(usage) = self.usage.take() {
            out.push_back(StreamEvent::Usage(usage));
        }
        let stop = match self.stop.take().unwrap_or(StopReason::EndTurn) {
            StopReason::EndTurn if self.made_calls => StopReason::ToolUse,
            other => other,
        };
        out.push_back(StreamEvent::Finished(stop));
        Ok(())
    }
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "stop" => StopReason::EndTurn,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "length" => StopReason::MaxTokens,
        other => StopReason::Other(other.to_owned()),
    }
}

impl Decoder for ChunkDecoder {
    fn event(
        &mut self,
        event: SseEvent,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<Flow, ProviderError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.finish(out)?;
            return Ok(Flow::Done);
        }
        if data.is_empty() {
            return Ok(Flow::More);
        }
        let chunk: Chunk = http::parse_data(NAME, data, "a chat completion chunk")?;
        self.chunk(chunk, out)?;
        Ok(Flow::More)
    }

    fn whole(&mut self, body: &str, out: &mut VecDeque<StreamEvent>) -> Result<(), ProviderError> {
        let completion: Chunk = http::parse_data(NAME, body.trim(), "a chat completion")?;
        self.chunk(completion, out)?;
        self.finish(out)
    }

    fn end(&mut self, out: &mut VecDeque<StreamEvent>) -> Result<(), ProviderError> {
        // Some servers close without `[DONE]`; a finish_reason says the answer is whole.
        if self.stop.is_some() {
            return self.finish(out);
        }
        Err(http::malformed(
            NAME,
            "the stream ended without a finish_reason or [DONE]: the connection was cut or \
             the server is not streaming chat completions"
                .to_owned(),
        ))
    }
}

impl ChunkDecoder {
    /// Handles one chunk, or a whole completion (its choices carry `message` for
    /// `delta`).
    fn chunk(
        &mut self,
        chunk: Chunk,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<(), ProviderError> {
        if let Some(error) = chunk.error {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| error.to_string());
            let kind = error
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("error")
                .to_owned();
            return Err(http::api_error(NAME, kind, &message));
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(Usage {
                input_tokens: usage.prompt_tokens.unwrap_or_default(),
                output_tokens: usage.completion_tokens.unwrap_or_default(),
            });
        }
        // Only one choice is asked for (no `n`); a usage-only chunk has none.
        for choice in chunk.choices.unwrap_or_default() {
            if let Some(delta) = choice.delta {
                if let Some(text) = delta.content {
                    let text = self.content.push(&text);
                    if !text.is_empty() {
                        out.push_back(StreamEvent::TextDelta(text));
                    }
                }
                for call in delta.tool_calls.unwrap_or_default() {
                    self.tool_delta(call);
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.stop = Some(stop_reason(&reason));
                self.flush_calls(out)?;
            }
        }
        Ok(())
    }
}
