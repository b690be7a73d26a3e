//! Validation: from the file as written to the values the exporter runs with. Every message
//! names the field, the bound or form expected, and a fix, and never quotes a value that may
//! hold a secret.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use secrecy::SecretString;

use crate::redact::{quote, redact_url};

use super::raw::{RawApi, RawDaily, RawDashboard, RawMailbox, RawMailboxTarget, RawView};
use super::{
    ApiConfig, BreakerPolicy, ConfigError, DailyConfig, DashboardConfig, DateFormat, MailboxConfig,
    MailboxTarget, RetryPolicy, Schedule, TOKEN_ENV, View, defaults, invalid, limits,
};

/// Reads a regular file without blocking, or `None` when it is larger than `limit` bytes.
pub(super) fn read_at_most(path: &Path, limit: u64) -> std::io::Result<Option<Vec<u8>>> {
    crate::files::read_bounded(path, limit)
}

/// A YAML error of a config file (this one or `--web.config.file`), as shown to the operator:
/// serde_yaml_ng prefixes the path of the offending key (kept) and quotes the offending value;
/// any field may hold a secret pasted in the wrong place, so quoted strings are replaced by
/// their length. `schema` says where the keys are described, for the hint on an unknown one.
pub(crate) fn describe_yaml_error(e: &serde_yaml_ng::Error, schema: &str) -> String {
    let msg = crate::redact::yaml_error(e);
    if msg.contains("unknown field") {
        format!("{msg} (remove or correct the key; see {schema})")
    } else if msg.contains("expected a duration") {
        format!("{msg} (write durations like 30s, 5m or 1h30m)")
    } else {
        msg
    }
}

/// The single-token `api` block: the token from `api.token_file`, else from `from_env` (the
/// value of [`TOKEN_ENV`], or the error saying it is unset).
pub(super) fn validate_api(
    raw: RawApi,
    from_env: Result<String, ConfigError>,
) -> Result<ApiConfig, ConfigError> {
    // The address is checked first: its message is the more useful one on a fresh config.
    base_url("api.base_url", &raw.base_url)?;
    let token = token("api.token_file", raw.token_file.as_deref(), from_env)?;
    api_settings(raw, token)
}

/// Checks a provider address; `field` names it in the message.
pub(super) fn base_url(field: &str, raw: &str) -> Result<String, ConfigError> {
    let base_url = raw.trim_end_matches('/').to_owned();
    let parsed = reqwest::Url::parse(&base_url);
    match &parsed {
        Ok(u) if (u.scheme() == "http" || u.scheme() == "https") && u.host().is_some() => {
            if !u.username().is_empty() || u.password().is_some() {
                return Err(invalid(
                    field,
                    "must not carry credentials; put the token in a token file or variable",
                ));
            }
            if u.query().is_some() || u.fragment().is_some() {
                return Err(invalid(field, "must not carry a query or fragment"));
            }
            Ok(base_url)
        }
        _ => {
            // Shown without userinfo, query or fragment: they may hold a secret.
            let why = match &parsed {
                Err(e) => format!(" ({e})"),
                Ok(_) => String::new(),
            };
            Err(invalid(
                field,
                format!(
                    "{} is not an http(s) address{why}; write it like https://api.example.net",
                    quote(&redact_url(&base_url))
                ),
            ))
        }
    }
}

/// A token from the file `file_field` names, or else from `from_env` (the value of a variable,
/// or the error that says none was given). Checked for form; never quoted.
pub(super) fn token(
    file_field: &str,
    file: Option<&Path>,
    from_env: Result<String, ConfigError>,
) -> Result<SecretString, ConfigError> {
    let token = match file {
        // The path is never quoted: a token pasted there by mistake would be shown.
        Some(path) => {
            let bytes = read_at_most(path, limits::TOKEN_FILE_BYTES).map_err(|e| {
                invalid(
                    file_field,
                    format!(
                        "cannot read the file it names ({}); check that it is the path of a readable file holding the token, not the token itself",
                        io_reason(&e)
                    ),
                )
            })?;
            let Some(bytes) = bytes else {
                return Err(invalid(
                    file_field,
                    format!(
                        "the file it names is larger than {} bytes; it should hold the token alone",
                        limits::TOKEN_FILE_BYTES
                    ),
                ));
            };
            let text = String::from_utf8(bytes).map_err(|_| {
                invalid(
                    file_field,
                    "the file it names is not UTF-8 text; it should hold the token alone",
                )
            })?;
            let t = text.trim().to_owned();
            if t.is_empty() {
                return Err(invalid(
                    file_field,
                    "the file it names is empty; write the Management API token into it",
                ));
            }
            t
        }
        None => {
            let t = from_env?.trim().to_owned();
            if t.is_empty() {
                // The same as unset: an empty variable is a forgotten one.
                return Err(from_env_empty(file_field));
            }
            t
        }
    };
    // Where the token came from names it in a message; the token itself never appears.
    let source = match file {
        Some(_) => file_field.to_owned(),
        None => env_field(file_field),
    };
    if token.chars().any(|c| c.is_control() || c == ' ') {
        return Err(invalid(
            source,
            "the token contains spaces or control characters; a token is one word",
        ));
    }
    if token.chars().count() > limits::TOKEN_CHARS {
        return Err(invalid(
            source,
            format!(
                "the token is longer than {} characters; is it the token?",
                limits::TOKEN_CHARS
            ),
        ));
    }
    Ok(SecretString::from(token))
}

