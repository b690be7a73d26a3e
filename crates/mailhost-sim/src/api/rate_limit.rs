//! The rate limiter on the wire: the outermost layer of every Management API route (after the hit
//! counter), like a gateway in front of the service. It refuses (429, or the limit's own status)
//! before authentication and before any injected fault, and adds the rate-limit headers of the limit that governs the answer
//! (the route's limit of the token, else the token-wide one) to every answer to a limited token.
//! The buckets and their rules, and which limit governs, are in `crate::world::rate_limit`.
//!
//! Each route has its own instance of the layer, which knows its [`Route`]: the router has already
//! matched method and path, so nothing here parses a path. Paths that match no route never reach
//! the layer.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use jiff::{SignedDuration, Timestamp};
use tokio::time::Instant;

use super::error::ApiError;
use super::extract::MANAGEMENT_TOKEN_HEADER;
use super::faults::http_date;
use crate::route::Route;
use crate::world::clock::{SimClock, shift};
use crate::world::rate_limit::{Decision, RateLimiter, RetryAfterStyle};

const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// State of the limiter layer of one Management route.
#[derive(Clone)]
pub(crate) struct RateLimitLayerState {
    /// Shared by every route.
    pub limiter: Arc<RateLimiter>,
    /// The route this layer is in front of, for its per-route limits.
    pub route: Route,
    /// Dates the HTTP-date `Retry-After`, as the fault layer does.
    pub clock: SimClock,
}

/// Lets a request of a limited token through if its buckets (token-wide, and of this route) have a
/// token, else refuses it; either way the answer carries the headers of the governing limit.
/// Requests without a limit (no token, an unknown one, one limited neither as a whole nor on this
/// route) pass untouched.
pub(crate) async fn limit(
    State(layer): State<RateLimitLayerState>,
    request: Request,
    next: Next,
) -> Response {
    let decision = request
        .headers()
        .get(MANAGEMENT_TOKEN_HEADER)
        .and_then(|value| value.to_str().ok())
        .and_then(|token| layer.limiter.take(token, layer.route, Instant::now()));
    let Some(decision) = decision else {
        return next.run(request).await;
    };
    let mut response = if decision.allowed {
        next.run(request).await
    } else {
        refused(&decision, layer.clock.now())
    };
    add_headers(response.headers_mut(), &decision);
    response
}

/// The simulator's usual refusal, with the limit's status (429 unless it says otherwise) and its
/// `Retry-After` in the limit's style.
fn refused(decision: &Decision, now: Timestamp) -> Response {
    // The limit was validated against `REFUSAL_STATUSES`; 429 is only a fallback.
    let status = StatusCode::from_u16(decision.status).unwrap_or(StatusCode::TOO_MANY_REQUESTS);
    let mut response = ApiError::RateLimited {
        status,
        retry_after_secs: decision.retry_after_secs,
    }
    .into_response();
    match decision.retry_after {
        RetryAfterStyle::Seconds => {}
        RetryAfterStyle::HttpDate => {
            let secs = i64::try_from(decision.retry_after_secs).unwrap_or(i64::MAX);
            let at = shift(now, SignedDuration::from_secs(secs));
            if let Ok(value) = HeaderValue::from_str(&http_date(at)) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
        }
        RetryAfterStyle::None => {
            response.headers_mut().remove(header::RETRY_AFTER);
        }
    }
    response
}

/// The `x_ratelimit` and `ietf` headers (or both, or none) of one decision. They replace any of
/// the same name the handler set.
fn add_headers(headers: &mut HeaderMap, decision: &Decision) {
    if decision.headers.x_ratelimit() {
        headers.insert(X_RATELIMIT_LIMIT, HeaderValue::from(decision.limit));
        headers.insert(X_RATELIMIT_REMAINING, HeaderValue::from(decision.remaining));
        headers.insert(X_RATELIMIT_RESET, HeaderValue::from(decision.reset_secs));
    }
    if decision.headers.ietf() {
        // Structured fields (RFC 8941): a string item naming the policy, with integer parameters.
        let policy = format!(
            "\"default\";q={};w={}",
            decision.limit, decision.window_secs
        );
        let state = format!(
            "\"default\";r={};t={}",
            decision.remaining, decision.reset_secs
        );
        for (name, value) in [(RATELIMIT_POLICY, policy), (RATELIMIT, state)] {
            // Digits, quotes and semicolons only: always a valid header value.
            if let Ok(value) = HeaderValue::try_from(value) {
                headers.insert(name, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::rate_limit::RateLimitHeaders;

    fn decision(headers: RateLimitHeaders) -> Decision {
        Decision {
            allowed: false,
            limit: 5,
            remaining: 0,
            reset_secs: 9,
            window_secs: 10,
            retry_after_secs: 2,
            retry_after: RetryAfterStyle::Seconds,
            headers,
            status: 429,
        }
    }

    #[test]
    fn each_header_style_writes_its_own_headers() {
        let names = |style| {
            let mut headers = HeaderMap::new();
            add_headers(&mut headers, &decision(style));
            let mut names: Vec<String> = headers.keys().map(|n| n.as_str().to_owned()).collect();
            names.sort();
            names
        };
        assert!(names(RateLimitHeaders::None).is_empty());
        assert_eq!(
            names(RateLimitHeaders::XRateLimit),
            [
                "x-ratelimit-limit",
                "x-ratelimit-remaining",
                "x-ratelimit-reset"
            ]
        );
        assert_eq!(
            names(RateLimitHeaders::Ietf),
            ["ratelimit", "ratelimit-policy"]
        );
        assert_eq!(names(RateLimitHeaders::Both).len(), 5);
        let mut headers = HeaderMap::new();
        add_headers(&mut headers, &decision(RateLimitHeaders::Ietf));
        assert_eq!(headers[RATELIMIT_POLICY], "\"default\";q=5;w=10");
        assert_eq!(headers[RATELIMIT], "\"default\";r=0;t=9");
    }

    #[test]
    fn a_refusal_dates_its_http_date_retry_after_with_the_simulator_clock() {
        let at: Timestamp = "2026-11-22T10:00:00Z".parse().expect("timestamp");
        let response = refused(
            &Decision {
                retry_after: RetryAfterStyle::HttpDate,
                ..decision(RateLimitHeaders::None)
            },
            at,
        );
        assert_eq!(
            response.headers()[header::RETRY_AFTER],
            "Sun, 22 Nov 2026 10:00:02 GMT"
        );
    }
}
