//! Application assembly: from a validated config to a bound listener, a running poller and
//! a serving router. Everything a test needs is here: [`App::build`], [`App::local_addr`],
//! [`App::run`].

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use std::path::{Path, PathBuf};

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::descriptors;
use crate::engine::checkpoint::{self, Identity};
use crate::engine::paces;
use crate::engine::poll_set::PollSets;
use crate::engine::poller::{Poller, Work};
use crate::engine::spec::{Clock, CollectorSpec, Context};
use crate::engine::store::Store;
use crate::metrics::self_metrics::Telemetry;
use crate::settings::ApiConfig;
use crate::storage::{Dir, StorageError, WriteCause};
use crate::tenant::TenantName;
use crate::upstream::breaker::CircuitKey;
use crate::upstream::endpoint::Endpoint;
use crate::upstream::observe::Observer as _;
use crate::upstream::pacer::Pacer;
use crate::upstream::transport::Transport;
use crate::upstream::{BuildError, Client};
use crate::web::listen::{self, Inherited, ListenError};
use crate::web::serve::ServeOptions;
use crate::web::web_config::{LiveWebConfig, WebConfig};
use crate::web::{self, AppState, ReloadRequest, SharedUpstream, Upstream};

/// Tenants whose failure counters start at zero; those of more tenants appear at their first
/// failure, so that ten thousand tenants do not cost a million idle series.
const ZERO_INIT_TENANTS: usize = 100;

/// One tenant's way to the provider: its own client (token, connection pool) and pacer
/// (concurrency, the token's learned pace, its targets' circuits and 429s), so that a revoked,
/// rate-limited or slow tenant fails alone.
struct TenantClient {
    /// The settings the client was built with: a reload that keeps them keeps the client.
    /// Shared with the client when it was built from them (ten thousand tenants hold one copy
    /// each, not two, and the table of tenants a pointer, not the settings).
    api: Arc<ApiConfig>,
    client: Client,
    /// What the pacer learned outlives a reload that keeps the token and the address, and with
    /// it the circuits and 429s of the targets the reload keeps.
    pacer: Pacer,
}

/// Each tenant's pacer with what its learned state is kept under (its name and provider).
fn held_pacers(tenants: &HashMap<TenantName, TenantClient>) -> Vec<paces::TenantPacer> {
    tenants
        .iter()
        .map(|(name, t)| paces::TenantPacer {
            tenant: name.clone(),
            origin: crate::redact::redact_url(&t.api.base_url),
            pacer: t.pacer.clone(),
        })
        .collect()
}

impl TenantClient {
    /// Whether `api` calls the same provider with the same token: the same limit applies.
    fn same_token(&self, api: &ApiConfig) -> bool {
        use secrecy::ExposeSecret;
        self.api.base_url == api.base_url
            && self.api.token.expose_secret() == api.token.expose_secret()
    }
}

/// How long shutdown waits for open HTTP requests before giving up on them.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(1500);

/// Web settings that come from flags rather than the config file.
#[derive(Clone, Debug)]
pub struct WebOptions {
    /// Addresses to listen on (`--web.listen-address`, repeatable; at most
    /// [`MAX_LISTENERS`](crate::web::listen::MAX_LISTENERS)).
    pub listen_addresses: Vec<String>,
    /// Sockets systemd passed (`--web.systemd-socket`): served instead of the addresses.
    pub systemd_sockets: Option<Inherited>,
    pub telemetry_path: String,
    /// Whether `POST /-/reload` is served (`--web.enable-lifecycle`).
    pub enable_lifecycle: bool,
    /// Whether `/metrics` carries the `process_*` series (off with
    /// `--web.disable-exporter-metrics`).
    pub exporter_metrics: bool,
    /// Concurrent scrapes served at most; more get 503 (0: no limit).
    pub max_requests: usize,
    /// TLS and basic auth (`--web.config.file`), loaded and checked at start.
    pub web_config: WebConfig,
    /// Timeouts and the connection cap of the HTTP server.
    pub serve: ServeOptions,
}

