//! Hostile clients against the exporter binary in demo mode: unfinished and fat request heads,
//! idle connections, more connections than a 1024-descriptor limit allows, and a flood of
//! wrong passwords next to a scraper's right one. Every socket is closed and every child
//! killed by the test, and waits are bounded.

use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use mailhost_exporter::web::serve::serve;
use mailhost_exporter::web::web_config::WebConfig;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::helpers::{PATIENCE, Running, memory_kib, wait_for};

/// The exporter binary in demo mode on a loopback port, optionally under a descriptor limit;
/// killed on drop.
/// The exporter as a child; a panic in its log fails the test when it is dropped (`Running`).
struct Exporter {
    running: Running,
    addr: SocketAddr,
}

impl Exporter {
    async fn start(flags: &[&str], fd_limit: Option<u32>) -> Exporter {
        let bin = env!("CARGO_BIN_EXE_mailhost_exporter");
        let mut command = match fd_limit {
            Some(n) => {
                let mut c = Command::new("bash");
                c.arg("-c")
                    .arg(format!("ulimit -Sn {n} -Hn {n} && exec \"$0\" \"$@\""))
                    .arg(bin);
                c
            }
            None => Command::new(bin),
        };
        command
            .args(["--demo", "--web.listen-address=127.0.0.1:0"])
            .args(flags);
        let running = Running::spawn(command);
        let addr = wait_for("the exporter to say where it listens", || async {
            running
                .log()
                .iter()
                .filter(|l| {
                    l.contains("mailhost_exporter listening") || l.contains("open this URL")
                })
                .find_map(|l| {
                    let start = l.find("url=")? + 4;
                    let url = l[start..].split_whitespace().next()?.trim_matches('"');
                    let host_port = url.strip_prefix("http://")?.split('/').next()?;
                    host_port.parse::<SocketAddr>().ok()
                })
        })
        .await;
        Exporter { running, addr }
    }

    fn pid(&self) -> u32 {
        self.running.pid()
    }

    /// A field of `/proc/<pid>/status` in KiB, e.g. `VmHWM`.
    fn status_kib(&self, field: &str) -> u64 {
        memory_kib(self.pid(), field)
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// A connection that sent part of a request head; `Ok(true)` once the server has closed it.
async fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_millis(50), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            // Whatever the server said (a 408 or 431), it must then close.
            Ok(Ok(_)) => continue,
            Err(_) => return false,
        }
    }
}

