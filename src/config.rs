//! Configuration: the strict YAML file, its defaults, and validation whose messages name the
//! field and the fix.

use std::collections::HashSet;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;

/// Environment variable that may hold the Management API token instead of `api.token_file`.
pub const TOKEN_ENV: &str = "MAILHOST_API_TOKEN";

/// Defaults, named so that docs and code agree.
pub mod defaults {
    use std::time::Duration;

    pub const TIMEOUT: Duration = Duration::from_secs(10);
    pub const CONCURRENCY: usize = 8;
    pub const MAX_RESPONSE_BYTES: u64 = 4 * 1024 * 1024;
    pub const MAX_RETRIES: u32 = 2;
    pub const RETRY_BACKOFF: Duration = Duration::from_millis(250);
    pub const RETRY_MAX_BACKOFF: Duration = Duration::from_secs(5);
    pub const BREAKER_FAILURES: u32 = 5;
    pub const BREAKER_COOLDOWN: Duration = Duration::from_secs(60);
    pub const INTERVAL: Duration = Duration::from_secs(60);
    /// `max_age` is this many intervals unless set.
    pub const MAX_AGE_INTERVALS: u32 = 3;
    /// Time zone of the mail-tracing collectors' "today".
    pub const TIMEZONE: &str = "UTC";
    /// How dates are written in mail-tracing requests.
    pub const DATE_FORMAT: &str = "YYYY-MM-DD";
    /// `limit` of the dashboard's top lists.
    pub const TOP_LIMIT: i64 = 10;
    /// Domains per account kept from the daily `domains-rank`.
    pub const TOP_DOMAINS: i64 = 20;
}

/// The bounds of every value: what the exporter can run with. Each is named in the message that
/// refuses a value past it.
pub mod limits {
    use std::time::Duration;

    /// Largest config file read (a fleet of a million ids fits).
    pub const CONFIG_FILE_BYTES: u64 = 32 * 1024 * 1024;
    /// Largest token file read: it holds one token.
    pub const TOKEN_FILE_BYTES: u64 = 4096;
    /// Longest token.
    pub const TOKEN_CHARS: usize = 1024;
    pub const MAX_TIMEOUT: Duration = Duration::from_secs(5 * 60);
    pub const MAX_BACKOFF: Duration = Duration::from_secs(5 * 60);
    pub const MIN_COOLDOWN: Duration = Duration::from_secs(1);
    pub const MAX_COOLDOWN: Duration = Duration::from_secs(60 * 60);
    pub const MAX_BREAKER_FAILURES: u32 = 1000;
    pub const MIN_RESPONSE_BYTES: u64 = 1024;
    pub const MAX_RESPONSE_BYTES: u64 = 256 * 1024 * 1024;
    pub const MIN_INTERVAL: Duration = Duration::from_secs(1);
    pub const MAX_INTERVAL: Duration = Duration::from_secs(24 * 60 * 60);
    pub const MAX_AGE: Duration = Duration::from_secs(7 * 24 * 60 * 60);
    /// Targets in one list (accounts, views, migrations, mailboxes).
    pub const MAX_TARGETS: usize = 1_000_000;
    /// Characters of a config value quoted back in a message at most.
    pub const QUOTED_CHARS: usize = 64;
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "config file {path} is larger than {} MiB; is it the right file?",
        limits::CONFIG_FILE_BYTES / 1024 / 1024
    )]
    TooLarge { path: PathBuf },
    #[error("{0}")]
    Syntax(String),
    #[error("{field}: {problem}")]
    Invalid { field: String, problem: String },
}

/// What an empty (or comments-only) config file is told.
pub const EMPTY_CONFIG: &str = "the config file is empty: start from examples/config.yml; at least api.base_url and one collector are needed";

fn invalid(field: impl Into<String>, problem: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        problem: problem.into(),
    }
}

