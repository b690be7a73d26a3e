//! The accept loop: plain HTTP or TLS on one listener, with the bounds that keep it answering
//! against any client (header-read and idle timeouts, a small header buffer, a connection cap
//! below the descriptor limit that evicts the least recently active idle connection), connect
//! info for the handlers, and a graceful stop when the shutdown token is cancelled.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use arc_swap::ArcSwap;
use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc};

use crate::descriptors::FD_RESERVE;
use crate::web::listen::accept_any;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

/// Pause after an accept error that is not about one connection (e.g. too many open files),
/// so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Open connections at most, as Prometheus' own `--web.max-connections`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// Time a client has to send a request head (and finish a TLS handshake) once it started.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Twice Prometheus' default scrape interval, so a scraper's kept-alive connection survives
/// from one scrape to the next; idle connections are also the first evicted at the cap.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// Read buffer of one HTTP/1 connection, which bounds the request head: a client sending more
/// header bytes gets a 431 and the connection is closed. hyper's default is about 400 KiB.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;

/// Header fields in one request at most (hyper's default is 100); more get a 431.
pub const MAX_HEADERS: usize = 64;

/// HTTP/2 streams open at once on one connection (hyper's default is 200). A scraper needs one.
const H2_MAX_STREAMS: u32 = 16;

/// What a plain-HTTP client on the TLS port is told, as Go's net/http answers it.
const PLAIN_HTTP_ON_TLS: &[u8] = b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nClient sent an HTTP request to an HTTPS server; use https://\n";

/// Bytes of a plain-HTTP request read and thrown away after the 400, so the close does not
/// reset the connection before the client has read the answer.
const PLAIN_HTTP_DRAIN: usize = 16 * 1024;

/// The server's bounds; [`ServeOptions::default`] is what the flags default to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServeOptions {
    /// A request head (and a TLS handshake) must arrive within this time of its first byte.
    pub header_read_timeout: Duration,
    /// A connection with no request in flight and no traffic is closed after this time.
    pub idle_timeout: Duration,
    /// Open connections at most (before the descriptor limit lowers it; see
    /// [`connection_cap`]).
    pub max_connections: usize,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// The TLS server config, read per handshake so that a reload serves a new certificate at once.
pub type LiveTls = Arc<ArcSwap<rustls::ServerConfig>>;

/// The connection cap: `requested`, lowered to the soft descriptor limit minus
/// [`FD_RESERVE`] so that accepting never runs out of descriptors.
pub fn connection_cap(requested: usize) -> usize {
    let soft = rlimit::getrlimit(rlimit::Resource::NOFILE)
        .map(|(soft, _)| soft)
        .unwrap_or(rlimit::INFINITY);
    cap_below(requested, soft)
}

fn cap_below(requested: usize, soft_limit: u64) -> usize {
    if soft_limit == rlimit::INFINITY {
        return requested.max(1);
    }
    let room = usize::try_from(soft_limit.saturating_sub(FD_RESERVE)).unwrap_or(usize::MAX);
    requested.min(room).max(1)
}

/// Serves `router` on `listener` with the default bounds, over TLS when `tls` is set; see
/// [`serve_with`].
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let tls = tls.map(|c| Arc::new(ArcSwap::new(c)));
    serve_with(
        vec![listener],
        router,
        tls,
        shutdown,
        ServeOptions::default(),
    )
    .await
}

