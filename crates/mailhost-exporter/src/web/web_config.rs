//! `--web.config.file`: TLS, client certificates, basic auth users and extra response headers,
//! in the schema of the Prometheus exporter toolkit
//! (<https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md>).
//! Everything is read and checked by [`WebConfig::load`], so a bad file stops the exporter at
//! start instead of failing the first scrape. [`LiveWebConfig`] reads the file again on reload:
//! users and headers are taken per request and the TLS config per handshake, as the toolkit
//! does, and a bad new file leaves the old one serving.

use std::collections::BTreeMap;
use std::fmt;
use std::hash::{DefaultHasher, Hash as _, Hasher as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, SupportedKxGroup};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme,
    SupportedCipherSuite, SupportedProtocolVersion,
};
use serde::Deserialize;

use crate::web::auth::{self, Users};

/// Where the schema is documented; quoted in messages about unknown keys.
const SCHEMA_DOC: &str =
    "https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md";

#[derive(Debug, thiserror::Error)]
pub enum WebConfigError {
    #[error("--web.config.file: cannot read {path}: {source}; point it at a readable YAML file")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The YAML does not fit the schema; serde names the offending key and where it is.
    #[error("{0}")]
    Syntax(String),
    #[error("{field}: {problem}")]
    Invalid { field: String, problem: String },
}

fn invalid(field: impl Into<String>, problem: impl Into<String>) -> WebConfigError {
    WebConfigError::Invalid {
        field: field.into(),
        problem: problem.into(),
    }
}

/// The file as written. Fields that the toolkit of promtool 2.42 accepts are all here, so a
/// file that `promtool check web-config` passes also loads.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWebConfig {
    #[serde(default)]
    tls_server_config: Option<RawTls>,
    #[serde(default)]
    http_server_config: Option<RawHttp>,
    /// user -> bcrypt hash; a plain map so that `Debug` never runs on it outside this module.
    #[serde(default)]
    basic_auth_users: Option<BTreeMap<String, Option<String>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTls {
    #[serde(default)]
    cert_file: Option<PathBuf>,
    #[serde(default)]
    key_file: Option<PathBuf>,
    #[serde(default)]
    client_auth_type: Option<String>,
    #[serde(default)]
    client_ca_file: Option<PathBuf>,
    #[serde(default)]
    cipher_suites: Option<Vec<String>>,
    #[serde(default)]
    curve_preferences: Option<Vec<String>>,
    #[serde(default)]
    min_version: Option<String>,
    #[serde(default)]
    max_version: Option<String>,
    #[serde(default)]
    prefer_server_cipher_suites: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    #[serde(default)]
    http2: Option<bool>,
    #[serde(default)]
    headers: Option<BTreeMap<String, String>>,
}

/// The validated web configuration: the TLS server config (certificates already loaded),
/// the basic auth users and the extra response headers.
#[derive(Clone, Default)]
pub struct WebConfig {
    tls: Option<Arc<ServerConfig>>,
    users: Users,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// The file it was loaded from, read again on reload.
    source: Option<PathBuf>,
    /// A digest of the file and of the certificate, key and CA files it names, to tell an
    /// unchanged config on reload (and keep its caches).
    fingerprint: u64,
    /// The certificate, key and CA files read, for the fingerprint.
    files: Vec<PathBuf>,
}

impl fmt::Debug for WebConfig {
    // Users' Debug prints names only; the TLS config is summarised, not dumped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebConfig")
            .field("tls", &self.tls.is_some())
            .field("users", &self.users)
            .field("headers", &self.headers)
            .finish()
    }
}