/// The file as written; see [`Config`] for the validated form.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    api: RawApi,
    #[serde(default)]
    collectors: RawCollectors,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApi {
    base_url: String,
    #[serde(default)]
    token_file: Option<PathBuf>,
    #[serde(default, with = "humantime_serde")]
    timeout: Option<Duration>,
    #[serde(default)]
    concurrency: Option<usize>,
    #[serde(default)]
    max_response_bytes: Option<u64>,
    #[serde(default)]
    max_retries: Option<u32>,
    #[serde(default, with = "humantime_serde")]
    retry_backoff: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    retry_max_backoff: Option<Duration>,
    #[serde(default)]
    circuit_breaker_failures: Option<u32>,
    #[serde(default, with = "humantime_serde")]
    circuit_breaker_cooldown: Option<Duration>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCollectors {
    #[serde(default)]
    delivery_account: Option<RawDeliveryAccount>,
    #[serde(default)]
    tracemail_dashboard: Option<RawDashboard>,
    #[serde(default)]
    tracemail_daily: Option<RawDaily>,
    #[serde(default)]
    migration: Option<RawMigration>,
    #[serde(default)]
    mailbox: Option<RawMailbox>,
}

// Each collector repeats enabled/interval/deadline/max_age: serde cannot `flatten` a shared
// struct into one that denies unknown fields, and unknown keys must be refused.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDashboard {
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default, with = "humantime_serde")]
    interval: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    deadline: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    max_age: Option<Duration>,
    #[serde(default)]
    timezone: Option<String>,
    #[serde(default)]
    date_format: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
    #[serde(default)]
    views: Vec<RawView>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawView {
    #[serde(default)]
    account: Option<i64>,
    #[serde(default)]
    domain: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDaily {
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default, with = "humantime_serde")]
    interval: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    deadline: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    max_age: Option<Duration>,
    #[serde(default)]
    timezone: Option<String>,
    #[serde(default)]
    date_format: Option<String>,
    #[serde(default)]
    top_domains: Option<i64>,
    #[serde(default)]
    accounts: Vec<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMigration {
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default, with = "humantime_serde")]
    interval: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    deadline: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    max_age: Option<Duration>,
    #[serde(default)]
    migrations: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMailbox {
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default, with = "humantime_serde")]
    interval: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    deadline: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    max_age: Option<Duration>,
    #[serde(default)]
    mailboxes: Vec<RawMailboxTarget>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMailboxTarget {
    domain: String,
    mailbox: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDeliveryAccount {
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default, with = "humantime_serde")]
    interval: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    deadline: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    max_age: Option<Duration>,
    #[serde(default)]
    accounts: Vec<i64>,
}

fn yes() -> bool {
    true
}

/// The validated configuration the exporter runs with.
#[derive(Debug, Clone)]
pub struct Config {
    pub api: ApiConfig,
    pub collectors: CollectorsConfig,
}

#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// Base address without a trailing slash, `http` or `https`.
    pub base_url: String,
    pub token: SecretString,
    pub timeout: Duration,
    pub concurrency: usize,
    pub max_response_bytes: u64,
    pub retry: RetryPolicy,
    pub breaker: BreakerPolicy,
}

/// How read calls are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 = none).
    pub max_retries: u32,
    /// The first back-off; each retry doubles it, up to `max_backoff`, with jitter.
    pub backoff: Duration,
    pub max_backoff: Duration,
}

/// When an endpoint's circuit opens, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerPolicy {
    /// Consecutive failed calls that open the circuit (0 = never).
    pub failures: u32,
    /// How long it stays open before one probe call is let through.
    pub cooldown: Duration,
}

#[derive(Debug, Clone, Default)]
pub struct CollectorsConfig {
    pub delivery_account: Option<DeliveryAccountConfig>,
    pub tracemail_dashboard: Option<DashboardConfig>,
    pub tracemail_daily: Option<DailyConfig>,
    pub migration: Option<MigrationConfig>,
    pub mailbox: Option<MailboxConfig>,
}

/// When a collector runs and how long its values live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    pub interval: Duration,
    /// The whole run must finish within this; shorter than `interval`, so runs never pile up.
    pub deadline: Duration,
    /// A failing target keeps its last good values this long, then its series are dropped.
    pub max_age: Duration,
}

#[derive(Debug, Clone)]
pub struct DeliveryAccountConfig {
    pub schedule: Schedule,
    pub accounts: Vec<i32>,
}

/// A dashboard view: the whole customer, or filtered by one account or one domain.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum View {
    All,
    Account(i32),
    Domain(String),
}

#[derive(Debug, Clone)]
pub struct DashboardConfig {
    pub schedule: Schedule,
    pub timezone: jiff::tz::TimeZone,
    /// The IANA name, as sent in the request body.
    pub timezone_name: String,
    pub date_format: DateFormat,
    pub limit: i32,
    /// Always starts with [`View::All`].
    pub views: Vec<View>,
}

#[derive(Debug, Clone)]
pub struct DailyConfig {
    pub schedule: Schedule,
    pub timezone: jiff::tz::TimeZone,
    pub date_format: DateFormat,
    pub top_domains: usize,
    pub accounts: Vec<i32>,
}

