//! Command-line flags, named after the Prometheus exporter conventions.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::collectors::CollectorName;
use crate::config::CollectorSwitches;
use crate::settings::TargetFailureLog;

pub const DEFAULT_LISTEN_ADDRESS: &str = ":19587";
/// Requests per second the simulated provider of `--demo` allows the demo token unless told
/// otherwise (its burst is as many): twice what the demo fleet needs on average, but below the
/// two dozen calls its collectors make at once when they start, so the first refresh always
/// meets the limit and the pacer's series and panels show a learned one.
pub const DEFAULT_DEMO_RATE_LIMIT: f64 = 10.0;
/// Concurrent scrapes served at most, as Prometheus' own default.
pub const DEFAULT_MAX_REQUESTS: usize = 40;
pub use crate::web::serve::{
    DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
};

const MAX_CONNECTIONS_RANGE: std::ops::RangeInclusive<usize> = 4..=1_048_576;
const HEADER_READ_TIMEOUT_RANGE: std::ops::RangeInclusive<Duration> =
    Duration::from_secs(1)..=Duration::from_secs(300);
const IDLE_TIMEOUT_RANGE: std::ops::RangeInclusive<Duration> =
    Duration::from_secs(1)..=Duration::from_secs(3600);

/// Shown after the flags: how to start, and where the token comes from (it is never a flag).
const AFTER_HELP: &str = "\
Start with a config file (--config.file, see examples/config.yml) or try it with --demo.

The API token: the file named by api.token_file in the config, or else the environment
variable MAILHOST_API_TOKEN. It is never a flag (flags show in the process list), never
logged, and only sent to api.base_url as the X-Api-Token header. A token the provider refuses
shows as reason \"unauthorized\" on the landing page and in mailhost_api_request_failures_total.";

#[derive(Debug, Parser)]
#[command(
    name = "mailhost_exporter",
    version,
    long_version = crate::LONG_VERSION,
    about = "Prometheus exporter for an email provider's Management API: Delivery quota, sending statistics, migrations and mailboxes.",
    after_help = AFTER_HELP
)]
pub struct Cli {
    /// Path to the YAML configuration file.
    #[arg(long = "config.file", value_name = "FILE")]
    pub config_file: Option<PathBuf>,

    /// Validate the configuration file, print what is wrong or `ok`, and exit (0 ok, 1 not).
    #[arg(long = "config.check", requires = "config_file")]
    pub config_check: bool,

    /// With --config.check: check the file alone, as `promtool check config --syntax-only`
    /// does: every key, value and rule in it, but not the token files, token variables and TLS
    /// files it names (it says which it left unread).
    #[arg(long = "config.syntax-only", requires = "config_check")]
    pub config_syntax_only: bool,

    /// Address to listen on for the metrics and landing pages (`:PORT` means every interface).
    /// Repeat it to listen on several (at most 16).
    #[arg(long = "web.listen-address", value_name = "ADDR", default_value = DEFAULT_LISTEN_ADDRESS, action = clap::ArgAction::Append)]
    pub listen_addresses: Vec<String>,

    /// Serve on the sockets systemd passes (socket activation, LISTEN_FDS) instead of
    /// --web.listen-address.
    #[arg(long = "web.systemd-socket")]
    pub systemd_socket: bool,

