//! The web config file as written: the exporter toolkit's schema, checked for unknown keys.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// The file as written. Fields that the toolkit of promtool 2.42 accepts are all here, so a
/// file that `promtool check web-config` passes also loads.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWebConfig {
    pub(super) tls_server_config: Option<RawTls>,
    pub(super) http_server_config: Option<RawHttp>,
    /// user -> bcrypt hash; a plain map so that `Debug` never runs on it outside this module.
    pub(super) basic_auth_users: Option<BTreeMap<String, Option<String>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTls {
    pub(super) cert_file: Option<PathBuf>,
    pub(super) key_file: Option<PathBuf>,
    pub(super) client_auth_type: Option<String>,
    pub(super) client_ca_file: Option<PathBuf>,
    pub(super) cipher_suites: Option<Vec<String>>,
    pub(super) curve_preferences: Option<Vec<String>>,
    pub(super) min_version: Option<String>,
    pub(super) max_version: Option<String>,
    pub(super) prefer_server_cipher_suites: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHttp {
    pub(super) http2: Option<bool>,
    pub(super) headers: Option<BTreeMap<String, String>>,
}