#[derive(Debug, Clone)]
pub struct MigrationConfig {
    pub schedule: Schedule,
    pub migrations: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MailboxTarget {
    pub domain: String,
    pub mailbox: String,
}

#[derive(Debug, Clone)]
pub struct MailboxConfig {
    pub schedule: Schedule,
    pub mailboxes: Vec<MailboxTarget>,
}

/// How dates are written in requests: `YYYY`, `MM` and `DD` in any order with separators,
/// e.g. `YYYY-MM-DD` (the default) or `DD/MM/YYYY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DateFormat {
    strftime: String,
}

impl DateFormat {
    pub fn parse(pattern: &str) -> Option<DateFormat> {
        let ok = pattern.matches("YYYY").count() == 1
            && pattern.matches("MM").count() == 1
            && pattern.matches("DD").count() == 1
            && pattern.len() <= 32;
        let strftime = pattern
            .replace('%', "%%")
            .replace("YYYY", "%Y")
            .replace("MM", "%m")
            .replace("DD", "%d");
        // Nothing but the three fields and separators: no letters left over.
        let rest = pattern
            .replace("YYYY", "")
            .replace("MM", "")
            .replace("DD", "");
        (ok && !rest.chars().any(|c| c.is_alphanumeric())).then_some(DateFormat { strftime })
    }

    pub fn format(&self, date: jiff::civil::Date) -> String {
        date.strftime(&self.strftime).to_string()
    }

    /// Reads a date written in this format (or as ISO `YYYY-MM-DD`, or a date-time whose date
    /// part is one of those).
    pub fn read(&self, text: &str) -> Option<jiff::civil::Date> {
        let t = text.trim();
        jiff::civil::Date::strptime(&self.strftime, t)
            .ok()
            .or_else(|| {
                t.get(..10)
                    .and_then(|d| d.parse::<jiff::civil::Date>().ok())
            })
    }
}

impl Default for DateFormat {
    fn default() -> Self {
        DateFormat::parse(defaults::DATE_FORMAT).expect("the default date format is valid")
    }
}

impl Config {
    /// Reads, parses and validates a config file; the token comes from `api.token_file` or,
    /// when that is unset, from [`TOKEN_ENV`] as given by `env_token`.
    pub fn load(path: &Path, env_token: Option<String>) -> Result<Config, ConfigError> {
        let read = |source| ConfigError::Read {
            path: path.to_owned(),
            source,
        };
        let bytes = read_at_most(path, limits::CONFIG_FILE_BYTES).map_err(read)?;
        let Some(bytes) = bytes else {
            return Err(ConfigError::TooLarge {
                path: path.to_owned(),
            });
        };
        let text = String::from_utf8(bytes).map_err(|_| {
            read(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "it is not UTF-8 text",
            ))
        })?;
        Self::parse(&text, env_token)
    }

    /// Parses and validates YAML text; see [`Config::load`].
    pub fn parse(text: &str, env_token: Option<String>) -> Result<Config, ConfigError> {
        // The YAML parser's own word for this ("EOF while parsing") does not help a new user.
        let blank = text
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'));
        if blank {
            return Err(ConfigError::Syntax(EMPTY_CONFIG.to_owned()));
        }
        let raw: RawConfig = serde_yaml_ng::from_str(text)
            .map_err(|e| ConfigError::Syntax(describe_yaml_error(&e)))?;
        let api = validate_api(raw.api, env_token)?;
        let c = raw.collectors;
        let delivery_account = match c.delivery_account {
            Some(d) if d.enabled => Some(DeliveryAccountConfig {
                schedule: schedule(
                    "collectors.delivery_account",
                    d.interval,
                    d.deadline,
                    d.max_age,
                )?,
                accounts: account_ids("collectors.delivery_account.accounts", &d.accounts)?,
            }),
            _ => None,
        };
        let tracemail_dashboard = match c.tracemail_dashboard {
            Some(d) if d.enabled => Some(dashboard(d)?),
            _ => None,
        };
        let tracemail_daily = match c.tracemail_daily {
            Some(d) if d.enabled => Some(daily(d)?),
            _ => None,
        };
        let migration = match c.migration {
            Some(m) if m.enabled => Some(MigrationConfig {
                schedule: schedule("collectors.migration", m.interval, m.deadline, m.max_age)?,
                migrations: codes(
                    "collectors.migration.migrations",
                    &m.migrations,
                    &[("MG", 8)],
                    "MG followed by 8 digits, e.g. MG00000001",
                )?,
            }),
            _ => None,
        };
        let mailbox = match c.mailbox {
            Some(m) if m.enabled => Some(mailboxes(m)?),
            _ => None,
        };
        let collectors = CollectorsConfig {
            delivery_account,
            tracemail_dashboard,
            tracemail_daily,
            migration,
            mailbox,
        };
        if collectors.delivery_account.is_none()
            && collectors.tracemail_dashboard.is_none()
            && collectors.tracemail_daily.is_none()
            && collectors.migration.is_none()
            && collectors.mailbox.is_none()
        {
            return Err(invalid(
                "collectors",
                "no collector is enabled: configure at least one, e.g. collectors.delivery_account.accounts",
            ));
        }
        Ok(Config { api, collectors })
    }
}