/// What names a token that came from the environment: the variable of the single token, or the
/// tenant's `token_env`.
fn env_field(file_field: &str) -> String {
    if file_field == "api.token_file" {
        TOKEN_ENV.to_owned()
    } else {
        file_field.replace("token_file", "token_env")
    }
}

fn from_env_empty(file_field: &str) -> ConfigError {
    if file_field == "api.token_file" {
        invalid(
            file_field,
            format!(
                "no API token: set api.token_file to a file holding the token, or set {TOKEN_ENV}"
            ),
        )
    } else {
        invalid(
            file_field.replace("token_file", "token_env"),
            "the variable it names is empty; put the tenant's token in it, or use token_file",
        )
    }
}

/// The API settings of `raw` with `token`.
pub(super) fn api_settings(raw: RawApi, token: SecretString) -> Result<ApiConfig, ConfigError> {
    let base_url = base_url("api.base_url", &raw.base_url)?;
    let timeout = raw.timeout.unwrap_or(defaults::TIMEOUT);
    within(
        "api.timeout",
        timeout,
        Duration::from_millis(1),
        limits::MAX_TIMEOUT,
        "10s",
    )?;
    let concurrency = concurrency("api.concurrency", raw.concurrency)?;
    let rate_limit = rate_limit("api.rate_limit", raw.rate_limit)?;
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
        token,
        timeout,
        concurrency,
        rate_limit,
        max_response_bytes,
        retry: RetryPolicy {
            max_retries,
            backoff,
            max_backoff,
        },
        breaker: BreakerPolicy { failures, cooldown },
    })
}

/// Requests in flight at most, 1 to 256.
pub(super) fn concurrency(field: &str, raw: Option<usize>) -> Result<usize, ConfigError> {
    let concurrency = raw.unwrap_or(defaults::CONCURRENCY);
    if !(1..=256).contains(&concurrency) {
        return Err(invalid(
            field,
            format!("{concurrency} is out of range: use 1 to 256"),
        ));
    }
    Ok(concurrency)
}

/// A ceiling on requests per second, from `MIN_RATE_LIMIT` to `MAX_RATE_LIMIT`, if given.
pub(super) fn rate_limit(field: &str, raw: Option<f64>) -> Result<Option<f64>, ConfigError> {
    match raw {
        None => Ok(None),
        Some(r)
            if r.is_finite() && (limits::MIN_RATE_LIMIT..=limits::MAX_RATE_LIMIT).contains(&r) =>
        {
            Ok(Some(r))
        }
        Some(r) => Err(invalid(
            field,
            format!(
                "{r} is out of range: give the requests per second the provider allows the token, from {} to {}, e.g. 50 (or leave it out: the exporter learns the limit from the provider's answers)",
                limits::MIN_RATE_LIMIT,
                limits::MAX_RATE_LIMIT
            ),
        )),
    }
}

/// The reason an I/O error gives, without the path it concerns.
pub(super) fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_owned(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        std::io::ErrorKind::IsADirectory => "it is a directory".to_owned(),
        // Our own refusal of what is not a regular file: its text says why, without the path.
        std::io::ErrorKind::InvalidInput => e.to_string(),
        kind => kind.to_string(),
    }
}

