//! Application assembly: from a validated config to a bound listener, a running scraper and
//! a serving router. Everything a test needs is here: [`App::build`], [`App::local_addr`],
//! [`App::run`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::collector::{Clock, CollectorSpec, Context};
use crate::config::Config;
use crate::scraper;
use crate::snapshot::Store;
use crate::telemetry::Telemetry;
use crate::upstream::{BuildError, Client};
use crate::web::{self, AppState};

/// How long shutdown waits for open HTTP requests before giving up on them.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(1500);

/// Web settings that come from flags rather than the config file.
#[derive(Clone, Debug)]
pub struct WebOptions {
    pub listen_address: String,
    pub telemetry_path: String,
}

impl Default for WebOptions {
    fn default() -> Self {
        WebOptions {
            listen_address: crate::cli::DEFAULT_LISTEN_ADDRESS.to_owned(),
            telemetry_path: "/metrics".to_owned(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("cannot listen on {address}: {source} (choose another --web.listen-address)")]
    Bind {
        address: String,
        #[source]
        source: std::io::Error,
    },
    #[error("--web.telemetry-path {0:?} must start with / and must not be / or under /-/")]
    TelemetryPath(String),
    #[error(transparent)]
    Client(#[from] BuildError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

pub struct App {
    listener: TcpListener,
    state: AppState,
    ctx: Context,
    specs: Vec<CollectorSpec>,
}

impl App {
    /// Binds the listener and prepares everything; nothing runs until [`App::run`].
    pub async fn build(config: Config, web: WebOptions) -> Result<App, AppError> {
        Self::build_with_clock(config, web, Clock::system()).await
    }

    /// As [`App::build`], with "now" taken from `clock` for the collectors' notion of today
    /// (tests drive it from the simulator's clock).
    pub async fn build_with_clock(
        config: Config,
        web: WebOptions,
        clock: Clock,
    ) -> Result<App, AppError> {
        let path = web.telemetry_path;
        if !path.starts_with('/') || path == "/" || path.starts_with("/-/") {
            return Err(AppError::TelemetryPath(path));
        }
        let specs = CollectorSpec::from_config(&config);
        let endpoints: Vec<_> = specs
            .iter()
            .flat_map(|s| s.endpoints().iter().copied())
            .collect();
        let telemetry = Arc::new(Telemetry::new(&endpoints));
        let client = Client::new(&config.api, telemetry.clone())?;
        let store = Store::new(&specs);
        let listener = bind(&web.listen_address).await?;
        Ok(App {
            listener,
            state: AppState {
                store,
                telemetry,
                telemetry_path: path,
            },
            ctx: Context { client, clock },
            specs,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves and scrapes until `shutdown` is cancelled.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), AppError> {
        let scraper = tokio::spawn(scraper::run(
            self.ctx,
            self.specs,
            self.state.store.clone(),
            shutdown.clone(),
        ));
        let router = web::router(self.state);
        let server = axum::serve(self.listener, router)
            .with_graceful_shutdown(shutdown.clone().cancelled_owned());
        tokio::select! {
            r = server => r?,
            // A client holding a request open must not stall shutdown past the grace period.
            _ = async { shutdown.cancelled().await; tokio::time::sleep(SHUTDOWN_GRACE).await } => {}
        }
        let _ = scraper.await;
        Ok(())
    }
}

/// Binds `host:port`, or every interface for `:port` (IPv6 and IPv4 when the host has both).
async fn bind(address: &str) -> Result<TcpListener, AppError> {
    let err = |source| AppError::Bind {
        address: address.to_owned(),
        source,
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
