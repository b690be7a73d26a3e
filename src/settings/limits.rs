//! The bounds of every value: what the exporter can run with. Each is named in the message that
//! refuses a value past it.

use std::time::Duration;

/// Largest config file read (a fleet of a million ids fits).
pub const CONFIG_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// Largest token file read: it holds one token.
pub const TOKEN_FILE_BYTES: u64 = 4096;
/// Longest token.
pub const TOKEN_CHARS: usize = 1024;
pub const MAX_TIMEOUT: Duration = Duration::from_secs(5 * 60);
pub const MAX_BACKOFF: Duration = Duration::from_secs(5 * 60);
pub const MIN_COOLDOWN: Duration = Duration::from_secs(1);
pub const MAX_COOLDOWN: Duration = Duration::from_secs(60 * 60);
pub const MAX_BREAKER_FAILURES: u32 = 1000;
pub const MIN_RESPONSE_BYTES: u64 = 1024;
pub const MAX_RESPONSE_BYTES: u64 = 256 * 1024 * 1024;
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);
pub const MAX_INTERVAL: Duration = Duration::from_secs(24 * 60 * 60);
pub const MAX_AGE: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// Targets in one list (accounts, views, migrations, mailboxes).
pub const MAX_TARGETS: usize = 1_000_000;
/// `[`/`{` nesting depth at most (the schema needs 5); checked before the YAML parser runs.
pub const MAX_FLOW_DEPTH: usize = 64;
/// `probe.idle_intervals` at most.
pub const MAX_IDLE_INTERVALS: u32 = 1000;
/// `probe.first_fetches` at most.
pub const MAX_FIRST_FETCHES: usize = 10_000;
/// `rate_limit` at least: one call every 100 seconds.
pub const MIN_RATE_LIMIT: f64 = 0.01;
/// `rate_limit` at most, requests per second.
pub const MAX_RATE_LIMIT: f64 = 10_000.0;
/// Entries of `endpoint_rate_limits` at most (each must name an endpoint the exporter calls).
pub const MAX_ENDPOINT_RATE_LIMITS: usize = 64;
/// The dashboard's `limit` of its top lists.
pub const TOP_LIMIT: std::ops::RangeInclusive<i64> = 1..=1000;
/// Domains per account kept from the daily `domains-rank` (`top_domains`).
pub const TOP_DOMAINS: std::ops::RangeInclusive<i64> = 1..=200;