impl WebConfig {
    /// Reads and validates the file, and reads the certificates and keys it names (relative
    /// paths are taken from the file's folder), so that every error surfaces at start.
    pub fn load(path: &Path) -> Result<WebConfig, WebConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| WebConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let dir = path.parent().unwrap_or(Path::new(""));
        let mut config = Self::parse(&text, dir)?;
        config.source = Some(path.to_owned());
        config.fingerprint = fingerprint(&text, &config.files);
        Ok(config)
    }

    /// The file this config was loaded from, if any.
    pub fn source(&self) -> Option<&Path> {
        self.source.as_deref()
    }

    /// Parses YAML text whose relative paths are relative to `dir`; see [`WebConfig::load`].
    pub fn parse(text: &str, dir: &Path) -> Result<WebConfig, WebConfigError> {
        // An empty file (or one of comments only) is a valid, empty config, as for the toolkit.
        let raw: RawWebConfig = serde_yaml_ng::from_str::<Option<RawWebConfig>>(text)
            .map_err(|e| WebConfigError::Syntax(describe_yaml_error(&e)))?
            .unwrap_or_default();
        let http = raw.http_server_config.unwrap_or_default();
        let headers = headers(http.headers.unwrap_or_default())?;
        let users = users(raw.basic_auth_users.unwrap_or_default())?;
        let mut files = Vec::new();
        let tls = match raw.tls_server_config {
            Some(t) if t.is_enabled() => {
                files = t.files(dir);
                Some(Arc::new(tls(t, dir, http.http2.unwrap_or(true))?))
            }
            _ => None,
        };
        Ok(WebConfig {
            tls,
            users,
            headers,
            source: None,
            fingerprint: 0,
            files,
        })
    }

    /// The TLS server config, or `None` to serve plain HTTP.
    pub fn tls(&self) -> Option<Arc<ServerConfig>> {
        self.tls.clone()
    }

    /// The basic auth users; empty means no authentication.
    pub fn users(&self) -> &Users {
        &self.users
    }

    /// Extra response headers from `http_server_config.headers`.
    pub fn headers(&self) -> &[(HeaderName, HeaderValue)] {
        &self.headers
    }

    /// Wraps `router` in the configured headers and basic auth. The headers are set on every
    /// response, a 401 included, as the exporter toolkit does.
    pub fn apply(&self, router: Router) -> Router {
        LiveWebConfig::new(self.clone()).apply(router)
    }
}

/// A digest of the config text and the files it names; a file that cannot be read counts as
/// empty (the reload that follows refuses it anyway).
fn fingerprint(text: &str, files: &[PathBuf]) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    for file in files {
        file.hash(&mut h);
        std::fs::read(file).unwrap_or_default().hash(&mut h);
    }
    h.finish()
}

/// What a reload did with the web config; its text never quotes a secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebReload {
    /// No `--web.config.file`: nothing to reload.
    NoFile,
    Reloaded,
    Unchanged,
    /// The new file is bad or asks for what a reload cannot do; the old config keeps serving.
    Refused(String),
}

impl WebReload {
    pub fn is_refused(&self) -> bool {
        matches!(self, WebReload::Refused(_))
    }
}

impl fmt::Display for WebReload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WebReload::NoFile => Ok(()),
            WebReload::Reloaded => f.write_str("web config reloaded"),
            WebReload::Unchanged => f.write_str("web config unchanged"),
            WebReload::Refused(why) => write!(
                f,
                "web config refused: {why}; the previous web config keeps serving"
            ),
        }
    }
}

/// The web config in force, swapped whole on reload. Clones share it.
#[derive(Clone)]
pub struct LiveWebConfig {
    current: Arc<ArcSwap<WebConfig>>,
    /// The TLS config handed to the accept loop, read at each handshake; `None` for plain
    /// HTTP, which a reload cannot change.
    tls: Option<crate::web::serve::LiveTls>,
}

impl fmt::Debug for LiveWebConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("LiveWebConfig")
            .field(&*self.current.load())
            .finish()
    }
}

impl LiveWebConfig {
    pub fn new(config: WebConfig) -> LiveWebConfig {
        let tls = config.tls.clone().map(|t| Arc::new(ArcSwap::new(t)));
        LiveWebConfig {
            current: Arc::new(ArcSwap::from_pointee(config)),
            tls,
        }
    }

    /// The config in force now.
    pub fn current(&self) -> Arc<WebConfig> {
        self.current.load_full()
    }

    /// The TLS config for the accept loop, or `None` to serve plain HTTP.
    pub fn tls(&self) -> Option<crate::web::serve::LiveTls> {
        self.tls.clone()
    }

    /// Wraps `router` in the basic auth and headers of the config in force at each request.
    pub fn apply(&self, router: Router) -> Router {
        router.layer(axum::middleware::from_fn_with_state(
            self.clone(),
            web_layer,
        ))
    }