/// Reads a file, or `None` when it is larger than `limit` bytes (only `limit + 1` are read).
fn read_at_most(path: &Path, limit: u64) -> std::io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= limit).then_some(bytes))
}

/// A config value quoted back to its author, cut at [`limits::QUOTED_CHARS`]: for values that
/// cannot be secrets (time zones, codes, domains), shown so the mistake is easy to find.
fn quote(value: &str) -> String {
    let mut cut: String = value.chars().take(limits::QUOTED_CHARS).collect();
    if cut.len() < value.len() {
        cut.push('…');
    }
    format!("{cut:?}")
}

/// serde_yaml_ng prefixes the path of the offending key (kept) and quotes the offending value:
/// any field may hold a secret pasted in the wrong place, so quoted strings are replaced by
/// their length.
fn describe_yaml_error(e: &serde_yaml_ng::Error) -> String {
    let msg = redact_quoted(&e.to_string());
    if msg.contains("unknown field") {
        format!("{msg} (remove or correct the key; see examples/config.yml)")
    } else if msg.contains("expected a duration") {
        format!("{msg} (write durations like 30s, 5m or 1h30m)")
    } else {
        msg
    }
}

/// Replaces every double-quoted string of a message (`"abc"`, with `\"` escapes inside) by
/// `(N characters)`; the rest of the message is kept.
fn redact_quoted(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut chars = msg.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            out.push(c);
            continue;
        }
        let mut n = 0usize;
        let mut escaped = false;
        for c in chars.by_ref() {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
                continue;
            } else if c == '"' {
                break;
            }
            n += 1;
        }
        out.push_str(&format!("({n} characters)"));
    }
    out
}

