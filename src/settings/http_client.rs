//! How the exporter reaches the provider through a corporate network, with the keys of
//! Prometheus' `http_client_config`: `proxy_url`, `no_proxy`, `proxy_from_environment` and
//! `tls_config` (`ca_file`, `cert_file`, `key_file`, `server_name`, `min_version`), under `api:`
//! and per tenant. Files are read and checked when the config is (at start, by
//! `--config.check`, on every reload; not by `--config.syntax-only`); a bad one is refused naming
//! its field.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;

use super::error::{ConfigError, invalid};
use super::outside::Outside;

use crate::redact::{quote, redact_url};

/// A PEM file (certificates or a key) is read up to this many bytes.
const PEM_FILE_BYTES: u64 = 1024 * 1024;
/// Certificates of one `ca_file` or `cert_file`, at most.
const MAX_CERTIFICATES: usize = 1024;
/// Distinct proxy and TLS settings across tenants, at most (each is a connection pool; the
/// transport keeps as many).
pub const MAX_DISTINCT: usize = 64;
/// Characters of `no_proxy`, at most.
const MAX_NO_PROXY_CHARS: usize = 4096;

/// The keys as written, under `api:` or a tenant.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTlsConfig {
    ca_file: Option<PathBuf>,
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    server_name: Option<String>,
    min_version: Option<String>,
}

/// The lowest TLS version offered to the provider.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TlsVersion {
    #[default]
    Tls12,
    Tls13,
}

/// A client certificate and its key for mutual TLS. The key never shows in `Debug`.
#[derive(Clone)]
pub struct ClientIdentity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: Arc<PrivateKeyDer<'static>>,
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ClientIdentity({} certificates, key redacted)",
            self.chain.len()
        )
    }
}

impl PartialEq for ClientIdentity {
    fn eq(&self, other: &Self) -> bool {
        self.chain == other.chain && self.key.secret_der() == other.key.secret_der()
    }
}

impl Eq for ClientIdentity {}

/// TLS towards the provider, beyond the bundled roots.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// Certificates trusted besides the bundled roots (`ca_file`).
    pub ca_certs: Vec<CertificateDer<'static>>,
    pub identity: Option<ClientIdentity>,
    /// The name the provider's certificate must carry, instead of the host of `base_url`.
    pub server_name: Option<String>,
    pub min_version: TlsVersion,
}

/// The way to the provider: proxy and TLS. Tenants with equal settings share a connection pool.
/// `Debug` shows the proxy without its user and password.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct HttpClientSettings {
    /// `http://` or `https://` proxy, reached with CONNECT (it may carry user and password).
    pub proxy_url: Option<String>,
    /// Hosts, domains and networks reached without the proxy, comma-separated.
    pub no_proxy: Option<String>,
    /// Whether `HTTPS_PROXY`, `HTTP_PROXY` and `NO_PROXY` are honoured (off by default, as in
    /// Prometheus: a variable set for something else must not reroute the token).
    pub proxy_from_environment: bool,
    pub tls: TlsSettings,
}

impl std::fmt::Debug for HttpClientSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClientSettings")
            .field("proxy_url", &self.proxy_url.as_deref().map(redact_url))
            .field("no_proxy", &self.no_proxy)
            .field("proxy_from_environment", &self.proxy_from_environment)
            .field("tls", &self.tls)
            .finish()
    }
}

impl HttpClientSettings {
    /// Whether these are the defaults (the shared pool's settings).
    pub fn is_default(&self) -> bool {
        *self == HttpClientSettings::default()
    }
}

