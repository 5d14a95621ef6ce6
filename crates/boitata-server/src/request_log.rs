//! What the request log shows of a request: its method, its path, the names of its
//! query parameters with every value masked, and no header that can carry a
//! credential. Applied where requests are logged (the `TraceLayer`'s span), so it
//! holds at every level (`BOITATA_LOG=trace` included): a client that puts the API
//! token in a query string (`/api/runs?token=T`) or a header does not get it written
//! to the log.

use axum::http::{HeaderMap, Request, Uri};
use boitata_core::redact::REDACTED;
use tower_http::trace::MakeSpan;
use tracing::Span;

/// Headers never logged, whatever their value: they carry credentials.
const SECRET_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
    "x-auth-token",
];

/// `uri` as the log shows it: the path, and each query parameter as `NAME=[REDACTED]`
/// (names kept, values masked: any of them may be a token).
pub(crate) fn loggable_uri(uri: &Uri) -> String {
    let path = uri.path();
    match uri.query() {
        None => path.to_owned(),
        Some(query) => {
            let masked: Vec<String> = query
                .split('&')
                .filter(|pair| !pair.is_empty())
                .map(|pair| match pair.split_once('=') {
                    Some((name, _)) => format!("{name}={REDACTED}"),
                    None => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", masked.join("&"))
        }
    }
}

/// `headers` as the log shows them: `name: value` lines, credential headers masked.
pub(crate) fn loggable_headers(headers: &HeaderMap) -> String {
    headers
        .iter()
        .map(|(name, value)| {
            let shown = if SECRET_HEADERS.contains(&name.as_str()) {
                REDACTED.to_owned()
            } else {
                String::from_utf8_lossy(value.as_bytes()).into_owned()
            };
            format!("{name}: {shown}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The span of one request: method, masked URI, masked headers.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RequestSpan;

impl<B> MakeSpan<B> for RequestSpan {
    fn make_span(&mut self, request: &Request<B>) -> Span {
        tracing::debug_span!(
            "request",
            method = %request.method(),
            uri = %loggable_uri(request.uri()),
            headers = %loggable_headers(request.headers()),
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn query_values_are_masked_and_names_kept() {
        let uri: Uri = "/api/runs?token=T0K3N&limit=5&flag".parse().unwrap();
        assert_eq!(
            loggable_uri(&uri),
            "/api/runs?token=[REDACTED]&limit=[REDACTED]&flag"
        );
        let plain: Uri = "/api/runs/abc/events".parse().unwrap();
        assert_eq!(loggable_uri(&plain), "/api/runs/abc/events");
    }

    #[test]
    fn credential_headers_are_masked() {
        let mut headers = HeaderMap::new();
        headers.insert("authorization", HeaderValue::from_static("Bearer T0K3N"));
        headers.insert("cookie", HeaderValue::from_static("session=T0K3N"));
        headers.insert("accept", HeaderValue::from_static("text/event-stream"));
        let shown = loggable_headers(&headers);
        assert!(!shown.contains("T0K3N"), "{shown}");
        assert!(shown.contains("accept: text/event-stream"), "{shown}");
        assert!(shown.contains("authorization: [REDACTED]"), "{shown}");
    }
}