    /// Path under which to expose metrics: letters, digits, `-`, `.`, `_` and `~` between
    /// slashes; not `/`, `/probe`, `/sd` or under `/-/`.
    #[arg(
        long = "web.telemetry-path",
        value_name = "PATH",
        default_value = "/metrics",
        value_parser = telemetry_path
    )]
    pub telemetry_path: String,

    /// TLS and basic authentication for the web endpoints, in the Prometheus exporter-toolkit
    /// format (tls_server_config, basic_auth_users, http_server_config).
    #[arg(long = "web.config.file", value_name = "FILE")]
    pub web_config_file: Option<PathBuf>,

    /// Serve `POST /-/reload` (the config is also reloaded on SIGHUP).
    #[arg(long = "web.enable-lifecycle")]
    pub enable_lifecycle: bool,

    /// Leave the process_* series (CPU, memory, file descriptors, threads, start time) out of
    /// /metrics, as exporter-toolkit's flag of the same name does.
    #[arg(long = "web.disable-exporter-metrics")]
    pub disable_exporter_metrics: bool,

    /// Scrapes served at once at most; more get 503. 0 means no limit; at most 1048576.
    #[arg(long = "web.max-requests", value_name = "N", default_value_t = DEFAULT_MAX_REQUESTS, value_parser = max_requests)]
    pub max_requests: usize,

    /// Open connections at most; at the cap the least recently active connection without a
    /// request in flight is closed for a new one. Lowered to the open-file limit minus 128.
    /// From 4 to 1048576.
    #[arg(long = "web.max-connections", value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS, value_parser = max_connections)]
    pub max_connections: usize,

    /// Time a client has to send the head of a request (and to finish the TLS handshake) once
    /// it started; then the connection is closed. From 1s to 5m.
    #[arg(long = "web.header-read-timeout", value_name = "DURATION", default_value = "10s", value_parser = header_read_timeout)]
    pub header_read_timeout: Duration,

    /// A connection with no request in flight and no traffic for this long is closed. From 1s
    /// to 1h.
    #[arg(long = "web.idle-timeout", value_name = "DURATION", default_value = "2m", value_parser = idle_timeout)]
    pub idle_timeout: Duration,

    /// Keep what the exporter learned under this directory (created 0700 if missing, locked
    /// against a second exporter): each target's last values and outcome, written every
    /// --storage.checkpoint-interval and at shutdown, and restored at start when they belong to
    /// the same config and are younger than max_age. Off when not given.
    #[arg(long = "storage.path", value_name = "DIR", conflicts_with = "demo")]
    pub storage_path: Option<PathBuf>,

    /// How often what is kept under --storage.path is written (and once more at shutdown). A
    /// restart after a crash loses at most this much. From 1s to 1h.
    #[arg(long = "storage.checkpoint-interval", value_name = "DURATION", default_value = "1m", value_parser = checkpoint_interval, requires = "storage_path")]
    pub checkpoint_interval: Duration,

    /// Only log messages with the given severity or above.
    #[arg(long = "log.level", value_enum, default_value_t = LogLevel::Info)]
    pub log_level: LogLevel,

    /// How loud failing targets are in the log: none (debug level only), summary (one warn
    /// line per failure reason per collector per interval, naming a few targets) or target (one
    /// warn line per failing target per run).
    #[arg(long = "log.target-failures", value_enum, default_value_t = TargetFailureLog::Summary)]
    pub target_failures: TargetFailureLog,

    /// Output format of log messages.
    #[arg(long = "log.format", value_enum, default_value_t = LogFormat::Logfmt)]
    pub log_format: LogFormat,

    /// Poll only this replica's share of the configured targets: I of N replicas (from 0), split
    /// by account as Prometheus' `hashmod` over [tenant, account_id] splits them.
    #[arg(
        long = "shard",
        value_name = "I/N",
        default_value = "0/1",
        conflicts_with = "demo"
    )]
    pub shard: crate::shard::Shard,

    /// Run against a built-in simulator of the provider with a demo fleet; needs no token.
    #[arg(long, conflicts_with = "config_file")]
    pub demo: bool,

    /// In demo mode, the simulated provider rate-limits the demo token to this many requests
    /// per second, as real providers do without saying how (429 with Retry-After past it), and
    /// its daily statistics endpoint to half of that on its own; the exporter learns both
    /// limits; try 2 to see a fleet that does not fit, 0 for no limit.
    /// It can be changed at runtime through the simulator's /_sim/rate_limit (logged at start).
    #[arg(
        long = "demo.rate-limit",
        value_name = "RPS",
        default_value_t = DEFAULT_DEMO_RATE_LIMIT,
        value_parser = demo_rate
    )]
    pub demo_rate_limit: f64,
}

/// A demo rate limit: requests per second the simulator accepts (0: no limit).
fn demo_rate(value: &str) -> Result<f64, String> {
    let rate: f64 = value
        .parse()
        .map_err(|_| format!("{value:?} is not a number of requests per second, e.g. 2"))?;
    if rate == 0.0 || (rate.is_finite() && (0.1..=10_000.0).contains(&rate)) {
        Ok(rate)
    } else {
        Err(format!(
            "{rate} is out of range: use 0.1 to 10000 requests per second, e.g. 2, or 0 for no limit"
        ))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Logfmt,
    Json,
}

/// A count within `range`; `note` says what its low end means, `example` what suits most setups.
fn count_in(
    s: &str,
    range: std::ops::RangeInclusive<usize>,
    note: &str,
    example: usize,
) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|_| format!("{s:?} is not a whole number; use a count such as {example}"))?;
    if !range.contains(&n) {
        return Err(format!(
            "{n} is outside {} to {}; {note}{example} suits most setups",
            range.start(),
            range.end()
        ));
    }
    Ok(n)
}

