//! `anthropic`: the Anthropic Messages API, streamed.
//!
//! Each request is `POST {base_url}/v1/messages` with `stream: true`, the headers
//! `x-api-key: KEY` and `anthropic-version: 2023-06-01`, and the required `max_tokens`
//! (the request's `max_output_tokens`, else [`DEFAULT_MAX_TOKENS`]). `base_url`
//! defaults to `https://api.anthropic.com`; a base URL already ending in `/v1` is not
//! given a second one.
//!
//! - Messages: the system prompt goes in `system`; an assistant turn's tool calls become
//!   `tool_use` blocks; tool results become `tool_result` blocks (with `is_error`) in a
//!   user message, consecutive results sharing one message as the API requires.
//! - The answer is Server-Sent Events: `message_start` (input usage),
//!   `content_block_start` / `content_block_delta` / `content_block_stop` per content
//!   block `index`, `message_delta` (stop reason, output usage), `message_stop`, and
//!   `ping`s. A `tool_use` block's input streams as `input_json_delta` pieces joined per
//!   block; a tool with no input streams `{}` then an empty `partial_json`, which gives
//!   `{}`. An `error` event ends the stream with [`ProviderError::Api`].
//! - `stop_reason`: `end_turn` and `stop_sequence` → [`StopReason::EndTurn`],
//!   `tool_use` → [`StopReason::ToolUse`], `max_tokens` → [`StopReason::MaxTokens`],
//!   anything else → [`StopReason::Other`].
//!
//! With `provider.stream = false` (or after a refusal in `auto`, see
//! [`StreamMode`](crate::config::StreamMode)) the request says `stream: false` and the
//! whole `message` is read as the stream of its events would be. A request that
//! offers tools says `tool_choice: {"type": "auto"}`.
//!
//! Events come in this order: text deltas and tool calls as their blocks complete, one
//! [`StreamEvent::Usage`], [`StreamEvent::Finished`].

use std::collections::{BTreeMap, VecDeque};

use async_trait::async_trait;
use eventsource_stream::Event as SseEvent;
use reqwest::header::{HeaderMap, HeaderName};
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
const NAME: &str = "anthropic";
/// The variable holding the key.
const KEY_VARIABLE: &str = "ANTHROPIC_API_KEY";
/// Anthropic's own endpoint.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The API version sent in `anthropic-version`.
pub const API_VERSION: &str = "2023-06-01";
/// `max_tokens` when the request sets no limit (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// A Messages API client. See the [module docs](self).
#[derive(Debug)]
pub struct Anthropic {
    api: HttpApi,
    model: String,
}

impl Anthropic {
    /// A client with these options.
    ///
    /// # Errors
    /// [`ProviderError::MissingApiKey`] naming `ANTHROPIC_API_KEY` when the URL is the
    /// default and no key is set (another URL, e.g. a proxy, may need none);
    /// [`ProviderError::InvalidApiKey`]; [`ProviderError::Connect`] when the HTTP client
    /// cannot be built.
    pub fn new(options: HttpOptions) -> Result<Self, ProviderError> {
        let base_url = http::base_url_or(&options, DEFAULT_BASE_URL);
        let mut headers = HeaderMap::new();
        http::static_header(&mut headers, "anthropic-version", API_VERSION);
        let required = base_url == DEFAULT_BASE_URL;
        if let Some(key) = http::required_api_key(&options, NAME, KEY_VARIABLE, required)? {
            let value = http::secret_header(NAME, KEY_VARIABLE, key)?;
            headers.insert(HeaderName::from_static("x-api-key"), value);
        }
        let url = if base_url.ends_with("/v1") {
            format!("{base_url}/messages")
        } else {
            format!("{base_url}/v1/messages")
        };
        Ok(Anthropic {
            api: HttpApi::new(NAME, KEY_VARIABLE, url, headers, &options)?,
            model: options.model,
        })
    }

    /// A client as `config` says (`kind` is not checked).
    ///
    /// # Errors
    /// As [`Anthropic::new`].
    pub fn from_config(config: &ProviderConfig) -> Result<Self, ProviderError> {
        Anthropic::new(HttpOptions::from_config(config))
    }

    /// The URL requests go to (`{base_url}/v1/messages`).
    pub fn url(&self) -> &str {
        self.api.url()
    }

    /// The JSON body sent for `request`, asking for a streamed answer or not.
    fn body(&self, request: &ModelRequest, stream: bool) -> Value {
        let mut body = json!({
            "model": self.model,
            "max_tokens": request.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            "messages": messages_json(&request.messages),
            "stream": stream,
        });
        if !request.system.is_empty() {
            body["system"] = json!(request.system);
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "name": tool.name,
                        "description": tool.description,
                        "input_schema": tool.parameters,
                    })
                })
                .collect();
            body["tool_choice"] = json!({"type": "auto"});
        }
        body
    }
}

