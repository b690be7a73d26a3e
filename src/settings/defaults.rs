//! Defaults, named so that docs and code agree.

use std::time::Duration;

pub const TIMEOUT: Duration = Duration::from_secs(10);
pub const CONCURRENCY: usize = 8;
pub const MAX_RESPONSE_BYTES: u64 = 4 * 1024 * 1024;
pub const MAX_RETRIES: u32 = 2;
pub const RETRY_BACKOFF: Duration = Duration::from_millis(250);
pub const RETRY_MAX_BACKOFF: Duration = Duration::from_secs(5);
pub const BREAKER_FAILURES: u32 = 5;
pub const BREAKER_COOLDOWN: Duration = Duration::from_secs(60);
pub const INTERVAL: Duration = Duration::from_secs(60);
/// `max_age` is this many intervals unless set.
pub const MAX_AGE_INTERVALS: u32 = 3;
/// Time zone of the mail-tracing collectors' "today".
pub const TIMEZONE: &str = "UTC";
/// How dates are written in mail-tracing requests.
pub const DATE_FORMAT: &str = "YYYY-MM-DD";
/// `limit` of the dashboard's top lists.
pub const TOP_LIMIT: i64 = 10;
/// Domains per account kept from the daily `domains-rank`.
pub const TOP_DOMAINS: i64 = 20;
/// A probed target leaves the poll set after this many intervals without a probe.
pub const PROBE_IDLE_INTERVALS: u32 = 3;
/// Probe-registered targets per tenant at most.
pub const PROBE_MAX_TARGETS: usize = 10_000;
/// Accounts `/probe` may register per tenant within one interval of its account collectors,
/// whatever the provider then answers for them.
pub const PROBE_NEW_PER_INTERVAL: usize = 100;
/// Accounts `/probe` registered whose first fetch has not ended yet, per tenant, at most.
pub const PROBE_FIRST_FETCHES: usize = 16;
/// Discovered accounts per tenant at most.
pub const DISCOVERY_MAX_ACCOUNTS: usize = 1000;
/// Discovered sending domains (dashboard views) per tenant at most.
pub const DISCOVERY_MAX_DOMAINS: usize = 100;
