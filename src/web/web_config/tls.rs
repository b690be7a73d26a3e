//! TLS: certificates and keys, versions, cipher suites, curves and client certificates, named as
//! in Go's `crypto/tls` so one file works for every exporter.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, SupportedKxGroup};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme,
    SupportedCipherSuite, SupportedProtocolVersion,
};

use super::raw::RawTls;
use super::{WebConfigError, invalid};

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

impl RawTls {
    /// The certificate, key and CA files named, resolved against `dir`, the web config file's
    /// folder, as the toolkit's `JoinDir` (`join` keeps an absolute path as it is).
    pub(super) fn files(&self, dir: &Path) -> Vec<PathBuf> {
        [&self.cert_file, &self.key_file, &self.client_ca_file]
            .into_iter()
            .flatten()
            .map(|p| dir.join(p))
            .collect()
    }

    /// As the toolkit: any of these set means TLS is wanted (and must then be complete).
    pub(super) fn is_enabled(&self) -> bool {
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

fn required(
    dir: &Path,
    path: Option<PathBuf>,
    field: &str,
    what: &str,
) -> Result<PathBuf, WebConfigError> {
    match path {
        Some(p) if !p.as_os_str().is_empty() => Ok(dir.join(p)),
        _ => Err(invalid(
            format!("tls_server_config.{field}"),
            format!("is required when tls_server_config is set; point it at {what}"),
        )),
    }
}

fn read(path: &Path, field: &str, what: &str) -> Result<Vec<u8>, WebConfigError> {
    let refused = |why: String| {
        invalid(
            format!("tls_server_config.{field}"),
            format!("cannot read {}: {why}; point it at {what}", path.display()),
        )
    };
    crate::files::read_bounded(path, crate::files::MAX_WEB_FILE_BYTES)
        .map_err(|e| refused(e.to_string()))?
        .ok_or_else(|| {
            refused(format!(
                "it is larger than {} bytes",
                crate::files::MAX_WEB_FILE_BYTES
            ))
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
        .map_err(|e| bad_pem(field, path, &format!("is not valid PEM ({e})"), what))?;
    if certs.is_empty() {
        let problem = "holds no PEM certificate (-----BEGIN CERTIFICATE-----)";
        return Err(bad_pem(field, path, problem, what));
    }
    Ok(certs)
}

/// The PEM file at `path`, named by `field`, is refused: `problem`, and what it should be.
fn bad_pem(field: &str, path: &Path, problem: &str, what: &str) -> WebConfigError {
    invalid(
        format!("tls_server_config.{field}"),
        format!("{} {problem}; point it at {what}", path.display()),
    )
}

const CERT_WHAT: &str = "the server certificate (chain) in PEM";
const KEY_WHAT: &str = "the certificate's private key in PEM";
const CA_WHAT: &str = "the PEM file of the CA that signs client certificates";

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, WebConfigError> {
    let pem = read(path, "key_file", KEY_WHAT)?;
    // Never quote the key's bytes: only the path and what is wrong.
    match rustls_pemfile::private_key(&mut pem.as_slice()) {
        Ok(Some(key)) => Ok(key),
        Ok(None) => {
            let problem = "holds no PEM private key (PKCS#8, PKCS#1 or SEC1)";
            Err(bad_pem("key_file", path, problem, KEY_WHAT))
        }
        Err(_) => Err(bad_pem("key_file", path, "is not valid PEM", KEY_WHAT)),
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

/// The rustls server config of `tls_server_config`. The checks run in this order so that a
/// mistake in the file itself is named before any certificate or key is read.
pub(super) fn server_config(
    raw: RawTls,
    dir: &Path,
    http2: bool,
) -> Result<ServerConfig, WebConfigError> {
    let client_auth = client_auth_type(raw.client_auth_type.as_deref())?;
    let cert_path = required(dir, raw.cert_file, "cert_file", CERT_WHAT)?;
    let key_path = required(dir, raw.key_file, "key_file", KEY_WHAT)?;
    let ca_path = client_ca_path(dir, raw.client_ca_file, client_auth)?;
    let (versions, max) =
        protocol_versions(raw.min_version.as_deref(), raw.max_version.as_deref())?;
    let provider = crypto_provider(
        raw.cipher_suites.as_deref(),
        raw.curve_preferences.as_deref(),
        max,
    )?;

    let certs = certificates(&cert_path, "cert_file", CERT_WHAT)?;
    let key = private_key(&key_path)?;
    let verifier = client_verifier(client_auth, ca_path.as_deref(), &provider)?;

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
        .map_err(|e| unusable_key(e, &key_path, &cert_path))?;
    // Go prefers the server's order by default; so do we unless told otherwise.
    config.ignore_client_order = raw.prefer_server_cipher_suites.unwrap_or(true);
    config.alpn_protocols = if http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(config)
}

/// `client_auth_type`; unset or empty is `NoClientCert`, as in the toolkit.
fn client_auth_type(name: Option<&str>) -> Result<ClientAuth, WebConfigError> {
    let auth_name = name.unwrap_or_default();
    ClientAuth::parse(auth_name).ok_or_else(|| {
        invalid(
            "tls_server_config.client_auth_type",
            format!(
                "{auth_name:?} is not a client auth type; use NoClientCert, RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert"
            ),
        )
    })
}

/// The resolved `client_ca_file`. A verifying `client_auth_type` without one, or one beside
/// `NoClientCert`, is refused at load: either way the file asks for something the server
/// would not do.
fn client_ca_path(
    dir: &Path,
    file: Option<PathBuf>,
    client_auth: ClientAuth,
) -> Result<Option<PathBuf>, WebConfigError> {
    let ca_path = file
        .filter(|p| !p.as_os_str().is_empty())
        .map(|p| dir.join(p));
    if client_auth.verifies() && ca_path.is_none() {
        return Err(invalid(
            "tls_server_config.client_ca_file",
            format!("is required when client_auth_type is {client_auth:?}; point it at {CA_WHAT}"),
        ));
    }
    if ca_path.is_some() && client_auth == ClientAuth::NoClientCert {
        return Err(invalid(
            "tls_server_config.client_auth_type",
            "client_ca_file is set but client_auth_type is NoClientCert; set client_auth_type to RequireAndVerifyClientCert (or VerifyClientCertIfGiven), or remove client_ca_file",
        ));
    }
    Ok(ca_path)
}

/// The versions from `min_version` to `max_version`, and the maximum, which decides whether
/// the cipher suites must hold a TLS 1.2 one. TLS10 and TLS11, which the toolkit accepts and
/// rustls does not speak, are raised to TLS12 as a minimum (with a warning) and refused as a
/// maximum, where nothing could be spoken.
fn protocol_versions(
    min: Option<&str>,
    max: Option<&str>,
) -> Result<(Vec<&'static SupportedProtocolVersion>, TlsVersion), WebConfigError> {
    let (min, min_old) = version("min_version", min, TlsVersion::Tls12)?;
    let (max, max_old) = version("max_version", max, TlsVersion::Tls13)?;
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
    let versions = [TlsVersion::Tls12, TlsVersion::Tls13]
        .into_iter()
        .filter(|v| (min..=max).contains(v))
        .map(TlsVersion::rustls)
        .collect();
    Ok((versions, max))
}

/// The ring provider narrowed to `cipher_suites` and `curve_preferences`. One provider serves
/// the handshake and the client certificate checks, so both accept the same algorithms.
fn crypto_provider(
    cipher_suite_names: Option<&[String]>,
    curve_names: Option<&[String]>,
    max: TlsVersion,
) -> Result<Arc<CryptoProvider>, WebConfigError> {
    let mut provider = rustls::crypto::ring::default_provider();
    if let Some(names) = cipher_suite_names.filter(|n| !n.is_empty()) {
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
    if let Some(names) = curve_names.filter(|n| !n.is_empty()) {
        provider.kx_groups = curves(names)?;
    }
    Ok(Arc::new(provider))
}

/// The CAs of `client_ca_file`; one that is not a usable CA is named by its place in the file,
/// which may hold many.
fn client_roots(path: &Path) -> Result<Arc<RootCertStore>, WebConfigError> {
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
    Ok(Arc::new(roots))
}

/// The client certificate check for `client_auth_type`. A `client_ca_file` is read whenever it
/// is set, even where nothing checks against it, so a broken one is found before it is needed.
fn client_verifier(
    client_auth: ClientAuth,
    ca_path: Option<&Path>,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, WebConfigError> {
    let roots = ca_path.map(client_roots).transpose()?;
    Ok(match client_auth {
        ClientAuth::NoClientCert => WebPkiClientVerifier::no_client_auth(),
        ClientAuth::RequestClientCert | ClientAuth::RequireAnyClientCert => {
            Arc::new(AnyClientCert {
                mandatory: client_auth == ClientAuth::RequireAnyClientCert,
                provider: provider.clone(),
            })
        }
        ClientAuth::VerifyClientCertIfGiven | ClientAuth::RequireAndVerifyClientCert => {
            let roots = roots
                .expect("a verifying client_auth_type without a CA is refused by client_ca_path");
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
    })
}

/// Why the key cannot serve the certificate. The key of another certificate is the usual slip,
/// so it gets its own message and fix.
fn unusable_key(e: rustls::Error, key_path: &Path, cert_path: &Path) -> WebConfigError {
    let (key, cert) = (key_path.display(), cert_path.display());
    let problem = match e {
        rustls::Error::InconsistentKeys(_) => format!(
            "the key in {key} does not match the certificate in {cert}; use the key the certificate was issued for"
        ),
        other => format!(
            "cannot use the key in {key} with the certificate in {cert} ({other}); use an RSA, ECDSA or Ed25519 key that matches the certificate"
        ),
    };
    invalid("tls_server_config.key_file", problem)
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