/// The conversation in the API's shape: roles `user` / `assistant`, each with a list of
/// content blocks.
fn messages_json(messages: &[Message]) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in messages {
        match message {
            Message::User { content } => {
                let block = json!({"type": "text", "text": content});
                // Text may follow tool results in the same user message.
                match out.last_mut() {
                    Some(("user", blocks)) => blocks.push(block),
                    _ => out.push(("user", vec![block])),
                }
            }
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut blocks = Vec::new();
                // The API refuses empty text blocks.
                if !content.is_empty() {
                    blocks.push(json!({"type": "text", "text": content}));
                }
                blocks.extend(tool_calls.iter().map(|call| {
                    json!({
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": tool_input(&call.arguments),
                    })
                }));
                if !blocks.is_empty() {
                    out.push(("assistant", blocks));
                }
            }
            Message::Tool {
                call_id,
                content,
                is_error,
            } => {
                let mut block = json!({
                    "type": "tool_result",
                    "tool_use_id": call_id,
                    "content": content,
                });
                if *is_error {
                    block["is_error"] = json!(true);
                }
                // Tool results must open their user message: join only a message that
                // holds nothing but results.
                match out.last_mut() {
                    Some(("user", blocks)) if blocks.iter().all(is_tool_result) => {
                        blocks.push(block);
                    }
                    _ => out.push(("user", vec![block])),
                }
            }
        }
    }
    out.into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

fn is_tool_result(block: &Value) -> bool {
    block.get("type").and_then(Value::as_str) == Some("tool_result")
}

/// A tool call's arguments as a `tool_use` input, which must be an object: arguments
/// the model sent as unparsable text go back as `{}`.
fn tool_input(arguments: &Value) -> Value {
    if arguments.is_object() {
        arguments.clone()
    } else {
        json!({})
    }
}

#[async_trait]
impl Provider for Anthropic {
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
                EventDecoder::default(),
            )
            .await
    }
}

/// One streamed event (only the fields read; unknown types are ignored, as the API's
/// versioning policy asks).
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ApiEvent {
    MessageStart {
        message: StartedMessage,
    },
    ContentBlockStart {
        index: u32,
        content_block: Block,
    },
    ContentBlockDelta {
        index: u32,
        delta: BlockDelta,
    },
    ContentBlockStop {
        index: u32,
    },
    MessageDelta {
        delta: MessageDelta,
        #[serde(default)]
        usage: Option<ApiUsage>,
    },
    MessageStop,
    Error {
        error: ApiError,
    },
    #[serde(other)]
    Other,
}

/// A whole (non-streamed) answer: a `message` (only the fields read).
#[derive(Debug, Deserialize)]
struct WholeMessage {
    #[serde(default)]
    content: Vec<Block>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<ApiUsage>,
    /// An `{"type": "error", "error": {…}}` body.
    #[serde(default)]
    error: Option<ApiError>,
}

#[derive(Debug, Deserialize)]
struct StartedMessage {
    #[serde(default)]
    usage: Option<ApiUsage>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Option<Value>,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct MessageDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct ApiUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
}

impl ApiUsage {
    /// All input tokens, cached or not; `None` when none were reported.
    fn input(&self) -> Option<u64> {
        let parts = [
            self.input_tokens,
            self.cache_creation_input_tokens,
            self.cache_read_input_tokens,
        ];
        parts
            .iter()
            .any(Option::is_some)
            .then(|| parts.iter().flatten().sum())
    }
}

#[derive(Debug, Deserialize)]
struct ApiError {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// A `tool_use` block being assembled.
#[derive(Debug)]
struct PartialToolUse {
    id: String,
    name: String,
    /// The input given at block start (usually `{}`), used when no JSON streams.
    initial: Option<Value>,
    json: String,
}

/// Assembles events into [`StreamEvent`]s.
#[derive(Debug, Default)]
struct EventDecoder {
    tools: BTreeMap<u32, PartialToolUse>,
    /// The surrogate halves of each text block being streamed, by block index.
    texts: BTreeMap<u32, SurrogateJoiner>,
    usage: Usage,
    saw_usage: bool,
    stop: Option<StopReason>,
}

impl EventDecoder {
    fn record_usage(&mut self, usage: &ApiUsage) {
        if let Some(input) = usage.input() {
            self.usage.input_tokens = self.usage.input_tokens.max(input);
            self.saw_usage = true;
        }
        if let Some(output) = usage.output_tokens {
            // `message_delta` reports the cumulative count.
            self.usage.output_tokens = self.usage.output_tokens.max(output);
            self.saw_usage = true;
        }
    }

    /// Text for block `index`, surrogate halves joined across its deltas.
    fn text(&mut self, index: u32, text: &str, out: &mut VecDeque<StreamEvent>) {
        let text = self.texts.entry(index).or_default().push(text);
        if !text.is_empty() {
            out.push_back(StreamEvent::TextDelta(text));
        }
    }

    /// The text block `index` still holds back, if any.
    fn end_text(&mut self, index: u32, out: &mut VecDeque<StreamEvent>) {
        if let Some(mut joiner) = self.texts.remove(&index) {
            let held = joiner.finish();
            if !held.is_empty() {
                out.push_back(StreamEvent::TextDelta(held));
            }
        }
    }

