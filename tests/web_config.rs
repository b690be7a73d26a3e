//! `--web.config.file`: TLS, client certificates and basic auth against a tiny router served by
//! `web::serve::serve` on loopback, with certificates made at test time; bad files refused with
//! their exact message; what we accept or refuse checked against `promtool check web-config`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::routing::get;
use mailhost_exporter::web::serve::serve;
use mailhost_exporter::web::web_config::WebConfig;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use reqwest::StatusCode;
use tempfile::TempDir;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::helpers::{Exporter, TOKEN, promtool, spawn_sim};

/// A CA, a server certificate for 127.0.0.1 and localhost and a client certificate signed by
/// it, and a key that belongs to neither, as PEM files in a temporary folder.
struct Pki {
    dir: TempDir,
    ca_pem: String,
    client_identity_pem: String,
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "test CA");
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();

        let server_key = KeyPair::generate().unwrap();
        let server = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .unwrap()
            .signed_by(&server_key, &ca)
            .unwrap();

        let client_key = KeyPair::generate().unwrap();
        let mut client_params = CertificateParams::new(vec!["client.test".to_owned()]).unwrap();
        client_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let client = client_params.signed_by(&client_key, &ca).unwrap();

        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        write("ca.crt", &ca.pem());
        write("server.crt", &server.pem());
        write("server.key", &server_key.serialize_pem());
        write("other.key", &KeyPair::generate().unwrap().serialize_pem());
        write(
            "garbage.crt",
            "-----BEGIN CERTIFICATE-----\nnot base64 at all!\n",
        );
        Pki {
            ca_pem: ca.pem(),
            client_identity_pem: format!("{}{}", client.pem(), client_key.serialize_pem()),
            dir,
            ca,
        }
    }

    /// A second server certificate for 127.0.0.1 from the same CA, and its key, as PEM.
    fn another_server_certificate(&self) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .unwrap()
            .signed_by(&key, &self.ca)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// Writes a web config file next to the certificates (so relative paths resolve there).
    fn config(&self, name: &str, yaml: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, yaml).unwrap();
        path
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A client that trusts the test CA, with `tweak` applied (TLS versions, identity).
    fn client(
        &self,
        tweak: impl FnOnce(reqwest::ClientBuilder) -> reqwest::ClientBuilder,
    ) -> reqwest::Client {
        let builder = reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(self.ca_pem.as_bytes()).unwrap());
        tweak(builder).build().unwrap()
    }

    fn identity(&self) -> reqwest::Identity {
        reqwest::Identity::from_pem(self.client_identity_pem.as_bytes()).unwrap()
    }
}

/// The good TLS files below, each with a name; all must load and pass promtool.
const GOOD_TLS: &[(&str, &str)] = &[
    (
        "tls.yml",
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n",
    ),
    (
        "tls13.yml",
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  min_version: TLS13\n",
    ),
    (
        "mtls.yml",
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n",
    ),
    (
        "everything.yml",
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n  min_version: TLS12\n  max_version: TLS13\n  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256]\n  curve_preferences: [X25519, CurveP256]\n  prefer_server_cipher_suites: true\nhttp_server_config:\n  http2: false\n  headers:\n    X-Content-Type-Options: nosniff\n    X-Frame-Options: deny\n    Strict-Transport-Security: max-age=31536000\nbasic_auth_users:\n  alice: $2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi\n",
    ),
    (
        // Settings the toolkit knows and rustls lacks: older versions, CBC suites, P-521, the
        // old name of RequireAnyClientCert. promtool passes them, so they must load.
        "legacy.yml",
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: RequireClientCert\n  min_version: TLS10\n  cipher_suites: [TLS_RSA_WITH_AES_128_CBC_SHA, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256]\n  curve_preferences: [CurveP521, X25519]\n",
    ),
    (
        "request-client-cert.yml",
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: RequestClientCert\n",
    ),
];