    /// Reads the file again. A new, valid file takes effect for the next request and the next
    /// TLS handshake; a bad one, or one that switches TLS on or off (which needs a new
    /// listener), is refused and the old config keeps serving.
    pub fn reload(&self) -> WebReload {
        let old = self.current.load_full();
        let Some(path) = old.source.clone() else {
            return WebReload::NoFile;
        };
        let new = match WebConfig::load(&path) {
            Ok(new) => new,
            Err(e) => return self.refused(e.to_string()),
        };
        if new.fingerprint == old.fingerprint {
            return WebReload::Unchanged;
        }
        if new.tls.is_some() != old.tls.is_some() {
            let now = if old.tls.is_some() { "on" } else { "off" };
            return self.refused(format!(
                "tls_server_config: TLS is {now} and cannot be switched by a reload; restart the exporter to change it"
            ));
        }
        let users = new.users.clone().sharing_gate_of(&old.users);
        let new = WebConfig { users, ..new };
        if let (Some(live), Some(tls)) = (&self.tls, &new.tls) {
            live.store(tls.clone());
        }
        self.current.store(Arc::new(new));
        tracing::info!("web config reloaded");
        WebReload::Reloaded
    }

    fn refused(&self, why: String) -> WebReload {
        tracing::error!(reason = %why, "web config reload refused; the previous web config keeps serving");
        WebReload::Refused(why)
    }
}

async fn web_layer(State(live): State<LiveWebConfig>, request: Request, next: Next) -> Response {
    let config = live.current();
    let mut response = match auth::authorize(&config.users, &request).await {
        Ok(()) => next.run(request).await,
        Err(refusal) => refusal,
    };
    for (name, value) in &config.headers {
        response.headers_mut().insert(name.clone(), value.clone());
    }
    response
}

/// serde_yaml_ng prefixes the path of the offending key; add where the schema is described.
/// Quoted values are hidden: the value in the wrong place may be a hash or a password.
fn describe_yaml_error(e: &serde_yaml_ng::Error) -> String {
    let msg = crate::redact::yaml_error(e);
    if msg.contains("unknown field") {
        format!("{msg} (remove or correct the key; see {SCHEMA_DOC})")
    } else {
        msg
    }
}

/// The headers the toolkit lets an operator set, with their allowed values where those are an
/// enumeration; kept identical so that one file works for every exporter.
const ALLOWED_HEADERS: &[(&str, &[&str])] = &[
    ("Strict-Transport-Security", &[]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-XSS-Protection", &[]),
    ("Content-Security-Policy", &[]),
];

fn headers(
    raw: BTreeMap<String, String>,
) -> Result<Vec<(HeaderName, HeaderValue)>, WebConfigError> {
    let mut out = Vec::with_capacity(raw.len());
    for (name, value) in raw {
        let field = format!("http_server_config.headers.{name}");
        let Some((_, allowed)) = ALLOWED_HEADERS.iter().find(|(n, _)| *n == name) else {
            let names: Vec<&str> = ALLOWED_HEADERS.iter().map(|(n, _)| *n).collect();
            return Err(invalid(
                field,
                format!(
                    "this header cannot be configured; use one of {}",
                    names.join(", ")
                ),
            ));
        };
        if !allowed.is_empty() && !allowed.contains(&value.as_str()) {
            return Err(invalid(
                field,
                format!(
                    "{value:?} is not allowed; use one of {}",
                    allowed.join(", ")
                ),
            ));
        }
        let value = HeaderValue::from_str(&value).map_err(|_| {
            invalid(
                &field,
                "is not a valid header value; use visible ASCII characters only",
            )
        })?;
        let name = HeaderName::from_bytes(name.as_bytes()).expect("the allowed names are valid");
        out.push((name, value));
    }
    Ok(out)
}

fn users(raw: BTreeMap<String, Option<String>>) -> Result<Users, WebConfigError> {
    let mut hashes = BTreeMap::new();
    for (user, hash) in raw {
        let field = format!("basic_auth_users.{user}");
        if user.contains(':') {
            // The toolkit accepts it, so we do; but basic auth splits on ':', so nobody can
            // log in as this user.
            tracing::warn!(%user, "basic_auth_users: a user name with ':' can never log in");
        }
        let hash = hash.unwrap_or_default();
        if let Err(problem) = auth::check_hash(&hash) {
            return Err(invalid(
                field,
                format!(
                    "{problem}; write a bcrypt hash such as the output of `htpasswd -nbBC 10 \"\" PASSWORD | tr -d ':\\n'`"
                ),
            ));
        }
        hashes.insert(user, hash);
    }
    Ok(Users::from_checked(hashes))
}

/// `client_auth_type`, named as in Go's `crypto/tls`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientAuth {
    NoClientCert,
    RequestClientCert,
    RequireAnyClientCert,
    VerifyClientCertIfGiven,
    RequireAndVerifyClientCert,
}