/// Serves `router` on every listener, over TLS when `tls` is set (its current config is taken at
/// each handshake), until `shutdown` is cancelled; one connection cap for all of them; then stops accepting, lets open requests
/// finish, and returns. A failed handshake is logged at debug and only ends that connection.
/// Handlers can extract `ConnectInfo<SocketAddr>`.
pub async fn serve_with(
    listeners: Vec<TcpListener>,
    router: Router,
    tls: Option<LiveTls>,
    shutdown: CancellationToken,
    options: ServeOptions,
) -> std::io::Result<()> {
    let cap = connection_cap(options.max_connections);
    if cap < options.max_connections {
        tracing::warn!(
            max_connections = cap,
            requested = options.max_connections,
            "the open-file limit lowers the connection cap; raise `ulimit -n` (LimitNOFILE) to serve more"
        );
    }
    let tracker = Arc::new(Tracker::new(cap));
    // Every connection task holds a sender; when all are gone, every connection has ended.
    let (alive, mut all_done) = mpsc::channel::<()>(1);
    let mut turn = 0;
    loop {
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = accept_any(&listeners, &mut turn) => match accepted {
                Ok(conn) => conn,
                Err(e) if is_per_connection(&e) => continue,
                Err(e) => {
                    tracing::error!(error = %e, "cannot accept connections; retrying");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let Some(slot) = tracker.admit() else {
            // Every connection has a request in flight: the newcomer is the one to go.
            tracker.warn_full(peer);
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let tls = tls.clone();
        let shutdown = shutdown.clone();
        let alive = alive.clone();
        tokio::spawn(async move {
            let _alive = alive;
            let state = slot.state.clone();
            let evicted = state.evict.clone();
            tokio::select! {
                _ = accepted(stream, peer, router, tls, &shutdown, state, options) => {}
                _ = evicted.cancelled() => {
                    tracing::debug!(%peer, "connection evicted to make room for a new one");
                }
            }
            drop(slot);
        });
    }
    drop(listeners);
    drop(alive);
    let _ = all_done.recv().await;
    Ok(())
}

/// One accepted connection: the TLS handshake if any, then HTTP.
async fn accepted(
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    tls: Option<LiveTls>,
    shutdown: &CancellationToken,
    state: Arc<ConnState>,
    options: ServeOptions,
) {
    let Some(tls) = tls else {
        let io = Tracked::new(stream, state.clone(), true);
        return connection(io, peer, router, shutdown, state, options, false).await;
    };
    // The handshake counts as part of reading the request head, as Go's ReadHeaderTimeout.
    let handshake = async {
        let mut first = [0u8; 1];
        match stream.peek(&mut first).await {
            Ok(1) if first[0] == 0x16 => {}
            Ok(1) => {
                plain_http_on_tls(stream).await;
                return None;
            }
            _ => return None,
        }
        let acceptor = TlsAcceptor::from(tls.load_full());
        match acceptor.accept(stream).await {
            Ok(tls) => Some(tls),
            Err(e) => {
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                None
            }
        }
    };
    let tls = tokio::select! {
        _ = shutdown.cancelled() => return,
        r = tokio::time::timeout(options.header_read_timeout, handshake) => match r {
            Ok(Some(tls)) => tls,
            Ok(None) => return,
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                return;
            }
        },
    };
    // HTTP/2 over TLS only when ALPN agreed on it, as in Go.
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    let io = Tracked::new(tls, state.clone(), !h2);
    connection(io, peer, router, shutdown, state, options, h2).await;
}

/// Answers a plain-HTTP request on the TLS port with a 400 that says to use https, reads (and
/// drops) a bounded part of the request so the close is not a reset, and closes.
async fn plain_http_on_tls(mut stream: TcpStream) {
    if stream.write_all(PLAIN_HTTP_ON_TLS).await.is_err() {
        return;
    }
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 1024];
    let mut drained = 0;
    while drained < PLAIN_HTTP_DRAIN {
        match stream.read(&mut sink).await {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}

/// Serves one connection: HTTP/2 when `http2` (ALPN chose it), HTTP/1.1 otherwise.
async fn connection<I>(
    io: Tracked<I>,
    peer: SocketAddr,
    router: Router,
    shutdown: &CancellationToken,
    state: Arc<ConnState>,
    options: ServeOptions,
    http2: bool,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let in_service = state.clone();
    let service =
        hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            let in_flight = InFlight::start(in_service.clone());
            let response = router.clone().oneshot(request);
            async move {
                let response = response.await;
                drop(in_flight);
                response
            }
        });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        // A backstop only: hyper's clock also runs while a kept-alive connection waits for its
        // next request, so it cannot be the header-read timeout itself (see `watchdog`).
        .header_read_timeout(
            options
                .header_read_timeout
                .saturating_add(options.idle_timeout),
        )
        .max_buf_size(MAX_HEADER_BYTES)
        .max_headers(MAX_HEADERS);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(H2_MAX_STREAMS)
        .max_header_list_size(MAX_HEADER_BYTES as u32);
    let builder = if http2 {
        builder.http2_only()
    } else {
        builder.http1_only()
    };
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        why = watchdog(&state, options, !http2) => {
            tracing::debug!(%peer, reason = why, "connection closed");
            return;
        }
        _ = shutdown.cancelled() => {
            // Finish the request in flight, refuse new ones on this connection; a client that
            // sends nothing more is still bound by the timeouts.
            conn.as_mut().graceful_shutdown();
            tokio::select! {
                r = conn.as_mut() => r,
                _ = watchdog(&state, options, !http2) => return,
            }
        }
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// Resolves when the connection has to go: a request head that took longer than the
/// header-read timeout since its first byte, or no request in flight and no traffic for the
/// idle timeout. Returns the reason for the log.
async fn watchdog(state: &ConnState, options: ServeOptions, heads: bool) -> &'static str {
    loop {
        // Armed before the state is read, so a change made meanwhile still wakes us.
        let changed = state.changed.notified();
        let now = state.epoch.elapsed();
        let (deadline, reason) = if state.in_flight.load(Ordering::Acquire) > 0 {
            (None, "")
        } else {
            match state.head_started() {
                Some(start) if heads => (
                    Some(start.saturating_add(options.header_read_timeout)),
                    "request head not received within the header-read timeout",
                ),
                _ => (
                    Some(state.last_active().saturating_add(options.idle_timeout)),
                    "idle timeout",
                ),
            }
        };
        match deadline {
            Some(deadline) if deadline <= now => return reason,
            Some(deadline) => {
                tokio::select! {
                    _ = tokio::time::sleep(deadline.saturating_sub(now)) => {}
                    _ = changed => {}
                }
            }
            None => changed.await,
        }
    }
}

/// The open connections, so that the cap can evict the least recently active idle one.
struct Tracker {
    cap: usize,
    epoch: Instant,
    next_id: AtomicU64,
    open: Mutex<HashMap<u64, Arc<ConnState>>>,
    /// When the last "cap reached" warning was logged (ms since `epoch`), to log once a minute.
    last_warning: AtomicU64,
}

impl Tracker {
    fn new(cap: usize) -> Tracker {
        Tracker {
            cap,
            epoch: Instant::now(),
            next_id: AtomicU64::new(0),
            open: Mutex::default(),
            last_warning: AtomicU64::new(0),
        }
    }

    /// A slot for a new connection, evicting the least recently active connection without a
    /// request in flight (idle, or still sending its head) when the cap is reached; `None`
    /// when every open connection has a request in flight.
    fn admit(self: &Arc<Self>) -> Option<Slot> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let mut evicted = false;
        if open.len() >= self.cap {
            let victim = open
                .iter()
                .filter(|(_, c)| c.in_flight.load(Ordering::Acquire) == 0)
                .min_by_key(|(_, c)| c.last_active_ms.load(Ordering::Relaxed))
                .map(|(id, _)| *id)?;
            if let Some(gone) = open.remove(&victim) {
                gone.evict.cancel();
                evicted = true;
            }
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(ConnState::new(self.epoch));
        open.insert(id, state.clone());
        drop(open);
        if evicted && self.should_warn() {
            tracing::warn!(
                max_connections = self.cap,
                "connection cap reached: closing the least recently active idle connection for each new one (logged once a minute)"
            );
        }
        Some(Slot {
            tracker: self.clone(),
            id,
            state,
        })
    }

    fn should_warn(&self) -> bool {
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        let last = self.last_warning.load(Ordering::Relaxed);
        (last == 0 || now.saturating_sub(last) >= 60_000)
            && self
                .last_warning
                .compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    fn warn_full(&self, peer: SocketAddr) {
        if self.should_warn() {
            tracing::warn!(
                max_connections = self.cap,
                %peer,
                "connection cap reached and every connection has a request in flight: new connections are closed (logged once a minute)"
            );
        }
    }
}

/// A connection's place in the [`Tracker`], given back when the connection ends.
struct Slot {
    tracker: Arc<Tracker>,
    id: u64,
    state: Arc<ConnState>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.tracker.open.lock().unwrap_or_else(|e| e.into_inner());
        open.remove(&self.id);
    }
}

/// What the cap and the timeouts need to know of one connection. Times are milliseconds since
/// the tracker's epoch; `head_started_ms` is 0 when no request head is being received.
struct ConnState {
    epoch: Instant,
    last_active_ms: AtomicU64,
    head_started_ms: AtomicU64,
    in_flight: AtomicUsize,
    evict: CancellationToken,
    /// Wakes the watchdog when a request head starts or a request ends.
    changed: Notify,
}

impl ConnState {
    fn new(epoch: Instant) -> ConnState {
        let state = ConnState {
            epoch,
            last_active_ms: AtomicU64::new(0),
            head_started_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            evict: CancellationToken::new(),
            changed: Notify::new(),
        };
        state.touch();
        state
    }

    fn now_ms(&self) -> u64 {
        // Never 0, which means "none" for `head_started_ms`.
        u64::try_from(self.epoch.elapsed().as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    fn touch(&self) {
        self.last_active_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    fn last_active(&self) -> Duration {
        Duration::from_millis(self.last_active_ms.load(Ordering::Relaxed))
    }

    fn head_started(&self) -> Option<Duration> {
        match self.head_started_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    /// Bytes arrived: with no request in flight, they begin a request head whose clock starts
    /// now (unless it already runs).
    fn on_read(&self, heads: bool) {
        let now = self.now_ms();
        self.last_active_ms.store(now, Ordering::Relaxed);
        if heads
            && self.in_flight.load(Ordering::Acquire) == 0
            && self
                .head_started_ms
                .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.changed.notify_waiters();
        }
    }
}

/// A request in the handler: its connection is neither idle nor evictable meanwhile.
struct InFlight(Arc<ConnState>);

impl InFlight {
    fn start(state: Arc<ConnState>) -> InFlight {
        state.in_flight.fetch_add(1, Ordering::AcqRel);
        state.head_started_ms.store(0, Ordering::Relaxed);
        state.touch();
        InFlight(state)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.0.changed.notify_waiters();
    }
}

/// A connection's byte stream that records when bytes last moved. `heads` is off for HTTP/2,
/// whose frames are not request heads; only requests then count as activity.
struct Tracked<I> {
    io: I,
    state: Arc<ConnState>,
    heads: bool,
}

impl<I> Tracked<I> {
    fn new(io: I, state: Arc<ConnState>, heads: bool) -> Tracked<I> {
        Tracked { io, state, heads }
    }

    /// Bytes written are activity too (for HTTP/1).
    fn wrote(&self, r: Poll<std::io::Result<usize>>) -> Poll<std::io::Result<usize>> {
        if self.heads && matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.state.touch();
        }
        r
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Tracked<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        if this.heads && matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.state.on_read(true);
        }
        r
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Tracked<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, data);
        self.wrote(r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.wrote(r)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Errors that concern one connection only (the peer gave up before we accepted).
fn is_per_connection(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_stays_below_the_descriptor_limit_with_room_for_upstream() {
        assert_eq!(cap_below(512, 1024), 512);
        assert_eq!(cap_below(2000, 1024), 1024 - FD_RESERVE as usize);
        assert_eq!(cap_below(512, 100), 1);
        assert_eq!(cap_below(512, rlimit::INFINITY), 512);
    }

    #[tokio::test]
    async fn a_full_house_evicts_the_least_recently_active_idle_connection() {
        let tracker = Arc::new(Tracker::new(3));
        let a = tracker.admit().unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let b = tracker.admit().unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let c = tracker.admit().unwrap();
        // `a` is the oldest but busy; `b` is the least recently active idle one.
        let busy = InFlight::start(a.state.clone());
        let d = tracker.admit().unwrap();
        assert!(b.state.evict.is_cancelled());
        assert!(!a.state.evict.is_cancelled() && !c.state.evict.is_cancelled());
        drop(b);
        assert_eq!(tracker.open.lock().unwrap().len(), 3);
        // Everyone busy: the newcomer is refused.
        let _c_busy = InFlight::start(c.state.clone());
        let _d_busy = InFlight::start(d.state.clone());
        assert!(tracker.admit().is_none());
        drop(busy);
        assert!(tracker.admit().is_some());
        assert!(a.state.evict.is_cancelled());
    }
}
