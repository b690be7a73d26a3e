//! Validation: from the file as written to the values the exporter runs with. Every message
//! names the field, the bound or form expected, and a fix, and never quotes a value that may
//! hold a secret.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use secrecy::SecretString;

use crate::files::read_bounded;
use crate::redact::{quote, redact_url};

use super::fields::{in_bounds, in_range, within};
use super::outside::Outside;
use super::raw_api::RawApi;
use super::{
    ApiConfig, BreakerPolicy, ConfigError, RetryPolicy, TOKEN_ENV, defaults, invalid, limits,
};

/// A YAML error of a config file (this one or `--web.config.file`), as shown to the operator:
/// serde_yaml_ng prefixes the path of the offending key (kept) and quotes the offending value,
/// which is hidden unless `shown` says its field holds no secret (a value shown still has its
/// token-like runs redacted and is cut and escaped). `schema` says where the keys are
/// described, for the hint on an unknown one.
pub(crate) fn describe_yaml_error(
    e: &serde_yaml_ng::Error,
    schema: &str,
    shown: crate::redact::Shown,
) -> String {
    let msg = crate::redact::yaml_error(e, shown);
    if msg.contains("unknown field") {
        format!("{msg} (remove or correct the key; see {schema})")
    } else if msg.contains("expected a duration") {
        format!("{msg} (write durations like 30s, 5m or 1h30m)")
    } else {
        msg
    }
}

/// The single-token `api` block: the token from `api.token_file`, else from [`TOKEN_ENV`].
pub(crate) fn validate_api(raw: RawApi, outside: &Outside) -> Result<ApiConfig, ConfigError> {
    // The address is checked first: its message is the more useful one on a fresh config.
    base_url("api.base_url", &raw.base_url)?;
    let from_env = || outside.var(TOKEN_ENV).ok_or_else(no_token);
    let token = token(
        "api.token_file",
        raw.token_file.as_deref(),
        from_env,
        outside,
    )?;
    api_settings(raw, token, outside)
}