impl ClientAuth {
    fn parse(s: &str) -> Option<ClientAuth> {
        Some(match s {
            "" | "NoClientCert" => ClientAuth::NoClientCert,
            "RequestClientCert" => ClientAuth::RequestClientCert,
            // The toolkit keeps the old name for compatibility.
            "RequireAnyClientCert" | "RequireClientCert" => ClientAuth::RequireAnyClientCert,
            "VerifyClientCertIfGiven" => ClientAuth::VerifyClientCertIfGiven,
            "RequireAndVerifyClientCert" => ClientAuth::RequireAndVerifyClientCert,
            _ => return None,
        })
    }

    fn verifies(self) -> bool {
        matches!(
            self,
            ClientAuth::VerifyClientCertIfGiven | ClientAuth::RequireAndVerifyClientCert
        )
    }
}

impl fmt::Display for ClientAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl RawTls {
    /// The certificate, key and CA files named, resolved.
    fn files(&self, dir: &Path) -> Vec<PathBuf> {
        [&self.cert_file, &self.key_file, &self.client_ca_file]
            .into_iter()
            .flatten()
            .map(|p| resolve(dir, p))
            .collect()
    }

    /// As the toolkit: any of these set means TLS is wanted (and must then be complete).
    fn is_enabled(&self) -> bool {
        let set = |p: &Option<PathBuf>| p.as_ref().is_some_and(|p| !p.as_os_str().is_empty());
        set(&self.cert_file)
            || set(&self.key_file)
            || set(&self.client_ca_file)
            || self
                .client_auth_type
                .as_ref()
                .is_some_and(|s| !s.is_empty())
    }
}

/// Paths relative to the web config file's folder, as the toolkit's `JoinDir`.
fn resolve(dir: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_owned()
    } else {
        dir.join(path)
    }
}

fn required(
    dir: &Path,
    path: Option<PathBuf>,
    field: &str,
    what: &str,
) -> Result<PathBuf, WebConfigError> {
    match path {
        Some(p) if !p.as_os_str().is_empty() => Ok(resolve(dir, &p)),
        _ => Err(invalid(
            format!("tls_server_config.{field}"),
            format!("is required when tls_server_config is set; point it at {what}"),
        )),
    }
}

fn read(path: &Path, field: &str, what: &str) -> Result<Vec<u8>, WebConfigError> {
    std::fs::read(path).map_err(|e| {
        invalid(
            format!("tls_server_config.{field}"),
            format!("cannot read {}: {e}; point it at {what}", path.display()),
        )
    })
}

fn certificates(
    path: &Path,
    field: &str,
    what: &str,
) -> Result<Vec<CertificateDer<'static>>, WebConfigError> {
    let pem = read(path, field, what)?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<_, _>>()
        .map_err(|e| {
            invalid(
                format!("tls_server_config.{field}"),
                format!(
                    "{} is not valid PEM ({e}); point it at {what}",
                    path.display()
                ),
            )
        })?;
    if certs.is_empty() {
        return Err(invalid(
            format!("tls_server_config.{field}"),
            format!(
                "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----); point it at {what}",
                path.display()
            ),
        ));
    }
    Ok(certs)
}

const CERT_WHAT: &str = "the server certificate (chain) in PEM";
const KEY_WHAT: &str = "the certificate's private key in PEM";
const CA_WHAT: &str = "the PEM file of the CA that signs client certificates";

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, WebConfigError> {
    let pem = read(path, "key_file", KEY_WHAT)?;
    // Never quote the key's bytes: only the path and what is wrong.
    match rustls_pemfile::private_key(&mut pem.as_slice()) {
        Ok(Some(key)) => Ok(key),
        Ok(None) => Err(invalid(
            "tls_server_config.key_file",
            format!(
                "{} holds no PEM private key (PKCS#8, PKCS#1 or SEC1); point it at {KEY_WHAT}",
                path.display()
            ),
        )),
        Err(_) => Err(invalid(
            "tls_server_config.key_file",
            format!(
                "{} is not valid PEM; point it at {KEY_WHAT}",
                path.display()
            ),
        )),
    }
}

