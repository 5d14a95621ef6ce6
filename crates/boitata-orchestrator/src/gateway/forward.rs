//! The gateway's two endpoints: authenticate, admit, forward with the real key, and
//! stream the answer back while reading its usage.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use serde_json::{json, Value};

use super::usage::{SseUsage, Usage};
use super::{Grant, ModelGateway, UpstreamApi};

/// The `anthropic-version` sent when the agent sends none.
const DEFAULT_ANTHROPIC_VERSION: &str = "2023-06-01";

/// Request headers passed through to Anthropic as they are.
const ANTHROPIC_PASSTHROUGH: &[&str] = &["anthropic-version", "anthropic-beta"];

/// The most of a provider's error answer the gateway passes on, in bytes (it is read
/// whole to mask the run's secrets in it).
const MAX_ERROR_BYTES: usize = 1 << 20;

/// `POST /v1/chat/completions`: the OpenAI Chat Completions API.
pub(super) async fn openai(
    State(gateway): State<ModelGateway>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, token) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        });
    serve(&gateway, UpstreamApi::OpenAi, presented, &headers, body).await
}

/// `POST /v1/messages`: the Anthropic Messages API.
pub(super) async fn anthropic(
    State(gateway): State<ModelGateway>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let presented = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    serve(&gateway, UpstreamApi::Anthropic, presented, &headers, body).await
}

async fn serve(
    gateway: &ModelGateway,
    api: UpstreamApi,
    presented: Option<&str>,
    headers: &HeaderMap,
    body: Bytes,
) -> Response {
    let Some(grant) = presented.and_then(|token| gateway.authorize(token)) else {
        return refusal(
            api,
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid or revoked model gateway token: the run it was made for has ended",
        );
    };
    let upstream = &grant.run.upstream;
    if upstream.api != api {
        return refusal(
            api,
            StatusCode::NOT_FOUND,
            "not_found_error",
            &format!(
                "this run's provider is {}: its model API is at {}",
                upstream.api.name(),
                upstream.api.path()
            ),
        );
    }
    let node = grant.node();
    if let Err(exceeded) = grant.run.budget.admit() {
        grant
            .run
            .budget
            .report(&grant.run.emitter, node.as_deref())
            .ok();
        return refusal(
            api,
            StatusCode::PAYMENT_REQUIRED,
            "budget_exceeded",
            &exceeded.to_string(),
        );
    }
    let mut request: Value = match serde_json::from_slice(&body) {
        Ok(value @ Value::Object(_)) => value,
        _ => {
            return refusal(
                api,
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "the request body is not a JSON object",
            )
        }
    };
    let streaming = request.get("stream").and_then(Value::as_bool) == Some(true);
    if api == UpstreamApi::OpenAi && streaming {
        // Ask for the usage chunk: the gateway counts from the provider's own report.
        // Whatever `stream_options` the agent sent (an object or not: a value that is
        // not one is the agent's mistake, and must not fail the gateway).
        if let Some(object) = request.as_object_mut() {
            let options = object.entry("stream_options").or_insert_with(|| json!({}));
            if !options.is_object() {
                *options = json!({});
            }
            options["include_usage"] = Value::Bool(true);
        }
    }
    let body = match serde_json::to_vec(&request) {
        Ok(body) => body,
        Err(e) => {
            return refusal(
                api,
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &e.to_string(),
            )
        }
    };

    let mut outgoing = gateway
        .shared
        .client
        .post(&upstream.url)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body);
    match api {
        UpstreamApi::OpenAi => {
            if let Some(key) = &upstream.api_key {
                outgoing = outgoing.bearer_auth(key);
            }
        }
        UpstreamApi::Anthropic => {
            if let Some(key) = &upstream.api_key {
                outgoing = outgoing.header("x-api-key", key);
            }
            for name in ANTHROPIC_PASSTHROUGH {
                if let Some(value) = headers.get(*name) {
                    outgoing = outgoing.header(*name, value);
                }
            }
            if !headers.contains_key("anthropic-version") {
                outgoing = outgoing.header("anthropic-version", DEFAULT_ANTHROPIC_VERSION);
            }
        }
    }
    let answer = match outgoing.send().await {
        Ok(answer) => answer,
        Err(e) => {
            tracing::warn!(run = %grant.run.run_id, "model gateway: {} unreachable: {e}", upstream.url);
            return refusal(
                api,
                StatusCode::BAD_GATEWAY,
                "api_error",
                &format!(
                    "the model gateway cannot reach the provider ({}): {}",
                    upstream.api.name(),
                    without_url(&e)
                ),
            );
        }
    };

    let status = answer.status();
    let mut response = Response::builder().status(status.as_u16());
    for name in [header::CONTENT_TYPE, header::RETRY_AFTER] {
        if let Some(value) = answer.headers().get(&name) {
            response = response.header(name, value);
        }
    }
    if !status.is_success() {
        // The provider's own error, passed on with the run's secrets masked (a server
        // may echo the key it was sent: "Incorrect API key provided: sk-…"); nothing
        // to charge.
        let body = error_body(answer).await;
        let masked = grant.run.emitter.redactor().redact(&body);
        return response
            .body(Body::from(masked))
            .unwrap_or_else(|_| internal());
    }
    let is_stream = answer
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if is_stream {
        let metered = Metered {
            inner: Box::pin(answer.bytes_stream()),
            usage: SseUsage::new(api),
            grant: grant.clone(),
            node,
            charged: false,
        };
        response = response
            .header(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"))
            .header("x-accel-buffering", HeaderValue::from_static("no"));
        return response
            .body(Body::from_stream(metered))
            .unwrap_or_else(|_| internal());
    }
    let bytes = match answer.bytes().await {
        Ok(bytes) => bytes,
        Err(e) => {
            return refusal(
                api,
                StatusCode::BAD_GATEWAY,
                "api_error",
                &format!("the provider's answer broke off: {}", without_url(&e)),
            )
        }
    };
    charge(&grant, node.as_deref(), Usage::from_json(api, &bytes));
    response
        .body(Body::from(bytes))
        .unwrap_or_else(|_| internal())
}

