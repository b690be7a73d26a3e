//! The `mailhost_sim` binary: serves the simulated provider (Management and Send APIs) with the
//! demo fleet, optionally sending demo traffic through itself, behind rate limits (refusing with
//! 429 or another status) or an outage of the whole API, until ctrl-c or SIGTERM.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use clap::{ArgGroup, Parser, ValueEnum};
use mailhost_sim::{
    Account, DEFAULT_REFUSAL_STATUS, DEMO_SEED, FaultSpec, ManagementToken, RateLimit,
    RateLimitHeaders, RetryAfterStyle, Route, SimConfig, Simulator, traffic,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

/// Environment variable holding the management token (kept off the command line, where other
/// users of the machine could read it).
const TOKEN_ENV: &str = "MAILHOST_SIM_TOKEN";
const DEFAULT_TOKEN: &str = "demo-management-token";

#[derive(Debug, Parser)]
#[command(
    version,
    about = "Simulated email provider (Management and Send APIs) for demos, tests and benchmarks",
    after_help = "The management token (X-Api-Token) is read from MAILHOST_SIM_TOKEN; \
                  without it the simulator accepts `demo-management-token`.\n\
                  Log level: RUST_LOG (default info)."
)]
#[command(group(
    ArgGroup::new("any_rate_limit")
        .multiple(true)
        .args(["rate_limit", "route_rate_limit"])
))]
#[command(group(
    ArgGroup::new("outage")
        .multiple(true)
        .args(["outage_after", "outage_for"])
))]
struct Args {
    /// Address to listen on (host:port).
    #[arg(long, default_value = "127.0.0.1:19588")]
    listen: String,
    /// Send demo traffic through the simulator's own Send API.
    #[arg(long)]
    traffic: bool,
    /// How often the traffic generator sends.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    traffic_tick: Duration,
    /// Seed of the random source used by fault injection.
    #[arg(long, default_value_t = DEMO_SEED)]
    seed: u64,
    /// Adds this many plain Delivery accounts, ids 100001 upwards, next to the demo fleet (for
    /// benchmarks of large fleets).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    extra_accounts: u32,
    /// Splits the extra accounts among this many more management tokens, `<token>-t0`,
    /// `<token>-t1`, ..., each seeing only its own contiguous share (for benchmarks of many
    /// tenants); the main token still sees every account.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    extra_tenants: u32,
    /// Limits every management token (the main one and each extra tenant's, each with its own
    /// token bucket) to this many Management API requests per second (0.01 to 100000); beyond it
    /// the simulator answers 429.
    #[arg(long, value_name = "RPS")]
    rate_limit: Option<f64>,
    /// Requests a limited token may make at once after an idle time (default: the rate, at least
    /// 1).
    #[arg(long, value_name = "N", requires = "rate_limit")]
    rate_limit_burst: Option<f64>,
    /// Limits every management token (each with its own token bucket) on one Management API
    /// route, named as in the fault table, to this many requests per second (0.01 to 100000),
    /// e.g. `tracemail_daily=5`; may be given once per route. A request needs a token from its
    /// route's bucket and, with --rate-limit, from the token's own; refused, it takes neither. The
    /// burst is the rate (at least 1).
    #[arg(long, value_name = "ROUTE=RPS", value_parser = route_rate)]
    route_rate_limit: Vec<(Route, f64)>,
    /// How a refusal of the rate limits says when to come back.
    #[arg(long, value_enum, default_value_t = RetryAfterArg::Seconds, requires = "any_rate_limit")]
    rate_limit_retry_after: RetryAfterArg,
    /// Status of a refusal of the rate limits: 429, or 503, 502, 504 or 403 for a provider that
    /// throttles with another status (S3's SlowDown and Azure's ServerBusy answer 503), with the
    /// same Retry-After and rate-limit headers.
    #[arg(
        long,
        value_name = "STATUS",
        default_value_t = DEFAULT_REFUSAL_STATUS,
        requires = "any_rate_limit"
    )]
    rate_limit_status: u16,
    /// Rate-limit headers on every answer to a limited token: those of the route's limit, if it
    /// has one, else those of the token's.
    #[arg(long, value_enum, default_value_t = HeadersArg::None, requires = "any_rate_limit")]
    rate_limit_headers: HeadersArg,
    /// Starts an outage of the whole API (every route, the Send API included; not the /_sim/
    /// control plane) this long after the simulator starts, e.g. `10s`; with --outage-for alone
    /// it starts at once.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    outage_after: Option<Duration>,
    /// How long the outage lasts, e.g. `60s`; without it, until the simulator stops or its faults
    /// are changed over the control plane.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    outage_for: Option<Duration>,
    /// Status of every answer during the outage (400-599), with the usual JSON error body.
    #[arg(
        long,
        value_name = "STATUS",
        default_value_t = 503,
        requires = "outage"
    )]
    outage_status: u16,
    /// `Retry-After` seconds of the outage's answers (at most 86400); without it they carry none.
    #[arg(
        long,
        value_name = "SECS",
        requires = "outage",
        conflicts_with = "outage_no_answer"
    )]
    outage_retry_after: Option<u64>,
    /// During the outage, no answer at all: each request is held open until its client gives up
    /// (10 minutes at most), then its connection is closed without a status.
    #[arg(long, requires = "outage", conflicts_with = "outage_status")]
    outage_no_answer: bool,
}

