//! The vocabularies of labels (collectors, endpoints, failure reasons) and the sanitising and
//! bounding of names from the API. Every label set and its cardinality bound is listed in
//! [`crate::metrics::labels`].

use std::fmt;

/// A collector: one API area, with its own switch, interval and health series.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CollectorName {
    DeliveryAccount,
    TracemailDashboard,
    TracemailDaily,
    Migration,
    Mailbox,
}

impl CollectorName {
    pub fn as_str(self) -> &'static str {
        match self {
            CollectorName::DeliveryAccount => "delivery_account",
            CollectorName::TracemailDashboard => "tracemail_dashboard",
            CollectorName::TracemailDaily => "tracemail_daily",
            CollectorName::Migration => "migration",
            CollectorName::Mailbox => "mailbox",
        }
    }
}

impl fmt::Display for CollectorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An upstream operation, named after its route.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Endpoint {
    /// `GET /api/delivery/accounts/{id}`
    DeliveryAccount,
    /// `POST /api/delivery/tracemail/dashboard`
    TracemailDashboard,
    /// `GET /api/delivery/tracemail/daily/{account}?type=account`
    TracemailDaily,
    /// `GET /api/delivery/tracemail/daily/{account}?type=domains-rank`
    TracemailDomainsRank,
    /// `GET /api/migrations/{migration_code}/stats`
    MigrationStats,
    /// `GET /api/domains/{domain_code}/email_accounts/{email_account_code}`
    EmailAccount,
}

impl Endpoint {
    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::DeliveryAccount => "delivery_account",
            Endpoint::TracemailDashboard => "tracemail_dashboard",
            Endpoint::TracemailDaily => "tracemail_daily",
            Endpoint::TracemailDomainsRank => "tracemail_domains_rank",
            Endpoint::MigrationStats => "migration_stats",
            Endpoint::EmailAccount => "email_account",
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an upstream call failed. A fixed set: alerts and dashboards can rely on it.
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
    /// 429: the provider asks us to slow down.
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
}

impl FailureReason {
    pub const ALL: [FailureReason; 10] = [
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
        }
    }

    /// The failures that say "this call is in trouble now, not refused for good": they are
    /// retried with back-off, and they count towards opening the target's circuit breaker.
    /// Every other reason is an answer that a retry would only repeat.
    pub const TRANSIENT: [FailureReason; 4] = [
        FailureReason::Timeout,
        FailureReason::Connect,
        FailureReason::ServerError,
        FailureReason::RateLimited,
    ];

    pub fn is_transient(self) -> bool {
        Self::TRANSIENT.contains(&self)
    }

    /// The reason for an HTTP status that is not a success.
    pub fn from_status(status: u16) -> FailureReason {
        match status {
            401 => FailureReason::Unauthorized,
            403 => FailureReason::Forbidden,
            404 => FailureReason::NotFound,
            429 => FailureReason::RateLimited,
            500..=599 => FailureReason::ServerError,
            _ => FailureReason::ClientError,
        }
    }
}

impl fmt::Display for FailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Most distinct names (statuses, groups, states) kept from one record; the rest are summed
/// into `other`, so an upstream that invents names cannot explode the series count.
pub const MAX_NAMES: usize = 16;

/// Longest name kept by [`sanitize`].
const MAX_NAME_LEN: usize = 32;

/// Turns a name from the API (a status, a group) into a label value: lower case, ASCII letters,
/// digits and `_` only, at most 32 characters; an empty result is `unknown`.
pub fn sanitize(name: &str) -> String {
    let mut out = String::with_capacity(name.len().min(MAX_NAME_LEN));
    for c in name.trim().chars() {
        if out.len() == MAX_NAME_LEN {
            break;
        }
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let trimmed = out.trim_matches('_');
    if trimmed.is_empty() {
        "unknown".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// Keeps at most [`MAX_NAMES`] names, summing the rest (and any duplicates after
/// sanitising) into their survivors and `other`. Order is kept; a sum that overflows to
/// infinity is dropped rather than shown.
pub fn bound_names(pairs: Vec<(String, f64)>) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for (name, v) in pairs {
        let name = sanitize(&name);
        if let Some(slot) = out.iter_mut().find(|(n, _)| *n == name) {
            slot.1 += v;
        } else if out.len() < MAX_NAMES - 1 || (out.len() == MAX_NAMES - 1 && name == "other") {
            out.push((name, v));
        } else if let Some(slot) = out.iter_mut().find(|(n, _)| n == "other") {
            slot.1 += v;
        } else {
            out.push(("other".to_owned(), v));
        }
    }
    // Summing huge values can overflow: an infinite count would be a wrong number, drop it.
    out.retain(|(_, v)| v.is_finite());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_the_api_become_safe_label_values() {
        assert_eq!(sanitize("Delivered"), "delivered");
        assert_eq!(sanitize("  soft-bounce (4xx) "), "soft_bounce_4xx");
        assert_eq!(sanitize("!!!"), "unknown");
        assert_eq!(sanitize(&"x".repeat(100)).len(), 32);
    }

    #[test]
    fn too_many_names_are_summed_into_other() {
        let pairs: Vec<_> = (0..40).map(|i| (format!("s{i}"), 1.0)).collect();
        let out = bound_names(pairs);
        assert_eq!(out.len(), MAX_NAMES);
        assert_eq!(out.last().unwrap(), &("other".to_owned(), 25.0));
        assert_eq!(out.iter().map(|(_, v)| v).sum::<f64>(), 40.0);
    }

    #[test]
    fn names_equal_after_sanitising_are_summed() {
        let out = bound_names(vec![("Bounced".into(), 2.0), ("bounced".into(), 3.0)]);
        assert_eq!(out, vec![("bounced".to_owned(), 5.0)]);
    }
}
