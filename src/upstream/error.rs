//! Why an upstream call failed ([`FailureReason`], with the one status mapping and the one retry
//! policy), and the error a failed call returns ([`UpstreamError`]); which operation it was is
//! [`super::endpoint::Endpoint`]. Metrics and alerts use these names as label values,
//! so the sets are fixed and never come from an error's text.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::trail::Trail;
use crate::storage::targets::KeptError;

/// Why an upstream call failed. A fixed set: alerts and dashboards can rely on it. Kept under
/// `--storage.path` by its label value ([`UpstreamError::kept`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FailureReason {
    /// No complete answer within `api.timeout` (or the collector's deadline).
    Timeout,
    /// The connection could not be made, or broke before the answer was complete.
    Connect,
    /// 401: the token is missing, wrong or revoked.
    Unauthorized,
    /// 403: the token may not see this resource.
    Forbidden,
    /// 404: the resource does not exist (any more).
    NotFound,
    /// The provider asks us to come back later: a 429, or a 403, 502, 503 or 504 that carries
    /// `Retry-After` (a throttle spelled in another status, or an outage that says when it
    /// ends).
    RateLimited,
    /// 5xx.
    ServerError,
    /// Any other unexpected status (other 4xx, 3xx).
    ClientError,
    /// The body is not the JSON we can read (malformed, wrong shape, too large).
    Decode,
    /// Not called: this target's circuit breaker is open after its own repeated failures, until
    /// the cool-down lets one probe through.
    CircuitOpen,
    /// Not called: every call of the endpoint fails (5xx, timeouts, refused connections) for
    /// the token, and only one probe asks after a cool-down until the provider answers again.
    Outage,
}

impl FailureReason {
    pub const ALL: [FailureReason; 11] = [
        FailureReason::Timeout,
        FailureReason::Connect,
        FailureReason::Unauthorized,
        FailureReason::Forbidden,
        FailureReason::NotFound,
        FailureReason::RateLimited,
        FailureReason::ServerError,
        FailureReason::ClientError,
        FailureReason::Decode,
        FailureReason::CircuitOpen,
        FailureReason::Outage,
    ];

    /// The failures that say "this target's call is in trouble now, not refused for good": the
    /// client retries them with back-off, and the breaker counts them towards opening the
    /// target's circuit. A 429 is not among them: it is the token's state, not the target's; the
    /// call waits for the token's pacer and tries again while its deadline allows, and no
    /// circuit counts it. Every other reason is an answer that a retry would only repeat. This
    /// list and that rule are the retry policy: nothing else decides what is retried.
    pub const TRANSIENT: [FailureReason; 3] = [
        FailureReason::Timeout,
        FailureReason::Connect,
        FailureReason::ServerError,
    ];

    /// Every reason a call is tried again for: [`Self::TRANSIENT`], and 429.
    pub const RETRIED: [FailureReason; 4] = [
        FailureReason::Timeout,
        FailureReason::Connect,
        FailureReason::ServerError,
        FailureReason::RateLimited,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::Timeout => "timeout",
            FailureReason::Connect => "connect",
            FailureReason::Unauthorized => "unauthorized",
            FailureReason::Forbidden => "forbidden",
            FailureReason::NotFound => "not_found",
            FailureReason::RateLimited => "rate_limited",
            FailureReason::ServerError => "server_error",
            FailureReason::ClientError => "client_error",
            FailureReason::Decode => "decode",
            FailureReason::CircuitOpen => "circuit_open",
            FailureReason::Outage => "outage",
        }
    }

    /// Whether this failure is retried and counts towards the breaker: see [`Self::TRANSIENT`].
    pub fn is_transient(self) -> bool {
        Self::TRANSIENT.contains(&self)
    }
}

impl fmt::Display for FailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed upstream call: the bounded reason, plus a short detail for logs and the landing
/// page that never contains the token or a URL.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{reason}: {detail}")]
pub struct UpstreamError {
    pub reason: FailureReason,
    pub detail: String,
    /// From `Retry-After` on a 429 (or another status taken as one), when the provider sent
    /// one.
    pub retry_after: Option<Duration>,
    /// Not called at all: the token's pace gave the call no turn before the deadline (reason
    /// `rate_limited`). The target keeps its state and goes first next run.
    pub deferred: bool,
    /// A 429 of this target's own (reason `rate_limited`): refused again and again while its
    /// neighbours on the same endpoint succeed. It backs off alone and waits for its next run,
    /// not for a catch-up: nothing about the token held it.
    pub own: bool,
    /// The trail of the poll that failed: what `/probe?debug=true` prints. Set by the run that
    /// polled the target.
    pub trail: Option<Arc<Trail>>,
}

impl UpstreamError {
    pub fn new(reason: FailureReason, detail: impl Into<String>) -> Self {
        UpstreamError {
            reason,
            detail: detail.into(),
            retry_after: None,
            deferred: false,
            own: false,
            trail: None,
        }
    }

    /// The error of an HTTP status that is not a success: the one mapping from status to
    /// reason. For 401 and 403 the detail says where the token comes from, since a wrong token
    /// is the first thing a new user meets; the token itself is never quoted.
    pub fn from_status(status: u16) -> UpstreamError {
        let reason = match status {
            401 => FailureReason::Unauthorized,
            403 => FailureReason::Forbidden,
            404 => FailureReason::NotFound,
            429 => FailureReason::RateLimited,
            500..=599 => FailureReason::ServerError,
            _ => FailureReason::ClientError,
        };
        let detail = match status {
            401 => "HTTP 401: the provider refused the token (check api.token_file or MAILHOST_API_TOKEN)".to_owned(),
            403 => "HTTP 403: the token may not see this resource".to_owned(),
            _ => format!("HTTP {status}"),
        };
        UpstreamError::new(reason, detail)
    }