/// `ROUTE=RPS` of `--route-rate-limit`; the rate is checked with the rest of the limit.
fn route_rate(value: &str) -> Result<(Route, f64), String> {
    let (name, rate) = value
        .split_once('=')
        .ok_or_else(|| format!("expected ROUTE=RPS, e.g. tracemail_daily=5, got {value:?}"))?;
    let route = name
        .parse::<Route>()
        .ok()
        .filter(Route::is_management)
        .ok_or_else(|| {
            let names: Vec<&str> = Route::management().map(|r| r.name()).collect();
            format!(
                "{name:?} is not a Management API route: name one of {}",
                names.join(", ")
            )
        })?;
    let rate = rate
        .parse::<f64>()
        .map_err(|_| format!("expected requests per second after `{name}=`, got {rate:?}"))?;
    Ok((route, rate))
}

/// `--rate-limit-retry-after`, in kebab-case as command lines are.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum RetryAfterArg {
    Seconds,
    HttpDate,
    None,
}

/// `--rate-limit-headers`.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum HeadersArg {
    None,
    #[value(name = "x-ratelimit")]
    XRateLimit,
    Ietf,
    Both,
}

impl Args {
    /// The token-wide limit the flags ask for, if any, checked.
    fn rate_limit(&self) -> Result<Option<RateLimit>, String> {
        let Some(rate) = self.rate_limit else {
            return Ok(None);
        };
        let limit = self.limit(rate, self.rate_limit_burst);
        // The library's message names the members of a limit; here they are flags.
        limit.validate().map_err(|reason| {
            flag_names(reason)
                .replace("`rate`", "--rate-limit")
                .replace("`burst`", "--rate-limit-burst")
        })?;
        Ok(Some(limit))
    }

    /// The route limits the flags ask for, checked, each route at most once.
    fn route_rate_limits(&self) -> Result<Vec<(Route, RateLimit)>, String> {
        let mut limits: Vec<(Route, RateLimit)> = Vec::new();
        for &(route, rate) in &self.route_rate_limit {
            if limits.iter().any(|(seen, _)| *seen == route) {
                return Err(format!(
                    "--route-rate-limit names {route} twice: give each route once"
                ));
            }
            let limit = self.limit(rate, None);
            limit.validate().map_err(|reason| {
                flag_names(reason)
                    .replace("`rate`", &format!("the rate of --route-rate-limit {route}"))
            })?;
            limits.push((route, limit));
        }
        Ok(limits)
    }

    /// A limit of `rate` and `burst` with the Retry-After style and headers of the flags.
    fn limit(&self, rate: f64, burst: Option<f64>) -> RateLimit {
        RateLimit {
            rate,
            burst,
            retry_after: match self.rate_limit_retry_after {
                RetryAfterArg::Seconds => RetryAfterStyle::Seconds,
                RetryAfterArg::HttpDate => RetryAfterStyle::HttpDate,
                RetryAfterArg::None => RetryAfterStyle::None,
            },
            retry_after_secs: None,
            headers: match self.rate_limit_headers {
                HeadersArg::None => RateLimitHeaders::None,
                HeadersArg::XRateLimit => RateLimitHeaders::XRateLimit,
                HeadersArg::Ietf => RateLimitHeaders::Ietf,
                HeadersArg::Both => RateLimitHeaders::Both,
            },
            status: self.rate_limit_status,
        }
    }

