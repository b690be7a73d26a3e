//! The accept loop: plain HTTP or TLS on one listener, connect info for the handlers, and a
//! graceful stop when the shutdown token is cancelled.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

/// A client that has not finished the TLS handshake by then is dropped, so half-open
/// connections cannot pile up.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Pause after an accept error that is not about one connection (e.g. too many open files),
/// so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `router` on `listener`, over TLS when `tls` is set, until `shutdown` is cancelled;
/// then stops accepting, lets open requests finish, and returns. A failed handshake is logged
/// at debug and only ends that connection. Handlers can extract `ConnectInfo<SocketAddr>`.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let acceptor = tls.map(TlsAcceptor::from);
    // Every connection task holds a sender; when all are gone, every connection has ended.
    let (alive, mut all_done) = mpsc::channel::<()>(1);
    loop {
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) if is_per_connection(&e) => continue,
                Err(e) => {
                    tracing::error!(error = %e, "cannot accept connections; retrying");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let acceptor = acceptor.clone();
        let shutdown = shutdown.clone();
        let alive = alive.clone();
        tokio::spawn(async move {
            let _alive = alive;
            match acceptor {
                None => connection(stream, peer, router, &shutdown, true).await,
                Some(acceptor) => {
                    let handshake =
                        tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream));
                    let tls = tokio::select! {
                        _ = shutdown.cancelled() => return,
                        r = handshake => match r {
                            Ok(Ok(tls)) => tls,
                            Ok(Err(e)) => {
                                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                                return;
                            }
                            Err(_) => {
                                tracing::debug!(%peer, "TLS handshake timed out");
                                return;
                            }
                        },
                    };
                    // HTTP/2 over TLS only when ALPN agreed on it, as in Go.
                    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                    connection(tls, peer, router, &shutdown, h2).await;
                }
            }
        });
    }
    drop(listener);
    drop(alive);
    let _ = all_done.recv().await;
    Ok(())
}

/// Serves one connection; `http2` allows HTTP/2 next to HTTP/1.1 (over TLS only when ALPN
/// chose it).
async fn connection<I>(
    io: I,
    peer: SocketAddr,
    router: Router,
    shutdown: &CancellationToken,
    http2: bool,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service =
        hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            router.clone().oneshot(request)
        });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    if !http2 {
        builder = builder.http1_only();
    }
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        _ = shutdown.cancelled() => {
            // Finish the request in flight, refuse new ones on this connection.
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
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
