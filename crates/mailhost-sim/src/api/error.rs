//! The one HTTP error type every handler returns: a JSON message and a stable code, never the
//! simulator's internals.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error answered to a client as `{"message": "...", "code": "..."}`.
///
/// Messages describe the request, never the simulator's internals or a secret.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request (path, headers or body) is malformed or fails validation.
    #[error("{0}")]
    BadRequest(String),
    /// No or unknown credentials.
    #[error("{0}")]
    Unauthorized(String),
    /// Known credentials that may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// The addressed resource or route does not exist.
    #[error("{0}")]
    NotFound(String),
    #[error("method not allowed on this path")]
    MethodNotAllowed,
    #[error("{0}")]
    PayloadTooLarge(String),
    /// The account cannot pay for the messages it tried to send.
    #[error(
        "quota exhausted: {requested} messages requested, {remaining} remaining on the account"
    )]
    QuotaExhausted { requested: i64, remaining: i64 },
    /// A fault injected by the test harness: the status is whatever the fault asked for.
    #[error("injected fault: simulated upstream error")]
    Injected(StatusCode),
    /// A refusal of a rate limit: 429, or the status the limit refuses with (503 as S3's
    /// SlowDown does, ...); the code stays `rate_limited` whatever the status.
    #[error("rate limit exceeded, retry after {retry_after_secs} s")]
    RateLimited {
        status: StatusCode,
        retry_after_secs: u64,
    },
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::BadRequest(message.into())
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::QuotaExhausted { .. } => StatusCode::PAYMENT_REQUIRED,
            Self::Injected(status) => *status,
            Self::RateLimited { status, .. } => *status,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// A stable, machine-readable name of the error kind.
    pub fn code(&self) -> &'static str {
        match self {
            Self::BadRequest(_) => "bad_request",
            Self::Unauthorized(_) => "unauthorized",
            Self::Forbidden(_) => "forbidden",
            Self::NotFound(_) => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::PayloadTooLarge(_) => "payload_too_large",
            Self::QuotaExhausted { .. } => "quota_exhausted",
            Self::Injected(_) => "injected_fault",
            Self::RateLimited { .. } => "rate_limited",
            Self::Internal(_) => "internal",
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "message": self.to_string(), "code": self.code() });
        let mut response = (self.status(), Json(body)).into_response();
        if let Self::RateLimited {
            retry_after_secs, ..
        } = self
        {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn rate_limited_errors_carry_retry_after_and_a_json_message() {
        let response = ApiError::RateLimited {
            status: StatusCode::TOO_MANY_REQUESTS,
            retry_after_secs: 7,
        }
        .into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[header::RETRY_AFTER], "7");
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        let body: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
        assert_eq!(body["code"], "rate_limited");
        assert!(body["message"].as_str().is_some());
    }
}