    /// The fault of every route the outage flags ask for, if any, checked.
    fn outage(&self) -> Result<Option<FaultSpec>, String> {
        if self.outage_after.is_none() && self.outage_for.is_none() {
            return Ok(None);
        }
        let spec = if self.outage_no_answer {
            FaultSpec {
                no_answer_rate: 1.0,
                ..FaultSpec::default()
            }
        } else {
            FaultSpec {
                error_rate: 1.0,
                error_status: Some(self.outage_status),
                error_retry_after_secs: self.outage_retry_after,
                ..FaultSpec::default()
            }
        };
        let spec = FaultSpec {
            starts_after: self.outage_after,
            lasts: self.outage_for,
            ..spec
        };
        // The library's message names the members of a fault; here they are flags, and the
        // window's bounds durations rather than milliseconds.
        spec.validate().map_err(|reason| {
            reason
                .replace("`error_status`", "--outage-status")
                .replace("`error_retry_after_secs`", "--outage-retry-after")
                .replace("`starts_after_ms`", "--outage-after (in milliseconds)")
                .replace(
                    "`lasts_ms` must be at least 1: omit it for a fault that lasts until changed",
                    "--outage-for must be at least 1ms: omit it for an outage until the end",
                )
                .replace("`lasts_ms`", "--outage-for (in milliseconds)")
        })?;
        Ok(Some(spec))
    }
}

/// A limit's message with the members every limit of the flags shares named as their flags.
fn flag_names(reason: String) -> String {
    reason.replace("`status`", "--rate-limit-status")
}

/// The id of the first account `--extra-accounts` adds.
const FIRST_EXTRA_ACCOUNT: i32 = 100_001;

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        // Colour codes only for a person at a terminal, never into a log file or pipe.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        // Logs go to standard error, as the exporter's do.
        .with_writer(std::io::stderr)
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    // Checked before anything starts, so a bad flag fails fast.
    let rate_limit = args.rate_limit()?;
    let route_rate_limits = args.route_rate_limits()?;
    let outage = args.outage()?;
    let token = management_token();
    let config = demo_config(&args, &token);
    let identities = config.send_identities();
    let targets = config.demo_targets();
    let accounts = targets.accounts.clone();
    let limited_tokens = config.management_tokens.len();
    let sim = Simulator::new(config);
    apply_rate_limits(&sim, rate_limit, route_rate_limits, limited_tokens)?;
    if let Some(spec) = outage {
        apply_outage(&sim, &args, spec);
    }

    let listener = TcpListener::bind(&args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("cannot read the listening address: {e}"))?;
    let base_url = format!("http://{}", reachable(addr));
    tracing::info!(
        url = %base_url,
        accounts = accounts.len(),
        first_accounts = ?&accounts[..accounts.len().min(8)],
        example = %format!("curl -H 'X-Api-Token: ...' {base_url}/api/delivery/accounts/{}", accounts.first().copied().unwrap_or(1001)),
        "simulated provider listening"
    );
    tracing::info!(
        migrations = ?targets.migrations,
        mailboxes = ?targets.mailboxes,
        sending_domains = ?targets.domains,
        team_members = ?targets.team_members,
        "demo fleet: migrations, mailboxes (domain code, code), sending domains and team members"
    );

    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone());
    let generator = args.traffic.then(|| {
        tracing::info!(tick = %humantime::format_duration(args.traffic_tick), "sending demo traffic");
        tokio::spawn(traffic::run(
            base_url.clone(),
            identities,
            args.traffic_tick,
            u64::MAX,
            shutdown.clone(),
        ))
    });
    let served = sim.serve(listener, shutdown.clone()).await;
    shutdown.cancel();
    if let Some(generator) = generator {
        // The generator never panics; a join error would only mean the runtime is going away.
        let _ = generator.await;
    }
    served.map_err(|e| format!("server failed: {e}"))
}