/// The settings under `at` (`api` or `tenants[N]`), over `defaults` (a tenant starts from the
/// `api:` block's): each key given replaces the default's; `tls_config` replaces it whole.
pub(crate) fn settings(
    at: &str,
    base_url: &str,
    raw: RawHttpClient,
    defaults: &HttpClientSettings,
    outside: &Outside,
) -> Result<HttpClientSettings, ConfigError> {
    let mut out = defaults.clone();
    if let Some(url) = raw.proxy_url {
        out.proxy_url = Some(proxy_url(&format!("{at}.proxy_url"), &url)?);
    }
    if let Some(hosts) = raw.no_proxy {
        if hosts.chars().count() > MAX_NO_PROXY_CHARS || hosts.chars().any(char::is_control) {
            return Err(invalid(
                format!("{at}.no_proxy"),
                format!(
                    "write at most {MAX_NO_PROXY_CHARS} characters of comma-separated hosts, domains or networks, e.g. localhost,.internal,10.0.0.0/8"
                ),
            ));
        }
        out.no_proxy = Some(hosts);
    }
    if let Some(on) = raw.proxy_from_environment {
        out.proxy_from_environment = on;
    }
    if out.proxy_url.is_some() && out.proxy_from_environment {
        return Err(invalid(
            format!("{at}.proxy_url"),
            "give proxy_url or proxy_from_environment: true, not both",
        ));
    }
    if out.no_proxy.is_some() && out.proxy_url.is_none() {
        return Err(invalid(
            format!("{at}.no_proxy"),
            "applies to proxy_url, which is not set (with proxy_from_environment, set NO_PROXY)",
        ));
    }
    if (out.proxy_url.is_some() || out.proxy_from_environment) && base_url.starts_with("http://") {
        return Err(invalid(
            format!("{at}.proxy_url"),
            "a proxy would see every header of a plain http:// request, the token included: use an https:// base_url, which the proxy only tunnels",
        ));
    }
    if let Some(tls) = raw.tls_config {
        out.tls = tls_settings(&format!("{at}.tls_config"), tls, outside)?;
    }
    Ok(out)
}

/// The HTTP client keys of an `api:` block or a tenant, as written.
#[derive(Debug, Default)]
pub(crate) struct RawHttpClient {
    pub(crate) proxy_url: Option<String>,
    pub(crate) no_proxy: Option<String>,
    pub(crate) proxy_from_environment: Option<bool>,
    pub(crate) tls_config: Option<RawTlsConfig>,
}

impl RawHttpClient {
    /// The keys of a block (`api:` or a tenant), taken out of it.
    pub(crate) fn take(
        proxy_url: &mut Option<String>,
        no_proxy: &mut Option<String>,
        proxy_from_environment: &mut Option<bool>,
        tls_config: &mut Option<RawTlsConfig>,
    ) -> RawHttpClient {
        RawHttpClient {
            proxy_url: proxy_url.take(),
            no_proxy: no_proxy.take(),
            proxy_from_environment: proxy_from_environment.take(),
            tls_config: tls_config.take(),
        }
    }
}

fn proxy_url(field: &str, raw: &str) -> Result<String, ConfigError> {
    let parsed = reqwest::Url::parse(raw);
    match &parsed {
        Ok(u)
            if (u.scheme() == "http" || u.scheme() == "https")
                && u.host().is_some()
                && (u.path().is_empty() || u.path() == "/")
                && u.query().is_none()
                && u.fragment().is_none() =>
        {
            // Checked as reqwest will read it, so that building the pool cannot fail later.
            reqwest::Proxy::all(raw).map_err(|_| {
                invalid(field, "is not a proxy address reqwest can use; write it like http://proxy.example.net:3128")
            })?;
            Ok(raw.to_owned())
        }
        _ => Err(invalid(
            field,
            format!(
                "{} is not a proxy address; write it like http://proxy.example.net:3128 (http or https, a host, optionally user:password@, no path)",
                quote(&redact_url(raw))
            ),
        )),
    }
}

