//! API errors: every one is JSON `{error, code}` with a status, and says what to do.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use drover_api::ErrorBody;

/// An error answer of the API.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: the request is malformed or invalid.
    #[error("{0}")]
    BadRequest(String),
    /// 401: no or bad credentials.
    #[error("{0}")]
    Unauthorized(String),
    /// 401: the browser's sign-in has expired.
    #[error("{0}")]
    AuthExpired(String),
    /// 403: not allowed.
    #[error("{0}")]
    Forbidden(String),
    /// 404: no such thing.
    #[error("{0}")]
    NotFound(String),
    /// 409: not possible in the current state.
    #[error("{0}")]
    Conflict(String),
    /// 413: too large.
    #[error("{0}")]
    TooLarge(String),
    /// 429: too many failed sign-ins; try again after this many seconds.
    #[error("too many failed sign-ins: try again in {0} seconds")]
    TooManyRequests(u64),
    /// 503: what the request needs (a device) is not connected.
    #[error("{0}")]
    Unavailable(String),
    /// 504: a device did not answer in time.
    #[error("{0}")]
    Timeout(String),
    /// 500: a failure on our side (logged; the message is generic).
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            ApiError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            ApiError::AuthExpired(_) => (StatusCode::UNAUTHORIZED, "auth_expired"),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            ApiError::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            ApiError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
            ApiError::TooManyRequests(_) => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            ApiError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            ApiError::Timeout(_) => (StatusCode::GATEWAY_TIMEOUT, "timeout"),
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

impl From<drover_store::StoreError> for ApiError {
    fn from(e: drover_store::StoreError) -> Self {
        tracing::error!("store: {e}");
        ApiError::Internal("the database failed; see the server log".into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        let mut resp = (status, Json(ErrorBody { error: self.to_string(), code: code.into() })).into_response();
        if let ApiError::TooManyRequests(secs) = self {
            resp.headers_mut().insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        resp
    }
}
