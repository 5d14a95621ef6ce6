//! What the HTTP providers share: their settings ([`HttpOptions`]), sending a JSON
//! POST with retries and turning failures into [`ProviderError`]s, and reading the
//! response as Server-Sent Events (`eventsource-stream`) through a per-API decoder,
//! with the pieces every decoder needs (parsing a `data:` line, an error the API
//! reports inside the stream, a tool call's streamed arguments).

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use eventsource_stream::{Event as SseEvent, EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use reqwest::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::retry::{self, RetryPolicy};
use super::surrogate::{mark_lone_surrogates, repair_lone_surrogates, resolve_markers};
use super::{ModelStream, ProviderError, StreamEvent};
use crate::config::{ProviderConfig, StreamMode};
use boitata_protocol::redact::Redactor;

/// The longest API error message kept in an error, in bytes.
const MAX_ERROR_MESSAGE_BYTES: usize = 2_000;
/// The most of an error response body read, in bytes.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;
/// The longest line of an event stream, in bytes (a whole tool call's arguments fit).
pub(crate) const MAX_SSE_LINE_BYTES: usize = 8 * 1024 * 1024;
/// The most bytes one streamed response may hold.
pub(crate) const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// Settings of an HTTP provider ([`super::openai::OpenAi`], [`super::anthropic::Anthropic`]).
///
/// Built from the config by the providers' `from_config`, or by hand (tests, embedders):
///
/// ```
/// use std::time::Duration;
/// use boitata_provider::{HttpOptions, RetryPolicy};
///
/// let options = HttpOptions::new("llama3.2")
///     .base_url("http://127.0.0.1:11434/v1")
///     .timeout(Duration::from_secs(30))
///     .retry(RetryPolicy::never());
/// assert_eq!(options.model, "llama3.2");
/// ```
///
/// Its `Debug` output never shows the API key.
#[derive(Clone)]
pub struct HttpOptions {
    /// The model to ask.
    pub model: String,
    /// The API's base URL; `None` means the vendor's.
    pub base_url: Option<String>,
    /// The API key, if any.
    pub api_key: Option<String>,
    /// How long to wait for the connection, the response headers, and then between two
    /// reads of the streamed body (an idle timeout: a long answer that keeps streaming
    /// is never cut).
    pub timeout: Duration,
    /// How long one request may take in all: retries, the response headers and the
    /// whole streamed answer. Bounds an answer that keeps trickling in forever.
    pub total_timeout: Duration,
    /// Retries for 429, 5xx and failed connections.
    pub retry: RetryPolicy,
    /// Whether to ask for a streamed answer.
    pub stream: StreamMode,
}

impl HttpOptions {
    /// Options for `model` with the vendor's URL, no key, a 120 s (idle) timeout, a
    /// 10 min total timeout and the default [`RetryPolicy`].
    pub fn new(model: impl Into<String>) -> Self {
        HttpOptions {
            model: model.into(),
            base_url: None,
            api_key: None,
            timeout: Duration::from_secs(120),
            total_timeout: Duration::from_secs(600),
            retry: RetryPolicy::default(),
            stream: StreamMode::default(),
        }
    }

    /// The options `config` describes: its model (or the provider's default), base
    /// URL, key, timeout and `max_retries` (with the default waits).
    pub fn from_config(config: &ProviderConfig) -> Self {
        HttpOptions {
            model: config.model_or_default(),
            base_url: config.base_url.clone(),
            api_key: config.api_key.clone(),
            timeout: config.timeout,
            total_timeout: config.total_timeout,
            retry: RetryPolicy::new(config.max_retries),
            stream: config.stream,
        }
    }

    /// Sets the base URL.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }

    /// Sets the API key.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Sets the timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the total timeout of one request.
    pub fn total_timeout(mut self, total_timeout: Duration) -> Self {
        self.total_timeout = total_timeout;
        self
    }

    /// Sets the retry policy.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sets whether to ask for a streamed answer.
    pub fn stream(mut self, stream: StreamMode) -> Self {
        self.stream = stream;
        self
    }
}

impl fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpOptions")
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .field("timeout", &self.timeout)
            .field("total_timeout", &self.total_timeout)
            .field("retry", &self.retry)
            .field("stream", &self.stream)
            .finish()
    }
}