/// `--web.max-requests`: 0 (no limit) up to the most connections there may be.
fn max_requests(s: &str) -> Result<usize, String> {
    let range = 0..=*MAX_CONNECTIONS_RANGE.end();
    count_in(s, range, "0 means no limit, ", 40)
}

/// Longest `--web.telemetry-path`.
const MAX_TELEMETRY_PATH: usize = 256;

/// A telemetry path the router can take as it is: `/` then segments of letters, digits, `-`,
/// `.`, `_` and `~` (none empty, none `.` or `..`), never a path of another endpoint. Route
/// syntax (`{param}`, `*`, `:`) would capture other paths or stop the router from starting.
pub fn telemetry_path(s: &str) -> Result<String, String> {
    let fix = "write a path like /metrics: / then letters, digits, -, ., _ and ~ between slashes";
    let segments_ok = s.strip_prefix('/').is_some_and(|rest| {
        rest.split('/').all(|seg| {
            !seg.is_empty()
                && seg != "."
                && seg != ".."
                && seg
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~'))
        })
    });
    if s.len() > MAX_TELEMETRY_PATH || !segments_ok {
        return Err(format!(
            "{} is not a path the exporter can serve; {fix} (at most {MAX_TELEMETRY_PATH} characters)",
            crate::redact::quote(s)
        ));
    }
    if ["/probe", "/sd"].contains(&s) || s.starts_with("/-/") {
        return Err(format!(
            "{s} is taken by another endpoint (/probe, /sd, /-/...); choose another, e.g. /metrics"
        ));
    }
    Ok(s.to_owned())
}

fn max_connections(s: &str) -> Result<usize, String> {
    count_in(s, MAX_CONNECTIONS_RANGE, "", 512)
}

fn duration_in(
    s: &str,
    range: &std::ops::RangeInclusive<Duration>,
    example: &str,
) -> Result<Duration, String> {
    let d = humantime::parse_duration(s)
        .map_err(|e| format!("{s:?} is not a duration ({e}); write one such as {example}"))?;
    if !range.contains(&d) {
        return Err(format!(
            "{s} is outside {} to {}; {example} suits most setups",
            humantime::format_duration(*range.start()),
            humantime::format_duration(*range.end())
        ));
    }
    Ok(d)
}

fn header_read_timeout(s: &str) -> Result<Duration, String> {
    duration_in(s, &HEADER_READ_TIMEOUT_RANGE, "10s")
}

fn idle_timeout(s: &str) -> Result<Duration, String> {
    duration_in(s, &IDLE_TIMEOUT_RANGE, "2m")
}

/// `--storage.checkpoint-interval`'s bounds.
pub const CHECKPOINT_INTERVAL_RANGE: std::ops::RangeInclusive<Duration> =
    Duration::from_secs(1)..=Duration::from_secs(3600);

fn checkpoint_interval(s: &str) -> Result<Duration, String> {
    duration_in(s, &CHECKPOINT_INTERVAL_RANGE, "1m")
}

/// The derived flags plus `--collector.NAME` and `--no-collector.NAME` for every collector, as
/// node_exporter spells them; the two of one collector exclude each other.
pub fn command() -> clap::Command {
    use clap::CommandFactory as _;
    let mut command = Cli::command();
    for name in CollectorName::ALL {
        // Flag names live as long as the process: a dozen short strings, made once.
        let on: &'static str = Box::leak(format!("collector.{name}").into_boxed_str());
        let off: &'static str = Box::leak(format!("no-collector.{name}").into_boxed_str());
        command = command
            .arg(
                clap::Arg::new(on)
                    .long(on)
                    .action(clap::ArgAction::SetTrue)
                    .conflicts_with(off)
                    .help(format!("Run the {name} collector whatever the config's enabled says (with its defaults when the config has no {name} block)")),
            )
            .arg(
                clap::Arg::new(off)
                    .long(off)
                    .action(clap::ArgAction::SetTrue)
                    .help(format!("Do not run the {name} collector, whatever the config says")),
            );
    }
    command
}

/// Parses the command line: the derived flags and the collector switches.
pub fn parse() -> (Cli, CollectorSwitches) {
    use clap::FromArgMatches as _;
    let matches = command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    (cli, switches(&matches))
}

