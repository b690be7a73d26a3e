//! TLS towards the provider when `tls_config` asks for more than the defaults: the bundled
//! roots plus `ca_file`, a client certificate for mutual TLS, a lowest version, and a
//! `server_name` the provider's certificate is verified against instead of the host of
//! `base_url` (the name sent in SNI stays that host, as reqwest writes it).

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::settings::http_client::{TlsSettings, TlsVersion};

/// The rustls configuration for `tls`; the message of an error says what could not be used.
pub fn client_config(tls: &TlsSettings) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for cert in &tls.ca_certs {
        roots
            .add(cert.clone())
            .map_err(|e| format!("ca_file: {e}"))?;
    }
    let versions: &[&rustls::SupportedProtocolVersion] = match tls.min_version {
        TlsVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        TlsVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|e| e.to_string())?;
    let roots = Arc::new(roots);
    let builder = match &tls.server_name {
        None => builder.with_root_certificates(roots),
        Some(name) => {
            let name =
                ServerName::try_from(name.clone()).map_err(|e| format!("server_name: {e}"))?;
            let inner = WebPkiServerVerifier::builder_with_provider(roots, provider)
                .build()
                .map_err(|e| e.to_string())?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(FixedName { inner, name }))
        }
    };
    let mut config = match &tls.identity {
        None => builder.with_no_client_auth(),
        Some(id) => builder
            .with_client_auth_cert(id.chain.clone(), id.key.clone_key())
            .map_err(|e| format!("cert_file and key_file: {e}"))?,
    };
    // reqwest speaks HTTP/1.1 here (no HTTP/2 feature).
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Full WebPKI verification of the provider's certificate, against a configured name rather
/// than the host the connection was made to.
#[derive(Debug)]
struct FixedName {
    inner: Arc<WebPkiServerVerifier>,
    name: ServerName<'static>,
}

impl ServerCertVerifier for FixedName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _host: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, &self.name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
