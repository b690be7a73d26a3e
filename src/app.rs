//! Application assembly: from a validated config to a bound listener, a running scraper and
//! a serving router. Everything a test needs is here: [`App::build`], [`App::local_addr`],
//! [`App::run`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use std::path::{Path, PathBuf};

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::collector::{Clock, CollectorSpec, Context};
use crate::config::{Config, TOKEN_ENV};
use crate::scraper;
use crate::snapshot::Store;
use crate::telemetry::Telemetry;
use crate::upstream::{BuildError, Client};
use crate::web::web_config::WebConfig;
use crate::web::{self, AppState};

/// How long shutdown waits for open HTTP requests before giving up on them.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(1500);

/// Web settings that come from flags rather than the config file.
#[derive(Clone, Debug)]
pub struct WebOptions {
    pub listen_address: String,
    pub telemetry_path: String,
    /// Whether `POST /-/reload` is served (`--web.enable-lifecycle`).
    pub enable_lifecycle: bool,
    /// Concurrent scrapes served at most; more get 503 (0: no limit).
    pub max_requests: usize,
    /// TLS and basic auth (`--web.config.file`), loaded and checked at start.
    pub web_config: WebConfig,
}

impl Default for WebOptions {
    fn default() -> Self {
        WebOptions {
            listen_address: crate::cli::DEFAULT_LISTEN_ADDRESS.to_owned(),
            telemetry_path: "/metrics".to_owned(),
            enable_lifecycle: false,
            max_requests: crate::cli::DEFAULT_MAX_REQUESTS,
            web_config: WebConfig::default(),
        }
    }
}

/// A reload request; the answer says whether the new config was taken.
pub type ReloadRequest = oneshot::Sender<Result<(), String>>;

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
    web_config: WebConfig,
    /// Where a reload reads the config from; `None` in demo mode.
    config_file: Option<PathBuf>,
    reloads: mpsc::Receiver<ReloadRequest>,
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
        let (reload_tx, reloads) = mpsc::channel(4);
        Ok(App {
            listener,
            state: AppState {
                store,
                telemetry,
                telemetry_path: path,
                reload: reload_tx,
                enable_lifecycle: web.enable_lifecycle,
                scrape_limit: (web.max_requests > 0)
                    .then(|| Arc::new(Semaphore::new(web.max_requests))),
            },
            ctx: Context { client, clock },
            specs,
            web_config: web.web_config,
            config_file: None,
            reloads,
        })
    }

    /// Makes the config reloadable from `path` (SIGHUP, `POST /-/reload`).
    pub fn with_config_file(mut self, path: PathBuf) -> Self {
        self.config_file = Some(path);
        self
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves and scrapes until `shutdown` is cancelled; takes reloads in between.
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<(), AppError> {
        let store = self.state.store.clone();
        let telemetry = self.state.telemetry.clone();
        let mut scraper_stop = shutdown.child_token();
        let mut scraper = tokio::spawn(scraper::run(
            self.ctx.clone(),
            self.specs.clone(),
            store.clone(),
            scraper_stop.clone(),
        ));
        forward_sighup(self.state.reload.clone(), shutdown.clone());
        let router = self.web_config.apply(web::router(self.state));
        let mut server = tokio::spawn(web::serve::serve(
            self.listener,
            router,
            self.web_config.tls(),
            shutdown.clone(),
        ));
        // Whether the server task has ended (a JoinHandle must not be polled again after that).
        let mut served = false;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                r = &mut server => {
                    served = true;
                    // The server only ends on its own on an accept error.
                    r.map_err(std::io::Error::other)??;
                    break;
                }
                Some(reply) = self.reloads.recv() => {
                    match reload(self.config_file.as_deref(), &self.ctx, &telemetry) {
                        Ok((ctx, specs)) => {
                            // The running scraper stops; a run in flight is dropped, never half applied.
                            scraper_stop.cancel();
                            let _ = scraper.await;
                            store.reconfigure(&specs);
                            scraper_stop = shutdown.child_token();
                            scraper = tokio::spawn(scraper::run(ctx.clone(), specs.clone(), store.clone(), scraper_stop.clone()));
                            self.ctx = ctx;
                            self.specs = specs;
                            telemetry.observe_reload(true);
                            tracing::info!("configuration reloaded");
                            let _ = reply.send(Ok(()));
                        }
                        Err(e) => {
                            telemetry.observe_reload(false);
                            tracing::error!(error = %e, "configuration reload refused; the previous configuration keeps running");
                            let _ = reply.send(Err(e));
                        }
                    }
                }
            }
        }
        // A client holding a request open must not stall shutdown past the grace period.
        if !served {
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, &mut server).await;
            server.abort();
        }
        let _ = scraper.await;
        Ok(())
    }
}

/// Reads and validates the config file again; on success, the client and collectors to run.
fn reload(
    path: Option<&Path>,
    current: &Context,
    telemetry: &Arc<Telemetry>,
) -> Result<(Context, Vec<CollectorSpec>), String> {
    let path = path.ok_or("there is no config file to reload (demo mode)")?;
    let config = Config::load(path, std::env::var(TOKEN_ENV).ok())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let specs = CollectorSpec::from_config(&config);
    let endpoints: Vec<_> = specs
        .iter()
        .flat_map(|s| s.endpoints().iter().copied())
        .collect();
    telemetry.ensure_endpoints(&endpoints);
    let client = Client::new(&config.api, telemetry.clone()).map_err(|e| e.to_string())?;
    Ok((
        Context {
            client,
            clock: current.clock.clone(),
        },
        specs,
    ))
}

/// SIGHUP asks for a reload, as with Prometheus.
fn forward_sighup(reloads: mpsc::Sender<ReloadRequest>, shutdown: CancellationToken) {
    #[cfg(unix)]
    tokio::spawn(async move {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            return;
        };
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                Some(()) = hup.recv() => {
                    tracing::info!("SIGHUP: reloading the configuration");
                    let (tx, rx) = oneshot::channel();
                    if reloads.send(tx).await.is_err() {
                        return;
                    }
                    let _ = rx.await;
                }
            }
        }
    });
    #[cfg(not(unix))]
    let _ = (reloads, shutdown);
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