/// A provider's error answer as text, at most [`MAX_ERROR_BYTES`] of it (with a marker
/// when cut); whatever arrived when the answer breaks off.
async fn error_body(mut answer: reqwest::Response) -> String {
    let mut body = Vec::new();
    let mut cut = false;
    loop {
        match answer.chunk().await {
            Ok(Some(chunk)) => {
                let room = MAX_ERROR_BYTES - body.len();
                if chunk.len() > room {
                    body.extend_from_slice(&chunk[..room]);
                    cut = true;
                    break;
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) => {
                tracing::debug!("model gateway: the provider's error answer broke off: {e}");
                break;
            }
        }
    }
    let mut text = String::from_utf8_lossy(&body).into_owned();
    if cut {
        text.push_str("\n[the model gateway cut this error answer at 1 MiB]");
    }
    text
}

/// Records one answer's usage: the `usage` event, then the budget.
fn charge(grant: &Grant, node: Option<&str>, usage: Option<Usage>) {
    let Some(usage) = usage else {
        tracing::warn!(
            run = %grant.run.run_id,
            "model gateway: the provider reported no usage for an answer; it is not counted"
        );
        return;
    };
    let emitter = &grant.run.emitter;
    emitter.emit_or_log(
        node,
        boitata_core::EventPayload::Usage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
        },
    );
    if grant
        .run
        .budget
        .charge(usage.input_tokens, usage.output_tokens)
        .is_err()
    {
        if let Err(e) = grant.run.budget.report(emitter, node) {
            tracing::error!("{e}");
        }
    }
}

/// A streamed answer passed through chunk by chunk, its usage read on the way and
/// charged once: at its end, or when it is dropped (the agent went away).
struct Metered {
    inner: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
    usage: SseUsage,
    grant: Arc<Grant>,
    node: Option<String>,
    charged: bool,
}

impl Metered {
    fn finish(&mut self) {
        if !self.charged {
            self.charged = true;
            charge(&self.grant, self.node.as_deref(), self.usage.total());
        }
    }
}

impl Stream for Metered {
    type Item = reqwest::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.inner.as_mut().poll_next(cx);
        match &polled {
            Poll::Ready(Some(Ok(chunk))) => {
                let chunk = chunk.clone();
                self.usage.feed(&chunk);
            }
            Poll::Ready(None) | Poll::Ready(Some(Err(_))) => self.finish(),
            Poll::Pending => {}
        }
        polled
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        self.finish();
    }
}

/// An error in the API's own shape, so the agent's provider shows its message.
fn refusal(api: UpstreamApi, status: StatusCode, kind: &str, message: &str) -> Response {
    let body = match api {
        UpstreamApi::OpenAi => json!({
            "error": {"message": message, "type": kind, "code": kind}
        }),
        UpstreamApi::Anthropic => json!({
            "type": "error",
            "error": {"type": kind, "message": message}
        }),
    };
    (status, axum::Json(body)).into_response()
}

fn internal() -> Response {
    StatusCode::INTERNAL_SERVER_ERROR.into_response()
}

/// A client error's message without the URL (which the agent has no need to see).
fn without_url(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    if let Some(url) = e.url() {
        text = text.replace(url.as_str(), "the provider");
    }
    text
}