/// Refuses a duration outside `min..=max`, naming the field, the bound and an example.
pub(super) fn within(
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

pub(super) fn schedule(
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

pub(super) fn timezone(
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

pub(super) fn date_format(field: &str, pattern: Option<String>) -> Result<DateFormat, ConfigError> {
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

pub(super) fn dashboard(d: RawDashboard) -> Result<DashboardConfig, ConfigError> {
    let f = "collectors.tracemail_dashboard";
    let (tz, timezone_name) = timezone(&format!("{f}.timezone"), d.timezone)?;
    let limit = d.limit.unwrap_or(defaults::TOP_LIMIT);
    if !(1..=1000).contains(&limit) {
        return Err(invalid(
            format!("{f}.limit"),
            format!("{limit} is out of range: use 1 to 1000"),
        ));
    }
    let views = views(&format!("{f}.views"), d.views)?;
    Ok(DashboardConfig {
        schedule: schedule(f, d.interval, d.deadline, d.max_age)?,
        timezone: tz,
        timezone_name,
        date_format: date_format(&format!("{f}.date_format"), d.date_format)?,
        limit: limit as i32,
        views,
    })
}

/// Validates dashboard views: [`View::All`] first, then each listed one once.
pub(super) fn views(field: &str, raw: Vec<RawView>) -> Result<Vec<View>, ConfigError> {
    at_most(field, raw.len())?;
    let mut views = vec![View::All];
    let mut seen: HashSet<View> = HashSet::from([View::All]);
    for (i, v) in raw.into_iter().enumerate() {
        let field = format!("{field}[{i}]");
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
    Ok(views)
}

pub(super) fn daily(d: RawDaily, required: bool) -> Result<DailyConfig, ConfigError> {
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
        accounts: account_list(&format!("{f}.accounts"), &d.accounts, required)?,
    })
}

pub(super) fn mailboxes(m: RawMailbox, required: bool) -> Result<MailboxConfig, ConfigError> {
    let f = "collectors.mailbox";
    Ok(MailboxConfig {
        mailboxes: mailbox_list(&format!("{f}.mailboxes"), m.mailboxes, required)?,
        schedule: schedule(f, m.interval, m.deadline, m.max_age)?,
    })
}

/// Validates distinct mailboxes; an empty list is refused when `required`.
pub(super) fn mailbox_list(
    field: &str,
    list: Vec<RawMailboxTarget>,
    required: bool,
) -> Result<Vec<MailboxTarget>, ConfigError> {
    if required && list.is_empty() {
        return Err(invalid(
            field,
            "is empty; list pairs like {domain: D000000101, mailbox: EA00000001}",
        ));
    }
    at_most(field, list.len())?;
    let mut seen = HashSet::with_capacity(list.len());
    let mut out: Vec<MailboxTarget> = Vec::with_capacity(list.len());
    for (i, t) in list.into_iter().enumerate() {
        let field = format!("{field}[{i}]");
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
    Ok(out)
}

/// Validates one identifier code: a prefix followed by a number of digits.
pub(super) fn code(
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

/// Validates a list of distinct codes; an empty one is refused when `required`.
pub(super) fn codes(
    field: &str,
    values: &[String],
    forms: &[(&str, usize)],
    expected: &str,
    required: bool,
) -> Result<Vec<String>, ConfigError> {
    if required && values.is_empty() {
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
pub(super) fn at_most(field: &str, len: usize) -> Result<(), ConfigError> {
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

pub(super) fn account_ids(field: &str, ids: &[i64]) -> Result<Vec<i32>, ConfigError> {
    account_list(field, ids, true)
}

/// Validates distinct account ids; an empty list is refused when `required`.
pub(super) fn account_list(
    field: &str,
    ids: &[i64],
    required: bool,
) -> Result<Vec<i32>, ConfigError> {
    if required && ids.is_empty() {
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

/// Refuses flow collections nested deeper than [`limits::MAX_FLOW_DEPTH`] before the YAML
/// scanner sees them. Brackets inside quoted scalars and comments do not count; where this
/// cannot tell, it counts, so it may refuse an odd file but never lets a deep one through.
pub(super) fn check_flow_depth(text: &str) -> Result<(), ConfigError> {
    let (mut depth, mut line, mut column) = (0usize, 1usize, 0usize);
    // The last character on this line that is not white space: a quote opens a scalar only
    // where a value may start.
    let mut prev: Option<char> = None;
    // The character just before: a `#` opens a comment only after white space.
    let mut last: Option<char> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        column += 1;
        match c {
            '\n' => {
                (line, column, prev, last) = (line + 1, 0, None, None);
                continue;
            }
            '#' if last.is_none_or(char::is_whitespace) => {
                while chars.next_if(|&n| n != '\n').is_some() {}
                continue;
            }
            '"' | '\'' if matches!(prev, None | Some(':' | '-' | '[' | '{' | ',' | '?')) => {
                while let Some(n) = chars.next() {
                    column += 1;
                    match n {
                        '\n' => (line, column) = (line + 1, 0),
                        '\\' if c == '"' => {
                            chars.next_if(|&e| e != '\n');
                        }
                        '\'' if c == '\'' && chars.peek() == Some(&'\'') => {
                            chars.next();
                        }
                        n if n == c => break,
                        _ => {}
                    }
                }
            }
            '[' | '{' => {
                depth += 1;
                if depth > limits::MAX_FLOW_DEPTH {
                    return Err(ConfigError::Syntax(format!(
                        "[ ] and {{ }} are nested more than {} deep at line {line} column {column}; the config needs at most 4",
                        limits::MAX_FLOW_DEPTH
                    )));
                }
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if !c.is_whitespace() {
            prev = Some(c);
        }
        last = Some(c);
    }
    Ok(())
}