    /// The error of a status that is not a success, with the `Retry-After` it carried: a 429,
    /// and a 403, 502, 503 or 504 that says when to come back, are the provider's "come back
    /// later" (reason `rate_limited`, paced and paused as a 429 is); any other status is
    /// [`UpstreamError::from_status`]'s, its `Retry-After` unused.
    pub fn from_answer(status: u16, retry_after: Option<Duration>) -> UpstreamError {
        match (status, retry_after) {
            (429, _) => UpstreamError {
                retry_after,
                ..UpstreamError::from_status(status)
            },
            (403 | 502..=504, Some(wait)) => UpstreamError {
                retry_after,
                ..UpstreamError::new(
                    FailureReason::RateLimited,
                    format!(
                        "HTTP {status} with Retry-After {}: the provider asks to come back later",
                        humantime::format_duration(wait)
                    ),
                )
            },
            _ => UpstreamError::from_status(status),
        }
    }

    /// The failure as `--storage.path` keeps it: its reason by its label value, its detail
    /// bounded; the trail stays with the process.
    pub fn kept(&self) -> KeptError {
        KeptError::new(self.reason.as_str(), &self.detail)
    }

    /// A kept failure as the snapshot holds it: with no trail, not deferred, and of the target's
    /// own when the reason says so (a kept `rate_limited` waits as the token's, as a deferred
    /// target does, until its next attempt). `None` for a reason this version lacks: its
    /// collector's targets are then unreadable, as with any other value it cannot read.
    pub fn from_kept(kept: &KeptError) -> Option<UpstreamError> {
        let reason = FailureReason::ALL
            .into_iter()
            .find(|r| r.as_str() == kept.reason)?;
        Some(UpstreamError::new(reason, kept.detail()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_maps_to_one_reason_and_a_detail_without_the_token() {
        for (status, reason) in [
            (401, FailureReason::Unauthorized),
            (403, FailureReason::Forbidden),
            (404, FailureReason::NotFound),
            (429, FailureReason::RateLimited),
            (500, FailureReason::ServerError),
            (503, FailureReason::ServerError),
            (400, FailureReason::ClientError),
            (302, FailureReason::ClientError),
        ] {
            let e = UpstreamError::from_status(status);
            assert_eq!(e.reason, reason, "{status}");
            assert!(e.detail.starts_with(&format!("HTTP {status}")), "{e}");
        }
    }

    #[test]
    fn a_5xx_or_403_that_says_when_to_come_back_is_taken_as_a_429_and_without_it_as_before() {
        let wait = Some(Duration::from_secs(10));
        for status in [403, 502, 503, 504] {
            let e = UpstreamError::from_answer(status, wait);
            assert_eq!(e.reason, FailureReason::RateLimited, "{status}");
            assert_eq!(e.retry_after, wait);
            assert!(
                e.detail
                    .starts_with(&format!("HTTP {status} with Retry-After 10s"))
            );
            assert_eq!(
                UpstreamError::from_answer(status, None).reason,
                UpstreamError::from_status(status).reason
            );
        }
        let e = UpstreamError::from_answer(429, None);
        assert_eq!(
            (e.reason, e.retry_after),
            (FailureReason::RateLimited, None)
        );
        assert_eq!(
            UpstreamError::from_answer(429, wait).retry_after,
            wait,
            "a 429 keeps its wait"
        );
        for status in [500, 404, 401, 400] {
            let e = UpstreamError::from_answer(status, wait);
            assert_eq!(
                e.reason,
                UpstreamError::from_status(status).reason,
                "{status}"
            );
            assert_eq!(e.retry_after, None);
        }
    }

    #[test]
    fn a_failure_keeps_its_reason_and_a_bounded_detail() {
        use crate::storage::targets::MAX_DETAIL_BYTES;
        let long = "é".repeat(MAX_DETAIL_BYTES);
        let kept = UpstreamError::new(FailureReason::ServerError, long.clone()).kept();
        assert!(kept.detail.len() <= MAX_DETAIL_BYTES);
        assert!(kept.detail.chars().all(|c| c == 'é'));
        let back = UpstreamError::from_kept(&kept).unwrap();
        assert_eq!(back.reason, FailureReason::ServerError);
        assert!(back.trail.is_none() && !back.deferred && !back.own);
        // A file written by another hand is held to the same bound when read.
        let read = KeptError {
            detail: long,
            ..kept.clone()
        };
        assert_eq!(UpstreamError::from_kept(&read).unwrap().detail, kept.detail);
    }

    #[test]
    fn every_reason_is_kept_by_its_label_value() {
        for reason in FailureReason::ALL {
            let kept = UpstreamError::new(reason, "").kept();
            let json = serde_json::to_string(&kept).unwrap();
            assert_eq!(json, format!(r#"{{"reason":"{reason}","detail":""}}"#));
            let read: KeptError = serde_json::from_str(&json).unwrap();
            assert_eq!(UpstreamError::from_kept(&read).unwrap().reason, reason);
        }
        let unknown = KeptError::new("no_such_reason", "");
        assert!(UpstreamError::from_kept(&unknown).is_none());
    }

    #[test]
    fn only_the_transient_reasons_are_retried_with_back_off_and_a_429_is_not_among_them() {
        let retried: Vec<_> = FailureReason::ALL
            .into_iter()
            .filter(|r| r.is_transient())
            .collect();
        assert_eq!(
            retried,
            [
                FailureReason::Timeout,
                FailureReason::Connect,
                FailureReason::ServerError,
            ]
        );
        assert!(FailureReason::RETRIED.contains(&FailureReason::RateLimited));
        assert!(!FailureReason::RateLimited.is_transient());
    }
}
