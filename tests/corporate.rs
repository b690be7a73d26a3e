//! Corporate networks: the provider behind a private CA (the simulator served over TLS by a
//! relay with a test CA), `server_name`, mutual TLS, a CONNECT proxy that logs what it sees
//! (the token only ever inside the tunnel), `HTTPS_PROXY` honoured only with
//! `proxy_from_environment`, and bad files and proxy addresses refused at `--config.check`
//! naming the field.

use std::sync::{Arc, Mutex};

use mailhost_exporter::config::Config;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use crate::helpers::{Exporter, Running, TOKEN, spawn_exporter, spawn_sim, value, wait_for};

const ACCOUNT: i32 = 1001;

/// A test CA with a server certificate (for `names`) and a client certificate, as PEM files.
struct Pki {
    dir: TempDir,
    server_chain: Vec<CertificateDer<'static>>,
    server_key: PrivateKeyDer<'static>,
    ca_der: CertificateDer<'static>,
}

impl Pki {
    fn new(names: &[&str]) -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "corporate test CA");
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let server_key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let server = CertificateParams::new(names)
            .unwrap()
            .signed_by(&server_key, &ca)
            .unwrap();
        let client_key = KeyPair::generate().unwrap();
        let mut client_params = CertificateParams::new(vec!["exporter.test".to_owned()]).unwrap();
        client_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let client = client_params.signed_by(&client_key, &ca).unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        write("ca.crt", &ca.pem());
        write("client.crt", &client.pem());
        write("client.key", &client_key.serialize_pem());
        write("not-pem.crt", "this is not a certificate\n");
        write("token", TOKEN);
        Pki {
            server_chain: vec![server.der().clone()],
            server_key: PrivateKeyDer::from_pem_slice(server_key.serialize_pem().as_bytes())
                .unwrap(),
            ca_der: ca.der().clone(),
            dir,
        }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// The TLS server side: this PKI's server certificate; with `clients`, only a client
    /// certificate of this CA gets through.
    fn server_config(&self, clients: bool) -> Arc<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = if clients {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(self.ca_der.clone()).unwrap();
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .unwrap();
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        Arc::new(
            builder
                .with_single_cert(self.server_chain.clone(), self.server_key.clone_key())
                .unwrap(),
        )
    }
}

/// The simulator served over TLS: a relay on loopback that ends TLS and forwards each
/// connection to `upstream` (host:port). Stops with the returned task.
async fn tls_relay(
    upstream: String,
    config: Arc<rustls::ServerConfig>,
) -> (String, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (acceptor, upstream) = (acceptor.clone(), upstream.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return;
                };
                let Ok(mut plain) = TcpStream::connect(&upstream).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    (addr, task)
}

/// What a CONNECT proxy saw: each request head, and every byte clients sent it.
#[derive(Clone, Default)]
struct ProxyLog(Arc<Mutex<(Vec<String>, Vec<u8>)>>);

impl ProxyLog {
    fn heads(&self) -> Vec<String> {
        self.0.lock().unwrap().0.clone()
    }
    fn everything(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap().1).into_owned()
    }
}

/// A CONNECT proxy on loopback that logs what it sees. Only CONNECT is served.
async fn connect_proxy() -> (String, ProxyLog, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let log = ProxyLog::default();
    let seen = log.clone();
    let task = tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
                    if client.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let text = String::from_utf8_lossy(&head).into_owned();
                {
                    let mut log = seen.0.lock().unwrap();
                    log.0.push(text.clone());
                    log.1.extend_from_slice(&head);
                }
                let Some(target) = text
                    .strip_prefix("CONNECT ")
                    .and_then(|t| t.split_whitespace().next())
                else {
                    let _ = client
                        .write_all(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
                        .await;
                    return;
                };
                let Ok(mut server) = TcpStream::connect(target).await else {
                    let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
                    return;
                };
                let _ = client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await;
                // Both directions, keeping what the client sent.
                let (mut cr, mut cw) = client.split();
                let (mut sr, mut sw) = server.split();
                let up = async {
                    let mut buf = [0u8; 8192];
                    loop {
                        let n = cr.read(&mut buf).await.unwrap_or(0);
                        if n == 0 || sw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                        seen.0.lock().unwrap().1.extend_from_slice(&buf[..n]);
                    }
                };
                let down = tokio::io::copy(&mut sr, &mut cw);
                let _ = tokio::join!(up, down);
            });
        }
    });
    (url, log, task)
}

