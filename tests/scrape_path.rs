//! The scrape path: `/metrics` hands out the prepared body (gzipped once per refresh) and a
//! per-scrape tail of self-metrics; gzip is negotiated from `Accept-Encoding`, and the
//! gunzipped answer is byte for byte the identity answer.

use std::io::Read as _;

use mailhost_exporter::config::Config;
use reqwest::header::{ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH, VARY};

use crate::helpers::{Exporter, TOKEN, memory_kib, spawn_exporter, spawn_sim, wait_for};

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0";

/// The demo accounts, polled once a minute: after the first run nothing changes for a while,
/// so two scrapes a moment apart agree.
async fn exporter(sim_url: &str) -> Exporter {
    let yaml = format!(
        "api:\n  base_url: {sim_url}\n  timeout: 2s\ncollectors:\n  delivery_account:\n    interval: 60s\n    max_age: 10m\n    accounts: [1001, 1002, 1003, 1004]\n"
    );
    let exporter = spawn_exporter(Config::parse(&yaml, Some(TOKEN.to_owned())).unwrap()).await;
    exporter
        .scrape_until("the first run", |b| {
            b.contains("mailhost_delivery_remaining_messages{")
        })
        .await;
    exporter
}

/// (Content-Encoding, Vary, Content-Length, body bytes) of one scrape.
async fn fetch(
    exporter: &Exporter,
    accept: Option<&str>,
    encoding: Option<&str>,
) -> (Option<String>, Option<String>, Option<u64>, Vec<u8>) {
    let mut request = reqwest::Client::new().get(exporter.url("/metrics"));
    if let Some(a) = accept {
        request = request.header(ACCEPT, a);
    }
    if let Some(e) = encoding {
        request = request.header(ACCEPT_ENCODING, e);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    let header = |name| {
        response
            .headers()
            .get(name)
            .map(|v: &reqwest::header::HeaderValue| v.to_str().unwrap().to_owned())
    };
    let encoding = header(CONTENT_ENCODING);
    let vary = header(VARY);
    let length = header(CONTENT_LENGTH).map(|l| l.parse().unwrap());
    let body = response.bytes().await.unwrap().to_vec();
    (encoding, vary, length, body)
}

/// Every member of a gzip stream, concatenated, as Go's reader (Prometheus) reads it.
fn gunzip_all(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(data)
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// The first gzip member only.
fn gunzip_first(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(data)
        .read_to_end(&mut out)
        .unwrap();
    out
}

#[tokio::test]
async fn the_gunzipped_body_equals_the_identity_body_exactly_in_both_formats() {
    let sim = spawn_sim().await;
    let exporter = exporter(&sim.url).await;
    for (accept, eof) in [(None, false), (Some(OPENMETRICS), true)] {
        // Self-metrics only grow: two equal identity bodies around the gzip one mean nothing
        // changed in between, and then the three must agree exactly.
        let (identity, gzip) = wait_for("two equal identity bodies around a gzip one", || async {
            let (_, _, _, before) = fetch(&exporter, accept, None).await;
            let (encoding, vary, length, gzip) = fetch(&exporter, accept, Some("gzip")).await;
            let (_, _, _, after) = fetch(&exporter, accept, None).await;
            assert_eq!(encoding.as_deref(), Some("gzip"));
            assert_eq!(vary.as_deref(), Some("accept-encoding"));
            assert_eq!(length, Some(gzip.len() as u64), "an exact Content-Length");
            (before == after).then_some((before, gzip))
        })
        .await;
        let text = String::from_utf8(identity.clone()).unwrap();
        assert!(text.contains("mailhost_delivery_remaining_messages{"));
        assert!(
            text.contains("mailhost_build_info{"),
            "self-metrics in the tail"
        );
        assert_eq!(text.ends_with("# EOF\n"), eof, "{accept:?}");
        assert_eq!(text.matches("# EOF").count(), usize::from(eof));
        assert_eq!(gunzip_all(&gzip), identity, "{accept:?}");
        // One member per prepared section (health, then each collector), each gzipped once per
        // refresh, then the self-metrics.
        let first = gunzip_first(&gzip);
        assert!(first.len() < identity.len());
        assert!(identity.starts_with(&first));
        assert!(
            !String::from_utf8(first)
                .unwrap()
                .contains("mailhost_build_info")
        );
    }
}

#[tokio::test]
async fn a_client_that_does_not_accept_gzip_gets_identity() {
    let sim = spawn_sim().await;
    let exporter = exporter(&sim.url).await;
    for encoding in [None, Some("identity"), Some("br, deflate"), Some("")] {
        let (content_encoding, vary, length, body) = fetch(&exporter, None, encoding).await;
        assert_eq!(content_encoding, None, "{encoding:?}");
        assert_eq!(vary.as_deref(), Some("accept-encoding"));
        assert_eq!(length, Some(body.len() as u64));
        let text = String::from_utf8(body).unwrap();
        assert!(text.starts_with("# HELP "), "{encoding:?}");
        assert!(text.contains("mailhost_build_info{"));
    }
}

#[tokio::test]
async fn gzip_with_q_zero_means_identity() {
    let sim = spawn_sim().await;
    let exporter = exporter(&sim.url).await;
    for encoding in [
        "gzip;q=0",
        "gzip;q=0.000, identity",
        "gzip;q=0, *;q=1",
        "*;q=0",
    ] {
        let (content_encoding, _, _, body) = fetch(&exporter, None, Some(encoding)).await;
        assert_eq!(content_encoding, None, "{encoding}");
        assert!(String::from_utf8(body).unwrap().starts_with("# HELP "));
    }
    // A positive q still means gzip.
    let (content_encoding, _, _, body) = fetch(&exporter, None, Some("gzip;q=0.1")).await;
    assert_eq!(content_encoding.as_deref(), Some("gzip"));
    assert!(
        String::from_utf8(gunzip_all(&body))
            .unwrap()
            .starts_with("# HELP ")
    );
}

#[tokio::test]
async fn the_landing_page_is_still_gzipped_by_the_compression_layer() {
    let sim = spawn_sim().await;
    let exporter = exporter(&sim.url).await;
    let response = reqwest::Client::new()
        .get(exporter.url("/"))
        .header(ACCEPT_ENCODING, "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response
            .headers()
            .get(CONTENT_ENCODING)
            .map(|v| v.to_str().unwrap()),
        Some("gzip")
    );
    let page = String::from_utf8(gunzip_all(&response.bytes().await.unwrap())).unwrap();
    assert!(
        page.contains("<html") || page.contains("<!DOCTYPE"),
        "{page}"
    );
}

/// Reads one `Connection: close` answer to its end (bounded by `limit` bytes and a timeout);
/// returns the head and the length of the body.
async fn read_answer(stream: &mut tokio::net::TcpStream, limit: usize) -> (String, usize) {
    use tokio::io::AsyncReadExt as _;
    let mut all = Vec::new();
    let mut limited = (&mut *stream).take(limit as u64);
    tokio::time::timeout(
        std::time::Duration::from_secs(120),
        limited.read_to_end(&mut all),
    )
    .await
    .expect("the answer within 120 s")
    .unwrap();
    let end = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    (
        String::from_utf8_lossy(&all[..end]).into_owned(),
        all.len() - end - 4,
    )
}

// Several threads: the simulator in this process answers while the child polls it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_scrapes_held_open_at_once_share_one_prepared_body() {
    use crate::helpers::{Running, spawn_sim_with};
    use mailhost_sim::{Account, AccountSeed, SimConfig};
    use tokio::io::AsyncWriteExt as _;

    const ACCOUNTS: i32 = 2000;
    let mut config = SimConfig::demo(TOKEN);
    for id in 200_001..200_001 + ACCOUNTS {
        config.accounts.push(AccountSeed::from(Account {
            id,
            username: format!("bulk-{id}"),
            ..Account::default()
        }));
    }
    let sim = spawn_sim_with(config).await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let ids: Vec<String> = (200_001..200_001 + ACCOUNTS)
        .map(|i| i.to_string())
        .collect();
    let config_file = dir.path().join("config.yml");
    std::fs::write(
        &config_file,
        format!(
            "api:\n  base_url: {}\n  token_file: {}\n  timeout: 10s\n  concurrency: 32\ncollectors:\n  delivery_account:\n    interval: 1h\n    deadline: 10m\n    accounts: [{}]\n",
            sim.url,
            token_file.display(),
            ids.join(", ")
        ),
    )
    .unwrap();
    let running = Running::start(&[
        &format!("--config.file={}", config_file.display()),
        "--web.listen-address=127.0.0.1:0",
    ]);
    let address = running
        .logged("mailhost_exporter listening", "address")
        .await;
    let url = format!("http://{address}/metrics");
    // The debug binary polls 2000 accounts: more patience than the usual wait.
    let mut body = String::new();
    for _ in 0..240 {
        body = reqwest::get(&url).await.unwrap().text().await.unwrap();
        if body
            .matches("mailhost_delivery_remaining_messages{")
            .count()
            >= ACCOUNTS as usize
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    assert!(
        body.matches("mailhost_delivery_remaining_messages{")
            .count()
            >= ACCOUNTS as usize,
        "every account on /metrics"
    );
    let size = body.len();
    assert!(size > 1_500_000, "a large body: {size} bytes");

    let pid = running.pid();
    let before = memory_kib(pid, "VmHWM");
    // 32 scrapes asked for and not read: each answer waits on a full socket buffer, so a
    // per-scrape copy of the body would be held 32 times at once.
    let mut streams = Vec::new();
    for _ in 0..32 {
        let mut s = tokio::net::TcpStream::connect(address.as_str())
            .await
            .unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        streams.push(s);
    }
    // Every answer has begun: its first bytes wait in our socket.
    for s in &streams {
        let mut first = [0u8; 1];
        tokio::time::timeout(crate::helpers::PATIENCE, s.peek(&mut first))
            .await
            .expect("every scrape is answered")
            .unwrap();
    }
    let held = memory_kib(pid, "VmHWM");
    for s in &mut streams {
        let (head, length) = read_answer(s, size * 2).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(
            head.to_ascii_lowercase().contains("content-length:"),
            "{head}"
        );
        assert!(
            length + 16 * 1024 > size && length < size + 16 * 1024,
            "{length} vs {size}"
        );
    }
    let grown_kib = held.saturating_sub(before);
    // 32 copies would be 32 bodies; allow a quarter of that for everything else.
    let bound_kib = (32 * size / 4 / 1024) as u64;
    eprintln!(
        "body {size} bytes; VmHWM {before} KiB before, {held} KiB with 32 answers held open (+{grown_kib} KiB, bound {bound_kib} KiB)"
    );
    assert!(
        grown_kib < bound_kib,
        "VmHWM grew by {grown_kib} KiB with 32 scrapes held open (bound {bound_kib} KiB)"
    );
}

/// `collect[]`, as node_exporter reads it: only the named collectors' series, with the
/// exporter's health and self-metrics; the selection is still a valid exposition in both formats
/// and encodings; a collector that is not enabled is a 400 naming the enabled ones.
#[tokio::test]
async fn collect_serves_only_the_named_collectors_and_refuses_unknown_ones() {
    let sim = spawn_sim().await;
    let yaml = format!(
        "api:\n  base_url: {}\ncollectors:\n  delivery_account:\n    interval: 1s\n    accounts: [1001]\n  migration:\n    interval: 1s\n    migrations: [{}]\n",
        sim.url,
        mailhost_sim::DEMO_MIGRATION_RUNNING
    );
    let config =
        mailhost_exporter::config::Config::parse(&yaml, Some(crate::helpers::TOKEN.to_owned()))
            .unwrap();
    let exporter = crate::helpers::spawn_exporter(config).await;
    exporter
        .scrape_until("both collectors", |b| {
            b.contains("mailhost_delivery_remaining_messages{") && b.contains("mailhost_migration_")
        })
        .await;
    let client = reqwest::Client::new();
    for (accept, encoding) in [
        (None, None),
        (None, Some("gzip")),
        (Some(OPENMETRICS), None),
        (Some(OPENMETRICS), Some("gzip")),
    ] {
        let mut request = client.get(exporter.url("/metrics?collect[]=migration"));
        if let Some(a) = accept {
            request = request.header("Accept", a);
        }
        if let Some(e) = encoding {
            request = request.header("Accept-Encoding", e);
        }
        let r = request.send().await.unwrap();
        assert_eq!(r.status(), 200);
        let bytes = r.bytes().await.unwrap();
        let text = String::from_utf8(if encoding.is_some() {
            gunzip_all(&bytes)
        } else {
            bytes.to_vec()
        })
        .unwrap();
        assert!(
            text.contains("mailhost_migration_"),
            "{accept:?} {encoding:?}"
        );
        assert!(
            !text.contains("mailhost_delivery_remaining_messages"),
            "{accept:?} {encoding:?}"
        );
        assert!(text.contains("mailhost_up "), "health stays");
        assert!(text.contains("mailhost_build_info{"), "self-metrics stay");
        // promtool reads a filtered body too: promtool::promtool_finds_nothing_to_complain_about_in_metrics.
        if accept.is_some() {
            assert!(text.ends_with("# EOF\n"));
        }
    }
    // Percent-encoded, as Prometheus writes `params`.
    let encoded = exporter
        .get("/metrics?collect%5B%5D=delivery_account")
        .await
        .text()
        .await
        .unwrap();
    assert!(encoded.contains("mailhost_delivery_remaining_messages{"));
    assert!(!encoded.contains("mailhost_migration_"));
    let long = "x".repeat(5000);
    for bad in ["mailbox", "nope", "%3Cscript%3E", long.as_str()] {
        let r = exporter.get(&format!("/metrics?collect[]={bad}")).await;
        assert_eq!(r.status(), 400, "{bad}");
        // Plain text, so an echoed value is never markup, and a long one is cut.
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/plain")
        );
        let text = r.text().await.unwrap();
        assert!(
            text.contains("is not an enabled collector; use one of: delivery_account, migration"),
            "{text}"
        );
        assert!(text.len() < 300, "{text}");
    }
}