/// The base URL with surrounding spaces and trailing slashes removed, or `default`.
pub(crate) fn base_url_or(options: &HttpOptions, default: &str) -> String {
    options
        .base_url
        .as_deref()
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .unwrap_or(default)
        .trim_end_matches('/')
        .to_owned()
}

/// The API key, trimmed, if set and not blank.
fn api_key(options: &HttpOptions) -> Option<&str> {
    options
        .api_key
        .as_deref()
        .map(str::trim)
        .filter(|key| !key.is_empty())
}

/// The API key ([`api_key`]), if any.
///
/// # Errors
/// [`ProviderError::MissingApiKey`] naming `variable` when there is none and `required`
/// (the vendor's own URL; another, such as a proxy or a local server, may need none).
pub(crate) fn required_api_key<'a>(
    options: &'a HttpOptions,
    provider: &'static str,
    variable: &'static str,
    required: bool,
) -> Result<Option<&'a str>, ProviderError> {
    match api_key(options) {
        None if required => Err(ProviderError::MissingApiKey {
            provider: provider.to_owned(),
            variable: variable.to_owned(),
        }),
        key => Ok(key),
    }
}

/// A header value holding a secret: marked sensitive so `Debug` never prints it.
///
/// # Errors
/// [`ProviderError::InvalidApiKey`] when the key cannot be sent in a header.
pub(crate) fn secret_header(
    provider: &'static str,
    variable: &'static str,
    value: &str,
) -> Result<HeaderValue, ProviderError> {
    let mut header = HeaderValue::from_str(value).map_err(|_| ProviderError::InvalidApiKey {
        provider: provider.to_owned(),
        variable: variable.to_owned(),
    })?;
    header.set_sensitive(true);
    Ok(header)
}

/// One model API endpoint: a client, a URL, fixed headers (auth included) and a retry
/// policy.
pub(crate) struct HttpApi {
    provider: &'static str,
    key_variable: &'static str,
    client: reqwest::Client,
    url: String,
    headers: HeaderMap,
    retry: RetryPolicy,
    timeout: Duration,
    total_timeout: Duration,
    redactor: Redactor,
    stream: StreamMode,
    /// What the server said when it refused to stream a request offering tools
    /// ([`StreamMode::Auto`] then stops asking it to).
    stream_refusal: OnceLock<String>,
}

impl fmt::Debug for HttpApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `headers` holds the key; HeaderMap's Debug hides sensitive values, but say
        // nothing about them at all.
        f.debug_struct("HttpApi")
            .field("provider", &self.provider)
            .field("url", &self.url)
            .field("retry", &self.retry)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// What failed on one attempt that may succeed on the next.
enum Retryable {
    RateLimited { retry_after: Option<Duration> },
    Server { status: u16, message: String },
    Connect { message: String },
}

impl HttpApi {
    /// An endpoint at `url` sending `headers` with every request.
    ///
    /// # Errors
    /// [`ProviderError::Connect`] when the HTTP client cannot be built (TLS setup).
    pub(crate) fn new(
        provider: &'static str,
        key_variable: &'static str,
        url: String,
        headers: HeaderMap,
        options: &HttpOptions,
    ) -> Result<Self, ProviderError> {
        let client = reqwest::Client::builder()
            .connect_timeout(options.timeout)
            .read_timeout(options.timeout)
            .user_agent(concat!("boitata/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ProviderError::Connect {
                provider: provider.to_owned(),
                url: url.clone(),
                message: format!("cannot set up the HTTP client: {e}"),
            })?;
        Ok(HttpApi {
            provider,
            key_variable,
            client,
            url,
            headers,
            retry: options.retry,
            timeout: options.timeout,
            total_timeout: options.total_timeout,
            redactor: Redactor::new(api_key(options)),
            stream: options.stream,
            stream_refusal: OnceLock::new(),
        })
    }