fn validate_api(raw: RawApi, env_token: Option<String>) -> Result<ApiConfig, ConfigError> {
    let base_url = raw.base_url.trim_end_matches('/').to_owned();
    let parsed = reqwest::Url::parse(&base_url);
    match &parsed {
        Ok(u) if (u.scheme() == "http" || u.scheme() == "https") && u.host().is_some() => {
            if !u.username().is_empty() || u.password().is_some() {
                return Err(invalid(
                    "api.base_url",
                    "must not carry credentials; put the token in api.token_file or MAILHOST_API_TOKEN",
                ));
            }
            if u.query().is_some() || u.fragment().is_some() {
                return Err(invalid(
                    "api.base_url",
                    "must not carry a query or fragment",
                ));
            }
        }
        _ => {
            // Shown without userinfo, query or fragment: they may hold a secret.
            let why = match &parsed {
                Err(e) => format!(" ({e})"),
                Ok(_) => String::new(),
            };
            return Err(invalid(
                "api.base_url",
                format!(
                    "{} is not an http(s) address{why}; write it like https://api.example.net",
                    quote(&crate::redact::url(&base_url))
                ),
            ));
        }
    }
    let token = match &raw.token_file {
        // The path is never quoted: a token pasted there by mistake would be shown.
        Some(path) => {
            let bytes = read_at_most(path, limits::TOKEN_FILE_BYTES).map_err(|e| {
                invalid(
                    "api.token_file",
                    format!(
                        "cannot read the file it names ({}); check that it is the path of a readable file holding the token, not the token itself",
                        io_reason(&e)
                    ),
                )
            })?;
            let Some(bytes) = bytes else {
                return Err(invalid(
                    "api.token_file",
                    format!(
                        "the file it names is larger than {} bytes; it should hold the token alone",
                        limits::TOKEN_FILE_BYTES
                    ),
                ));
            };
            let text = String::from_utf8(bytes).map_err(|_| {
                invalid(
                    "api.token_file",
                    "the file it names is not UTF-8 text; it should hold the token alone",
                )
            })?;
            let t = text.trim().to_owned();
            if t.is_empty() {
                return Err(invalid(
                    "api.token_file",
                    "the file it names is empty; write the Management API token into it",
                ));
            }
            t
        }
        None => match env_token.map(|t| t.trim().to_owned()) {
            Some(t) if !t.is_empty() => t,
            _ => {
                return Err(invalid(
                    "api.token_file",
                    format!(
                        "no API token: set api.token_file to a file holding the token, or set {TOKEN_ENV}"
                    ),
                ));
            }
        },
    };
    if token.chars().any(|c| c.is_control() || c == ' ') {
        return Err(invalid(
            "api token",
            "contains spaces or control characters; a token is one word",
        ));
    }
    if token.chars().count() > limits::TOKEN_CHARS {
        return Err(invalid(
            "api token",
            format!(
                "is longer than {} characters; is it the token?",
                limits::TOKEN_CHARS
            ),
        ));
    }
    let timeout = raw.timeout.unwrap_or(defaults::TIMEOUT);
    within(
        "api.timeout",
        timeout,
        Duration::from_millis(1),
        limits::MAX_TIMEOUT,
        "10s",
    )?;
    let concurrency = raw.concurrency.unwrap_or(defaults::CONCURRENCY);
    if !(1..=256).contains(&concurrency) {
        return Err(invalid(
            "api.concurrency",
            format!("{concurrency} is out of range: use 1 to 256"),
        ));
    }
    let max_response_bytes = raw
        .max_response_bytes
        .unwrap_or(defaults::MAX_RESPONSE_BYTES);
    if !(limits::MIN_RESPONSE_BYTES..=limits::MAX_RESPONSE_BYTES).contains(&max_response_bytes) {
        return Err(invalid(
            "api.max_response_bytes",
            format!(
                "{max_response_bytes} is out of range: use {} to {} (256 MiB), for example 4194304",
                limits::MIN_RESPONSE_BYTES,
                limits::MAX_RESPONSE_BYTES
            ),
        ));
    }
    let max_retries = raw.max_retries.unwrap_or(defaults::MAX_RETRIES);
    if max_retries > 10 {
        return Err(invalid(
            "api.max_retries",
            format!("{max_retries} is out of range: use 0 to 10"),
        ));
    }
    let backoff = raw.retry_backoff.unwrap_or(defaults::RETRY_BACKOFF);
    let max_backoff = raw.retry_max_backoff.unwrap_or(defaults::RETRY_MAX_BACKOFF);
    within(
        "api.retry_max_backoff",
        max_backoff,
        Duration::from_millis(1),
        limits::MAX_BACKOFF,
        "5s",
    )?;
    if backoff.is_zero() || backoff > max_backoff {
        return Err(invalid(
            "api.retry_backoff",
            "must be more than 0s and at most api.retry_max_backoff, for example 250ms and 5s",
        ));
    }
    let failures = raw
        .circuit_breaker_failures
        .unwrap_or(defaults::BREAKER_FAILURES);
    if failures > limits::MAX_BREAKER_FAILURES {
        return Err(invalid(
            "api.circuit_breaker_failures",
            format!(
                "{failures} is out of range: use 0 (never open) to {}, for example 5",
                limits::MAX_BREAKER_FAILURES
            ),
        ));
    }
    let cooldown = raw
        .circuit_breaker_cooldown
        .unwrap_or(defaults::BREAKER_COOLDOWN);
    within(
        "api.circuit_breaker_cooldown",
        cooldown,
        limits::MIN_COOLDOWN,
        limits::MAX_COOLDOWN,
        "60s",
    )?;
    Ok(ApiConfig {
        base_url,
        token: SecretString::from(token),
        timeout,
        concurrency,
        max_response_bytes,
        retry: RetryPolicy {
            max_retries,
            backoff,
            max_backoff,
        },
        breaker: BreakerPolicy { failures, cooldown },
    })
}

/// The reason an I/O error gives, without the path it concerns.
fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_owned(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        std::io::ErrorKind::IsADirectory => "it is a directory".to_owned(),
        kind => kind.to_string(),
    }
}

/// Refuses a duration outside `min..=max`, naming the field, the bound and an example.
fn within(
    field: &str,
    value: Duration,
    min: Duration,
    max: Duration,
    example: &str,
) -> Result<(), ConfigError> {
    if (min..=max).contains(&value) {
        return Ok(());
    }
    let f = humantime::format_duration;
    Err(invalid(
        field,
        format!(
            "{} is out of range: use {} to {}, for example {example}",
            f(value),
            f(min),
            f(max)
        ),
    ))
}