/// The management token from [`TOKEN_ENV`], or the well-known [`DEFAULT_TOKEN`] (with a
/// warning) when it is unset or blank.
fn management_token() -> String {
    match std::env::var(TOKEN_ENV) {
        Ok(token) if !token.trim().is_empty() => token,
        _ => {
            tracing::warn!(
                "{TOKEN_ENV} is not set: accepting the well-known management token \
                 `{DEFAULT_TOKEN}`; set {TOKEN_ENV} when anything but loopback can reach this port"
            );
            DEFAULT_TOKEN.to_owned()
        }
    }
}

/// The demo fleet under management token `token`, with the seed and the extra accounts and
/// tenant tokens the flags ask for.
fn demo_config(args: &Args, token: &str) -> SimConfig {
    let mut config = SimConfig::demo(token);
    config.seed = args.seed;
    for i in 0..args.extra_accounts as i32 {
        let id = FIRST_EXTRA_ACCOUNT + i;
        config.accounts.push(
            Account {
                id,
                username: format!("bench{id}"),
                ..Account::default()
            }
            .into(),
        );
    }
    if args.extra_tenants > 0 {
        let extra = args.extra_accounts as usize;
        let tenants = args.extra_tenants as usize;
        let share = extra.div_ceil(tenants);
        for t in 0..tenants {
            let first = FIRST_EXTRA_ACCOUNT + (t * share) as i32;
            let last = (FIRST_EXTRA_ACCOUNT + extra as i32).min(first + share as i32);
            config.management_tokens.push(ManagementToken {
                token: format!("{token}-t{t}"),
                accounts: Some((first..last).collect()),
            });
        }
        tracing::info!(
            tenants,
            accounts_each = share,
            "extra tenant tokens: <token>-t0 and on, each seeing its share of the extra accounts"
        );
    }
    config
}

/// Puts the flags' rate limits in force on every management token (`limited_tokens` of them,
/// for the log): the token-wide limit first, then each route's.
fn apply_rate_limits(
    sim: &Simulator,
    rate_limit: Option<RateLimit>,
    route_rate_limits: Vec<(Route, RateLimit)>,
    limited_tokens: usize,
) -> Result<(), String> {
    if let Some(limit) = rate_limit {
        tracing::info!(
            rate = limit.rate,
            burst = limit.effective_burst(),
            retry_after = ?limit.retry_after,
            headers = ?limit.headers,
            status = limit.status,
            tokens = limited_tokens,
            "Management API rate limit: every management token has its own token bucket"
        );
        sim.set_rate_limit(None, Some(limit))?;
    }
    for (route, limit) in route_rate_limits {
        tracing::info!(
            %route,
            rate = limit.rate,
            burst = limit.effective_burst(),
            status = limit.status,
            tokens = limited_tokens,
            "Management API route rate limit: every management token has its own bucket on it"
        );
        sim.set_route_rate_limit(None, route, Some(limit))?;
    }
    Ok(())
}

/// Puts the flags' outage `spec` in force on every route (the `/_sim/` control plane stays up).
fn apply_outage(sim: &Simulator, args: &Args, spec: FaultSpec) {
    let text = |d: Option<Duration>| d.map(|d| humantime::format_duration(d).to_string());
    tracing::info!(
        after = text(spec.starts_after).as_deref().unwrap_or("0s"),
        lasting = text(spec.lasts).as_deref().unwrap_or("until the end"),
        status = (!args.outage_no_answer).then_some(args.outage_status),
        retry_after_secs = spec.error_retry_after_secs,
        no_answer = args.outage_no_answer,
        "outage of every route (the /_sim/ control plane stays up)"
    );
    sim.set_fault_on_every_route(spec);
}

/// The address clients on this machine use: a wildcard listener is reached over loopback.
fn reachable(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), addr.port())
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), addr.port())
        }
        _ => addr,
    }
}

/// Cancels `token` on the first ctrl-c or SIGTERM.
fn cancel_on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        #[cfg(unix)]
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        #[cfg(unix)]
        let sigterm = async {
            match term.as_mut() {
                Some(t) => t.recv().await,
                None => std::future::pending().await,
            }
        };
        #[cfg(not(unix))]
        let sigterm = std::future::pending::<Option<()>>();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = sigterm => {}
        }
        tracing::info!("shutting down");
        token.cancel();
    });
}