    /// The URL requests go to.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// Sends one model request as the [`StreamMode`] says, its answer coming through
    /// `decoder` either way: streamed ([`HttpApi::stream`]), or whole
    /// ([`Decoder::whole`], the same events with the text in one piece).
    ///
    /// `body(stream)` is the request body with or without streaming. In
    /// [`StreamMode::Auto`], a request that offers tools (`offers_tools`) and is
    /// refused as unsupported while streaming ([`ProviderError::Unsupported`]) is sent
    /// again without streaming, as are the later ones that offer tools; each of those
    /// answers starts with a [`StreamEvent::Note`] saying so.
    ///
    /// # Errors
    /// As [`HttpApi::stream`]; [`ProviderError::MalformedStream`] for a whole answer
    /// that is not the API's JSON.
    pub(crate) async fn request<D: Decoder>(
        &self,
        body: impl Fn(bool) -> Value,
        offers_tools: bool,
        mut decoder: D,
    ) -> Result<ModelStream, ProviderError> {
        let auto = self.stream == StreamMode::Auto && offers_tools;
        let streaming = match self.stream {
            StreamMode::Always => true,
            StreamMode::Never => false,
            StreamMode::Auto => !auto || self.stream_refusal.get().is_none(),
        };
        let refusal = if streaming {
            match self.stream(&body(true), decoder).await {
                Err(ProviderError::Unsupported { message, .. }) if auto => {
                    decoder = D::default();
                    message
                }
                other => return other,
            }
        } else {
            self.stream_refusal.get().cloned().unwrap_or_default()
        };
        let mut out = VecDeque::new();
        if auto {
            out.push_back(StreamEvent::Note(format!(
                "{}: the server refused to stream a request that offers tools ({refusal}); \
                 sending this run's requests without streaming (set provider.stream = false \
                 to skip the streamed attempt)",
                self.provider
            )));
        }
        let text = self.whole(&body(false)).await?;
        decoder.whole(&text, &mut out)?;
        if auto {
            // Only once the server answered without streaming.
            let _ = self.stream_refusal.set(refusal);
        }
        Ok(futures::stream::iter(out.into_iter().map(Ok)).boxed())
    }

    /// POSTs `body` as JSON, retrying as the policy says, and returns the whole
    /// response body (lossy UTF-8), all within the total timeout.
    ///
    /// # Errors
    /// As [`post`](HttpApi::post); [`ProviderError::ResponseTooSlow`];
    /// [`ProviderError::MalformedStream`] for a body over [`MAX_RESPONSE_BYTES`].
    async fn whole(&self, body: &Value) -> Result<String, ProviderError> {
        let read = async {
            let mut response = self.post(body).await?;
            let mut bytes = Vec::new();
            while let Some(chunk) = response
                .chunk()
                .await
                .map_err(|e| self.transport_error(&e))?
            {
                bytes.extend_from_slice(&chunk);
                if bytes.len() > MAX_RESPONSE_BYTES {
                    return Err(self.malformed(format!(
                        "the response is larger than {} MiB; stopped reading",
                        MAX_RESPONSE_BYTES / (1024 * 1024)
                    )));
                }
            }
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        };
        match Instant::now().checked_add(self.total_timeout) {
            Some(deadline) => tokio::time::timeout_at(deadline, read)
                .await
                .unwrap_or_else(|_| Err(self.too_slow())),
            None => read.await,
        }
    }

    /// POSTs `body` as JSON, retrying as the policy says, and streams the response's
    /// Server-Sent Events through `decoder` (see [`decode`]). All of it, retries and
    /// the streamed answer included, must end within the total timeout.
    ///
    /// # Errors
    /// As [`post_sse`](HttpApi::post_sse), and [`ProviderError::ResponseTooSlow`];
    /// later errors come in the stream.
    pub(crate) async fn stream<D: Decoder>(
        &self,
        body: &Value,
        decoder: D,
    ) -> Result<ModelStream, ProviderError> {
        // A total timeout too large for the clock is no deadline.
        let deadline = Instant::now().checked_add(self.total_timeout);
        let events = match deadline {
            Some(deadline) => tokio::time::timeout_at(deadline, self.post_sse(body, deadline))
                .await
                .unwrap_or_else(|_| Err(self.too_slow()))?,
            None => self.post_sse(body, None).await?,
        };
        Ok(decode(events, decoder))
    }

    fn too_slow(&self) -> ProviderError {
        too_slow(self.provider, self.total_timeout)
    }