fn schedule(
    field: &str,
    interval: Option<Duration>,
    deadline: Option<Duration>,
    max_age: Option<Duration>,
) -> Result<Schedule, ConfigError> {
    let interval = interval.unwrap_or(defaults::INTERVAL);
    within(
        &format!("{field}.interval"),
        interval,
        limits::MIN_INTERVAL,
        limits::MAX_INTERVAL,
        "60s",
    )?;
    // Default deadline: 80% of the interval, so a slow run ends before the next one is due.
    // The interval is bounded above, so neither product can overflow.
    let deadline = deadline.unwrap_or(interval / 5 * 4);
    if deadline.is_zero() || deadline >= interval {
        return Err(invalid(
            format!("{field}.deadline"),
            format!(
                "{} must be shorter than the interval ({}); a run may not overlap the next",
                humantime::format_duration(deadline),
                humantime::format_duration(interval)
            ),
        ));
    }
    let max_age = max_age.unwrap_or(interval.saturating_mul(defaults::MAX_AGE_INTERVALS));
    if max_age > limits::MAX_AGE {
        return Err(invalid(
            format!("{field}.max_age"),
            format!(
                "{} is out of range: use at most {}; values older than that are of no use",
                humantime::format_duration(max_age),
                humantime::format_duration(limits::MAX_AGE)
            ),
        ));
    }
    if max_age < interval {
        return Err(invalid(
            format!("{field}.max_age"),
            format!(
                "{} is shorter than the interval ({}); values would vanish between runs",
                humantime::format_duration(max_age),
                humantime::format_duration(interval)
            ),
        ));
    }
    Ok(Schedule {
        interval,
        deadline,
        max_age,
    })
}

fn timezone(
    field: &str,
    name: Option<String>,
) -> Result<(jiff::tz::TimeZone, String), ConfigError> {
    let name = name.unwrap_or_else(|| defaults::TIMEZONE.to_owned());
    jiff::tz::TimeZone::get(&name)
        .map(|tz| (tz, name.clone()))
        .map_err(|_| {
            invalid(
                field,
                format!(
                    "{} is not a known time zone; use an IANA name such as UTC or Europe/Rome",
                    quote(&name)
                ),
            )
        })
}

fn date_format(field: &str, pattern: Option<String>) -> Result<DateFormat, ConfigError> {
    let pattern = pattern.unwrap_or_else(|| defaults::DATE_FORMAT.to_owned());
    DateFormat::parse(&pattern).ok_or_else(|| {
        invalid(
            field,
            format!(
                "{} is not a date format: write YYYY, MM and DD once each with separators, e.g. YYYY-MM-DD",
                quote(&pattern)
            ),
        )
    })
}

fn dashboard(d: RawDashboard) -> Result<DashboardConfig, ConfigError> {
    let f = "collectors.tracemail_dashboard";
    let (tz, timezone_name) = timezone(&format!("{f}.timezone"), d.timezone)?;
    let limit = d.limit.unwrap_or(defaults::TOP_LIMIT);
    if !(1..=1000).contains(&limit) {
        return Err(invalid(
            format!("{f}.limit"),
            format!("{limit} is out of range: use 1 to 1000"),
        ));
    }
    at_most(&format!("{f}.views"), d.views.len())?;
    let mut views = vec![View::All];
    let mut seen: HashSet<View> = HashSet::from([View::All]);
    for (i, v) in d.views.into_iter().enumerate() {
        let field = format!("{f}.views[{i}]");
        let view = match (v.account, v.domain) {
            (Some(id), None) => View::Account(account_ids(&format!("{field}.account"), &[id])?[0]),
            (None, Some(domain)) => {
                let domain = domain.trim().to_ascii_lowercase();
                if domain.is_empty()
                    || domain.len() > 253
                    || !domain
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
                {
                    return Err(invalid(
                        format!("{field}.domain"),
                        format!("{} is not a domain name, e.g. shop.example", quote(&domain)),
                    ));
                }
                View::Domain(domain)
            }
            _ => {
                return Err(invalid(
                    field,
                    "give exactly one of account (an id) or domain (a name)",
                ));
            }
        };
        if !seen.insert(view.clone()) {
            return Err(invalid(field, "is listed twice"));
        }
        views.push(view);
    }
    Ok(DashboardConfig {
        schedule: schedule(f, d.interval, d.deadline, d.max_age)?,
        timezone: tz,
        timezone_name,
        date_format: date_format(&format!("{f}.date_format"), d.date_format)?,
        limit: limit as i32,
        views,
    })
}