/// The TLS versions rustls speaks, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum TlsVersion {
    Tls12,
    Tls13,
}

impl TlsVersion {
    fn rustls(self) -> &'static SupportedProtocolVersion {
        match self {
            TlsVersion::Tls12 => &rustls::version::TLS12,
            TlsVersion::Tls13 => &rustls::version::TLS13,
        }
    }
}

/// A `min_version` or `max_version`; the bool says whether TLS10 or TLS11 was asked for,
/// which the toolkit accepts and rustls does not speak.
fn version(
    field: &str,
    value: Option<&str>,
    default: TlsVersion,
) -> Result<(TlsVersion, bool), WebConfigError> {
    match value.unwrap_or("") {
        "" => Ok((default, false)),
        "TLS13" => Ok((TlsVersion::Tls13, false)),
        "TLS12" => Ok((TlsVersion::Tls12, false)),
        "TLS10" | "TLS11" => Ok((TlsVersion::Tls12, true)),
        other => Err(invalid(
            format!("tls_server_config.{field}"),
            format!("{other:?} is not a TLS version; use TLS12 or TLS13"),
        )),
    }
}

/// Cipher suites Go's `crypto/tls` knows but the ring provider lacks (CBC and RSA key
/// exchange): a file listing them passes promtool, so they are skipped with a warning.
const GO_ONLY_CIPHER_SUITES: &[&str] = &[
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
];

/// TLS 1.3 suites as Go names them; Go does not let them be configured, so neither do we.
const GO_TLS13_CIPHER_SUITES: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

/// `cipher_suites` restricts the TLS 1.2 suites only, as in Go; TLS 1.3 keeps all of its own.
fn cipher_suites(names: &[String]) -> Result<Vec<SupportedCipherSuite>, WebConfigError> {
    let all = rustls::crypto::ring::default_provider().cipher_suites;
    let mut chosen: Vec<SupportedCipherSuite> = all
        .iter()
        .filter(|s| s.version() == &rustls::version::TLS13)
        .copied()
        .collect();
    for name in names {
        if let Some(s) = all
            .iter()
            .find(|s| s.version() == &rustls::version::TLS12 && s.suite().as_str() == Some(name))
        {
            if !chosen.contains(s) {
                chosen.push(*s);
            }
        } else if GO_ONLY_CIPHER_SUITES.contains(&name.as_str()) {
            tracing::warn!(
                cipher_suite = %name,
                "tls_server_config.cipher_suites: not supported by this exporter's TLS library; skipped"
            );
        } else if !GO_TLS13_CIPHER_SUITES.contains(&name.as_str()) {
            return Err(invalid(
                "tls_server_config.cipher_suites",
                format!(
                    "{name:?} is not a known cipher suite; use names such as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
                ),
            ));
        }
    }
    Ok(chosen)
}

fn curves(names: &[String]) -> Result<Vec<&'static dyn SupportedKxGroup>, WebConfigError> {
    use rustls::crypto::ring::kx_group;
    let mut out: Vec<&'static dyn SupportedKxGroup> = Vec::new();
    for name in names {
        let group = match name.as_str() {
            "X25519" => kx_group::X25519,
            "CurveP256" => kx_group::SECP256R1,
            "CurveP384" => kx_group::SECP384R1,
            "CurveP521" => {
                tracing::warn!(
                    curve = %name,
                    "tls_server_config.curve_preferences: not supported by this exporter's TLS library; skipped"
                );
                continue;
            }
            _ => {
                return Err(invalid(
                    "tls_server_config.curve_preferences",
                    format!("{name:?} is not a known curve; use X25519, CurveP256 or CurveP384"),
                ));
            }
        };
        if !out.iter().any(|g| g.name() == group.name()) {
            out.push(group);
        }
    }
    if out.is_empty() {
        return Err(invalid(
            "tls_server_config.curve_preferences",
            "none of the listed curves is supported; add X25519, CurveP256 or CurveP384",
        ));
    }
    Ok(out)
}