    /// POSTs `body` as JSON, retrying as the policy says, and returns the response's
    /// Server-Sent Events.
    ///
    /// # Errors
    /// [`ProviderError::Authentication`] (401/403, never retried),
    /// [`ProviderError::RateLimited`] / [`ProviderError::Http`] /
    /// [`ProviderError::Connect`] once retries are spent, [`ProviderError::Http`] at
    /// once for other statuses, [`ProviderError::Timeout`],
    /// [`ProviderError::MalformedStream`] for a JSON (not event-stream) answer.
    async fn post_sse(
        &self,
        body: &Value,
        deadline: impl Into<Option<Instant>>,
    ) -> Result<SseStream, ProviderError> {
        let response = self.post(body).await?;
        let is_json = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("application/json"));
        if is_json {
            let text = self.read_capped(response).await;
            return Err(self.malformed(format!(
                "expected a text/event-stream response, got JSON: {}",
                truncate(&text, 300)
            )));
        }
        Ok(self.events(response, deadline.into()))
    }

    async fn post(&self, body: &Value) -> Result<reqwest::Response, ProviderError> {
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let sent = self
                .client
                .post(&self.url)
                .headers(self.headers.clone())
                .json(body)
                .send()
                .await;
            let (failure, retry_after) = match sent {
                Ok(response) if response.status().is_success() => return Ok(response),
                Ok(response) => {
                    let status = response.status();
                    let retry_after = retry::retry_after(response.headers(), SystemTime::now());
                    let message = self.api_message(status, response).await;
                    match status.as_u16() {
                        // Sending it again would get the same answer.
                        400..=599 if status.as_u16() == 501 || says_unsupported(&message) => {
                            return Err(ProviderError::Unsupported {
                                provider: self.provider.to_owned(),
                                status: status.as_u16(),
                                url: self.url.clone(),
                                message,
                            })
                        }
                        401 | 403 => {
                            return Err(ProviderError::Authentication {
                                provider: self.provider.to_owned(),
                                status: status.as_u16(),
                                variable: self.key_variable.to_owned(),
                                message,
                            })
                        }
                        429 => (Retryable::RateLimited { retry_after }, retry_after),
                        500..=599 => (
                            Retryable::Server {
                                status: status.as_u16(),
                                message,
                            },
                            retry_after,
                        ),
                        other => {
                            return Err(ProviderError::Http {
                                provider: self.provider.to_owned(),
                                status: other,
                                url: self.url.clone(),
                                attempts,
                                message,
                            })
                        }
                    }
                }
                Err(e) if e.is_connect() => (
                    Retryable::Connect {
                        message: self.transport_message(&e),
                    },
                    None,
                ),
                Err(e) => return Err(self.transport_error(&e)),
            };
            if attempts > self.retry.max_retries {
                return Err(self.give_up(failure, attempts));
            }
            let delay = self.retry.delay(attempts - 1, retry_after);
            tracing::warn!(
                provider = self.provider,
                attempt = attempts,
                delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                reason = failure.describe(),
                "retrying model request"
            );
            tokio::time::sleep(delay).await;
        }
    }

    fn give_up(&self, failure: Retryable, attempts: u32) -> ProviderError {
        let provider = self.provider.to_owned();
        match failure {
            Retryable::RateLimited { retry_after } => ProviderError::RateLimited {
                provider,
                attempts,
                retry_after,
            },
            Retryable::Server { status, message } => ProviderError::Http {
                provider,
                status,
                url: self.url.clone(),
                attempts,
                message,
            },
            Retryable::Connect { message } => ProviderError::Connect {
                provider,
                url: self.url.clone(),
                message,
            },
        }
    }

    /// The API's error message from an error response: `error.message` (both APIs),
    /// `error` or `message` when a string, else the body text, else the status reason;
    /// redacted and cut to a readable length.
    async fn api_message(&self, status: StatusCode, response: reqwest::Response) -> String {
        let text = self.read_capped(response).await;
        let from_json = serde_json::from_str::<Value>(&text).ok().and_then(|json| {
            [
                json.pointer("/error/message"),
                json.get("error"),
                json.get("message"),
                json.get("detail"),
            ]
            .into_iter()
            .flatten()
            .find_map(|v| v.as_str().map(str::to_owned))
        });
        let message = match from_json {
            Some(message) => message,
            None if !text.trim().is_empty() => text.trim().to_owned(),
            None => status
                .canonical_reason()
                .unwrap_or("no error message")
                .to_owned(),
        };
        truncate(&self.redactor.redact(&message), MAX_ERROR_MESSAGE_BYTES)
    }

    /// Up to [`MAX_ERROR_BODY_BYTES`] of the body, lossily decoded; empty when reading
    /// fails.
    async fn read_capped(&self, mut response: reqwest::Response) -> String {
        let mut body = Vec::new();
        while body.len() < MAX_ERROR_BODY_BYTES {
            match response.chunk().await {
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                Ok(None) | Err(_) => break,
            }
        }
        body.truncate(MAX_ERROR_BODY_BYTES);
        String::from_utf8_lossy(&body).into_owned()
    }

    /// reqwest's message (URL removed: it is in the error already), redacted.
    fn transport_message(&self, error: &reqwest::Error) -> String {
        let mut text = String::new();
        let mut source: Option<&dyn std::error::Error> = Some(error);
        while let Some(e) = source {
            let part = e.to_string();
            if !text.contains(&part) {
                if !text.is_empty() {
                    text.push_str(": ");
                }
                text.push_str(&part);
            }
            source = e.source();
        }
        self.redactor.redact(&text)
    }

    fn transport_error(&self, error: &reqwest::Error) -> ProviderError {
        if error.is_timeout() {
            ProviderError::Timeout {
                provider: self.provider.to_owned(),
                timeout: self.timeout,
            }
        } else {
            ProviderError::Connect {
                provider: self.provider.to_owned(),
                url: self.url.clone(),
                message: self.transport_message(error),
            }
        }
    }

    fn malformed(&self, detail: String) -> ProviderError {
        malformed(self.provider, detail)
    }

    /// The response body as SSE events, transport and framing errors mapped; within
    /// [`MAX_SSE_LINE_BYTES`], [`MAX_RESPONSE_BYTES`] and `deadline` ([`bounded_body`]).
    fn events(&self, response: reqwest::Response, deadline: Option<Instant>) -> SseStream {
        let provider = self.provider;
        let timeout = self.timeout;
        let redactor = self.redactor.clone();
        let url = self.url.clone();
        bounded_body(
            response.bytes_stream().boxed(),
            provider,
            deadline.map(|at| (at, self.total_timeout)),
        )
        .eventsource()
        .map(move |item| {
            item.map_err(|e| match e {
                EventStreamError::Transport(BodyError::Limit(e)) => e,
                EventStreamError::Transport(BodyError::Transport(e)) if e.is_timeout() => {
                    ProviderError::Timeout {
                        provider: provider.to_owned(),
                        timeout,
                    }
                }
                EventStreamError::Transport(BodyError::Transport(e)) => ProviderError::Connect {
                    provider: provider.to_owned(),
                    url: url.clone(),
                    message: format!(
                        "the response stream broke: {}",
                        redactor.redact(&e.to_string())
                    ),
                },
                EventStreamError::Utf8(e) => {
                    malformed(provider, format!("the stream is not UTF-8: {e}"))
                }
                EventStreamError::Parser(e) => {
                    malformed(provider, format!("bad event-stream framing: {e}"))
                }
            })
        })
        .boxed()
    }
}