fn daily(d: RawDaily) -> Result<DailyConfig, ConfigError> {
    let f = "collectors.tracemail_daily";
    let top = d.top_domains.unwrap_or(defaults::TOP_DOMAINS);
    if !(1..=200).contains(&top) {
        return Err(invalid(
            format!("{f}.top_domains"),
            format!("{top} is out of range: use 1 to 200"),
        ));
    }
    Ok(DailyConfig {
        schedule: schedule(f, d.interval, d.deadline, d.max_age)?,
        timezone: timezone(&format!("{f}.timezone"), d.timezone)?.0,
        date_format: date_format(&format!("{f}.date_format"), d.date_format)?,
        top_domains: top as usize,
        accounts: account_ids(&format!("{f}.accounts"), &d.accounts)?,
    })
}

fn mailboxes(m: RawMailbox) -> Result<MailboxConfig, ConfigError> {
    let f = "collectors.mailbox";
    if m.mailboxes.is_empty() {
        return Err(invalid(
            format!("{f}.mailboxes"),
            "is empty; list pairs like {domain: D000000101, mailbox: EA00000001}",
        ));
    }
    at_most(&format!("{f}.mailboxes"), m.mailboxes.len())?;
    let mut seen = HashSet::with_capacity(m.mailboxes.len());
    let mut out: Vec<MailboxTarget> = Vec::with_capacity(m.mailboxes.len());
    for (i, t) in m.mailboxes.into_iter().enumerate() {
        let field = format!("{f}.mailboxes[{i}]");
        let domain = code(
            &format!("{field}.domain"),
            &t.domain,
            &[("D", 9)],
            "D followed by 9 digits, e.g. D000000101",
        )?;
        let mailbox = code(
            &format!("{field}.mailbox"),
            &t.mailbox,
            &[("EA", 8), ("P", 9)],
            "EA followed by 8 digits (e.g. EA00000001), or P followed by 9 digits for a postmaster",
        )?;
        if !seen.insert(mailbox.clone()) {
            return Err(invalid(field, format!("mailbox {mailbox} is listed twice")));
        }
        out.push(MailboxTarget { domain, mailbox });
    }
    Ok(MailboxConfig {
        schedule: schedule(f, m.interval, m.deadline, m.max_age)?,
        mailboxes: out,
    })
}

/// Validates one identifier code: a prefix followed by a number of digits.
fn code(
    field: &str,
    value: &str,
    forms: &[(&str, usize)],
    expected: &str,
) -> Result<String, ConfigError> {
    let ok = forms.iter().any(|(prefix, digits)| {
        value
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.len() == *digits && rest.bytes().all(|b| b.is_ascii_digit()))
    });
    if ok {
        Ok(value.to_owned())
    } else {
        Err(invalid(
            field,
            format!("{} is not a valid code: expected {expected}", quote(value)),
        ))
    }
}

/// Validates a non-empty list of distinct codes.
fn codes(
    field: &str,
    values: &[String],
    forms: &[(&str, usize)],
    expected: &str,
) -> Result<Vec<String>, ConfigError> {
    if values.is_empty() {
        return Err(invalid(
            field,
            format!("is empty; list codes written as {expected}"),
        ));
    }
    at_most(field, values.len())?;
    let mut seen = HashSet::with_capacity(values.len());
    let mut out: Vec<String> = Vec::with_capacity(values.len());
    for (i, v) in values.iter().enumerate() {
        let at = format!("{field}[{i}]");
        let v = code(&at, v, forms, expected)?;
        if !seen.insert(v.clone()) {
            return Err(invalid(at, format!("{v} is listed twice")));
        }
        out.push(v);
    }
    Ok(out)
}

/// Refuses a list longer than [`limits::MAX_TARGETS`].
fn at_most(field: &str, len: usize) -> Result<(), ConfigError> {
    if len > limits::MAX_TARGETS {
        return Err(invalid(
            field,
            format!(
                "lists {len} entries; at most {} are supported by one exporter (split the fleet with shards)",
                limits::MAX_TARGETS
            ),
        ));
    }
    Ok(())
}

