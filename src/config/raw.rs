//! The config file as written, whole: the serde schema of its top level and of a tenant,
//! strict (`deny_unknown_fields`), their `collectors:` blocks beside the blocks of
//! [`crate::settings`].

use std::path::PathBuf;

use serde::Deserialize;

use crate::collectors::{RawCollectors, RawTenantCollectors};
use crate::settings::discovery::RawDiscovery;
use crate::settings::http_client::{RawHttpClient, RawTlsConfig};
use crate::settings::probe::{RawProbe, RawTenantProbe};
use crate::settings::raw_api::RawApi;

/// The file as written; see [`super::Config`] for the validated form.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub(super) api: RawApi,
    #[serde(default)]
    pub(super) collectors: RawCollectors,
    /// One entry per management token; absent, `api` holds the one token.
    pub(super) tenants: Option<Vec<RawTenant>>,
    pub(super) probe: Option<RawProbe>,
    pub(super) discovery: Option<RawDiscovery>,
}

/// One tenant: its token, optionally its own address and concurrency, its static targets.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTenant {
    pub(super) name: String,
    pub(super) token_file: Option<PathBuf>,
    /// The name of an environment variable holding the token.
    pub(super) token_env: Option<String>,
    pub(super) base_url: Option<String>,
    pub(super) concurrency: Option<usize>,
    /// Requests per second the provider's contract allows this token, at most.
    pub(super) rate_limit: Option<f64>,
    /// The same, per endpoint: the tenant's own list replaces `api.endpoint_rate_limits`.
    pub(super) endpoint_rate_limits: Option<std::collections::BTreeMap<String, f64>>,
    /// Prometheus' `http_client_config` keys: the way to the provider.
    pub(super) proxy_url: Option<String>,
    pub(super) no_proxy: Option<String>,
    pub(super) proxy_from_environment: Option<bool>,
    pub(super) tls_config: Option<RawTlsConfig>,
    #[serde(default)]
    pub(super) collectors: RawTenantCollectors,
    pub(super) probe: Option<RawTenantProbe>,
    pub(super) discovery: Option<RawDiscovery>,
}

impl RawTenant {
    pub(super) fn http_client(&mut self) -> RawHttpClient {
        RawHttpClient::take(
            &mut self.proxy_url,
            &mut self.no_proxy,
            &mut self.proxy_from_environment,
            &mut self.tls_config,
        )
    }
}