    fn finish(&mut self, out: &mut VecDeque<StreamEvent>) {
        let open: Vec<u32> = self.texts.keys().copied().collect();
        for index in open {
            self.end_text(index, out);
        }
        if self.saw_usage {
            out.push_back(StreamEvent::Usage(self.usage));
        }
        out.push_back(StreamEvent::Finished(
            self.stop.take().unwrap_or(StopReason::EndTurn),
        ));
    }
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" | "stop_sequence" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        other => StopReason::Other(other.to_owned()),
    }
}

impl Decoder for EventDecoder {
    fn event(
        &mut self,
        event: SseEvent,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<Flow, ProviderError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(Flow::More);
        }
        let event = http::parse_data(NAME, data, "a Messages API event")?;
        self.api_event(event, out)
    }

    fn whole(&mut self, body: &str, out: &mut VecDeque<StreamEvent>) -> Result<(), ProviderError> {
        let message: WholeMessage = http::parse_data(NAME, body.trim(), "a Messages API message")?;
        if let Some(error) = message.error {
            return self.api_event(ApiEvent::Error { error }, out).map(|_| ());
        }
        // The events a stream of this message would have had.
        self.api_event(
            ApiEvent::MessageStart {
                message: StartedMessage {
                    usage: message.usage,
                },
            },
            out,
        )?;
        for (index, content_block) in (0..).zip(message.content) {
            self.api_event(
                ApiEvent::ContentBlockStart {
                    index,
                    content_block,
                },
                out,
            )?;
            self.api_event(ApiEvent::ContentBlockStop { index }, out)?;
        }
        if let Some(stop_reason) = message.stop_reason {
            let delta = MessageDelta {
                stop_reason: Some(stop_reason),
            };
            self.api_event(ApiEvent::MessageDelta { delta, usage: None }, out)?;
        }
        self.api_event(ApiEvent::MessageStop, out).map(|_| ())
    }

    fn end(&mut self, out: &mut VecDeque<StreamEvent>) -> Result<(), ProviderError> {
        // Tolerate a missing `message_stop` once the stop reason is known.
        if self.stop.is_some() && self.tools.is_empty() {
            self.finish(out);
            return Ok(());
        }
        Err(http::malformed(
            NAME,
            "the stream ended before message_stop: the connection was cut or the server \
             is not streaming Messages API events"
                .to_owned(),
        ))
    }
}

impl EventDecoder {
    /// Handles one event, streamed or made from a whole message.
    fn api_event(
        &mut self,
        event: ApiEvent,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<Flow, ProviderError> {
        match event {
            ApiEvent::MessageStart { message } => {
                if let Some(usage) = message.usage {
                    self.record_usage(&usage);
                }
            }
            ApiEvent::ContentBlockStart {
                index,
                content_block,
            } => match content_block {
                Block::Text { text } => self.text(index, &text, out),
                Block::ToolUse { id, name, input } => {
                    self.tools.insert(
                        index,
                        PartialToolUse {
                            id,
                            name,
                            initial: input,
                            json: String::new(),
                        },
                    );
                }
                Block::Other => {}
            },
            ApiEvent::ContentBlockDelta { index, delta } => {
                match delta {
                    BlockDelta::TextDelta { text } => self.text(index, &text, out),
                    BlockDelta::InputJsonDelta { partial_json } => {
                        let tool = self.tools.get_mut(&index).ok_or_else(|| {
                        http::malformed(
                            NAME,
                            format!("input_json_delta for block {index}, which is not a tool_use block"),
                        )
                    })?;
                        tool.json.push_str(&partial_json);
                    }
                    BlockDelta::Other => {}
                }
            }
            ApiEvent::ContentBlockStop { index } => {
                self.end_text(index, out);
                if let Some(tool) = self.tools.remove(&index) {
                    out.push_back(StreamEvent::ToolCall(ToolCall {
                        id: tool.id,
                        name: resolve_markers(&tool.name).into_owned(),
                        arguments: http::tool_arguments(tool.json, tool.initial),
                    }));
                }
            }
            ApiEvent::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason {
                    self.stop = Some(stop_reason(&reason));
                }
                if let Some(usage) = usage {
                    self.record_usage(&usage);
                }
            }
            ApiEvent::MessageStop => {
                if let Some(index) = self.tools.keys().next() {
                    return Err(http::malformed(
                        NAME,
                        format!("message_stop before tool_use block {index} stopped"),
                    ));
                }
                self.finish(out);
                return Ok(Flow::Done);
            }
            ApiEvent::Error { error } => {
                return Err(http::api_error(
                    NAME,
                    error.kind.unwrap_or_else(|| "error".to_owned()),
                    error.message.as_deref().unwrap_or("no message"),
                ));
            }
            ApiEvent::Other => {}
        }
        Ok(Flow::More)
    }
}
