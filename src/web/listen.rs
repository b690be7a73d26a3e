//! Where the HTTP server listens: the addresses of `--web.listen-address` (repeatable), or the
//! sockets systemd hands over with `--web.systemd-socket`, as exporter-toolkit's exporters do;
//! and accepting from all of them at once.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;

use tokio::net::{TcpListener, TcpStream};

/// Listeners at most, of either kind: every input has a bound.
pub const MAX_LISTENERS: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("cannot listen on {address}: {source} (choose another --web.listen-address)")]
    Bind {
        address: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot listen on {address}: the port is already in use, perhaps by another mailhost_exporter (stop it, or choose another --web.listen-address)"
    )]
    PortInUse { address: String },
    #[error(
        "{given} listen addresses; at most {MAX_LISTENERS} (give --web.listen-address fewer times)"
    )]
    TooMany { given: usize },
    #[error("no --web.listen-address given")]
    None,
    #[error(
        "--web.systemd-socket: systemd passed no socket (LISTEN_FDS unset, or for another process); start the exporter from a .socket unit, or drop the flag and give --web.listen-address"
    )]
    NoSystemdSocket,
    #[error(
        "--web.systemd-socket: systemd passed {given} sockets; at most {MAX_LISTENERS} (give the .socket unit fewer ListenStream= lines)"
    )]
    TooManySystemdSockets { given: usize },
    #[error(
        "--web.systemd-socket: socket {index} from systemd is not a listening TCP socket ({source}); use ListenStream= with an address and port"
    )]
    NotTcp {
        index: usize,
        #[source]
        source: std::io::Error,
    },
}

/// Sockets inherited from systemd, taken once by the app that serves on them. Read from the
/// environment before the runtime starts (the protocol clears `LISTEN_FDS` and `LISTEN_PID`,
/// which must not race other threads).
#[derive(Clone, Debug, Default)]
pub struct Inherited(Arc<Mutex<Vec<std::net::TcpListener>>>);

impl Inherited {
    /// The listening TCP sockets systemd passed to this process (`LISTEN_FDS`, `LISTEN_PID`).
    pub fn from_systemd() -> Result<Inherited, ListenError> {
        let mut fds = listenfd::ListenFd::from_env();
        let given = fds.len();
        if given == 0 {
            return Err(ListenError::NoSystemdSocket);
        }
        if given > MAX_LISTENERS {
            return Err(ListenError::TooManySystemdSockets { given });
        }
        let mut listeners = Vec::with_capacity(given);
        for index in 0..given {
            let listener = fds
                .take_tcp_listener(index)
                .map_err(|source| ListenError::NotTcp { index, source })?
                .ok_or(ListenError::NoSystemdSocket)?;
            listeners.push(listener);
        }
        Ok(Inherited(Arc::new(Mutex::new(listeners))))
    }

    /// The sockets, as Tokio listeners; empty once taken.
    fn take(&self) -> std::io::Result<Vec<TcpListener>> {
        let taken = std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner));
        taken
            .into_iter()
            .map(|l| {
                l.set_nonblocking(true)?;
                TcpListener::from_std(l)
            })
            .collect()
    }
}

/// The listeners to serve on: the inherited sockets when there are some, else each address
/// bound (`:PORT` is every interface, IPv6 and IPv4 when the host has both).
pub async fn listeners(
    addresses: &[String],
    inherited: Option<&Inherited>,
) -> Result<Vec<TcpListener>, ListenError> {
    if let Some(inherited) = inherited {
        let taken = inherited
            .take()
            .map_err(|source| ListenError::NotTcp { index: 0, source })?;
        if taken.is_empty() {
            return Err(ListenError::NoSystemdSocket);
        }
        return Ok(taken);
    }
    if addresses.is_empty() {
        return Err(ListenError::None);
    }
    if addresses.len() > MAX_LISTENERS {
        return Err(ListenError::TooMany {
            given: addresses.len(),
        });
    }
    let mut out = Vec::with_capacity(addresses.len());
    for address in addresses {
        out.push(bind(address).await?);
    }
    Ok(out)
}

/// Binds `host:port`, or every interface for `:port`.
async fn bind(address: &str) -> Result<TcpListener, ListenError> {
    let err = |source: std::io::Error| {
        if source.kind() == std::io::ErrorKind::AddrInUse {
            return ListenError::PortInUse {
                address: address.to_owned(),
            };
        }
        ListenError::Bind {
            address: address.to_owned(),
            source,
        }
    };
    if let Some(port) = address.strip_prefix(':') {
        let port: u16 = port.parse().map_err(|_| {
            err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the port is not a number from 0 to 65535",
            ))
        })?;
        return match TcpListener::bind(("::", port)).await {
            Ok(l) => Ok(l),
            Err(_) => TcpListener::bind(("0.0.0.0", port)).await.map_err(err),
        };
    }
    TcpListener::bind(address).await.map_err(err)
}

/// The next connection on any of `listeners`, starting the search one listener further each
/// time (`turn`), so that a busy listener never starves another.
pub async fn accept_any(
    listeners: &[TcpListener],
    turn: &mut usize,
) -> std::io::Result<(TcpStream, SocketAddr)> {
    let start = *turn;
    *turn = turn.wrapping_add(1);
    std::future::poll_fn(|cx| {
        for i in 0..listeners.len() {
            let listener = &listeners[(start + i) % listeners.len()];
            if let Poll::Ready(accepted) = listener.poll_accept(cx) {
                return Poll::Ready(accepted);
            }
        }
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_address_is_bound_and_each_gets_its_connections() {
        let addresses = vec!["127.0.0.1:0".to_owned(), "127.0.0.1:0".to_owned()];
        let listeners = listeners(&addresses, None).await.unwrap();
        assert_eq!(listeners.len(), 2);
        let mut turn = 0;
        for listener in &listeners {
            let addr = listener.local_addr().unwrap();
            let client = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (_, peer) = accept_any(&listeners, &mut turn).await.unwrap();
            assert_eq!(peer, client.local_addr().unwrap());
        }
    }

    #[tokio::test]
    async fn too_many_none_a_taken_port_and_no_systemd_socket_are_refused_with_the_fix() {
        let many = vec!["127.0.0.1:0".to_owned(); MAX_LISTENERS + 1];
        let e = listeners(&many, None).await.unwrap_err();
        assert!(e.to_string().contains("at most 16"), "{e}");
        assert!(matches!(listeners(&[], None).await, Err(ListenError::None)));
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = taken.local_addr().unwrap().to_string();
        let e = listeners(&[address], None).await.unwrap_err();
        assert!(e.to_string().contains("already in use"), "{e}");
        let e = listeners(&[":99999".to_owned()], None).await.unwrap_err();
        assert!(e.to_string().contains("not a number"), "{e}");
        // An empty set of inherited sockets (already taken, or none passed).
        let e = listeners(&[], Some(&Inherited::default()))
            .await
            .unwrap_err();
        assert!(e.to_string().contains(".socket unit"), "{e}");
    }
}