impl Retryable {
    fn describe(&self) -> String {
        match self {
            Retryable::RateLimited { .. } => "HTTP 429 (rate limited)".to_owned(),
            Retryable::Server { status, .. } => format!("HTTP {status}"),
            Retryable::Connect { message } => format!("connection failed: {message}"),
        }
    }
}

/// Whether an API's error message says the request asks for something the server
/// does not do (`Automatic streaming tool choice is not supported`, …).
fn says_unsupported(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    ["not supported", "unsupported", "not implemented"]
        .iter()
        .any(|phrase| message.contains(phrase))
}

/// A [`ProviderError::ResponseTooSlow`] for `provider`.
fn too_slow(provider: &str, total_timeout: Duration) -> ProviderError {
    ProviderError::ResponseTooSlow {
        provider: provider.to_owned(),
        total_timeout,
    }
}

/// Why [`bounded_body`] stopped.
enum BodyError {
    /// Reading the body failed.
    Transport(reqwest::Error),
    /// A cap or the deadline was reached.
    Limit(ProviderError),
}

/// The response body, re-chunked to end at line ends, within the caps.
///
/// `eventsource-stream` rescans its whole buffer whenever a chunk arrives, so a line
/// growing over many chunks costs quadratic time: handing it only complete lines
/// keeps it linear. A line longer than [`MAX_SSE_LINE_BYTES`], a body longer than
/// [`MAX_RESPONSE_BYTES`], or the deadline `(instant, total timeout)` passing ends
/// the stream with an error.
fn bounded_body<S, B>(
    chunks: S,
    provider: &'static str,
    deadline: Option<(Instant, Duration)>,
) -> impl Stream<Item = Result<Vec<u8>, BodyError>> + Send
where
    S: Stream<Item = reqwest::Result<B>> + Send + Unpin,
    B: AsRef<[u8]>,
{
    struct Body<S> {
        chunks: S,
        /// The bytes after the last line end seen.
        partial: Vec<u8>,
        total: usize,
        finished: bool,
    }
    let limit = |detail: String| BodyError::Limit(malformed(provider, detail));
    let state = Body {
        chunks,
        partial: Vec::new(),
        total: 0,
        finished: false,
    };
    futures::stream::unfold(state, move |mut body| async move {
        loop {
            if body.finished {
                return None;
            }
            let next = match deadline {
                Some((at, total_timeout)) => {
                    match tokio::time::timeout_at(at, body.chunks.next()).await {
                        Ok(next) => next,
                        Err(_) => {
                            body.finished = true;
                            let e = BodyError::Limit(too_slow(provider, total_timeout));
                            return Some((Err(e), body));
                        }
                    }
                }
                None => body.chunks.next().await,
            };
            let chunk = match next {
                None => {
                    body.finished = true;
                    if body.partial.is_empty() {
                        return None;
                    }
                    return Some((Ok(std::mem::take(&mut body.partial)), body));
                }
                Some(Err(e)) => {
                    body.finished = true;
                    return Some((Err(BodyError::Transport(e)), body));
                }
                Some(Ok(chunk)) => chunk,
            };
            let chunk = chunk.as_ref();
            body.total = body.total.saturating_add(chunk.len());
            if body.total > MAX_RESPONSE_BYTES {
                body.finished = true;
                let e = limit(format!(
                    "the response is larger than {} MiB; stopped reading",
                    MAX_RESPONSE_BYTES / (1024 * 1024)
                ));
                return Some((Err(e), body));
            }
            let line_end = last_line_end(chunk);
            let line_length = body.partial.len() + line_end.unwrap_or(chunk.len());
            if line_length > MAX_SSE_LINE_BYTES {
                body.finished = true;
                let e = limit(format!(
                    "an event-stream line is longer than {} MiB; stopped reading",
                    MAX_SSE_LINE_BYTES / (1024 * 1024)
                ));
                return Some((Err(e), body));
            }
            match line_end {
                Some(end) => {
                    let (lines, rest) = chunk.split_at(end + 1);
                    let mut out = std::mem::take(&mut body.partial);
                    out.extend_from_slice(lines);
                    body.partial.extend_from_slice(rest);
                    return Some((Ok(out), body));
                }
                None => body.partial.extend_from_slice(chunk),
            }
        }
    })
}

