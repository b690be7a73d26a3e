//! The config file as written: the serde schema, strict (`deny_unknown_fields`), with every key
//! optional that has a default. [`super::validate`] turns it into the validated [`super::Config`].

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::area::{RawCollectors, RawTenantCollectors};

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
    /// The same, per endpoint: the tenant's own list replaces `api.endpoint_rate_limits`.
    #[serde(default)]
    pub(super) endpoint_rate_limits: Option<std::collections::BTreeMap<String, f64>>,
    /// Prometheus' `http_client_config` keys: the way to the provider.
    #[serde(default)]
    pub(super) proxy_url: Option<String>,
    #[serde(default)]
    pub(super) no_proxy: Option<String>,
    #[serde(default)]
    pub(super) proxy_from_environment: Option<bool>,
    #[serde(default)]
    pub(super) tls_config: Option<super::http_client::RawTlsConfig>,
    #[serde(default)]
    pub(super) collectors: RawTenantCollectors,
    #[serde(default)]
    pub(super) probe: Option<RawTenantProbe>,
    #[serde(default)]
    pub(super) discovery: Option<RawDiscovery>,
}

impl RawTenant {
    pub(super) fn http_client(&mut self) -> super::http_client::RawHttpClient {
        super::http_client::RawHttpClient::take(
            &mut self.proxy_url,
            &mut self.no_proxy,
            &mut self.proxy_from_environment,
            &mut self.tls_config,
        )
    }
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
    /// Requests per second the provider's contract allows each token on one endpoint, at most.
    #[serde(default)]
    pub(super) endpoint_rate_limits: Option<std::collections::BTreeMap<String, f64>>,
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
    /// Prometheus' `http_client_config` keys: the way to the provider.
    #[serde(default)]
    pub(super) proxy_url: Option<String>,
    #[serde(default)]
    pub(super) no_proxy: Option<String>,
    #[serde(default)]
    pub(super) proxy_from_environment: Option<bool>,
    #[serde(default)]
    pub(super) tls_config: Option<super::http_client::RawTlsConfig>,
}

impl RawApi {
    pub(super) fn http_client(&mut self) -> super::http_client::RawHttpClient {
        super::http_client::RawHttpClient::take(
            &mut self.proxy_url,
            &mut self.no_proxy,
            &mut self.proxy_from_environment,
            &mut self.tls_config,
        )
    }
}