/// The simulator over TLS (a certificate for 127.0.0.1 from a test CA) and a CONNECT proxy.
struct Proxied {
    _sim: crate::helpers::Sim,
    pki: Pki,
    /// The TLS relay's address.
    addr: String,
    relay: tokio::task::JoinHandle<()>,
    proxy: String,
    log: ProxyLog,
    proxy_task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxied {
    fn drop(&mut self) {
        self.relay.abort();
        self.proxy_task.abort();
    }
}

impl Proxied {
    async fn start() -> Proxied {
        let sim = spawn_sim().await;
        let pki = Pki::new(&["127.0.0.1"]);
        let (addr, relay) = tls_relay(
            sim.url.trim_start_matches("http://").to_owned(),
            pki.server_config(false),
        )
        .await;
        let (proxy, log, proxy_task) = connect_proxy().await;
        Proxied {
            _sim: sim,
            pki,
            addr,
            relay,
            proxy,
            log,
            proxy_task,
        }
    }
}

/// An exporter polling account 1001 at `base_url` with `extra` under `api:`.
async fn exporter(base_url: &str, extra: &str) -> Exporter {
    let yaml = format!(
        "api:\n  base_url: {base_url}\n  timeout: 2s\n  max_retries: 0\n{extra}collectors:\n  delivery_account:\n    interval: 1s\n    accounts: [{ACCOUNT}]\n"
    );
    spawn_exporter(Config::parse(&yaml, Some(TOKEN.to_owned())).unwrap()).await
}

/// Waits for the account's first outcome; whether it succeeded.
async fn outcome(exporter: &Exporter) -> bool {
    let series =
        format!("mailhost_target_success{{collector=\"delivery_account\",target=\"{ACCOUNT}\"}}");
    let body = exporter
        .scrape_until("the account's first outcome", |b| {
            value(b, &series).is_some()
        })
        .await;
    value(&body, &series) == Some(1.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_behind_a_private_ca_is_reached_with_ca_file_server_name_and_a_client_certificate()
 {
    let sim = spawn_sim().await;
    let upstream = sim.url.trim_start_matches("http://").to_owned();
    // A certificate for 127.0.0.1: trusted only with ca_file.
    let pki = Pki::new(&["127.0.0.1", "localhost"]);
    let (addr, relay) = tls_relay(upstream.clone(), pki.server_config(false)).await;
    let url = format!("https://{addr}");
    let ca = format!("  tls_config:\n    ca_file: {}\n", pki.path("ca.crt"));
    assert!(
        !outcome(&exporter(&url, "").await).await,
        "no ca_file: refused"
    );
    let with_ca = exporter(&url, &ca).await;
    assert!(outcome(&with_ca).await, "with ca_file");
    let remaining = format!("mailhost_delivery_remaining_messages{{account_id=\"{ACCOUNT}\"}}");
    assert!(value(&with_ca.scrape().await, &remaining).is_some());
    relay.abort();

    // A certificate for another name: reached by address only with server_name.
    let named = Pki::new(&["provider.internal"]);
    let (addr, relay) = tls_relay(upstream.clone(), named.server_config(false)).await;
    let url = format!("https://{addr}");
    let ca = format!("  tls_config:\n    ca_file: {}\n", named.path("ca.crt"));
    assert!(
        !outcome(&exporter(&url, &ca).await).await,
        "the name does not match"
    );
    let server_name = format!("{ca}    server_name: provider.internal\n");
    assert!(
        outcome(&exporter(&url, &server_name).await).await,
        "with server_name"
    );
    relay.abort();

    // Mutual TLS: only with the client certificate.
    let (addr, relay) = tls_relay(upstream, pki.server_config(true)).await;
    let url = format!("https://{addr}");
    let ca = format!("  tls_config:\n    ca_file: {}\n", pki.path("ca.crt"));
    assert!(
        !outcome(&exporter(&url, &ca).await).await,
        "no client certificate"
    );
    let mutual = format!(
        "{ca}    cert_file: {}\n    key_file: {}\n    min_version: TLS13\n",
        pki.path("client.crt"),
        pki.path("client.key")
    );
    assert!(
        outcome(&exporter(&url, &mutual).await).await,
        "with cert_file and key_file"
    );
    relay.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_go_through_the_connect_proxy_and_the_token_travels_only_inside_the_tunnel() {
    let p = Proxied::start().await;
    let (pki, addr, proxy, log) = (&p.pki, &p.addr, &p.proxy, &p.log);
    let extra = format!(
        "  proxy_url: {proxy}\n  tls_config:\n    ca_file: {}\n",
        pki.path("ca.crt")
    );
    let through = exporter(&format!("https://{addr}"), &extra).await;
    assert!(outcome(&through).await);
    let heads = log.heads();
    assert!(
        !heads.is_empty()
            && heads
                .iter()
                .all(|h| h.starts_with(&format!("CONNECT {addr} "))),
        "{heads:?}"
    );
    let everything = log.everything();
    assert!(!everything.contains(TOKEN), "the proxy saw the token");
    assert!(
        !everything.contains("/api/delivery"),
        "the proxy saw a path"
    );
    // no_proxy: this address is reached directly, and the proxy sees nothing more.
    let before = log.heads().len();
    let direct = exporter(
        &format!("https://{addr}"),
        &format!("{extra}  no_proxy: 127.0.0.1\n"),
    )
    .await;
    assert!(outcome(&direct).await);
    assert_eq!(log.heads().len(), before);
    drop((through, direct));
}

/// `HTTPS_PROXY` is honoured only with `proxy_from_environment: true`, as in Prometheus: the
/// binary with the variable set and the default goes direct; with the key it goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_proxy_from_the_environment_is_used_only_when_the_config_says_so() {
    let p = Proxied::start().await;
    let (pki, addr, proxy, log) = (&p.pki, &p.addr, &p.proxy, &p.log);
    for from_environment in [false, true] {
        let config = pki
            .dir
            .path()
            .join(format!("config-{from_environment}.yml"));
        std::fs::write(
            &config,
            format!(
                "api:\n  base_url: https://{addr}\n  token_file: {}\n  proxy_from_environment: {from_environment}\n  tls_config:\n    ca_file: {}\ncollectors:\n  delivery_account:\n    interval: 1s\n    accounts: [{ACCOUNT}]\n",
                pki.path("token"),
                pki.path("ca.crt")
            ),
        )
        .unwrap();
        let port = crate::helpers::free_port();
        let mut running = Running::start_with_env(
            &[
                &format!("--config.file={}", config.display()),
                &format!("--web.listen-address=127.0.0.1:{port}"),
            ],
            // A NO_PROXY of the machine (often loopback) must not send the exporter direct.
            &[
                ("HTTPS_PROXY", proxy),
                ("https_proxy", proxy),
                ("NO_PROXY", ""),
                ("no_proxy", ""),
            ],
        );
        let url = format!("http://127.0.0.1:{port}/metrics");
        let series = format!(
            "mailhost_target_success{{collector=\"delivery_account\",target=\"{ACCOUNT}\"}}"
        );
        wait_for("a successful poll", || async {
            let body = reqwest::get(&url).await.ok()?.text().await.ok()?;
            (value(&body, &series) == Some(1.0)).then_some(())
        })
        .await;
        running.terminate();
        assert_eq!(
            !log.heads().is_empty(),
            from_environment,
            "proxy_from_environment: {from_environment}: {:?}",
            log.heads()
        );
    }
}

#[test]
fn bad_files_and_proxy_addresses_are_refused_at_config_check_naming_the_field() {
    let pki = Pki::new(&["127.0.0.1"]);
    let token = pki.path("token");
    let cases: Vec<(String, &str)> = vec![
        (
            format!("  tls_config:\n    ca_file: {}\n", pki.path("missing.crt")),
            "api.tls_config.ca_file: cannot read",
        ),
        (
            format!("  tls_config:\n    ca_file: {}\n", pki.path("not-pem.crt")),
            "api.tls_config.ca_file: the file it names holds no PEM certificate",
        ),
        (
            format!("  tls_config:\n    cert_file: {}\n", pki.path("client.crt")),
            "api.tls_config: give cert_file and key_file together",
        ),
        (
            format!(
                "  tls_config:\n    cert_file: {}\n    key_file: {}\n",
                pki.path("client.crt"),
                pki.path("client.crt")
            ),
            "api.tls_config.key_file: the file it names holds no PEM private key",
        ),
        (
            "  tls_config:\n    min_version: TLS10\n".to_owned(),
            "api.tls_config.min_version: \"TLS10\" is not offered",
        ),
        (
            "  tls_config:\n    server_name: \"not a name\"\n".to_owned(),
            "api.tls_config.server_name",
        ),
        (
            "  proxy_url: ftp://proxy.example.net\n".to_owned(),
            "api.proxy_url: \"ftp://proxy.example.net\" is not a proxy address",
        ),
        (
            "  proxy_url: http://user:secret@proxy.example.net:3128/path\n".to_owned(),
            "api.proxy_url:",
        ),
        (
            "  no_proxy: localhost\n".to_owned(),
            "api.no_proxy: applies to proxy_url",
        ),
        (
            "  proxy_url: http://proxy.example.net:3128\n  proxy_from_environment: true\n"
                .to_owned(),
            "api.proxy_url: give proxy_url or proxy_from_environment",
        ),
    ];
    // `--config.check` of `text`: whether it passed, and what it said.
    let check = |text: String| {
        let config = pki.dir.path().join("config.yml");
        std::fs::write(&config, text).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mailhost_exporter"))
            .arg(format!("--config.file={}", config.display()))
            .arg("--config.check")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for (extra, want) in cases {
        let (ok, said) = check(format!(
            "api:\n  base_url: https://api.example.net\n  token_file: {token}\n{extra}collectors:\n  delivery_account:\n    accounts: [1]\n"
        ));
        assert!(!ok, "{extra}");
        assert!(said.contains(want), "{extra}: {said}");
        // A proxy's password is never repeated.
        assert!(!said.contains("secret"), "{said}");
    }
    // A proxy in front of a plain http:// provider would see the token: refused, per tenant too.
    let (ok, said) = check(format!(
        "api:\n  base_url: https://api.example.net\ncollectors:\n  delivery_account: {{}}\ntenants:\n  - name: acme\n    token_file: {token}\n    base_url: http://api.example.net\n    proxy_url: http://proxy.example.net:3128\n    collectors:\n      delivery_account:\n        accounts: [1]\n"
    ));
    assert!(!ok);
    assert!(
        said.contains("tenants[0].proxy_url: a proxy would see every header"),
        "{said}"
    );
}
