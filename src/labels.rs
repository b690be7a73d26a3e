//! Every label name and bounded label value the exporter uses, in one place so that the
//! cardinality of each series can be reviewed at a glance.
//!
//! | label        | values                                                  |
//! |--------------|---------------------------------------------------------|
//! | `collector`  | [`CollectorName`]                                       |
//! | `target`     | one per configured target (account id, ...)             |
//! | `endpoint`   | [`Endpoint`]: a route name, never a raw path            |
//! | `reason`     | [`FailureReason`]: a fixed vocabulary, never error text |
//! | `code`       | HTTP status code of an upstream answer, or `none`       |
//! | `account_id` | configured Delivery account ids                         |
//! | info labels  | strings from the API, escaped and cut at 128 characters |

use std::fmt;

/// A collector: one API area, with its own switch, interval and health series.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CollectorName {
    DeliveryAccount,
}

impl CollectorName {
    pub const ALL: [CollectorName; 1] = [CollectorName::DeliveryAccount];

    pub fn as_str(self) -> &'static str {
        match self {
            CollectorName::DeliveryAccount => "delivery_account",
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
}

impl Endpoint {
    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::DeliveryAccount => "delivery_account",
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
}

impl FailureReason {
    pub const ALL: [FailureReason; 9] = [
        FailureReason::Timeout,
        FailureReason::Connect,
        FailureReason::Unauthorized,
        FailureReason::Forbidden,
        FailureReason::NotFound,
        FailureReason::RateLimited,
        FailureReason::ServerError,
        FailureReason::ClientError,
        FailureReason::Decode,
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
        }
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