fn good_tls(pki: &Pki, name: &str) -> WebConfig {
    let (_, yaml) = GOOD_TLS.iter().find(|(n, _)| *n == name).unwrap();
    WebConfig::load(&pki.config(name, yaml)).unwrap()
}

/// A tiny app: `/` says ok, `/peer` answers with the client's IP from the connect info.
fn app() -> Router {
    Router::new().route("/", get(|| async { "ok" })).route(
        "/peer",
        get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.ip().to_string() }),
    )
}

struct Server {
    addr: SocketAddr,
    shutdown: CancellationToken,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn start(router: Router, tls: Option<Arc<rustls::ServerConfig>>) -> Server {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(serve(listener, router, tls, shutdown.clone()));
    Server {
        addr,
        shutdown,
        task: Some(task),
    }
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/web")
        .join(name)
}

fn refusal(path: &Path) -> String {
    WebConfig::load(path).unwrap_err().to_string()
}

#[tokio::test]
async fn tls_serves_a_client_that_trusts_the_ca_and_a_plain_http_client_is_told_to_use_https() {
    let pki = Pki::new();
    let config = good_tls(&pki, "tls.yml");
    let server = start(app(), config.tls()).await;

    // First plain HTTP: a 400 that says what to do, as Go's net/http answers; the server
    // keeps serving TLS.
    let plain = reqwest::Client::new()
        .get(format!("http://{}/", server.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), StatusCode::BAD_REQUEST);
    assert!(plain.text().await.unwrap().contains("use https://"));

    let client = pki.client(|b| b);
    for host in ["127.0.0.1".to_owned(), "localhost".to_owned()] {
        let url = format!("https://{host}:{}/", server.addr.port());
        let r = client.get(url).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.text().await.unwrap(), "ok");
    }
    let peer = client
        .get(format!("https://127.0.0.1:{}/peer", server.addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(peer.text().await.unwrap(), "127.0.0.1");

    let untrusting = reqwest::Client::builder().use_rustls_tls().build().unwrap();
    assert!(
        untrusting
            .get(format!("https://127.0.0.1:{}/", server.addr.port()))
            .send()
            .await
            .is_err()
    );
}

#[tokio::test]
async fn min_version_tls13_refuses_a_client_limited_to_tls12() {
    let pki = Pki::new();
    let server = start(app(), good_tls(&pki, "tls13.yml").tls()).await;
    let url = format!("https://127.0.0.1:{}/", server.addr.port());

    let old = pki.client(|b| b.max_tls_version(reqwest::tls::Version::TLS_1_2));
    assert!(old.get(&url).send().await.is_err());

    let new = pki.client(|b| b);
    assert_eq!(new.get(&url).send().await.unwrap().status(), StatusCode::OK);
}

#[tokio::test]
async fn a_tls12_client_is_served_by_default() {
    let pki = Pki::new();
    let server = start(app(), good_tls(&pki, "tls.yml").tls()).await;
    let old = pki.client(|b| b.max_tls_version(reqwest::tls::Version::TLS_1_2));
    let r = old
        .get(format!("https://127.0.0.1:{}/", server.addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn require_and_verify_client_cert_refuses_a_client_without_one_and_serves_one_with_it() {
    let pki = Pki::new();
    let server = start(app(), good_tls(&pki, "mtls.yml").tls()).await;
    let url = format!("https://127.0.0.1:{}/", server.addr.port());

    let anonymous = pki.client(|b| b);
    assert!(anonymous.get(&url).send().await.is_err());

    let identified = pki.client(|b| b.identity(pki.identity()));
    let r = identified.get(&url).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn verify_client_cert_if_given_serves_a_client_without_one() {
    let pki = Pki::new();
    let config = good_tls(&pki, "everything.yml");
    // Basic auth is on in that file: the TLS layer lets the anonymous client through, auth
    // then answers.
    let server = start(config.apply(app()), config.tls()).await;
    let r = pki
        .client(|b| b)
        .get(format!("https://127.0.0.1:{}/", server.addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    assert_eq!(r.headers()["x-frame-options"], "deny");
}

/// alice's and bob's passwords, hashed at the lowest bcrypt cost to keep the test quick.
fn users_file(pki: &Pki) -> PathBuf {
    let alice = bcrypt::hash("alice-secret", 4).unwrap();
    let bob = bcrypt::hash("bob-secret", 4).unwrap();
    pki.config(
        "users.yml",
        &format!("basic_auth_users:\n  alice: {alice}\n  bob: '{bob}'\n"),
    )
}

#[tokio::test]
async fn basic_auth_lets_in_only_the_right_password_for_the_right_user() {
    let pki = Pki::new();
    let config = WebConfig::load(&users_file(&pki)).unwrap();
    assert!(config.tls().is_none());
    assert_eq!(config.users().len(), 2);
    let server = start(config.apply(app()), config.tls()).await;
    let url = format!("http://{}/", server.addr);
    let client = reqwest::Client::new();
    let get = |user: Option<(&str, &str)>| {
        let mut request = client.get(&url);
        if let Some((user, password)) = user {
            request = request.basic_auth(user, Some(password));
        }
        async move { request.send().await.unwrap() }
    };

    let none = get(None).await;
    assert_eq!(none.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        none.headers()["www-authenticate"],
        "Basic realm=\"mailhost_exporter\""
    );
    assert_eq!(none.text().await.unwrap(), "Unauthorized\n");

    let wrong = get(Some(("alice", "bob-secret"))).await;
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert!(!wrong.text().await.unwrap().contains("secret"));
    assert_eq!(
        get(Some(("alice", "nope"))).await.status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        get(Some(("carol", "alice-secret"))).await.status(),
        StatusCode::UNAUTHORIZED
    );

    let right = get(Some(("alice", "alice-secret"))).await;
    assert_eq!(right.status(), StatusCode::OK);
    assert_eq!(right.text().await.unwrap(), "ok");
    assert_eq!(
        get(Some(("bob", "bob-secret"))).await.status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn a_cached_success_lets_no_wrong_password_in() {
    let pki = Pki::new();
    let config = WebConfig::load(&users_file(&pki)).unwrap();
    let server = start(config.apply(app()), None).await;
    let url = format!("http://{}/", server.addr);
    let client = reqwest::Client::new();
    let status = |user: &str, password: &str| {
        let request = client.get(&url).basic_auth(user, Some(password));
        async move { request.send().await.unwrap().status() }
    };

    // Twice, so the second one comes from the cache.
    assert_eq!(status("alice", "alice-secret").await, StatusCode::OK);
    assert_eq!(status("alice", "alice-secret").await, StatusCode::OK);
    // Same user, wrong passwords, one a prefix and one an extension of the right one.
    for wrong in ["alice-secre", "alice-secret!", "wrong", ""] {
        assert_eq!(
            status("alice", wrong).await,
            StatusCode::UNAUTHORIZED,
            "{wrong}"
        );
    }
    // The cached password for another user.
    assert_eq!(
        status("bob", "alice-secret").await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(status("alice", "alice-secret").await, StatusCode::OK);
}

#[tokio::test]
async fn shutdown_lets_an_open_request_finish_then_serve_returns() {
    let (entered_tx, entered_rx) = tokio::sync::oneshot::channel::<()>();
    let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
    let entered = Arc::new(std::sync::Mutex::new(Some(entered_tx)));
    let release = Arc::new(tokio::sync::Mutex::new(Some(release_rx)));
    let router = Router::new().route(
        "/slow",
        get(move || {
            let entered = entered.clone();
            let release = release.clone();
            async move {
                if let Some(tx) = entered.lock().unwrap().take() {
                    let _ = tx.send(());
                }
                if let Some(rx) = release.lock().await.take() {
                    let _ = rx.await;
                }
                "done"
            }
        }),
    );
    let server = start(router, None).await;
    let url = format!("http://{}/slow", server.addr);
    let request = tokio::spawn(async move { reqwest::get(url).await.unwrap().text().await });
    entered_rx.await.unwrap();

    server.shutdown.cancel();
    // No longer accepting: a new connection is refused once the listener is dropped.
    crate::helpers::wait_for("the listener to close", || async {
        tokio::net::TcpStream::connect(server.addr)
            .await
            .is_err()
            .then_some(())
    })
    .await;
    let mut server = server;
    let task = server.task.take().unwrap();
    assert!(!task.is_finished());

    release_tx.send(()).unwrap();
    assert_eq!(request.await.unwrap().unwrap(), "done");
    task.await.unwrap().unwrap();
}

#[test]
fn an_unknown_key_is_refused_with_its_name() {
    assert_eq!(
        refusal(&fixture("unknown-key.yml")),
        "tls_server_config: unknown field `cert_path`, expected one of `cert_file`, `key_file`, `client_auth_type`, `client_ca_file`, `cipher_suites`, `curve_preferences`, `min_version`, `max_version`, `prefer_server_cipher_suites` at line 3 column 3 (remove or correct the key; see https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md)"
    );
}

#[test]
fn a_missing_cert_file_is_refused_with_its_path() {
    let cert = fixture("missing.crt");
    assert_eq!(
        refusal(&fixture("missing-cert-file.yml")),
        format!(
            "tls_server_config.cert_file: cannot read {}: No such file or directory (os error 2); point it at the server certificate (chain) in PEM",
            cert.display()
        )
    );
}

#[test]
fn a_bad_bcrypt_hash_is_refused_without_quoting_it() {
    let message = refusal(&fixture("bad-bcrypt-hash.yml"));
    assert_eq!(
        message,
        "basic_auth_users.alice: is not a bcrypt hash ($2y$, a cost, then 53 characters of salt and hash); write a bcrypt hash such as the output of `htpasswd -nbBC 10 \"\" PASSWORD | tr -d ':\\n'`"
    );
    assert!(!message.contains("plaintext-password"));
    assert_eq!(
        refusal(&fixture("bcrypt-cost-too-low.yml")),
        "basic_auth_users.alice: is not a usable bcrypt hash: its cost is outside 4 to 31; write a bcrypt hash such as the output of `htpasswd -nbBC 10 \"\" PASSWORD | tr -d ':\\n'`"
    );
}

#[test]
fn a_verifying_client_auth_type_without_a_ca_is_refused() {
    assert_eq!(
        refusal(&fixture("verify-without-ca.yml")),
        "tls_server_config.client_ca_file: is required when client_auth_type is RequireAndVerifyClientCert; point it at the PEM file of the CA that signs client certificates"
    );
}

#[test]
fn a_header_the_toolkit_does_not_allow_is_refused() {
    assert_eq!(
        refusal(&fixture("unknown-header.yml")),
        "http_server_config.headers.X-Powered-By: this header cannot be configured; use one of Strict-Transport-Security, X-Content-Type-Options, X-Frame-Options, X-XSS-Protection, Content-Security-Policy"
    );
}

#[test]
fn a_key_that_does_not_match_the_cert_is_refused() {
    let pki = Pki::new();
    let path = pki.config(
        "mismatch.yml",
        "tls_server_config:\n  cert_file: server.crt\n  key_file: other.key\n",
    );
    assert_eq!(
        refusal(&path),
        format!(
            "tls_server_config.key_file: the key in {} does not match the certificate in {}; use the key the certificate was issued for",
            pki.path("other.key").display(),
            pki.path("server.crt").display()
        )
    );
}

#[test]
fn an_invalid_pem_certificate_is_refused() {
    let pki = Pki::new();
    let path = pki.config(
        "garbage.yml",
        "tls_server_config:\n  cert_file: garbage.crt\n  key_file: server.key\n",
    );
    let message = refusal(&path);
    let expected_start = format!(
        "tls_server_config.cert_file: {} is not valid PEM (",
        pki.path("garbage.crt").display()
    );
    assert!(message.starts_with(&expected_start), "{message}");
    assert!(
        message.ends_with("); point it at the server certificate (chain) in PEM"),
        "{message}"
    );
    let path = pki.config(
        "key-as-cert.yml",
        "tls_server_config:\n  cert_file: server.key\n  key_file: server.key\n",
    );
    assert_eq!(
        refusal(&path),
        format!(
            "tls_server_config.cert_file: {} holds no PEM certificate (-----BEGIN CERTIFICATE-----); point it at the server certificate (chain) in PEM",
            pki.path("server.key").display()
        )
    );
}

#[test]
fn a_client_ca_without_a_client_auth_type_is_refused() {
    let pki = Pki::new();
    let path = pki.config(
        "ca-without-auth.yml",
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_ca_file: ca.crt\n",
    );
    assert_eq!(
        refusal(&path),
        "tls_server_config.client_auth_type: client_ca_file is set but client_auth_type is NoClientCert; set client_auth_type to RequireAndVerifyClientCert (or VerifyClientCertIfGiven), or remove client_ca_file"
    );
}

/// Files that load, each made again in a fresh folder with its keys and certificates.
fn good_files(pki: &Pki) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = GOOD_TLS
        .iter()
        .map(|(name, yaml)| pki.config(name, yaml))
        .collect();
    files.push(users_file(pki));
    files.push(pki.config("empty.yml", ""));
    files.push(fixture("good-headers.yml"));
    files
}

/// Files that must be refused, for reasons promtool gives too.
fn bad_files(pki: &Pki) -> Vec<PathBuf> {
    vec![
        fixture("unknown-key.yml"),
        fixture("bad-bcrypt-hash.yml"),
        fixture("bcrypt-cost-too-low.yml"),
        fixture("missing-cert-file.yml"),
        fixture("unknown-header.yml"),
        pki.config(
            "mismatch.yml",
            "tls_server_config:\n  cert_file: server.crt\n  key_file: other.key\n",
        ),
        pki.config(
            "ca-without-auth.yml",
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_ca_file: ca.crt\n",
        ),
    ]
}

#[test]
fn every_good_file_loads() {
    let pki = Pki::new();
    for file in good_files(&pki) {
        if let Err(e) = WebConfig::load(&file) {
            panic!("{} does not load: {e}", file.display());
        }
    }
}

#[test]
fn files_promtool_would_reject_are_refused() {
    let pki = Pki::new();
    for file in bad_files(&pki) {
        assert!(
            WebConfig::load(&file).is_err(),
            "{} loads but should not",
            file.display()
        );
    }
}

/// promtool agrees: it accepts every file the exporter loads and rejects every one it refuses.
#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn promtool_agrees_on_every_good_and_bad_file() {
    let Some(tool) = promtool() else { return };
    let pki = Pki::new();
    let accepts = |path: &Path| {
        std::process::Command::new(tool)
            .args(["check", "web-config"])
            .arg(path)
            .output()
            .unwrap()
            .status
            .success()
    };
    for file in good_files(&pki) {
        assert!(accepts(&file), "promtool rejects {}", file.display());
    }
    for file in bad_files(&pki) {
        assert!(!accepts(&file), "promtool accepts {}", file.display());
    }
}

#[tokio::test]
async fn the_exporter_binary_serves_metrics_over_tls_behind_basic_auth() {
    let pki = Pki::new();
    let hash = bcrypt::hash("scraper-secret", 4).unwrap();
    let web = pki.config(
        "exporter-web.yml",
        &format!("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  prometheus: '{hash}'\n"),
    );
    let flag = format!("--web.config.file={}", web.display());
    let exporter =
        crate::helpers::Running::start(&["--demo", "--web.listen-address=127.0.0.1:0", &flag]);
    let url = exporter.logged("open this URL", "url").await;
    assert!(url.starts_with("https://"), "the log says https: {url}");
    let client = pki.client(|b| b);
    let refused = client.get(&url).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    let wrong = client
        .get(&url)
        .basic_auth("prometheus", Some("guess"))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    let ok = client
        .get(&url)
        .basic_auth("prometheus", Some("scraper-secret"))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    assert!(ok.text().await.unwrap().contains("mailhost_build_info"));
    let plain = reqwest::Client::new()
        .get(url.replace("https://", "http://"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        plain.status(),
        StatusCode::BAD_REQUEST,
        "plain HTTP is not served"
    );
    let log = exporter.log().join("\n");
    assert!(!log.contains("scraper-secret") && !log.contains(&hash));
}

#[test]
fn the_exporter_binary_refuses_a_bad_web_config_at_start() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mailhost_exporter"))
        .args(["--demo", "--web.listen-address=127.0.0.1:0"])
        .arg(format!(
            "--web.config.file={}",
            fixture("unknown-key.yml").display()
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid web config") && stderr.contains("unknown field"),
        "{stderr}"
    );
}

/// The exporter in this process against the simulator, with a config file (token in a file, so
/// reloads need no environment), the lifecycle API and `web` as `--web.config.file`.
async fn deploy_with_web_config(pki: &Pki, web: &Path) -> (Exporter, crate::helpers::Sim) {
    let sim = spawn_sim().await;
    let token = pki.path("token");
    std::fs::write(&token, TOKEN).unwrap();
    let config = pki.config(
        "config.yml",
        &format!(
            "api:\n  base_url: {}\n  timeout: 2s\n  token_file: {}\ncollectors:\n  delivery_account:\n    interval: 1s\n    accounts: [1001]\n",
            sim.url,
            token.display()
        ),
    );
    let parsed = mailhost_exporter::config::Config::load(&config, None).unwrap();
    let options = mailhost_exporter::WebOptions {
        listen_addresses: vec!["127.0.0.1:0".to_owned()],
        enable_lifecycle: true,
        web_config: WebConfig::load(web).unwrap(),
        ..mailhost_exporter::WebOptions::default()
    };
    let app = mailhost_exporter::App::build(parsed, options)
        .await
        .unwrap()
        .with_config_file(config);
    (Exporter::start(app), sim)
}

async fn post_reload(client: &reqwest::Client, base: &str, auth: (&str, &str)) -> (u16, String) {
    let r = client
        .post(format!("{base}/-/reload"))
        .basic_auth(auth.0, Some(auth.1))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test]
async fn a_user_removed_from_the_web_config_gets_401_after_a_reload_and_a_bad_file_is_refused() {
    let pki = Pki::new();
    let alice = bcrypt::hash("alice-secret", 4).unwrap();
    let bob = bcrypt::hash("bob-secret", 4).unwrap();
    let web = pki.config(
        "live.yml",
        &format!("basic_auth_users:\n  alice: '{alice}'\n  bob: '{bob}'\n"),
    );
    let (exporter, _sim) = deploy_with_web_config(&pki, &web).await;
    let base = format!("http://{}", exporter.addr);
    let client = reqwest::Client::new();
    let status = |user: &str, password: &str| {
        let request = client
            .get(format!("{base}/metrics"))
            .basic_auth(user, Some(password));
        async move { request.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(status("bob", "bob-secret").await, 200);

    // Nothing changed: said so, and bob's cached login still holds.
    let (code, text) = post_reload(&client, &base, ("alice", "alice-secret")).await;
    assert_eq!(
        (code, text.as_str()),
        (200, "Reloaded\nweb config unchanged\n")
    );

    std::fs::write(&web, format!("basic_auth_users:\n  alice: '{alice}'\n")).unwrap();
    let (code, text) = post_reload(&client, &base, ("alice", "alice-secret")).await;
    assert_eq!(
        (code, text.as_str()),
        (200, "Reloaded\nweb config reloaded\n")
    );
    assert_eq!(status("bob", "bob-secret").await, 401, "bob was removed");
    assert_eq!(status("alice", "alice-secret").await, 200);

    // A bad file: refused without quoting what is in it; alice keeps her access.
    std::fs::write(
        &web,
        "basic_auth_users:\n  alice: plaintext-password\n  carol: '$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi'\n",
    )
    .unwrap();
    let (code, text) = post_reload(&client, &base, ("alice", "alice-secret")).await;
    assert_eq!(code, 500);
    assert!(
        text.starts_with(
            "Reloaded\nweb config refused: basic_auth_users.alice: is not a bcrypt hash"
        ),
        "{text}"
    );
    assert!(
        text.contains("the previous web config keeps serving"),
        "{text}"
    );
    assert!(
        !text.contains("plaintext-password") && !text.contains("QOauhQ"),
        "{text}"
    );
    assert_eq!(status("alice", "alice-secret").await, 200);

    // A value where a map belongs: the YAML error does not quote it either.
    std::fs::write(&web, "basic_auth_users: 'hunter2-password'\n").unwrap();
    let (code, text) = post_reload(&client, &base, ("alice", "alice-secret")).await;
    assert_eq!(code, 500);
    assert!(!text.contains("hunter2"), "{text}");

    // TLS cannot be switched on by a reload.
    std::fs::write(
        &web,
        format!("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  alice: '{alice}'\n"),
    )
    .unwrap();
    let (code, text) = post_reload(&client, &base, ("alice", "alice-secret")).await;
    assert_eq!(code, 500);
    assert!(
        text.contains("web config refused: tls_server_config: TLS is off and cannot be switched by a reload; restart the exporter to change it"),
        "{text}"
    );
    assert_eq!(
        status("alice", "alice-secret").await,
        200,
        "still plain HTTP"
    );
}

/// The certificate a TLS server at `addr` presents, as DER.
async fn served_certificate(addr: SocketAddr, ca_pem: &str) -> Vec<u8> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let tls = connector.connect(name, tcp).await.unwrap();
    tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

#[tokio::test]
async fn a_rotated_certificate_is_served_after_a_reload() {
    let pki = Pki::new();
    let web = pki.config(
        "live-tls.yml",
        "tls_server_config:\n  cert_file: live.crt\n  key_file: live.key\n",
    );
    std::fs::copy(pki.path("server.crt"), pki.path("live.crt")).unwrap();
    std::fs::copy(pki.path("server.key"), pki.path("live.key")).unwrap();
    let (exporter, _sim) = deploy_with_web_config(&pki, &web).await;
    let first = served_certificate(exporter.addr, &pki.ca_pem).await;

    // A new certificate from the same CA, written where the config points.
    let (cert, key) = pki.another_server_certificate();
    std::fs::write(pki.path("live.crt"), &cert).unwrap();
    std::fs::write(pki.path("live.key"), &key).unwrap();
    let client = pki.client(|b| b);
    let base = format!("https://127.0.0.1:{}", exporter.addr.port());
    let r = client
        .post(format!("{base}/-/reload"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.text().await.unwrap(), "Reloaded\nweb config reloaded\n");
    let second = served_certificate(exporter.addr, &pki.ca_pem).await;
    assert_ne!(first, second, "the new certificate is served");
    let pem_der = rustls_pemfile::certs(&mut cert.as_bytes())
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(second, pem_der.to_vec());

    // A key that does not match: refused, and the rotated certificate keeps serving.
    std::fs::copy(pki.path("other.key"), pki.path("live.key")).unwrap();
    let r = client
        .post(format!("{base}/-/reload"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let text = r.text().await.unwrap();
    assert!(
        text.contains("web config refused: tls_server_config.key_file: the key in"),
        "{text}"
    );
    assert!(!text.contains("PRIVATE KEY"), "{text}");
    assert_eq!(served_certificate(exporter.addr, &pki.ca_pem).await, second);

    // Switching TLS off is refused too.
    std::fs::write(&web, "").unwrap();
    let r = client
        .post(format!("{base}/-/reload"))
        .send()
        .await
        .unwrap();
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("TLS is on and cannot be switched by a reload")
    );
}