/// The index of the last line end in `chunk` that is known to be complete: an LF, or
/// a CR that is not the chunk's last byte (an LF may follow it in the next chunk).
fn last_line_end(chunk: &[u8]) -> Option<usize> {
    let last = chunk.len().checked_sub(1)?;
    chunk
        .iter()
        .enumerate()
        .rev()
        .find(|&(i, &b)| b == b'\n' || (b == b'\r' && i < last))
        .map(|(i, _)| i)
}

/// A [`ProviderError::MalformedStream`] for `provider`.
pub(crate) fn malformed(provider: &str, detail: String) -> ProviderError {
    ProviderError::MalformedStream {
        provider: provider.to_owned(),
        detail,
    }
}

/// An event's `data` parsed as `T`, or [`ProviderError::MalformedStream`] saying it
/// is not `what` (e.g. "a chat completion chunk") and showing the start of the line.
/// Lone surrogate halves in its strings come out marked for a
/// [`super::surrogate::SurrogateJoiner`] (see [`mark_lone_surrogates`]).
pub(crate) fn parse_data<T: DeserializeOwned>(
    provider: &str,
    data: &str,
    what: &str,
) -> Result<T, ProviderError> {
    serde_json::from_str(&mark_lone_surrogates(data)).map_err(|e| {
        malformed(
            provider,
            format!("a data line is not {what} ({e}): {}", truncate(data, 200)),
        )
    })
}