fn tls(raw: RawTls, dir: &Path, http2: bool) -> Result<ServerConfig, WebConfigError> {
    let auth_name = raw.client_auth_type.clone().unwrap_or_default();
    let client_auth = ClientAuth::parse(&auth_name).ok_or_else(|| {
        invalid(
            "tls_server_config.client_auth_type",
            format!(
                "{auth_name:?} is not a client auth type; use NoClientCert, RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert"
            ),
        )
    })?;
    let cert_path = required(dir, raw.cert_file, "cert_file", CERT_WHAT)?;
    let key_path = required(dir, raw.key_file, "key_file", KEY_WHAT)?;
    let ca_path = raw
        .client_ca_file
        .filter(|p| !p.as_os_str().is_empty())
        .map(|p| resolve(dir, &p));

    // Checks of the file alone come before any certificate is read.
    if client_auth.verifies() && ca_path.is_none() {
        return Err(invalid(
            "tls_server_config.client_ca_file",
            format!("is required when client_auth_type is {client_auth}; point it at {CA_WHAT}"),
        ));
    }
    if ca_path.is_some() && client_auth == ClientAuth::NoClientCert {
        return Err(invalid(
            "tls_server_config.client_auth_type",
            "client_ca_file is set but client_auth_type is NoClientCert; set client_auth_type to RequireAndVerifyClientCert (or VerifyClientCertIfGiven), or remove client_ca_file",
        ));
    }

    let (min, min_old) = version("min_version", raw.min_version.as_deref(), TlsVersion::Tls12)?;
    let (max, max_old) = version("max_version", raw.max_version.as_deref(), TlsVersion::Tls13)?;
    if max_old {
        return Err(invalid(
            "tls_server_config.max_version",
            "TLS10 and TLS11 are not supported; this exporter speaks TLS12 and TLS13: set max_version to TLS12 or TLS13",
        ));
    }
    if min_old {
        tracing::warn!(
            "tls_server_config.min_version: TLS10 and TLS11 are not supported; TLS12 is the minimum"
        );
    }
    if min > max {
        return Err(invalid(
            "tls_server_config.min_version",
            "TLS13 is above max_version TLS12; raise max_version or lower min_version",
        ));
    }
    let versions: Vec<&'static SupportedProtocolVersion> = [TlsVersion::Tls12, TlsVersion::Tls13]
        .into_iter()
        .filter(|v| (min..=max).contains(v))
        .map(TlsVersion::rustls)
        .collect();

    let mut provider = rustls::crypto::ring::default_provider();
    if let Some(names) = raw.cipher_suites.as_deref().filter(|n| !n.is_empty()) {
        provider.cipher_suites = cipher_suites(names)?;
        let tls12 = provider
            .cipher_suites
            .iter()
            .any(|s| s.version() == &rustls::version::TLS12);
        if !tls12 && max < TlsVersion::Tls13 {
            return Err(invalid(
                "tls_server_config.cipher_suites",
                "none of the listed TLS 1.2 suites is supported and TLS 1.3 is off; add TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 (or the ECDSA one) or allow max_version TLS13",
            ));
        }
    }
    if let Some(names) = raw.curve_preferences.as_deref().filter(|n| !n.is_empty()) {
        provider.kx_groups = curves(names)?;
    }
    let provider = Arc::new(provider);

    let certs = certificates(&cert_path, "cert_file", CERT_WHAT)?;
    let key = private_key(&key_path)?;

    let roots = match &ca_path {
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for (i, cert) in certificates(path, "client_ca_file", CA_WHAT)?
                .into_iter()
                .enumerate()
            {
                roots.add(cert).map_err(|e| {
                    invalid(
                        "tls_server_config.client_ca_file",
                        format!(
                            "certificate {} in {} is not a usable CA certificate ({e}); point it at {CA_WHAT}",
                            i + 1,
                            path.display()
                        ),
                    )
                })?;
            }
            Some(Arc::new(roots))
        }
        None => None,
    };
    let verifier: Arc<dyn ClientCertVerifier> = match client_auth {
        ClientAuth::NoClientCert => WebPkiClientVerifier::no_client_auth(),
        ClientAuth::RequestClientCert | ClientAuth::RequireAnyClientCert => {
            Arc::new(AnyClientCert {
                mandatory: client_auth == ClientAuth::RequireAnyClientCert,
                provider: provider.clone(),
            })
        }
        ClientAuth::VerifyClientCertIfGiven | ClientAuth::RequireAndVerifyClientCert => {
            let roots = roots.expect("a verifying client_auth_type without a CA is refused above");
            let builder = WebPkiClientVerifier::builder_with_provider(roots, provider.clone());
            let builder = if client_auth == ClientAuth::VerifyClientCertIfGiven {
                builder.allow_unauthenticated()
            } else {
                builder
            };
            builder.build().map_err(|e| {
                invalid(
                    "tls_server_config.client_ca_file",
                    format!(
                        "cannot verify client certificates with it ({e}); point it at {CA_WHAT}"
                    ),
                )
            })?
        }
    };

    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| {
            invalid(
                "tls_server_config",
                format!("the TLS versions and cipher suites do not fit together ({e}); check min_version, max_version and cipher_suites"),
            )
        })?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => invalid(
                "tls_server_config.key_file",
                format!(
                    "the key in {} does not match the certificate in {}; use the key the certificate was issued for",
                    key_path.display(),
                    cert_path.display()
                ),
            ),
            other => invalid(
                "tls_server_config.key_file",
                format!(
                    "cannot use the key in {} with the certificate in {} ({other}); use an RSA, ECDSA or Ed25519 key that matches the certificate",
                    key_path.display(),
                    cert_path.display()
                ),
            ),
        })?;
    // Go prefers the server's order by default; so do we unless told otherwise.
    config.ignore_client_order = raw.prefer_server_cipher_suites.unwrap_or(true);
    config.alpn_protocols = if http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(config)
}

