//! `--web.config.file`: TLS, client certificates, basic auth users and extra response headers,
//! in the schema of the Prometheus exporter toolkit
//! (<https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md>).
//! Everything is read and checked by [`WebConfig::load`], so a bad file stops the exporter at
//! start instead of failing the first scrape. [`LiveWebConfig`] reads the file again on reload:
//! users and headers are taken per request and the TLS config per handshake, as the toolkit
//! does, and a bad new file leaves the old one serving.
//!
//! By job: [`raw`] is the file's schema, [`http`] the users and response headers, [`tls`] the
//! server and client-certificate settings, [`live`] the config in force and its reload.

mod http;
mod live;
mod raw;
mod tls;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderName, HeaderValue};
use rustls::ServerConfig;

use crate::web::auth::Users;

pub use live::{LiveWebConfig, WebReload};
use raw::RawWebConfig;

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
        let read = |source| WebConfigError::Read {
            path: path.to_owned(),
            source,
        };
        let bytes = crate::files::read_bounded(path, crate::files::MAX_WEB_FILE_BYTES)
            .map_err(read)?
            .ok_or_else(|| {
                read(std::io::Error::other(format!(
                    "it is larger than {} bytes",
                    crate::files::MAX_WEB_FILE_BYTES
                )))
            })?;
        let text = String::from_utf8(bytes)
            .map_err(|_| read(std::io::Error::other("it is not UTF-8 text")))?;
        let dir = path.parent().unwrap_or(Path::new(""));
        let mut config = Self::parse(&text, dir)?;
        config.source = Some(path.to_owned());
        config.fingerprint = live::fingerprint(&text, &config.files);
        Ok(config)
    }

    /// Parses YAML text whose relative paths are relative to `dir`; see [`WebConfig::load`].
    pub fn parse(text: &str, dir: &Path) -> Result<WebConfig, WebConfigError> {
        // An empty file (or one of comments only) is a valid, empty config, as for the toolkit.
        let raw: RawWebConfig = serde_yaml_ng::from_str::<Option<RawWebConfig>>(text)
            .map_err(|e| {
                // Its fields' secrecy is not spelled out (user names, hashes, key files): no value
                // is shown.
                WebConfigError::Syntax(crate::settings::describe_yaml_error(
                    &e,
                    SCHEMA_DOC,
                    crate::redact::nothing_shown,
                ))
            })?
            .unwrap_or_default();
        let http = raw.http_server_config.unwrap_or_default();
        let headers = http::headers(http.headers.unwrap_or_default())?;
        let users = http::users(raw.basic_auth_users.unwrap_or_default())?;
        let mut files = Vec::new();
        let tls = match raw.tls_server_config {
            Some(t) if t.is_enabled() => {
                files = t.files(dir);
                Some(Arc::new(tls::server_config(
                    t,
                    dir,
                    http.http2.unwrap_or(true),
                )?))
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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::{StatusCode, header};
    use axum::response::Response;
    use axum::routing::get;
    use tower::ServiceExt as _;

    #[test]
    fn an_empty_file_or_tls_section_is_an_empty_config_served_as_plain_http() {
        for text in ["", "# nothing\n", "{}", "tls_server_config: {}\n"] {
            let c = WebConfig::parse(text, Path::new(".")).unwrap();
            assert!(c.tls().is_none() && c.users().is_empty() && c.headers().is_empty());
        }
    }

    #[test]
    fn a_bad_tls_or_header_setting_is_refused_naming_the_field_and_the_fix() {
        let tls = "tls_server_config:\n  cert_file: a\n  key_file: b\n";
        let cases = [
            (
                "tls_server_config:\n  client_auth_type: RequireAndVerifyClientCert\n".to_owned(),
                "tls_server_config.cert_file: is required when tls_server_config is set; point it at the server certificate (chain) in PEM",
            ),
            // TLS versions rustls cannot speak are refused as a maximum.
            (
                format!("{tls}  max_version: TLS11\n"),
                "tls_server_config.max_version: TLS10 and TLS11 are not supported; this exporter speaks TLS12 and TLS13: set max_version to TLS12 or TLS13",
            ),
            (
                format!("{tls}  min_version: TLS13\n  max_version: TLS12\n"),
                "tls_server_config.min_version: TLS13 is above max_version TLS12; raise max_version or lower min_version",
            ),
            (
                format!("{tls}  min_version: TLS14\n"),
                "tls_server_config.min_version: \"TLS14\" is not a TLS version; use TLS12 or TLS13",
            ),
            (
                format!("{tls}  client_auth_type: Always\n"),
                "tls_server_config.client_auth_type: \"Always\" is not a client auth type; use NoClientCert, RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert",
            ),
            // A header outside the toolkit's list.
            (
                "http_server_config:\n  headers:\n    X-Foo: bar\n".to_owned(),
                "http_server_config.headers.X-Foo: this header cannot be configured; use one of Strict-Transport-Security, X-Content-Type-Options, X-Frame-Options, X-XSS-Protection, Content-Security-Policy",
            ),
        ];
        for (text, want) in cases {
            let e = WebConfig::parse(&text, Path::new(".")).unwrap_err();
            assert_eq!(e.to_string(), want, "{text}");
        }
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

    /// A router of one route behind the web config `yaml`, as the server applies it.
    fn app(yaml: &str) -> Router {
        WebConfig::parse(yaml, Path::new("."))
            .unwrap()
            .apply(Router::new().route("/", get(|| async { "ok" })))
    }

    /// The answer of `app` to a GET of `path`, with an `Authorization` header if one is given.
    async fn answer(app: Router, path: &str, authorization: Option<&str>) -> Response {
        let mut request = axum::http::Request::get(path);
        if let Some(value) = authorization {
            request = request.header(header::AUTHORIZATION, value);
        }
        app.oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn every_route_and_the_fallback_demand_credentials() {
        let hash = bcrypt::hash("pw", 4).unwrap();
        let app = app(&format!("basic_auth_users:\n  alice: {hash}\n"));
        for path in ["/", "/nowhere"] {
            let r = answer(app.clone(), path, None).await;
            assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{path}");
            assert_eq!(
                r.headers()[header::WWW_AUTHENTICATE],
                "Basic realm=\"mailhost_exporter\""
            );
        }
        let r = answer(app, "/", Some("Basic YWxpY2U6cHc=")).await;
        assert_eq!(r.status(), StatusCode::OK);
    }

    #[tokio::test]
    async fn no_users_means_no_auth() {
        let r = answer(app(""), "/", None).await;
        assert_eq!(r.status(), StatusCode::OK);
    }
}
