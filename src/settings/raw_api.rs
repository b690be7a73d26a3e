//! The `api:` block as written (and each tenant's API keys): the serde schema, strict
//! (`deny_unknown_fields`), with every key optional that has a default. [`super::validate`]
//! turns it into an [`super::ApiConfig`]; `crate::config` reads the whole file.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// The `api:` block.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawApi {
    pub(crate) base_url: String,
    pub(crate) token_file: Option<PathBuf>,
    #[serde(default, with = "humantime_serde")]
    pub(crate) timeout: Option<Duration>,
    pub(crate) concurrency: Option<usize>,
    /// Requests per second the provider's contract allows each token, at most.
    pub(crate) rate_limit: Option<f64>,
    /// Requests per second the provider's contract allows each token on one endpoint, at most.
    pub(crate) endpoint_rate_limits: Option<std::collections::BTreeMap<String, f64>>,
    pub(crate) max_response_bytes: Option<u64>,
    pub(crate) max_retries: Option<u32>,
    #[serde(default, with = "humantime_serde")]
    pub(crate) retry_backoff: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub(crate) retry_max_backoff: Option<Duration>,
    pub(crate) circuit_breaker_failures: Option<u32>,
    #[serde(default, with = "humantime_serde")]
    pub(crate) circuit_breaker_cooldown: Option<Duration>,
    /// Prometheus' `http_client_config` keys: the way to the provider.
    pub(crate) proxy_url: Option<String>,
    pub(crate) no_proxy: Option<String>,
    pub(crate) proxy_from_environment: Option<bool>,
    pub(crate) tls_config: Option<super::http_client::RawTlsConfig>,
}

impl RawApi {
    pub(crate) fn http_client(&mut self) -> super::http_client::RawHttpClient {
        super::http_client::RawHttpClient::take(
            &mut self.proxy_url,
            &mut self.no_proxy,
            &mut self.proxy_from_environment,
            &mut self.tls_config,
        )
    }
}