/// Checks a provider address; `field` names it in the message.
pub(crate) fn base_url(field: &str, raw: &str) -> Result<String, ConfigError> {
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
/// or the error that says none was given). Checked for form; never quoted. Left unread, and
/// empty, when `outside` says so.
pub(crate) fn token(
    file_field: &str,
    file: Option<&Path>,
    from_env: impl FnOnce() -> Result<String, ConfigError>,
    outside: &Outside,
) -> Result<SecretString, ConfigError> {
    let source = match file {
        Some(_) => file_field.to_owned(),
        None => env_field(file_field),
    };
    if outside.leaves(&source) {
        return Ok(SecretString::from(String::new()));
    }
    let token = match file {
        // The path is never quoted: a token pasted there by mistake would be shown.
        Some(path) => {
            let bytes = read_bounded(path, limits::TOKEN_FILE_BYTES).map_err(|e| {
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
            let t = from_env()?.trim().to_owned();
            if t.is_empty() {
                // The same as unset: an empty variable is a forgotten one.
                return Err(from_env_empty(file_field));
            }
            t
        }
    };
    // Where the token came from names it in a message; the token itself never appears.
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

/// The single token was given neither by a file nor by [`TOKEN_ENV`].
fn no_token() -> ConfigError {
    invalid(
        "api.token_file",
        format!("no API token: set api.token_file to a file holding the token, or set {TOKEN_ENV}"),
    )
}

fn from_env_empty(file_field: &str) -> ConfigError {
    if file_field == "api.token_file" {
        no_token()
    } else {
        invalid(
            file_field.replace("token_file", "token_env"),
            "the variable it names is empty; put the tenant's token in it, or use token_file",
        )
    }
}

/// The API settings of `raw` with `token`.
pub(crate) fn api_settings(
    mut raw: RawApi,
    token: SecretString,
    outside: &Outside,
) -> Result<ApiConfig, ConfigError> {
    let base_url = base_url("api.base_url", &raw.base_url)?;
    let http = super::http_client::settings(
        "api",
        &base_url,
        raw.http_client(),
        &super::http_client::HttpClientSettings::default(),
        outside,
    )?;
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
    let endpoint_rate_limits =
        endpoint_rate_limits("api.endpoint_rate_limits", raw.endpoint_rate_limits.take())?;
    let max_response_bytes = max_response_bytes(raw.max_response_bytes)?;
    let retry = retry_policy(&raw)?;
    let breaker = breaker_policy(&raw)?;
    Ok(ApiConfig {
        base_url,
        token,
        timeout,
        concurrency,
        rate_limit,
        endpoint_rate_limits,
        max_response_bytes,
        retry,
        breaker,
        http,
    })
}

/// The largest answer read, in bytes.
fn max_response_bytes(raw: Option<u64>) -> Result<u64, ConfigError> {
    in_range(
        "api.max_response_bytes",
        raw.unwrap_or(defaults::MAX_RESPONSE_BYTES),
        limits::MIN_RESPONSE_BYTES..=limits::MAX_RESPONSE_BYTES,
        format_args!(
            "use {} to {} (256 MiB), for example 4194304",
            limits::MIN_RESPONSE_BYTES,
            limits::MAX_RESPONSE_BYTES
        ),
    )
}

/// How often and after what back-off a failed call is tried again.
fn retry_policy(raw: &RawApi) -> Result<RetryPolicy, ConfigError> {
    let max_retries = raw.max_retries.unwrap_or(defaults::MAX_RETRIES);
    let max_retries = in_bounds("api.max_retries", max_retries, 0..=10)?;
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
    Ok(RetryPolicy {
        max_retries,
        backoff,
        max_backoff,
    })
}

/// When an endpoint's circuit opens, and for how long.
fn breaker_policy(raw: &RawApi) -> Result<BreakerPolicy, ConfigError> {
    let failures = in_range(
        "api.circuit_breaker_failures",
        raw.circuit_breaker_failures
            .unwrap_or(defaults::BREAKER_FAILURES),
        0..=limits::MAX_BREAKER_FAILURES,
        format_args!(
            "use 0 (never open) to {}, for example 5",
            limits::MAX_BREAKER_FAILURES
        ),
    )?;
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
    Ok(BreakerPolicy { failures, cooldown })
}

/// Requests in flight at most, 1 to 256.
pub(crate) fn concurrency(field: &str, raw: Option<usize>) -> Result<usize, ConfigError> {
    in_bounds(field, raw.unwrap_or(defaults::CONCURRENCY), 1..=256)
}

/// A ceiling on requests per second, from `MIN_RATE_LIMIT` to `MAX_RATE_LIMIT`, if given.
pub(crate) fn rate_limit(field: &str, raw: Option<f64>) -> Result<Option<f64>, ConfigError> {
    // Neither NaN nor an infinity is in the range.
    raw.map(|r| {
        in_range(
            field,
            r,
            limits::MIN_RATE_LIMIT..=limits::MAX_RATE_LIMIT,
            format_args!(
                "give the requests per second the provider allows the token, from {} to {}, e.g. 50 (or leave it out: the exporter learns the limit from the provider's answers)",
                limits::MIN_RATE_LIMIT,
                limits::MAX_RATE_LIMIT
            ),
        )
    })
    .transpose()
}

/// Ceilings per endpoint: each a [`rate_limit`], keyed by an endpoint's name (checked against
/// the collectors' endpoints where the whole config is assembled), at most
/// [`limits::MAX_ENDPOINT_RATE_LIMITS`] of them.
pub(crate) fn endpoint_rate_limits(
    field: &str,
    raw: Option<BTreeMap<String, f64>>,
) -> Result<BTreeMap<String, f64>, ConfigError> {
    let raw = raw.unwrap_or_default();
    if raw.len() > limits::MAX_ENDPOINT_RATE_LIMITS {
        return Err(invalid(
            field,
            format!(
                "{} endpoints named: at most {} (one per endpoint the exporter calls)",
                raw.len(),
                limits::MAX_ENDPOINT_RATE_LIMITS
            ),
        ));
    }
    let mut out = BTreeMap::new();
    for (endpoint, r) in raw {
        let at = format!("{field}.{}", crate::redact::map_key(&endpoint));
        if let Some(r) = rate_limit(&at, Some(r))? {
            out.insert(endpoint, r);
        }
    }
    Ok(out)
}

/// The reason an I/O error gives, without the path it concerns.
pub(crate) fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_owned(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        std::io::ErrorKind::IsADirectory => "it is a directory".to_owned(),
        // Our own refusal of what is not a regular file: its text says why, without the path.
        std::io::ErrorKind::InvalidInput => e.to_string(),
        kind => kind.to_string(),
    }
}

/// Refuses flow collections nested deeper than [`limits::MAX_FLOW_DEPTH`] before the YAML
/// scanner sees them. Brackets inside quoted scalars and comments do not count; where this
/// cannot tell, it counts, so it may refuse an odd file but never lets a deep one through.
pub(crate) fn check_flow_depth(text: &str) -> Result<(), ConfigError> {
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
