//! The settings: the config's parts below the collectors. The field parsers and errors every
//! collector's block uses (`fields`, `error`, `schedule`, `date_format`), the defaults and
//! bounds, the API and HTTP client settings the upstream client runs with, what a config names
//! outside itself (`outside`), and the validation of the blocks no collector shapes. The whole
//! file, with their `collectors:` blocks, is read above the collectors, in [`crate::config`].

pub mod date_format;
pub mod defaults;
pub mod discovery;
pub mod error;
pub mod fields;
pub mod http_client;
pub mod limits;
pub mod outside;
pub mod probe;
pub(crate) mod raw_api;
pub mod schedule;
pub mod validate;

pub use date_format::DateFormat;
pub use discovery::DiscoveryConfig;
pub use error::{ConfigError, invalid};
pub use outside::Outside;
pub use probe::ProbeConfig;
pub use schedule::Schedule;

pub(crate) use validate::describe_yaml_error;

use std::collections::BTreeMap;
use std::time::Duration;

use secrecy::SecretString;

/// Environment variable that may hold the Management API token instead of `api.token_file`.
pub const TOKEN_ENV: &str = "MAILHOST_API_TOKEN";

/// What an empty (or comments-only) config file is told.
pub const EMPTY_CONFIG: &str = "the config file is empty: start from examples/config.yml; at least api.base_url and one collector are needed";

/// How a collector logs the targets that fail: the one knob for per-target failures in the log.
/// The series (`mailhost_target_failure_info`) and `/probe?debug=true` say the same whatever it
/// is set to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum TargetFailureLog {
    /// Nothing at warn level; every failure still at debug.
    None,
    /// One warn line per failure reason per collector per interval, naming a few targets.
    #[default]
    Summary,
    /// One warn line per failing target per run, with its reason and detail.
    Target,
}

#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// Base address without a trailing slash, `http` or `https`.
    pub base_url: String,
    pub token: SecretString,
    pub timeout: Duration,
    pub concurrency: usize,
    /// Requests per second the token may make at most (`rate_limit`): a ceiling the pacer never
    /// goes past, for providers whose contract states one; `None` leaves the pace to what the
    /// provider answers.
    pub rate_limit: Option<f64>,
    /// Requests per second the token may make at most on one endpoint (`endpoint_rate_limits`,
    /// by the `endpoint` label's value), for providers whose contract limits an endpoint on its
    /// own; the endpoints not named are paced by what the provider answers.
    pub endpoint_rate_limits: BTreeMap<String, f64>,
    pub max_response_bytes: u64,
    pub retry: RetryPolicy,
    pub breaker: BreakerPolicy,
    /// Proxy and TLS towards the provider.
    pub http: http_client::HttpClientSettings,
}

/// How read calls are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 = none).
    pub max_retries: u32,
    /// The first back-off; each retry doubles it, up to `max_backoff`, with jitter.
    pub backoff: Duration,
    pub max_backoff: Duration,
}

/// When an endpoint's circuit opens, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerPolicy {
    /// Consecutive failed calls that open the circuit (0 = never).
    pub failures: u32,
    /// How long it stays open before one probe call is let through.
    pub cooldown: Duration,
}

/// The config's defaults (`circuit_breaker_failures`, `circuit_breaker_cooldown`).
impl Default for BreakerPolicy {
    fn default() -> Self {
        BreakerPolicy {
            failures: defaults::BREAKER_FAILURES,
            cooldown: defaults::BREAKER_COOLDOWN,
        }
    }
}
