//! Model providers: one streaming trait, one file per API, and their settings
//! ([`config`]).
//!
//! - [`openai`]: the OpenAI Chat Completions API (`POST {base_url}/chat/completions`,
//!   `stream: true`), which Ollama, vLLM and llama.cpp also serve.
//! - [`anthropic`]: the Anthropic Messages API (`POST {base_url}/v1/messages`, streaming).
//! - [`scripted`]: replays a file of model turns; no network. For tests, demos, offline use.
//!
//! A provider turns a [`ModelRequest`] into a stream of [`StreamEvent`]s. Tool calls are
//! delivered whole ([`StreamEvent::ToolCall`]) once their streamed pieces are assembled;
//! [`Provider::complete`] collects a stream into a [`ModelResponse`].
//!
//! A character split by the server into two lone UTF-16 surrogate escapes across two
//! deltas (`\ud83d`, then `\ude42`) is joined again; a half that stays alone becomes
//! U+FFFD, in every streamed field of both APIs, and never fails the response.
//!
//! It does not own tools (`boitata-tools`), the agent loop that feeds the model tool
//! results (`boitata-core`), or loading the config file (`boitata_core::config`).
//!
//! # Example
//!
//! ```no_run
//! # async fn example() -> Result<(), boitata_provider::ProviderError> {
//! use boitata_provider::config::{ProviderConfig, ProviderKind};
//! use boitata_provider::ModelRequest;
//!
//! let provider = boitata_provider::build(&ProviderConfig {
//!     kind: ProviderKind::Scripted,
//!     script: Some("turns.yaml".into()),
//!     ..ProviderConfig::default()
//! })?;
//! let request = ModelRequest {
//!     system: "You are terse.".to_owned(),
//!     ..ModelRequest::default()
//! };
//! let answer = provider.complete(&request, &mut |delta: &str| print!("{delta}")).await?;
//! println!("{answer:?}");
//! # Ok(())
//! # }
//! ```

pub mod anthropic;
pub mod config;
mod http;
pub mod openai;
mod retry;
pub mod scripted;
mod surrogate;

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};

pub use http::HttpOptions;
pub use retry::RetryPolicy;

use crate::config::{ProviderConfig, ProviderKind};

/// One message of the conversation sent to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// The user (the task, or a follow-up).
    User {
        /// The text.
        content: String,
    },
    /// The model's earlier turn: its text and the tool calls it made.
    Assistant {
        /// The text (may be empty).
        content: String,
        /// Tool calls, in the order the model made them.
        #[serde(default)]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call.
    Tool {
        /// The id of the [`ToolCall`] this answers.
        call_id: String,
        /// The output the model sees.
        content: String,
        /// True when the tool refused or failed.
        #[serde(default)]
        is_error: bool,
    },
}

/// A tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call (made up by `scripted`).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments: a JSON object (an unparsable argument string becomes a JSON string).
    pub arguments: serde_json::Value,
}

pub use boitata_protocol::ToolSpec;

/// One request to the model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelRequest {
    /// The system prompt.
    pub system: String,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Upper bound on output tokens, if any.
    pub max_output_tokens: Option<u32>,
}

/// Token counts for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt (input) tokens.
    pub input_tokens: u64,
    /// Completion (output) tokens.
    pub output_tokens: u64,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// It finished its turn.
    EndTurn,
    /// It wants tool results.
    ToolUse,
    /// It hit the output token limit.
    MaxTokens,
    /// Anything else the API reported.
    Other(String),
}

/// One piece of a streamed model response.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// More text.
    TextDelta(String),
    /// A complete tool call (its streamed pieces already joined).
    ToolCall(ToolCall),
    /// Token usage (may come more than once; the last one wins per field).
    Usage(Usage),
    /// The end of the response.
    Finished(StopReason),
    /// Something the user should know about how the request was made (a fallback to
    /// non-streaming requests); not model output.
    Note(String),
}

/// A stream of [`StreamEvent`]s.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<StreamEvent, ProviderError>> + Send>>;

/// A whole model response.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelResponse {
    /// All text, joined.
    pub text: String,
    /// Tool calls in the order the model made them.
    pub tool_calls: Vec<ToolCall>,
    /// Usage, if the API reported it.
    pub usage: Option<Usage>,
    /// Why it stopped (`EndTurn` if the stream ended without saying).
    pub stop_reason: StopReason,
    /// The [`StreamEvent::Note`]s, in order.
    pub notes: Vec<String>,
}

/// A model API.
#[async_trait]
pub trait Provider: Send + Sync {
    /// The provider's name: `openai`, `anthropic`, `scripted`.
    fn name(&self) -> &str;

    /// The model it asks.
    fn model(&self) -> &str;

    /// Sends `request` and streams the response.
    ///
    /// # Errors
    /// [`ProviderError`]: authentication, rate limits and server errors after retries,
    /// timeouts, malformed streams.
    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ProviderError>;