/// The collector switches given in `matches`.
pub fn switches(matches: &clap::ArgMatches) -> CollectorSwitches {
    let given = |prefix: &str| {
        let given = |n: &CollectorName| matches.get_flag(&format!("{prefix}{n}"));
        CollectorName::ALL.iter().copied().filter(given).collect()
    };
    CollectorSwitches {
        on: given("collector."),
        off: given("no-collector."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command line of `--demo` and `args`.
    fn parse(args: &[&str]) -> Result<Cli, String> {
        Cli::try_parse_from([&["mailhost_exporter", "--demo"][..], args].concat())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn connection_flags_out_of_range_are_refused_with_the_range() {
        let ok = parse(&[]).unwrap();
        assert_eq!(ok.max_connections, DEFAULT_MAX_CONNECTIONS);
        assert_eq!(ok.header_read_timeout, DEFAULT_HEADER_READ_TIMEOUT);
        assert_eq!(ok.idle_timeout, DEFAULT_IDLE_TIMEOUT);
        let e = parse(&["--web.max-connections=2"]).unwrap_err();
        assert!(e.contains("2 is outside 4 to 1048576"), "{e}");
        let e = parse(&["--web.header-read-timeout=500ms"]).unwrap_err();
        assert!(e.contains("500ms is outside 1s to 5m"), "{e}");
        let e = parse(&["--web.idle-timeout=2h"]).unwrap_err();
        assert!(e.contains("2h is outside 1s to 1h"), "{e}");
        let e = parse(&["--web.idle-timeout=soon"]).unwrap_err();
        assert!(e.contains("is not a duration"), "{e}");
        let set = parse(&[
            "--web.max-connections=64",
            "--web.header-read-timeout=2s",
            "--web.idle-timeout=30s",
        ])
        .unwrap();
        assert_eq!(set.max_connections, 64);
        assert_eq!(set.header_read_timeout, Duration::from_secs(2));
        assert_eq!(set.idle_timeout, Duration::from_secs(30));
    }

    #[test]
    fn route_syntax_and_odd_characters_in_the_telemetry_path_are_refused_with_the_fix() {
        for good in ["/metrics", "/a/b-c.d_e~f", "/x"] {
            assert_eq!(telemetry_path(good).as_deref(), Ok(good));
        }
        for bad in [
            "",
            "/",
            "metrics",
            "//",
            "/a//b",
            "/a/",
            "/*x",
            "/:x",
            "/{x}",
            "/a/{*rest}",
            "/%",
            "/a b",
            "/é",
            "/..",
            "/./x",
            "/a?b",
            "/a#b",
        ] {
            let e = telemetry_path(bad).unwrap_err();
            assert!(e.contains("write a path like /metrics"), "{bad:?}: {e}");
        }
        for taken in ["/probe", "/sd", "/-/healthy", "/-/x"] {
            let e = telemetry_path(taken).unwrap_err();
            assert!(e.contains("taken by another endpoint"), "{taken}: {e}");
        }
        assert!(telemetry_path(&format!("/{}", "a".repeat(300))).is_err());
    }

    #[test]
    fn max_requests_is_bounded_so_the_scrape_semaphore_can_hold_it() {
        let max_requests =
            |v: &str| parse(&[&format!("--web.max-requests={v}")]).map(|c| c.max_requests);
        assert_eq!(max_requests("0"), Ok(0));
        assert_eq!(max_requests("1048576"), Ok(1_048_576));
        for bad in ["1048577", "18446744073709551615", "-1", "many"] {
            let e = max_requests(bad).unwrap_err();
            assert!(
                e.contains("is outside 0 to 1048576") || e.contains("is not a whole number"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn the_demo_rate_limit_takes_zero_or_a_rate_in_range() {
        let rate = |v: &str| parse(&[&format!("--demo.rate-limit={v}")]).map(|c| c.demo_rate_limit);
        assert_eq!(parse(&[]).unwrap().demo_rate_limit, DEFAULT_DEMO_RATE_LIMIT);
        assert_eq!(rate("0"), Ok(0.0));
        assert_eq!(rate("2.5"), Ok(2.5));
        for bad in ["0.05", "1e9", "NaN", "-1", "lots"] {
            let e = rate(bad).unwrap_err();
            assert!(
                e.contains("0.1 to 10000 requests per second")
                    || e.contains("is not a number of requests per second"),
                "{bad}: {e}"
            );
        }
    }
}
