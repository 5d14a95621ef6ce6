//! Bearer-token authentication for the API.
//!
//! With a token configured (`server.api_token` or `BOITATA_API_TOKEN`), every `/api`
//! request must carry `Authorization: Bearer TOKEN`. The comparison takes the same
//! time whatever the bytes ([`subtle`]); a refusal is a bare `401` with
//! `WWW-Authenticate: Bearer`, saying nothing about what was wrong. The token is never
//! logged: [`ApiToken`]'s `Debug` hides it.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::error::AppError;

/// The API token. `Debug` prints `ApiToken(***)`.
#[derive(Clone)]
pub struct ApiToken(Vec<u8>);

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiToken(***)")
    }
}

impl ApiToken {
    /// The token, or `None` for an empty string (an empty token is no token).
    pub fn new(token: &str) -> Option<Self> {
        let token = token.trim();
        (!token.is_empty()).then(|| ApiToken(token.as_bytes().to_vec()))
    }

    /// Whether `headers` carry `Authorization: Bearer` this token. The scheme is
    /// matched case-insensitively (RFC 7235); the token byte for byte, in constant time.
    pub fn accepts(&self, headers: &HeaderMap) -> bool {
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return false;
        };
        let value = value.as_bytes();
        let scheme = b"bearer ";
        if value.len() <= scheme.len() || !value[..scheme.len()].eq_ignore_ascii_case(scheme) {
            return false;
        }
        let given = value[scheme.len()..].trim_ascii();
        given.ct_eq(&self.0).into()
    }
}

/// Middleware: refuses a request without the right token (when one is configured).
/// Its state is the token alone (`None`: no token configured, the API is open).
pub(crate) async fn require_token(
    State(token): State<Option<Arc<ApiToken>>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(token) = &token {
        if !token.accepts(request.headers()) {
            return AppError::Unauthorized.into_response();
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn with(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn only_the_exact_token_passes() {
        let token = ApiToken::new("s3cret-token").unwrap();
        assert!(token.accepts(&with("Bearer s3cret-token")));
        assert!(token.accepts(&with("bearer s3cret-token")));
        assert!(!token.accepts(&with("Bearer s3cret-tokem")));
        assert!(!token.accepts(&with("Bearer s3cret-token-and-more")));
        assert!(!token.accepts(&with("Bearer ")));
        assert!(!token.accepts(&with("Basic s3cret-token")));
        assert!(!token.accepts(&with("s3cret-token")));
        assert!(!token.accepts(&HeaderMap::new()));
        assert!(ApiToken::new("  ").is_none());
        assert_eq!(format!("{token:?}"), "ApiToken(***)");
    }
}