/// `RequestClientCert` and `RequireAnyClientCert`: a client certificate is asked for (or
/// demanded) but not checked against a CA, as in Go. The handshake signature is still
/// verified, so the client holds the certificate's key.
#[derive(Debug)]
struct AnyClientCert {
    mandatory: bool,
    provider: Arc<CryptoProvider>,
}

impl ClientCertVerifier for AnyClientCert {
    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_file_is_an_empty_config() {
        for text in ["", "# nothing\n", "{}"] {
            let c = WebConfig::parse(text, Path::new(".")).unwrap();
            assert!(c.tls().is_none() && c.users().is_empty() && c.headers().is_empty());
        }
    }

    #[test]
    fn an_empty_tls_section_means_plain_http() {
        let c = WebConfig::parse("tls_server_config: {}\n", Path::new(".")).unwrap();
        assert!(c.tls().is_none());
    }

    #[test]
    fn tls_without_a_cert_file_names_the_field() {
        let e = WebConfig::parse(
            "tls_server_config:\n  client_auth_type: RequireAndVerifyClientCert\n",
            Path::new("."),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "tls_server_config.cert_file: is required when tls_server_config is set; point it at the server certificate (chain) in PEM"
        );
    }

    #[test]
    fn tls_versions_rustls_cannot_speak_as_a_maximum_are_refused() {
        let e = WebConfig::parse(
            "tls_server_config:\n  cert_file: a\n  key_file: b\n  max_version: TLS11\n",
            Path::new("."),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "tls_server_config.max_version: TLS10 and TLS11 are not supported; this exporter speaks TLS12 and TLS13: set max_version to TLS12 or TLS13"
        );
        let e = WebConfig::parse(
            "tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS13\n  max_version: TLS12\n",
            Path::new("."),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "tls_server_config.min_version: TLS13 is above max_version TLS12; raise max_version or lower min_version"
        );
    }

    #[test]
    fn an_unknown_client_auth_type_is_refused() {
        let e = WebConfig::parse(
            "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Always\n",
            Path::new("."),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "tls_server_config.client_auth_type: \"Always\" is not a client auth type; use NoClientCert, RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert"
        );
    }

    #[test]
    fn a_header_outside_the_toolkit_list_is_refused() {
        let e = WebConfig::parse(
            "http_server_config:\n  headers:\n    X-Foo: bar\n",
            Path::new("."),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "http_server_config.headers.X-Foo: this header cannot be configured; use one of Strict-Transport-Security, X-Content-Type-Options, X-Frame-Options, X-XSS-Protection, Content-Security-Policy"
        );
    }

    #[test]
    fn a_yaml_error_does_not_quote_the_value_in_the_wrong_place() {
        let e = WebConfig::parse("basic_auth_users: 'hunter2'\n", Path::new(".")).unwrap_err();
        let shown = e.to_string();
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(
            shown.starts_with("basic_auth_users: invalid type"),
            "{shown}"
        );
    }

    #[test]
    fn an_unknown_tls_version_is_refused() {
        let e = WebConfig::parse(
            "tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS14\n",
            Path::new("."),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "tls_server_config.min_version: \"TLS14\" is not a TLS version; use TLS12 or TLS13"
        );
    }
}