fn account_ids(field: &str, ids: &[i64]) -> Result<Vec<i32>, ConfigError> {
    if ids.is_empty() {
        return Err(invalid(
            field,
            "is empty; list the Delivery account ids to watch, e.g. [1001, 1002]",
        ));
    }
    at_most(field, ids.len())?;
    let mut seen = HashSet::with_capacity(ids.len());
    let mut out = Vec::with_capacity(ids.len());
    for (i, &id) in ids.iter().enumerate() {
        let id32 = i32::try_from(id).ok().filter(|v| *v > 0).ok_or_else(|| {
            invalid(
                format!("{field}[{i}]"),
                format!(
                    "{id} is out of range: Delivery account ids are int32, from 1 to 2147483647"
                ),
            )
        })?;
        if !seen.insert(id32) {
            return Err(invalid(
                format!("{field}[{i}]"),
                format!("{id} is listed twice"),
            ));
        }
        out.push(id32);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    const GOOD: &str = "api:\n  base_url: https://api.example.net/\ncollectors:\n  delivery_account:\n    interval: 30s\n    accounts: [1001, 1002]\n";

    #[test]
    fn a_minimal_config_gets_the_named_defaults() {
        let c = Config::parse(GOOD, Some("tok".into())).unwrap();
        assert_eq!(c.api.base_url, "https://api.example.net");
        assert_eq!(c.api.timeout, defaults::TIMEOUT);
        assert_eq!(c.api.concurrency, defaults::CONCURRENCY);
        assert_eq!(c.api.token.expose_secret(), "tok");
        let d = c.collectors.delivery_account.unwrap();
        assert_eq!(d.accounts, vec![1001, 1002]);
        assert_eq!(d.schedule.interval, Duration::from_secs(30));
        assert_eq!(d.schedule.deadline, Duration::from_secs(24));
        assert_eq!(d.schedule.max_age, Duration::from_secs(90));
    }

    #[test]
    fn a_deadline_as_long_as_the_interval_is_refused() {
        let text = GOOD.replace("interval: 30s", "interval: 30s\n    deadline: 30s");
        let e = Config::parse(&text, Some("t".into()))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "collectors.delivery_account.deadline: 30s must be shorter than the interval (30s); a run may not overlap the next"
        );
    }

    #[test]
    fn non_http_base_urls_are_refused() {
        let text = GOOD.replace("https://api.example.net/", "ftp://x");
        let e = Config::parse(&text, Some("t".into()))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("api.base_url: \"ftp://x\" is not an http(s) address"),
            "{e}"
        );
    }

    #[test]
    fn no_duration_reaches_a_panic_whatever_its_size() {
        let durations = [
            "0s",
            "1ns",
            "1ms",
            "999ms",
            "1s",
            "24h",
            "25h",
            "7days",
            "8days",
            "10000000000s",
            "18446744073709551615s",
            "584942417355y",
        ];
        let api_keys = [
            "timeout",
            "retry_backoff",
            "retry_max_backoff",
            "circuit_breaker_cooldown",
        ];
        for d in durations {
            for key in api_keys {
                let text = GOOD.replace(
                    "https://api.example.net/\n",
                    &format!("https://api.example.net/\n  {key}: {d}\n"),
                );
                let _ = Config::parse(&text, Some("t".into()));
            }
            for key in ["interval", "deadline", "max_age"] {
                let text = GOOD.replace("interval: 30s", &format!("{key}: {d}"));
                let _ = Config::parse(&text, Some("t".into()));
                let both = GOOD.replace("interval: 30s", &format!("interval: 24h\n    {key}: {d}"));
                if let Ok(c) = Config::parse(&both, Some("t".into())) {
                    let s = c.collectors.delivery_account.unwrap().schedule;
                    assert!(s.deadline < s.interval && s.max_age <= limits::MAX_AGE);
                }
            }
        }
    }

    #[test]
    fn quoted_strings_of_yaml_errors_are_replaced_by_their_length() {
        assert_eq!(
            redact_quoted(r#"invalid type: string "ab\"c", expected usize"#),
            "invalid type: string (4 characters), expected usize"
        );
        assert_eq!(redact_quoted("no quotes `key`"), "no quotes `key`");
        assert_eq!(
            redact_quoted(r#"unterminated "abc"#),
            "unterminated (3 characters)"
        );
    }

    #[test]
    fn long_values_are_quoted_cut() {
        let q = quote(&"x".repeat(1000));
        assert_eq!(q.chars().count(), limits::QUOTED_CHARS + 3);
        assert!(q.ends_with("…\""));
    }

    #[test]
    fn a_disabled_collector_counts_as_absent() {
        let text = GOOD.replace("interval: 30s", "enabled: false");
        let e = Config::parse(&text, Some("t".into()))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("collectors: no collector is enabled"), "{e}");
    }
}
