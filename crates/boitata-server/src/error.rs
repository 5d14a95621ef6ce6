//! The API's error: an HTTP status and a message, sent as `{"error": "..."}`.
//!
//! Handlers return `Result<_, AppError>` and use `?`: store errors, JSON and path
//! rejections convert with `From`. Internal details (a SQLite message, a join error)
//! are logged, not sent: the client reads `internal error (see the server log)`.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use boitata_core::store::StoreError;

/// Why a request failed, with the status code it answers with.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// 400: the request is malformed (bad JSON, a bad blueprint name, a bad header).
    #[error("{0}")]
    BadRequest(String),
    /// 401: no token, or the wrong one. The body says nothing more.
    #[error("unauthorized")]
    Unauthorized,
    /// 403: the `Host` or `Origin` is not one this server answers (DNS rebinding,
    /// cross-site requests).
    #[error("{0}")]
    Forbidden(String),
    /// 404: no such run, blueprint or route.
    #[error("{0}")]
    NotFound(String),
    /// 409: the request conflicts with the run's state (cancelling a finished run).
    #[error("{0}")]
    Conflict(String),
    /// 413: the body is larger than the limit.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// 415: the body is not `application/json`.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 422: well-formed, but the run cannot start (a missing param, a node type no
    /// backend here runs).
    #[error("{0}")]
    Unprocessable(String),
    /// 503: the server is shutting down.
    #[error("{0}")]
    Unavailable(String),
    /// 500: something broke on the server; the message is logged, not sent.
    #[error("{0}")]
    Internal(String),
}

impl AppError {
    /// The status code this error answers with.
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AppError::Unauthorized => StatusCode::UNAUTHORIZED,
            AppError::Forbidden(_) => StatusCode::FORBIDDEN,
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::Conflict(_) => StatusCode::CONFLICT,
            AppError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            AppError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            AppError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            AppError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// A rejection from one of axum's extractors, by its status.
    fn from_rejection(status: StatusCode, text: String) -> Self {
        match status {
            StatusCode::PAYLOAD_TOO_LARGE => AppError::PayloadTooLarge(text),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => AppError::UnsupportedMediaType(text),
            StatusCode::UNPROCESSABLE_ENTITY => AppError::Unprocessable(text),
            s if s.is_server_error() => AppError::Internal(text),
            _ => AppError::BadRequest(text),
        }
    }
}

pub use boitata_protocol::api::ErrorBody;

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let status = self.status();
        let message = match &self {
            AppError::Internal(detail) => {
                tracing::error!("internal error: {detail}");
                "internal error (see the server log)".to_owned()
            }
            other => other.to_string(),
        };
        let mut response = (status, Json(ErrorBody { error: message })).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<StoreError> for AppError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(id) => AppError::NotFound(format!("no run {id}")),
            e @ StoreError::Ambiguous { .. } => AppError::BadRequest(e.to_string()),
            e => AppError::Internal(e.to_string()),
        }
    }
}

impl From<JsonRejection> for AppError {
    fn from(rejection: JsonRejection) -> Self {
        AppError::from_rejection(rejection.status(), rejection.body_text())
    }
}

impl From<PathRejection> for AppError {
    fn from(rejection: PathRejection) -> Self {
        AppError::from_rejection(rejection.status(), rejection.body_text())
    }
}

impl From<QueryRejection> for AppError {
    fn from(rejection: QueryRejection) -> Self {
        AppError::from_rejection(rejection.status(), rejection.body_text())
    }
}

impl From<tokio::task::JoinError> for AppError {
    fn from(e: tokio::task::JoinError) -> Self {
        AppError::Internal(format!("a blocking task failed: {e}"))
    }
}