/// The TLS settings under `at`; the files are read unless `outside` leaves them (then the
/// settings have neither extra roots nor a client identity).
fn tls_settings(
    at: &str,
    raw: RawTlsConfig,
    outside: &Outside,
) -> Result<TlsSettings, ConfigError> {
    let ca_field = format!("{at}.ca_file");
    let ca_certs = match &raw.ca_file {
        Some(path) if !outside.leaves(&ca_field) => certificates(&ca_field, path)?,
        _ => Vec::new(),
    };
    let identity = match (&raw.cert_file, &raw.key_file) {
        (None, None) => None,
        (Some(_), None) | (None, Some(_)) => {
            return Err(invalid(
                at,
                "give cert_file and key_file together (a client certificate and its key), or neither",
            ));
        }
        (Some(cert), Some(key)) => {
            let (cert_field, key_field) = (format!("{at}.cert_file"), format!("{at}.key_file"));
            // `leaves` answers alike for every field, so both are noted or neither.
            if outside.leaves(&cert_field) && outside.leaves(&key_field) {
                None
            } else {
                Some(ClientIdentity {
                    chain: certificates(&cert_field, cert)?,
                    key: Arc::new(private_key(&key_field, key)?),
                })
            }
        }
    };
    if let Some(name) = &raw.server_name
        && rustls::pki_types::ServerName::try_from(name.as_str()).is_err()
    {
        return Err(invalid(
            format!("{at}.server_name"),
            format!(
                "{} is not a host name or IP address; write the name the provider's certificate carries, e.g. api.example.net",
                quote(name)
            ),
        ));
    }
    let min_version = match raw.min_version.as_deref() {
        None | Some("TLS12") => TlsVersion::Tls12,
        Some("TLS13") => TlsVersion::Tls13,
        Some(other) => {
            return Err(invalid(
                format!("{at}.min_version"),
                format!(
                    "{} is not offered: use TLS12 or TLS13 (older versions are not spoken)",
                    quote(other)
                ),
            ));
        }
    };
    Ok(TlsSettings {
        ca_certs,
        identity,
        server_name: raw.server_name,
        min_version,
    })
}

/// The text of a PEM file, bounded; `field` names it in messages.
fn pem_file(field: &str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    match crate::files::read_bounded(path, PEM_FILE_BYTES) {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err(invalid(
            field,
            format!(
                "the file it names is larger than {PEM_FILE_BYTES} bytes; it should hold PEM text"
            ),
        )),
        Err(e) => Err(invalid(
            field,
            format!(
                "cannot read {} ({e}); check the path",
                quote(&path.display().to_string())
            ),
        )),
    }
}

/// The certificates of a PEM file: at least one, at most [`MAX_CERTIFICATES`].
fn certificates(field: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let bytes = pem_file(field, path)?;
    let mut certs = Vec::new();
    for cert in rustls_pemfile::certs(&mut bytes.as_slice()) {
        let cert =
            cert.map_err(|e| invalid(field, format!("the file it names is not valid PEM ({e})")))?;
        if certs.len() == MAX_CERTIFICATES {
            return Err(invalid(
                field,
                format!("the file it names holds more than {MAX_CERTIFICATES} certificates"),
            ));
        }
        // Checked as a trust anchor now, so that building the pool cannot fail later.
        let mut store = rustls::RootCertStore::empty();
        store.add(cert.clone()).map_err(|why| {
            invalid(
                field,
                format!("holds a certificate that cannot be read ({why})"),
            )
        })?;
        certs.push(cert);
    }
    if certs.is_empty() {
        return Err(invalid(
            field,
            "the file it names holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
        ));
    }
    Ok(certs)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1). Its contents are never quoted.
fn private_key(field: &str, path: &Path) -> Result<PrivateKeyDer<'static>, ConfigError> {
    let bytes = pem_file(field, path)?;
    rustls_pemfile::private_key(&mut bytes.as_slice())
        .ok()
        .flatten()
        .ok_or_else(|| {
            invalid(
                field,
                "the file it names holds no PEM private key (-----BEGIN PRIVATE KEY-----, RSA or EC)",
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn a_client_key_is_never_shown_by_debug() {
        let id = ClientIdentity {
            chain: Vec::new(),
            key: Arc::new(PrivateKeyDer::Pkcs8(
                vec![0x53, 0x45, 0x43, 0x52, 0x45, 0x54].into(),
            )),
        };
        let shown = format!("{id:?}");
        assert!(
            shown.contains("redacted") && !shown.contains("83"),
            "{shown}"
        );
    }
}
