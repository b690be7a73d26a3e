//! The config file as written: the serde schema, strict (`deny_unknown_fields`), with every key
//! optional that has a default. [`super::validate`] turns it into the validated [`super::Config`].

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// The file as written; see [`super::Config`] for the validated form.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub(super) api: RawApi,
    #[serde(default)]
    pub(super) collectors: RawCollectors,
    /// One entry per management token; absent, `api` holds the one token.
    #[serde(default)]
    pub(super) tenants: Option<Vec<RawTenant>>,
    #[serde(default)]
    pub(super) probe: Option<RawProbe>,
    #[serde(default)]
    pub(super) discovery: Option<RawDiscovery>,
}

/// One tenant: its token, optionally its own address and concurrency, its static targets.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTenant {
    pub(super) name: String,
    #[serde(default)]
    pub(super) token_file: Option<PathBuf>,
    /// The name of an environment variable holding the token.
    #[serde(default)]
    pub(super) token_env: Option<String>,
    #[serde(default)]
    pub(super) base_url: Option<String>,
    #[serde(default)]
    pub(super) concurrency: Option<usize>,
    /// Requests per second the provider's contract allows this token, at most.
    #[serde(default)]
    pub(super) rate_limit: Option<f64>,
    #[serde(default)]
    pub(super) collectors: RawTenantCollectors,
    #[serde(default)]
    pub(super) probe: Option<RawTenantProbe>,
    #[serde(default)]
    pub(super) discovery: Option<RawDiscovery>,
}

/// A tenant's target lists, in the shape of the `collectors` block; settings stay there.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTenantCollectors {
    #[serde(default)]
    pub(super) delivery_account: Option<RawAccountList>,
    #[serde(default)]
    pub(super) tracemail_dashboard: Option<RawViewList>,
    #[serde(default)]
    pub(super) tracemail_daily: Option<RawAccountList>,
    #[serde(default)]
    pub(super) migration: Option<RawMigrationList>,
    #[serde(default)]
    pub(super) mailbox: Option<RawMailboxList>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAccountList {
    #[serde(default)]
    pub(super) accounts: Vec<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawViewList {
    #[serde(default)]
    pub(super) views: Vec<RawView>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMigrationList {
    #[serde(default)]
    pub(super) migrations: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMailboxList {
    #[serde(default)]
    pub(super) mailboxes: Vec<RawMailboxTarget>,
}

/// `/probe` settings; `max_targets` and `allow` are the defaults of every tenant.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProbe {
    #[serde(default)]
    pub(super) idle_intervals: Option<u32>,
    #[serde(default)]
    pub(super) max_targets: Option<usize>,
    #[serde(default)]
    pub(super) new_per_interval: Option<usize>,
    #[serde(default)]
    pub(super) first_fetches: Option<usize>,
    #[serde(default)]
    pub(super) allow: Option<Vec<i64>>,
}

/// What discovery follows; at the top level, every tenant's defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDiscovery {
    #[serde(default)]
    pub(super) accounts: Option<bool>,
    #[serde(default)]
    pub(super) domains: Option<bool>,
    #[serde(default)]
    pub(super) max_accounts: Option<usize>,
    #[serde(default)]
    pub(super) max_domains: Option<usize>,
    #[serde(default)]
    pub(super) allow: Option<Vec<i64>>,
    #[serde(default)]
    pub(super) deny: Option<Vec<i64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTenantProbe {
    #[serde(default)]
    pub(super) max_targets: Option<usize>,
    #[serde(default)]
    pub(super) new_per_interval: Option<usize>,
    #[serde(default)]
    pub(super) first_fetches: Option<usize>,
    #[serde(default)]
    pub(super) allow: Option<Vec<i64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawApi {
    pub(super) base_url: String,
    #[serde(default)]
    pub(super) token_file: Option<PathBuf>,
    #[serde(default, with = "humantime_serde")]
    pub(super) timeout: Option<Duration>,
    #[serde(default)]
    pub(super) concurrency: Option<usize>,
    /// Requests per second the provider's contract allows each token, at most.
    #[serde(default)]
    pub(super) rate_limit: Option<f64>,
    #[serde(default)]
    pub(super) max_response_bytes: Option<u64>,
    #[serde(default)]
    pub(super) max_retries: Option<u32>,
    #[serde(default, with = "humantime_serde")]
    pub(super) retry_backoff: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub(super) retry_max_backoff: Option<Duration>,
    #[serde(default)]
    pub(super) circuit_breaker_failures: Option<u32>,
    #[serde(default, with = "humantime_serde")]
    pub(super) circuit_breaker_cooldown: Option<Duration>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCollectors {
    #[serde(default)]
    pub(super) delivery_account: Option<RawDeliveryAccount>,
    #[serde(default)]
    pub(super) tracemail_dashboard: Option<RawDashboard>,
    #[serde(default)]
    pub(super) tracemail_daily: Option<RawDaily>,
    #[serde(default)]
    pub(super) migration: Option<RawMigration>,
    #[serde(default)]
    pub(super) mailbox: Option<RawMailbox>,
}

// Each collector repeats enabled/interval/deadline/max_age: serde cannot `flatten` a shared
// struct into one that denies unknown fields, and unknown keys must be refused.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDashboard {
    #[serde(default = "yes")]
    pub(super) enabled: bool,
    #[serde(default, with = "humantime_serde")]
    pub(super) interval: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub(super) deadline: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub(super) max_age: Option<Duration>,
    #[serde(default)]
    pub(super) timezone: Option<String>,
    #[serde(default)]
    pub(super) date_format: Option<String>,
    #[serde(default)]
    pub(super) limit: Option<i64>,
    #[serde(default)]
    pub(super) views: Vec<RawView>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawView {
    #[serde(default)]
    pub(super) account: Option<i64>,
    #[serde(default)]
    pub(super) domain: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDaily {
    #[serde(default = "yes")]
    pub(super) enabled: bool,
    #[serde(default, with = "humantime_serde")]
    pub(super) interval: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub(super) deadline: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub(super) max_age: Option<Duration>,
    #[serde(default)]
    pub(super) timezone: Option<String>,
    #[serde(default)]
    pub(super) date_format: Option<String>,
    #[serde(default)]
    pub(super) top_domains: Option<i64>,
    #[serde(default)]
    pub(super) accounts: Vec<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMigration {
    #[serde(default = "yes")]
    pub(super) enabled: bool,
    #[serde(default, with = "humantime_serde")]
    pub(super) interval: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub(super) deadline: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub(super) max_age: Option<Duration>,
    #[serde(default)]
    pub(super) migrations: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMailbox {
    #[serde(default = "yes")]
    pub(super) enabled: bool,
    #[serde(default, with = "humantime_serde")]
    pub(super) interval: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub(super) deadline: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub(super) max_age: Option<Duration>,
    #[serde(default)]
    pub(super) mailboxes: Vec<RawMailboxTarget>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMailboxTarget {
    pub(super) domain: String,
    pub(super) mailbox: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDeliveryAccount {
    #[serde(default = "yes")]
    pub(super) enabled: bool,
    #[serde(default, with = "humantime_serde")]
    pub(super) interval: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub(super) deadline: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub(super) max_age: Option<Duration>,
    #[serde(default)]
    pub(super) accounts: Vec<i64>,
}

fn yes() -> bool {
    true
}
