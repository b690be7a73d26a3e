//! What an answer says of the token's quota: the common `X-RateLimit-Limit`, `-Remaining` and
//! `-Reset` fields (and the same without `X-`, as early IETF drafts wrote them), and the IETF
//! `RateLimit` and `RateLimit-Policy` structured fields, read into one [`QuotaInfo`].
//!
//! Every value is untrusted: a field longer than [`MAX_FIELD_BYTES`] or with more than
//! [`MAX_MEMBERS`] members is ignored past that point, numbers are whole and bounded, and a reset
//! is never further away than [`MAX_PAUSE`].

use std::time::Duration;

use reqwest::header::HeaderMap;

/// The longest pause the provider can impose with one answer (`Retry-After`, a quota reset);
/// after it, one call finds out whether the pause goes on.
pub const MAX_PAUSE: Duration = Duration::from_secs(3600);

/// Longest header value read; a longer one is ignored.
pub const MAX_FIELD_BYTES: usize = 512;
/// Members of a structured field (policies) read at most.
pub const MAX_MEMBERS: usize = 16;
/// A reset at or above this many seconds is a Unix time (as GitHub writes it), not a delay.
const EPOCH_RESET_FROM: u64 = 1_000_000_000;
/// Longest window a policy may state; a longer one is read as this.
const MAX_WINDOW: Duration = Duration::from_secs(7 * 24 * 3600);

/// A quota policy: `quota` requests per `window`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Policy {
    pub quota: u64,
    pub window: Duration,
}

impl Policy {
    /// The policy as a sustained rate, in requests per second.
    pub fn rate(&self) -> f64 {
        self.quota as f64 / self.window.as_secs_f64().max(1.0)
    }
}

/// The quota fields of one answer; all absent when the provider sends none.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct QuotaInfo {
    /// Requests allowed per window (`X-RateLimit-Limit`), window unknown.
    pub limit: Option<u64>,
    /// Requests left in the current window.
    pub remaining: Option<u64>,
    /// Time until the quota is restored, at most [`MAX_PAUSE`].
    pub reset: Option<Duration>,
    /// The most restrictive stated policy (`RateLimit-Policy`).
    pub policy: Option<Policy>,
}

impl QuotaInfo {
    pub fn is_empty(&self) -> bool {
        *self == QuotaInfo::default()
    }
}

/// Reads the quota fields of `headers`; `now_unix` (seconds since the epoch) turns a reset given
/// as a Unix time into a delay.
pub fn read(headers: &HeaderMap, now_unix: u64) -> QuotaInfo {
    let field = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .filter(|v| v.len() <= MAX_FIELD_BYTES)
    };
    let mut info = QuotaInfo::default();
    for prefix in ["x-ratelimit-", "ratelimit-"] {
        let limit = field(&format!("{prefix}limit")).and_then(leading_number);
        let remaining = field(&format!("{prefix}remaining")).and_then(leading_number);
        let reset = field(&format!("{prefix}reset"))
            .and_then(leading_number)
            .map(|n| reset_delay(n, now_unix));
        info.limit = info.limit.or(limit);
        info.remaining = either(info.remaining, remaining, u64::min);
        info.reset = either(info.reset, reset, Duration::max);
    }
    if let Some(value) = field("ratelimit") {
        let (remaining, reset) = current(value, now_unix);
        // The most restrictive of the fields: the fewest requests left, the furthest reset.
        info.remaining = either(info.remaining, remaining, u64::min);
        info.reset = either(info.reset, reset, Duration::max);
    }
    if let Some(value) = field("ratelimit-policy") {
        info.policy = policy(value);
    }
    info
}

/// `a` and `b` combined by `f` when both are known, else whichever is.
pub(super) fn either<T>(a: Option<T>, b: Option<T>, f: impl FnOnce(T, T) -> T) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(f(a, b)),
        (a, b) => a.or(b),
    }
}

/// A reset as a delay: seconds from now, or a Unix time; capped at [`MAX_PAUSE`].
fn reset_delay(n: u64, now_unix: u64) -> Duration {
    let secs = if n >= EPOCH_RESET_FROM {
        n.saturating_sub(now_unix)
    } else {
        n
    };
    Duration::from_secs(secs).min(MAX_PAUSE)
}

/// The whole number a value starts with (`100`, `100, 100;w=60`, ` 7 `): at most 19 digits.
fn leading_number(value: &str) -> Option<u64> {
    let v = value.trim_start();
    let digits = v.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 19 {
        return None;
    }
    v[..digits].parse().ok()
}

/// One member of a structured field list: its first part (a name, a string or `key=value`) and
/// its `;key=value` parameters.
struct Member<'a> {
    head: &'a str,
    params: Vec<(&'a str, &'a str)>,
}

impl<'a> Member<'a> {
    fn param(&self, key: &str) -> Option<&'a str> {
        self.params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| *v)
    }
}

/// The members of a list or dictionary field, at most [`MAX_MEMBERS`]. Commas inside quoted
/// strings are not expected in these fields (policy names are short tokens); a member they
/// break is simply unreadable.
fn members(value: &str) -> impl Iterator<Item = Member<'_>> {
    value.split(',').take(MAX_MEMBERS).map(|m| {
        let mut parts = m.split(';').map(str::trim);
        let head = parts.next().unwrap_or("");
        let params = parts
            .take(MAX_MEMBERS)
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim(), v.trim().trim_matches('"')))
            .collect();
        Member { head, params }
    })
}