impl Default for WebOptions {
    fn default() -> Self {
        WebOptions {
            listen_addresses: vec![crate::cli::DEFAULT_LISTEN_ADDRESS.to_owned()],
            systemd_sockets: None,
            telemetry_path: "/metrics".to_owned(),
            enable_lifecycle: false,
            exporter_metrics: true,
            max_requests: crate::cli::DEFAULT_MAX_REQUESTS,
            web_config: WebConfig::default(),
            serve: ServeOptions::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Listen(#[from] ListenError),
    #[error("--web.telemetry-path: {0}")]
    TelemetryPath(String),
    #[error(transparent)]
    Client(#[from] BuildError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("--storage.path: {0}")]
    Storage(#[from] StorageError),
}

/// `--storage.path` and `--storage.checkpoint-interval`: where what the exporter learned is
/// kept across restarts, and how often it is written.
#[derive(Clone, Debug)]
pub struct StorageOptions {
    pub path: PathBuf,
    pub checkpoint_interval: Duration,
}

/// The storage directory as the running app uses it.
struct Storage {
    dir: Arc<Dir>,
    /// What the checkpoints are made under; a reload changes it.
    identity: checkpoint::Current,
    /// The configured tenants' pacers, whose learned state is kept; a reload changes them.
    pacers: paces::Pacers,
    every: Duration,
}

pub struct App {
    /// Taken by [`App::run`].
    listeners: Option<Vec<TcpListener>>,
    /// Where each listener listens, in order (never empty).
    local_addrs: Vec<SocketAddr>,
    state: AppState,
    clock: Clock,
    /// Each tenant's client and circuits, kept by a reload that keeps the tenant.
    tenants: HashMap<TenantName, TenantClient>,
    /// Every collector with its tenant's context: the very plans the poller's collectors run.
    work: Vec<Arc<Work>>,
    /// The pool and the cap on upstream calls in flight that every tenant shares.
    transport: Transport,
    /// How the open-file limit is shared, made at start; a reload is held to it.
    descriptors: descriptors::Plan,
    /// Read again on every reload.
    web_config: LiveWebConfig,
    serve: ServeOptions,
    /// Where a reload reads the config from; `None` in demo mode.
    config_file: Option<PathBuf>,
    /// `--shard`: the same for every config this process runs.
    shard: crate::shard::Shard,
    /// `--log.target-failures`: likewise.
    target_failures: crate::settings::TargetFailureLog,
    /// `--collector.NAME`, `--no-collector.NAME`: every reload reads the file with them.
    collector_switches: crate::config::CollectorSwitches,
    reloads: mpsc::Receiver<ReloadRequest>,
    upstream: SharedUpstream,
    /// What each collector is made under (its tenant's provider, its settings), for the
    /// storage; kept current by reloads.
    identity: Identity,
    /// `--storage.path`, when it is given and the directory could be opened.
    storage: Option<Storage>,
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
        let path =
            crate::cli::telemetry_path(&web.telemetry_path).map_err(AppError::TelemetryPath)?;
        let Plan { specs, endpoints } = plan(&config);
        log_shard(&config, &specs);
        let telemetry = Arc::new(Telemetry::new(&[]));
        let names = tenant_names(&config);
        telemetry.admit_tenants(&names);
        telemetry.ensure_endpoints(&endpoints, zero_init(&names));
        let plan_fds = descriptors::Plan::now(web.serve.max_connections, config.asked_upstream());
        if let Some(told) = plan_fds.shortfall() {
            tracing::warn!("{told}");
        }
        let transport = Transport::new(plan_fds.upstream)?;
        let tenants = tenant_clients(&config, &HashMap::new(), &telemetry, &transport)?;
        let store = Store::new(&specs);
        let identity = Identity::of(&config, &specs);
        let poll_sets = Arc::new(PollSets::default());
        poll_sets.reconfigure(&config, &specs);
        let work = with_contexts(specs, &tenants, &poll_sets, &clock);
        let upstream_url = crate::redact::redact_url(&config.api.base_url);
        let listeners =
            listen::listeners(&web.listen_addresses, web.systemd_sockets.as_ref()).await?;
        let local_addrs = listeners
            .iter()
            .map(TcpListener::local_addr)
            .collect::<std::io::Result<Vec<_>>>()?;
        let (reload_tx, reloads) = mpsc::channel(4);
        let state = serving_state(&web, store, telemetry, path, reload_tx, poll_sets);
        Ok(App {
            listeners: Some(listeners),
            local_addrs,
            state,
            clock,
            tenants,
            work,
            web_config: LiveWebConfig::new(web.web_config),
            serve: ServeOptions {
                max_connections: plan_fds.serving,
                ..web.serve
            },
            transport,
            descriptors: plan_fds,
            config_file: None,
            shard: config.shard,
            target_failures: config.target_failures,
            collector_switches: config.collector_switches.clone(),
            reloads,
            upstream: Arc::new(arc_swap::ArcSwap::from_pointee(Upstream {
                url: upstream_url,
                demo: false,
                shard: config.shard,
            })),
            identity,
            storage: None,
        })
    }

    /// Keeps what the exporter learns under `options.path` (`--storage.path`): locks the
    /// directory, restores what belongs to the current config before the first run, and from
    /// [`App::run`] on writes a checkpoint every `options.checkpoint_interval` and one at
    /// shutdown. Refused when another exporter holds the directory or the path is not a
    /// directory; a directory that cannot be created or written is told in a warn line and
    /// counted, and the exporter runs from memory.
    pub async fn with_storage(mut self, options: StorageOptions) -> Result<App, AppError> {
        let telemetry = self.state.telemetry.clone();
        telemetry.enable_storage();
        let path = options.path.clone();
        let dir = match tokio::task::spawn_blocking(move || Dir::open(&path))
            .await
            .map_err(std::io::Error::other)?
        {
            Ok(dir) => Arc::new(dir),
            Err(e @ StorageError::Open { .. }) => {
                tracing::warn!(
                    "{e}; running without it: nothing is restored now or kept for the next start"
                );
                telemetry.observe_storage(|f| f.failed(WriteCause::NotWritable));
                return Ok(self);
            }
            Err(e) => return Err(e.into()),
        };
        if let Some(holder) = dir.took_over() {
            tracing::warn!(path = %dir.path().display(), "took over the lock of the storage directory from {holder}, which did not end cleanly: what it last wrote is restored");
        }
        let specs = specs_of(&self.work);
        let mut keys = circuit_keys(&specs);
        let (restoring, store, identity) =
            (dir.clone(), self.state.store.clone(), self.identity.clone());
        let telemetry = telemetry.clone();
        let held = held_pacers(&self.tenants);
        let pacers = held.clone();
        // Two files, each read alone: a bad one costs only its own part.
        tokio::task::spawn_blocking(move || {
            checkpoint::restore(&restoring, &store, &specs, &identity, &telemetry);
            paces::restore(&restoring, &pacers, &telemetry);
        })
        .await
        .map_err(std::io::Error::other)?;
        // A back-off kept for a target no longer configured leaves now, as a reload's would.
        for (name, t) in &self.tenants {
            let keep = keys.remove(name).unwrap_or_default();
            t.pacer
                .reconfigure_targets(t.api.breaker, |k| keep.contains(k));
        }
        self.storage = Some(Storage {
            dir,
            identity: checkpoint::Current::new(self.identity.clone()),
            pacers: paces::Pacers::new(held),
            every: options.checkpoint_interval,
        });
        Ok(self)
    }

    /// Makes the config reloadable from `path` (SIGHUP, `POST /-/reload`).
    pub fn with_config_file(mut self, path: PathBuf) -> Self {
        self.config_file = Some(path);
        self
    }

    /// Marks the upstream as the built-in simulator, for the landing page.
    pub fn with_demo_mode(self) -> Self {
        let current = self.upstream.load_full();
        self.upstream.store(Arc::new(Upstream {
            demo: true,
            ..(*current).clone()
        }));
        self
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addrs[0]
    }

    /// Where each listener listens: the addresses in the order given, or systemd's sockets.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.local_addrs
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves and scrapes until `shutdown` is cancelled; takes reloads in between.
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<(), AppError> {
        let store = self.state.store.clone();
        let checkpoints = self.storage.as_ref().map(|s| {
            tokio::spawn(checkpoint::run(
                s.dir.clone(),
                (store.clone(), s.pacers.clone()),
                s.identity.clone(),
                self.state.telemetry.clone(),
                s.every,
                shutdown.clone(),
            ))
        });
        let mut poller = Poller::start(self.work.clone(), store, shutdown.child_token());
        forward_sighup(self.state.reload.clone(), shutdown.clone());
        let router = self
            .web_config
            .apply(web::router(self.state.clone()).layer(axum::Extension(self.upstream.clone())));
        let listeners = self
            .listeners
            .take()
            .ok_or_else(|| std::io::Error::other("the app was already run"))?;
        let mut server = tokio::spawn(web::serve::serve_with(
            listeners,
            router,
            self.web_config.tls(),
            shutdown.clone(),
            self.serve,
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
                    // A burst of reload requests (config management, a SIGHUP storm) is one reload.
                    let mut replies = vec![reply];
                    while let Ok(more) = self.reloads.try_recv() {
                        replies.push(more);
                    }
                    let outcome = web::ReloadAnswer {
                        config: self.reload(&mut poller).await,
                        web: self.web_config.reload(),
                    };
                    for reply in replies {
                        let _ = reply.send(outcome.clone());
                    }
                }
            }
        }
        // A client holding a request open must not stall shutdown past the grace period.
        if !served {
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, &mut server).await;
            server.abort();
        }
        poller.stopped().await;
        if let Some(last) = checkpoints {
            // The checkpoint at shutdown has its own bound; this one only keeps a stuck disk
            // from holding the exit.
            let _ = tokio::time::timeout(checkpoint::AT_SHUTDOWN + SHUTDOWN_GRACE, last).await;
        }
        Ok(())
    }

    /// Reads and validates the config file again and hands it to the poller; on any error the
    /// running config stays. The client is kept when the API settings did not change (its
    /// connection pool with it), and so is the circuit state of every target still configured.
    async fn reload(&mut self, poller: &mut Poller) -> Result<(), String> {
        let telemetry = self.state.telemetry.clone();
        let (shard, target_failures) = (self.shard, self.target_failures);
        let loaded =
            load_again(self.config_file.as_deref(), &self.collector_switches).map(|config| {
                Config {
                    shard,
                    target_failures,
                    ..config
                }
            });
        let refused = |e: String| {
            telemetry.observe_reload(false);
            tracing::error!(error = %e, "configuration reload refused; the previous configuration keeps running");
            e
        };
        let config = loaded.map_err(refused)?;
        let Plan { specs, endpoints } = plan(&config);
        log_shard(&config, &specs);
        // Every client first: a tenant whose client cannot be built refuses the whole reload
        // before anything has changed.
        let tenants = tenant_clients(&config, &self.tenants, &telemetry, &self.transport)
            .map_err(|e| refused(e.to_string()))?;
        // The reload cannot be refused any more: the new tenants' series may be written (their
        // pacers' first figures were dropped while it could; `configure` publishes them again).
        let names = tenant_names(&config);
        telemetry.admit_tenants(&names);
        for t in tenants.values() {
            t.pacer.configure(
                t.api.concurrency,
                t.api.rate_limit,
                t.api.endpoint_rate_limits.clone(),
            );
        }
        self.replan_descriptors(&config);
        telemetry.ensure_endpoints(&endpoints, zero_init(&names));
        self.reconfigure_circuits(&tenants, &specs);
        self.state.poll_sets.reconfigure(&config, &specs);
        let work = with_contexts(specs, &tenants, &self.state.poll_sets, &self.clock);
        poller.reconfigure(work.clone()).await;
        // Its collectors have stopped; whatever of it still ends later (a probe that resolved it
        // before the reload and is answered after, a side run's call that lands as it stops) is
        // not counted once its series are removed.
        let every_endpoint = crate::collectors::CollectorName::every_endpoint();
        for name in self.tenants.keys() {
            if !tenants.contains_key(name) {
                telemetry.remove_tenant(name, &every_endpoint);
            }
        }
        self.identity = Identity::of(&config, &specs_of(&work));
        if let Some(storage) = &self.storage {
            storage.identity.set(self.identity.clone());
            storage.pacers.set(held_pacers(&tenants));
        }
        self.work = work;
        self.tenants = tenants;
        let url = crate::redact::redact_url(&config.api.base_url);
        if self.upstream.load().url != url {
            self.upstream.store(Arc::new(Upstream {
                url,
                demo: false,
                shard: self.shard,
            }));
        }
        telemetry.observe_reload(true);
        tracing::info!("configuration reloaded");
        Ok(())
    }

    /// The plan of descriptors made at start holds: tells when `config` asks for more upstream
    /// sockets than it has.
    fn replan_descriptors(&mut self, config: &Config) {
        let asked = config.asked_upstream();
        if asked != self.descriptors.asked_upstream {
            self.descriptors = descriptors::Plan {
                asked_upstream: asked,
                ..self.descriptors.clone()
            };
            if let Some(told) = self.descriptors.shortfall() {
                tracing::warn!("{told}");
            }
        }
    }

    /// Keeps the pacer's records (circuits, 429s) of the targets `specs` still poll; closes the
    /// circuits of tenants no longer configured, and of pacers a new token or address replaced.
    fn reconfigure_circuits(
        &self,
        tenants: &HashMap<TenantName, TenantClient>,
        specs: &[CollectorSpec],
    ) {
        let telemetry = &self.state.telemetry;
        let mut keys = circuit_keys(specs);
        // A tenant no longer configured has no circuit any more (its series go with the rest
        // of its series once its collectors have stopped); one whose pacer was replaced starts
        // with none, and its gauges say so.
        for (name, old) in &self.tenants {
            let new = tenants.get(name);
            if new.is_some_and(|t| t.pacer.same(&old.pacer)) {
                continue;
            }
            let closed = old.pacer.reconfigure_targets(old.api.breaker, |_| false);
            if new.is_some() {
                for (endpoint, _) in closed {
                    telemetry.set_open_circuits(name, endpoint, 0);
                }
            }
        }
        for (name, t) in tenants {
            let keep = keys.remove(name).unwrap_or_default();
            for (endpoint, open) in t
                .pacer
                .reconfigure_targets(t.api.breaker, |k| keep.contains(k))
            {
                telemetry.set_open_circuits(name, endpoint, open);
            }
        }
    }
}

fn specs_of(work: &[Arc<Work>]) -> Vec<CollectorSpec> {
    work.iter().map(|w| w.spec.clone()).collect()
}

/// The client of every tenant of `config`: a `running` one kept when it calls as the config
/// asks, else built anew over the circuits and pacer that still hold for it (none at start).
fn tenant_clients(
    config: &Config,
    running: &HashMap<TenantName, TenantClient>,
    telemetry: &Arc<Telemetry>,
    transport: &Transport,
) -> Result<HashMap<TenantName, TenantClient>, BuildError> {
    let mut tenants = HashMap::with_capacity(config.tenants.len());
    for t in &config.tenants {
        let (name, api) = (t.name.clone(), Arc::new(t.api.clone()));
        let old = running.get(&name);
        // The same token at the same address meets the same limit and the same accounts: what
        // was learned stays, the targets' circuits with it. Another token or another address
        // starts afresh.
        let pacer = match old {
            Some(old) if old.same_token(&api) => old.pacer.clone(),
            _ => Pacer::new(
                name.clone(),
                api.concurrency,
                api.rate_limit,
                api.endpoint_rate_limits.clone(),
                api.breaker,
                telemetry.clone(),
            ),
        };
        let client = match old.filter(|old| old.client.calls_as(&api)) {
            Some(old) => old.client.clone(),
            None => Client::new(
                &api,
                name.clone(),
                telemetry.clone(),
                pacer.clone(),
                transport.clone(),
            )?,
        };
        tenants.insert(name, TenantClient { api, client, pacer });
    }
    Ok(tenants)
}

/// What the web side serves from: the store, the self-metrics, and the limits on scrapes and
/// probes that `--web.max-requests` sets.
fn serving_state(
    web: &WebOptions,
    store: Arc<Store>,
    telemetry: Arc<Telemetry>,
    telemetry_path: String,
    reload: mpsc::Sender<ReloadRequest>,
    poll_sets: Arc<PollSets>,
) -> AppState {
    AppState {
        store,
        telemetry,
        telemetry_path,
        reload,
        enable_lifecycle: web.enable_lifecycle,
        process_metrics: web.exporter_metrics,
        // The flag is bounded; a caller of the library is held to the semaphore's own.
        scrape_limit: (web.max_requests > 0)
            .then(|| Arc::new(Semaphore::new(web.max_requests.min(Semaphore::MAX_PERMITS)))),
        probe_limit: (web.max_requests > 0).then(|| {
            let shared = web.max_requests - web::metrics_reserve(web.max_requests);
            Arc::new(Semaphore::new(shared.min(Semaphore::MAX_PERMITS)))
        }),
        probe_waits: Arc::new(Semaphore::new(web::probe_waits(web.max_requests))),
        tails: Arc::default(),
        poll_sets,
    }
}

/// What a config asks the exporter to run: its collectors and the endpoints they call. Start and
/// reload both go through here.
struct Plan {
    specs: Vec<CollectorSpec>,
    endpoints: Vec<Endpoint>,
}

fn plan(config: &Config) -> Plan {
    let specs = CollectorSpec::from_config(config);
    let endpoints = specs
        .iter()
        .flat_map(|s| s.endpoints().iter().copied())
        .collect();
    Plan { specs, endpoints }
}

/// Says how much of the configured fleet a sharded process polls.
fn log_shard(config: &Config, specs: &[CollectorSpec]) {
    let shard = config.shard;
    if shard.count() > 1 {
        let polled: usize = specs.iter().map(|s| s.targets.len()).sum();
        let configured: usize = CollectorSpec::from_config(&Config {
            shard: crate::shard::Shard::default(),
            ..config.clone()
        })
        .iter()
        .map(|s| s.targets.len())
        .sum();
        tracing::info!(%shard, polled, configured, "polling only the targets of this shard");
    }
}

/// Reads and validates the config file again.
fn load_again(
    path: Option<&Path>,
    switches: &crate::config::CollectorSwitches,
) -> Result<Config, String> {
    let path = path.ok_or("there is no config file to reload (demo mode)")?;
    Config::load_switched(path, switches).map_err(|e| format!("{}: {e}", path.display()))
}

/// Every tenant of `config`, by name.
fn tenant_names(config: &Config) -> Vec<TenantName> {
    config.tenants.iter().map(|t| t.name.clone()).collect()
}

/// The tenants whose failure counters start at zero: the first [`ZERO_INIT_TENANTS`] of `names`.
fn zero_init(names: &[TenantName]) -> &[TenantName] {
    &names[..names.len().min(ZERO_INIT_TENANTS)]
}

/// Each collector with the context of its tenant's client and its tenant's poll set.
fn with_contexts(
    specs: Vec<CollectorSpec>,
    tenants: &HashMap<TenantName, TenantClient>,
    poll_sets: &PollSets,
    clock: &Clock,
) -> Vec<Arc<Work>> {
    specs
        .into_iter()
        .filter_map(|spec| {
            let t = tenants.get(&spec.tenant)?;
            let ctx = Context {
                client: t.client.clone(),
                clock: clock.clone(),
            };
            let poll_set = poll_sets.get(&spec.tenant);
            Some(Arc::new(Work {
                ctx,
                spec,
                poll_set,
            }))
        })
        .collect()
}

/// The circuit of every configured target, by tenant: the endpoints its collector calls, keyed
/// by the target's label value (which is what the client keys circuits by). Grouped once, so
/// that a reload of ten thousand tenants does not scan every collector for each of them.
fn circuit_keys(specs: &[CollectorSpec]) -> HashMap<TenantName, HashSet<CircuitKey>> {
    let mut keys: HashMap<TenantName, HashSet<CircuitKey>> = HashMap::new();
    for s in specs {
        let tenant = keys.entry(s.tenant.clone()).or_default();
        for e in s.endpoints() {
            tenant.extend(s.targets.iter().map(|t| (*e, t.to_string())));
        }
    }
    keys
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