/// Waits, with the suite's patience, until the server has closed every connection in `open`.
async fn all_closed_by_server(what: &str, open: &mut [TcpStream]) {
    let mut closed = vec![false; open.len()];
    let started = std::time::Instant::now();
    loop {
        for (stream, done) in open.iter_mut().zip(closed.iter_mut()) {
            if !*done {
                *done = closed_by_server(stream).await;
            }
        }
        if closed.iter().all(|c| *c) {
            return;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{what}: {} of {} connections still open",
            closed.iter().filter(|c| !**c).count(),
            open.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn get_status(client: &reqwest::Client, url: &str) -> Option<u16> {
    client
        .get(url)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .ok()
        .map(|r| r.status().as_u16())
}

#[tokio::test]
async fn unfinished_request_heads_are_dropped_after_the_header_read_timeout_even_while_bytes_trickle_in()
 {
    // Idle connections would live an hour: only the header-read timeout can close these.
    let exporter = Exporter::start(
        &["--web.header-read-timeout=2s", "--web.idle-timeout=1h"],
        None,
    )
    .await;
    let mut open = Vec::new();
    for i in 0..20 {
        let mut s = TcpStream::connect(exporter.addr).await.unwrap();
        s.write_all(format!("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow-{i}: ").as_bytes())
            .await
            .unwrap();
        open.push(s);
    }
    // One client keeps sending a byte now and then, never finishing its head.
    let mut trickle = TcpStream::connect(exporter.addr).await.unwrap();
    trickle.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
    let trickled = async {
        for _ in 0..(PATIENCE.as_millis() / 250) {
            if trickle.write_all(b"X-a: b\r\n").await.is_err() {
                return true;
            }
            if closed_by_server(&mut trickle).await {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        false
    };
    let (trickle_closed, ()) = tokio::join!(
        trickled,
        all_closed_by_server("unfinished heads", &mut open)
    );
    assert!(trickle_closed, "a head trickling in forever is cut off");
    // The exporter still answers.
    let client = reqwest::Client::new();
    assert_eq!(
        get_status(&client, &exporter.url("/metrics")).await,
        Some(200)
    );
}

#[tokio::test]
async fn fat_request_heads_get_431_or_a_close_and_memory_stays_bounded() {
    let exporter = Exporter::start(&[], None).await;
    let client = reqwest::Client::new();
    // Warm up so the baseline includes a served scrape.
    assert_eq!(
        get_status(&client, &exporter.url("/metrics")).await,
        Some(200)
    );
    let before = exporter.status_kib("VmHWM");

    // A complete request whose head is 32 KiB: refused with 431.
    let mut s = TcpStream::connect(exporter.addr).await.unwrap();
    let mut fat = String::from("GET /metrics HTTP/1.1\r\nHost: x\r\n");
    while fat.len() < 32 * 1024 {
        fat.push_str(
            "X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
        );
    }
    fat.push_str("\r\n");
    let _ = s.write_all(fat.as_bytes()).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(PATIENCE, s.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 431"),
        "a 32 KiB head: {answer}"
    );
    drop(s);

    // 300 connections, each sending 380 KB of header lines without ending the head, 50 at a
    // time so that they are all open together.
    let line = format!("X-Filler: {}\r\n", "a".repeat(500));
    let chunk = line.repeat(20); // about 10 KB
    let tasks: Vec<_> = (0..300)
        .map(|_| {
            let (chunk, addr) = (chunk.clone(), exporter.addr);
            tokio::spawn(async move {
                let Ok(mut s) = TcpStream::connect(addr).await else {
                    return;
                };
                let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n").await;
                for _ in 0..38 {
                    let sent =
                        tokio::time::timeout(Duration::from_secs(5), s.write_all(chunk.as_bytes()))
                            .await;
                    if !matches!(sent, Ok(Ok(()))) {
                        break;
                    }
                }
                // Hold it open a moment, then let go.
                tokio::time::sleep(Duration::from_millis(500)).await;
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let after = exporter.status_kib("VmHWM");
    let growth_mib = after.saturating_sub(before) / 1024;
    assert!(
        growth_mib < 64,
        "peak memory grew by {growth_mib} MiB ({before} KiB to {after} KiB)"
    );
    assert_eq!(
        get_status(&client, &exporter.url("/metrics")).await,
        Some(200)
    );
}

#[tokio::test]
async fn idle_connections_are_closed_after_the_idle_timeout() {
    // The header-read timeout is long: only the idle timeout can close these.
    let exporter = Exporter::start(
        &["--web.idle-timeout=2s", "--web.header-read-timeout=5m"],
        None,
    )
    .await;
    // One connection that never says anything, one kept alive after a request.
    let silent = TcpStream::connect(exporter.addr).await.unwrap();
    let mut kept = TcpStream::connect(exporter.addr).await.unwrap();
    kept.write_all(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut head = vec![0u8; 1024];
    let n = tokio::time::timeout(PATIENCE, kept.read(&mut head))
        .await
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&head[..n]).starts_with("HTTP/1.1 200"));
    all_closed_by_server("idle connections", &mut [silent, kept]).await;
}

#[tokio::test]
async fn eleven_hundred_idle_connections_under_a_1024_descriptor_limit_leave_metrics_answering() {
    // This process holds the connections too: it needs more than 1024 descriptors itself.
    let (soft, hard) = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap();
    if soft < 2048 {
        rlimit::setrlimit(rlimit::Resource::NOFILE, hard.min(4096), hard).unwrap();
    }
    let (soft, _) = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap();
    assert!(soft >= 1200, "the test needs 1200 descriptors, has {soft}");

    let exporter = Exporter::start(&[], Some(1024)).await;
    let mut idle = Vec::new();
    for _ in 0..1100 {
        match tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(exporter.addr)).await
        {
            Ok(Ok(s)) => idle.push(s),
            _ => break,
        }
    }
    assert_eq!(
        idle.len(),
        1100,
        "every connection is accepted by the kernel"
    );
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let mut answered = 0;
    for _ in 0..18 {
        if get_status(&client, &exporter.url("/metrics")).await == Some(200) {
            answered += 1;
        }
    }
    assert_eq!(
        answered, 18,
        "scrapes answered next to 1100 idle connections"
    );
    let log = exporter.running.log().join("\n");
    assert!(log.contains("connection cap reached"), "the cap is logged");
    drop(idle);
}

/// A server with one user whose bcrypt cost is realistic, so that checks queue up.
async fn flood_target() -> (SocketAddr, CancellationToken, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let hash = bcrypt::hash("scraper-secret", 11).unwrap();
    let path = dir.path().join("web.yml");
    std::fs::write(
        &path,
        format!("basic_auth_users:\n  prometheus: '{hash}'\n"),
    )
    .unwrap();
    let config = WebConfig::load(&path).unwrap();
    let router = config.apply(Router::new().route("/", get(|| async { "ok" })));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    tokio::spawn(serve(listener, router, None, shutdown.clone()));
    (addr, shutdown, dir)
}

/// A raw GET with basic auth from `source`, answered with its status code.
async fn login_from(source: &str, addr: SocketAddr, user: &str, password: &str) -> Option<u16> {
    let socket = TcpSocket::new_v4().ok()?;
    socket.bind(format!("{source}:0").parse().unwrap()).ok()?;
    let mut s = socket.connect(addr).await.ok()?;
    let credentials = base64(&format!("{user}:{password}"));
    s.write_all(
        format!("GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {credentials}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .ok()?;
    let mut answer = Vec::new();
    tokio::time::timeout(PATIENCE, s.read_to_end(&mut answer))
        .await
        .ok()?
        .ok()?;
    let answer = String::from_utf8_lossy(&answer);
    answer.get(9..12)?.parse().ok()
}

fn base64(s: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in s.as_bytes().chunks(3) {
        let n =
            chunk.iter().fold(0u32, |acc, b| acc << 8 | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[tokio::test]
async fn a_right_password_is_answered_while_a_flood_of_wrong_ones_from_another_address_waits() {
    let (addr, shutdown, _dir) = flood_target().await;
    // Every answer takes a number in the order it arrives.
    let order = Arc::new(AtomicUsize::new(0));
    let first_refusal = Arc::new(tokio::sync::Notify::new());
    let flood: Vec<_> = (0..300)
        .map(|i| {
            let (order, first_refusal) = (order.clone(), first_refusal.clone());
            tokio::spawn(async move {
                let status =
                    login_from("127.0.0.2", addr, "prometheus", &format!("guess-{i}")).await;
                let at = order.fetch_add(1, Ordering::SeqCst);
                if status == Some(429) {
                    first_refusal.notify_one();
                }
                (status, at)
            })
        })
        .collect();
    // Once one wrong guess was turned away, the flood's own queue is full.
    tokio::time::timeout(PATIENCE, first_refusal.notified())
        .await
        .expect("the flood fills its queue");
    let good = login_from("127.0.0.1", addr, "prometheus", "scraper-secret").await;
    let good_at = order.fetch_add(1, Ordering::SeqCst);
    let mut last_flood = 0;
    let mut checked = 0;
    for f in flood {
        let (status, at) = f.await.unwrap();
        assert!(
            matches!(status, Some(401) | Some(429)),
            "a wrong guess got {status:?}"
        );
        if status == Some(401) {
            checked += 1;
        }
        last_flood = last_flood.max(at);
    }
    shutdown.cancel();
    assert_eq!(good, Some(200), "the right password is let in");
    assert!(
        good_at < last_flood,
        "the right password was answered (#{good_at}) before the flood's last answer (#{last_flood})"
    );
    assert!(
        checked <= 300 - 250,
        "most of the flood is turned away without a bcrypt check ({checked} checked)"
    );
}