/// The `RateLimit` field: the fewest requests left among its policies and the reset of that
/// policy. Both drafts' forms are read: `"name";r=50;t=30` (a list, one member per policy) and
/// `limit=100, remaining=50, reset=30` (a dictionary).
fn current(value: &str, now_unix: u64) -> (Option<u64>, Option<Duration>) {
    let mut best: (Option<u64>, Option<Duration>) = (None, None);
    let mut dictionary: (Option<u64>, Option<Duration>) = (None, None);
    for m in members(value) {
        if let Some((key, v)) = m.head.split_once('=') {
            let n = leading_number(v.trim());
            match key.trim().to_ascii_lowercase().as_str() {
                "remaining" => dictionary.0 = n,
                "reset" => dictionary.1 = n.map(|n| reset_delay(n, now_unix)),
                _ => {}
            }
            continue;
        }
        let remaining = m.param("r").and_then(leading_number);
        let reset = m
            .param("t")
            .and_then(leading_number)
            .map(|n| reset_delay(n, now_unix));
        if remaining.is_some_and(|r| best.0.is_none_or(|b| r < b)) {
            best = (remaining, reset);
        }
    }
    if best.0.is_some() { best } else { dictionary }
}

/// The `RateLimit-Policy` field: the policy with the lowest rate, in either draft's form:
/// `"name";q=100;w=60` or `100;w=60`.
fn policy(value: &str) -> Option<Policy> {
    members(value)
        .filter_map(|m| {
            let quota = m
                .param("q")
                .and_then(leading_number)
                .or_else(|| leading_number(m.head))?;
            let window = m.param("w").and_then(leading_number)?;
            if window == 0 {
                return None;
            }
            Some(Policy {
                quota,
                window: Duration::from_secs(window).min(MAX_WINDOW),
            })
        })
        .min_by(|a, b| a.rate().total_cmp(&b.rate()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderName, HeaderValue};

    const NOW: u64 = 1_800_000_000;

    /// What an answer carrying the headers `pairs` says of the quota, at [`NOW`].
    fn quota(pairs: &[(&str, &str)]) -> QuotaInfo {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        read(&h, NOW)
    }

    #[test]
    fn x_ratelimit_fields_are_read_with_the_reset_as_a_delay_or_a_unix_time() {
        let info = quota(&[
            ("X-RateLimit-Limit", "100"),
            ("X-RateLimit-Remaining", "7"),
            ("X-RateLimit-Reset", "30"),
        ]);
        assert_eq!(
            info,
            QuotaInfo {
                limit: Some(100),
                remaining: Some(7),
                reset: Some(Duration::from_secs(30)),
                policy: None,
            }
        );
        // A Unix time: 45 s from now, and one in the past, which is now.
        for (reset, secs) in [("1800000045", 45), ("1700000000", 0)] {
            let info = quota(&[("x-ratelimit-reset", reset)]);
            assert_eq!(info.reset, Some(Duration::from_secs(secs)), "{reset}");
        }
    }

    #[test]
    fn ietf_fields_are_read_in_both_drafts_forms_taking_the_most_restrictive_policy() {
        let info = quota(&[
            ("RateLimit", "\"burst\";r=40;t=1, \"day\";r=5;t=3600"),
            (
                "RateLimit-Policy",
                "\"burst\";q=100;w=1, \"day\";q=1000;w=86400",
            ),
        ]);
        assert_eq!(info.remaining, Some(5));
        assert_eq!(info.reset, Some(Duration::from_secs(3600)));
        assert_eq!(
            info.policy,
            Some(Policy {
                quota: 1000,
                window: Duration::from_secs(86400)
            })
        );
        let old = quota(&[
            ("RateLimit", "limit=10, remaining=0, reset=4"),
            ("RateLimit-Policy", "10;w=2"),
        ]);
        assert_eq!(old.remaining, Some(0));
        assert_eq!(old.reset, Some(Duration::from_secs(4)));
        assert_eq!(old.policy.unwrap().rate(), 5.0);
        let draft6 = quota(&[("RateLimit-Remaining", "3"), ("RateLimit-Reset", "9")]);
        assert_eq!(draft6.remaining, Some(3));
        assert_eq!(draft6.reset, Some(Duration::from_secs(9)));
    }

    #[test]
    fn hostile_values_are_bounded_or_ignored() {
        let long = "9".repeat(MAX_FIELD_BYTES + 1);
        let members = "\"p\";r=1;t=1, ".repeat(10_000);
        for (name, value) in [
            ("x-ratelimit-remaining", long.as_str()),
            ("x-ratelimit-remaining", "-5"),
            ("x-ratelimit-remaining", "99999999999999999999999"),
            ("x-ratelimit-limit", "lots"),
            ("ratelimit-policy", "\"p\";q=10;w=0"),
            ("ratelimit", members.as_str()),
        ] {
            let info = quota(&[(name, value)]);
            assert_eq!(info, QuotaInfo::default(), "{name}: {value:.40}");
        }
        let far = quota(&[("x-ratelimit-reset", "86400000")]);
        assert_eq!(far.reset, Some(MAX_PAUSE));
        let year = quota(&[("ratelimit-policy", "5;w=999999999")]);
        assert_eq!(year.policy.unwrap().window, MAX_WINDOW);
        assert!(read(&HeaderMap::new(), NOW).is_empty());
    }
}