/// A [`ProviderError::Api`]: an error the API reported inside the stream, its message
/// cut to [`MAX_ERROR_MESSAGE_BYTES`].
pub(crate) fn api_error(provider: &str, kind: String, message: &str) -> ProviderError {
    ProviderError::Api {
        provider: provider.to_owned(),
        kind,
        message: truncate(message, MAX_ERROR_MESSAGE_BYTES),
    }
}

/// A tool call's streamed argument text (its deltas joined, lone surrogate halves
/// marked) as JSON: `if_blank` (else `{}`) when none streamed; lone halves, marked or
/// escaped in the JSON text, become U+FFFD; unparsable text stays a JSON string so the
/// agent can tell the model.
pub(crate) fn tool_arguments(raw: String, if_blank: Option<Value>) -> Value {
    let raw = resolve_markers(&raw).into_owned();
    if raw.trim().is_empty() {
        return if_blank.unwrap_or_else(|| json!({}));
    }
    serde_json::from_str(&repair_lone_surrogates(&raw)).unwrap_or(Value::String(raw))
}

/// At most `max` bytes of `text` (cut on a character boundary), with a marker if cut.
fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} more bytes)", &text[..end], text.len() - end)
}

/// Server-Sent Events from a response.
type SseStream = Pin<Box<dyn Stream<Item = Result<SseEvent, ProviderError>> + Send>>;

/// Whether a decoder wants more events.
pub(crate) enum Flow {
    /// Read the next event.
    More,
    /// The response is complete; stop reading.
    Done,
}

/// Turns one API's answers into [`StreamEvent`]s: streamed events one by one, or a
/// whole (non-streamed) answer.
pub(crate) trait Decoder: Default + Send + 'static {
    /// Handles a whole non-streamed answer (its JSON body, lone surrogate halves
    /// marked), pushing all its events onto `out`: the same as the streamed answer's,
    /// with the text in one piece.
    ///
    /// # Errors
    /// [`ProviderError::MalformedStream`] when `body` is not the API's answer;
    /// [`ProviderError::Api`] for an error the API reports in it.
    fn whole(&mut self, body: &str, out: &mut VecDeque<StreamEvent>) -> Result<(), ProviderError>;

    /// Handles one event, pushing what it completes onto `out`.
    ///
    /// # Errors
    /// A [`ProviderError`] that ends the stream.
    fn event(
        &mut self,
        event: SseEvent,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<Flow, ProviderError>;

    /// The body ended before [`Flow::Done`]: push what remains, or say why the
    /// response is incomplete.
    ///
    /// # Errors
    /// A [`ProviderError`] when the response was cut short.
    fn end(&mut self, out: &mut VecDeque<StreamEvent>) -> Result<(), ProviderError>;
}

/// Runs `decoder` over `events`. The stream ends after the decoder's
/// [`Flow::Done`], its end, or the first error.
fn decode<D: Decoder>(events: SseStream, decoder: D) -> ModelStream {
    struct State<D> {
        events: SseStream,
        decoder: D,
        out: VecDeque<StreamEvent>,
        finished: bool,
    }
    let state = State {
        events,
        decoder,
        out: VecDeque::new(),
        finished: false,
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.out.pop_front() {
                return Some((Ok(event), state));
            }
            if state.finished {
                return None;
            }
            let step = match state.events.next().await {
                Some(Ok(event)) => state
                    .decoder
                    .event(event, &mut state.out)
                    .map(|flow| matches!(flow, Flow::Done)),
                Some(Err(e)) => Err(e),
                None => state.decoder.end(&mut state.out).map(|()| true),
            };
            match step {
                Ok(done) => state.finished = done,
                Err(e) => {
                    state.finished = true;
                    state.out.clear();
                    return Some((Err(e), state));
                }
            }
        }
    })
    .boxed()
}

/// Adds `name: value` to `headers` (both known-valid at compile time).
pub(crate) fn static_header(headers: &mut HeaderMap, name: &'static str, value: &'static str) {
    headers.insert(
        HeaderName::from_static(name),
        HeaderValue::from_static(value),
    );
}