    /// Sends `request` and collects the whole response, calling `on_text` with each
    /// text delta as it arrives.
    async fn complete(
        &self,
        request: &ModelRequest,
        on_text: &mut (dyn for<'t> FnMut(&'t str) + Send),
    ) -> Result<ModelResponse, ProviderError> {
        let mut stream = self.stream(request).await?;
        let mut response = ModelResponse {
            text: String::new(),
            tool_calls: Vec::new(),
            usage: None,
            stop_reason: StopReason::EndTurn,
            notes: Vec::new(),
        };
        while let Some(item) = stream.next().await {
            match item? {
                StreamEvent::TextDelta(text) => {
                    on_text(&text);
                    response.text.push_str(&text);
                }
                StreamEvent::ToolCall(call) => response.tool_calls.push(call),
                StreamEvent::Usage(usage) => {
                    let prev = response.usage.unwrap_or_default();
                    response.usage = Some(Usage {
                        input_tokens: usage.input_tokens.max(prev.input_tokens),
                        output_tokens: usage.output_tokens.max(prev.output_tokens),
                    });
                }
                StreamEvent::Finished(reason) => response.stop_reason = reason,
                StreamEvent::Note(note) => response.notes.push(note),
            }
        }
        Ok(response)
    }
}

/// What can go wrong talking to a model. Every message names the provider and says
/// what to do.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The key is missing from the environment.
    #[error("{provider}: no API key: set {variable}")]
    MissingApiKey {
        /// The provider.
        provider: String,
        /// The variable to set.
        variable: String,
    },
    /// 401 or 403.
    #[error("{provider}: authentication failed (HTTP {status}): check {variable}; the API said: {message}")]
    Authentication {
        /// The provider.
        provider: String,
        /// The HTTP status.
        status: u16,
        /// The variable holding the key.
        variable: String,
        /// The API's message (redacted).
        message: String,
    },
    /// 429 after all retries.
    #[error("{provider}: rate limited (HTTP 429) after {attempts} attempts; try again later")]
    RateLimited {
        /// The provider.
        provider: String,
        /// How many requests were made.
        attempts: u32,
        /// The last `retry-after`, if any.
        retry_after: Option<Duration>,
    },
    /// The server says it does not support the request (HTTP 501, or an error
    /// message saying "not supported"): never retried.
    #[error("{provider}: HTTP {status} from {url}: the server does not support this request: {message} (for a server that cannot stream with tools, set provider.stream = false)")]
    Unsupported {
        /// The provider.
        provider: String,
        /// The HTTP status.
        status: u16,
        /// The URL asked.
        url: String,
        /// The API's message (redacted).
        message: String,
    },
    /// 5xx after all retries, or another unexpected status.
    #[error("{provider}: HTTP {status} from {url} after {attempts} attempts: {message}")]
    Http {
        /// The provider.
        provider: String,
        /// The HTTP status.
        status: u16,
        /// The URL asked.
        url: String,
        /// How many requests were made.
        attempts: u32,
        /// The API's message.
        message: String,
    },
    /// The request or the stream took longer than the configured timeout.
    #[error("{provider}: no answer within {timeout:?} (set provider.timeout in the config to wait longer)")]
    Timeout {
        /// The provider.
        provider: String,
        /// The timeout.
        timeout: Duration,
    },
    /// The whole request, retries and the streamed answer included, took longer than
    /// the total timeout (the answer kept coming, but too slowly or without end).
    #[error("{provider}: the response did not finish within {total_timeout:?} (set provider.total_timeout in the config to allow longer answers)")]
    ResponseTooSlow {
        /// The provider.
        provider: String,
        /// The total timeout.
        total_timeout: Duration,
    },
    /// The connection failed.
    #[error(
        "{provider}: cannot reach {url}: {message} (check provider.base_url / BOITATA_BASE_URL)"
    )]
    Connect {
        /// The provider.
        provider: String,
        /// The URL.
        url: String,
        /// The transport's message.
        message: String,
    },
    /// The API key cannot be sent (it holds characters not allowed in an HTTP header).
    #[error("{provider}: the API key in {variable} is not a valid HTTP header value: check it for stray characters")]
    InvalidApiKey {
        /// The provider.
        provider: String,
        /// The variable holding the key.
        variable: String,
    },
    /// The API reported an error in the middle of a streamed response (for example
    /// Anthropic's `error` event with `overloaded_error`).
    #[error("{provider}: the API reported an error during the response: {kind}: {message} (try again later)")]
    Api {
        /// The provider.
        provider: String,
        /// The API's error type (`overloaded_error`, …), or `error` when it gave none.
        kind: String,
        /// The API's message (redacted).
        message: String,
    },
    /// The response did not follow the API's streaming format.
    #[error("{provider}: malformed response stream: {detail} (is base_url pointing at a {provider}-compatible API?)")]
    MalformedStream {
        /// The provider.
        provider: String,
        /// What was wrong.
        detail: String,
    },
    /// The scripted session is broken or exhausted.
    #[error("scripted provider: {0}")]
    Script(String),
    /// The request was cancelled.
    #[error("{provider}: request cancelled")]
    Cancelled {
        /// The provider.
        provider: String,
    },
}

/// Builds the provider `config.kind` names from `config`: the one dispatch used by
/// the runtime.
///
/// # Errors
/// What the provider's `from_config` returns: [`ProviderError::MissingApiKey`] for
/// `openai` / `anthropic` at the vendor's URL without a key,
/// [`ProviderError::Script`] for a `scripted` provider without a readable script.
pub fn build(config: &ProviderConfig) -> Result<Arc<dyn Provider>, ProviderError> {
    Ok(match config.kind {
        ProviderKind::Openai => Arc::new(openai::OpenAi::from_config(config)?),
        ProviderKind::Anthropic => Arc::new(anthropic::Anthropic::from_config(config)?),
        ProviderKind::Scripted => Arc::new(scripted::Scripted::from_config(config)?),
    })
}
