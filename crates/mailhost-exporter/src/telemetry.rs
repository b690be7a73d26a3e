//! The exporter's own request accounting: upstream calls by endpoint and code, failures by
//! reason, latency, parse problems and build information. Small, rendered on every scrape.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use crate::exposition::{Family, Unit};
use crate::upstream::error::{Endpoint, FailureReason};

/// Distinct `(endpoint, path)` shapes of parse problems logged at warn level. Paths come from
/// the upstream's keys, so without a bound an upstream whose keys change on every answer would
/// grow the set (and the log) forever; beyond it, new shapes are still counted in
/// `mailhost_parse_problems_total` but logged at debug level, after one warn line saying so.
pub const MAX_LOGGED_SHAPES: usize = 256;
/// Longest path of a parse problem kept and logged, in characters.
pub const MAX_LOGGED_PATH_CHARS: usize = 120;
/// Longest description of a found value that reaches a log line, in characters.
pub const MAX_LOGGED_FOUND_CHARS: usize = 64;

/// Upper bounds of the request latency histogram, in seconds.
pub const DURATION_BUCKETS: [f64; 10] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

#[derive(Default)]
struct Histogram {
    counts: [u64; DURATION_BUCKETS.len()],
    sum: f64,
    count: u64,
}

#[derive(Default)]
struct Inner {
    requests: BTreeMap<(Endpoint, String), u64>,
    failures: BTreeMap<(Endpoint, FailureReason), u64>,
    durations: BTreeMap<Endpoint, Histogram>,
    parse_problems: BTreeMap<Endpoint, u64>,
    retries: BTreeMap<(Endpoint, FailureReason), u64>,
    open_circuits: BTreeMap<Endpoint, usize>,
    /// Parse problems already logged at warn level: one line per shape, not one per scrape;
    /// at most [`MAX_LOGGED_SHAPES`].
    logged: HashSet<(Endpoint, String)>,
    /// Whether the one line saying that new shapes are no longer logged was written.
    shapes_suppressed: bool,
}

/// Build facts for `mailhost_build_info`.
#[derive(Clone, Debug)]
pub struct BuildInfo {
    pub version: &'static str,
    pub revision: &'static str,
    pub rustc_version: &'static str,
}

impl BuildInfo {
    pub fn current() -> Self {
        BuildInfo {
            version: env!("CARGO_PKG_VERSION"),
            revision: env!("MAILHOST_BUILD_REVISION"),
            rustc_version: env!("MAILHOST_RUSTC_VERSION"),
        }
    }
}

/// The lock over the counters, held for a change; see [`Telemetry::change`].
struct Change<'a> {
    inner: std::sync::MutexGuard<'a, Inner>,
    generation: &'a std::sync::atomic::AtomicU64,
}

impl std::ops::Deref for Change<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}

impl std::ops::DerefMut for Change<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.inner
    }
}

impl Drop for Change<'_> {
    fn drop(&mut self) {
        // Still under the lock, after the change: a reader that sees this generation sees it.
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::Release);
    }
}

pub struct Telemetry {
    inner: Mutex<Inner>,
    /// Counts changes, so that a rendering of the families can be reused until the next one.
    generation: std::sync::atomic::AtomicU64,
    build: BuildInfo,
    /// Outcome of the last config reload and when one last succeeded (start counts as one).
    reload: Mutex<(bool, jiff::Timestamp)>,
}

impl Telemetry {
    /// Counters of the given endpoints start at zero, so that `rate()` and alerts see them
    /// before the first failure.
    pub fn new(endpoints: &[Endpoint]) -> Self {
        let mut inner = Inner::default();
        for &e in endpoints {
            for r in FailureReason::ALL {
                inner.failures.insert((e, r), 0);
            }
            inner.parse_problems.insert(e, 0);
            inner.open_circuits.insert(e, 0);
            for r in FailureReason::TRANSIENT {
                inner.retries.insert((e, r), 0);
            }
            inner.durations.insert(e, Histogram::default());
        }
        Telemetry {
            inner: Mutex::new(inner),
            generation: std::sync::atomic::AtomicU64::new(0),
            build: BuildInfo::current(),
            reload: Mutex::new((true, jiff::Timestamp::now())),
        }
    }

    /// Counters stay valid whatever panicked while holding them: a poisoned lock must not turn
    /// every later scrape into a panic.
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The lock, for a change: the generation moves on once the change is made (when the guard
    /// goes), so a rendering made under an older generation is never taken for a newer one.
    fn change(&self) -> Change<'_> {
        Change {
            inner: self.lock(),
            generation: &self.generation,
        }
    }

    /// Moves on whenever a counter, gauge or the reload outcome changed; equal generations
    /// render equal families.
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// One upstream request that ended: `code` is the HTTP status, when there was one.
    pub fn observe_request(&self, endpoint: Endpoint, code: Option<u16>, duration: Duration) {
        let code = code.map_or_else(|| "none".to_owned(), |c| c.to_string());
        let mut inner = self.change();
        *inner.requests.entry((endpoint, code)).or_default() += 1;
        let h = inner.durations.entry(endpoint).or_default();
        let secs = duration.as_secs_f64();
        for (i, le) in DURATION_BUCKETS.iter().enumerate() {
            if secs <= *le {
                h.counts[i] += 1;
            }
        }
        h.sum += secs;
        h.count += 1;
    }

    /// Zero-initialises the counters of endpoints a reloaded config adds.
    pub fn ensure_endpoints(&self, endpoints: &[Endpoint]) {
        let mut inner = self.change();
        for &e in endpoints {
            for r in FailureReason::ALL {
                inner.failures.entry((e, r)).or_insert(0);
            }
            for r in FailureReason::TRANSIENT {
                inner.retries.entry((e, r)).or_insert(0);
            }
            inner.parse_problems.entry(e).or_insert(0);
            inner.open_circuits.entry(e).or_insert(0);
            inner.durations.entry(e).or_default();
        }
    }

    /// Records the outcome of a config reload.
    pub fn observe_reload(&self, success: bool) {
        let mut r = self
            .reload
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        r.0 = success;
        if success {
            r.1 = jiff::Timestamp::now();
        }
        drop(r);
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    /// A failed attempt that is retried after a back-off.
    pub fn observe_retry(&self, endpoint: Endpoint, reason: FailureReason) {
        *self.change().retries.entry((endpoint, reason)).or_default() += 1;
    }

    /// How many targets of `endpoint` have their circuit open now.
    pub fn set_open_circuits(&self, endpoint: Endpoint, open: usize) {
        let before = self.change().open_circuits.insert(endpoint, open);
        if before.unwrap_or(0) != open {
            tracing::info!(
                endpoint = endpoint.as_str(),
                open_circuits = open,
                "targets with an open circuit breaker changed"
            );
        }
    }

    pub fn observe_failure(&self, endpoint: Endpoint, reason: FailureReason) {
        *self
            .change()
            .failures
            .entry((endpoint, reason))
            .or_default() += 1;
    }

    /// A field that had a shape we cannot read. Counted every time; logged at warn level once
    /// per path for the first [`MAX_LOGGED_SHAPES`] paths, at debug level otherwise. The path
    /// and the found value are cut short and token-like runs in them are redacted.
    pub fn parse_problem(&self, endpoint: Endpoint, path: &str, found: &str) {
        let path = shorten(path, MAX_LOGGED_PATH_CHARS);
        let (first, suppressing) = {
            let mut inner = self.change();
            *inner.parse_problems.entry(endpoint).or_default() += 1;
            let key = (endpoint, path.clone());
            if inner.logged.contains(&key) {
                (false, false)
            } else if inner.logged.len() < MAX_LOGGED_SHAPES {
                inner.logged.insert(key);
                (true, false)
            } else {
                (
                    false,
                    !std::mem::replace(&mut inner.shapes_suppressed, true),
                )
            }
        };
        // Logged without the lock: a slow log sink must not stall the collectors.
        let path = redact(&path);
        let found = shorten(&redact(found), MAX_LOGGED_FOUND_CHARS);
        if suppressing {
            tracing::warn!(
                shapes = MAX_LOGGED_SHAPES,
                "unexpected shapes in upstream answers: new shapes are no longer logged at warn level (still counted in mailhost_parse_problems_total; debug level shows them)"
            );
        }
        if first {
            tracing::warn!(
                endpoint = endpoint.as_str(),
                path = %path,
                found = %found,
                "unexpected shape in upstream answer; value skipped (logged once per path)"
            );
        } else {
            tracing::debug!(
                endpoint = endpoint.as_str(),
                path = %path,
                found = %found,
                "unexpected shape in upstream answer; value skipped"
            );
        }
    }

    /// How many parse-problem shapes have been logged at warn level.
    pub fn logged_shapes(&self) -> usize {
        self.lock().logged.len()
    }

    pub fn families(&self) -> Vec<Family> {
        let inner = self.lock();
        let mut requests = Family::counter(
            "mailhost_api_requests",
            "Upstream API requests by endpoint and HTTP status code (none: no answer).",
        );
        for ((e, code), n) in &inner.requests {
            requests.push(
                vec![("endpoint", e.as_str().into()), ("code", code.clone())],
                *n as f64,
            );
        }
        let mut failures = Family::counter(
            "mailhost_api_request_failures",
            "Upstream API requests that failed, by endpoint and reason.",
        );
        for ((e, r), n) in &inner.failures {
            failures.push(
                vec![
                    ("endpoint", e.as_str().into()),
                    ("reason", r.as_str().into()),
                ],
                *n as f64,
            );
        }
        let mut durations = Family::histogram(
            "mailhost_api_request_duration",
            "Upstream API request latency.",
        )
        .unit(Unit::Seconds);
        for (e, h) in &inner.durations {
            let buckets: Vec<(f64, u64)> = DURATION_BUCKETS.iter().copied().zip(h.counts).collect();
            durations.push_histogram(
                vec![("endpoint", e.as_str().into())],
                &buckets,
                h.sum,
                h.count,
            );
        }
        let mut problems = Family::counter(
            "mailhost_parse_problems",
            "Fields of upstream answers whose shape could not be read; the value was skipped, not zeroed.",
        );
        for (e, n) in &inner.parse_problems {
            problems.push(vec![("endpoint", e.as_str().into())], *n as f64);
        }
        let mut retries = Family::counter(
            "mailhost_api_retries",
            "Upstream attempts that failed and were retried after a back-off, by endpoint and reason.",
        );
        for ((e, r), n) in &inner.retries {
            retries.push(
                vec![
                    ("endpoint", e.as_str().into()),
                    ("reason", r.as_str().into()),
                ],
                *n as f64,
            );
        }
        let mut circuit = Family::gauge(
            "mailhost_api_open_circuits",
            "Targets of this endpoint whose circuit breaker is open: not called (reason circuit_open) after their own repeated failures, until one probe after the cool-down.",
        );
        for (e, open) in &inner.open_circuits {
            circuit.push(vec![("endpoint", e.as_str().into())], *open as f64);
        }
        let (reload_ok, reload_at) = *self
            .reload
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut reload_success = Family::gauge(
            "mailhost_config_last_reload_successful",
            "1 when the last configuration reload succeeded (or none was tried since start), 0 when the new file was refused and the old configuration kept running.",
        );
        reload_success.push(vec![], if reload_ok { 1.0 } else { 0.0 });
        let mut reload_time = Family::gauge(
            "mailhost_config_last_reload_success_timestamp",
            "When the configuration was last loaded successfully (at start or by a reload).",
        )
        .unit(Unit::Seconds);
        reload_time.push(vec![], reload_at.as_millisecond() as f64 / 1000.0);
        let mut build = Family::gauge(
            "mailhost_build_info",
            "A metric with a constant value 1, labelled with the version, revision and compiler of this build.",
        );
        build.push(
            vec![
                ("version", self.build.version.into()),
                ("revision", self.build.revision.into()),
                ("rustc_version", self.build.rustc_version.into()),
            ],
            1.0,
        );
        vec![
            requests,
            failures,
            retries,
            circuit,
            durations,
            problems,
            reload_success,
            reload_time,
            build,
        ]
    }
}

/// `text` cut at `max` characters, marked with `…` when cut.
fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// Characters of base64, base64url and hex: what tokens and keys are written in.
fn token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '_' | '-')
}

/// `text` with every token-like run replaced by `[redacted]`: a run of [`token_char`]s of at
/// least 16 that mixes letters and digits, or of at least 40 of any kind. Field names (letters
/// and `_`, at most 32 long in this API) and numbers are kept.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        let n = run.chars().count();
        let mixed =
            run.chars().any(|c| c.is_ascii_digit()) && run.chars().any(|c| c.is_ascii_alphabetic());
        if (n >= 16 && mixed) || n >= 40 {
            out.push_str("[redacted]");
        } else {
            out.push_str(run);
        }
        run.clear();
    };
    for c in text.chars() {
        if token_char(c) {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exposition::{Format, write_families};

    #[test]
    fn failures_start_at_zero_for_every_reason() {
        let t = Telemetry::new(&[Endpoint::DeliveryAccount]);
        let mut out = String::new();
        write_families(&mut out, &t.families(), Format::Classic);
        for r in FailureReason::ALL {
            let line = format!(
                "mailhost_api_request_failures_total{{endpoint=\"delivery_account\",reason=\"{r}\"}} 0\n"
            );
            assert!(out.contains(&line), "{line} missing in\n{out}");
        }
    }

    #[test]
    fn a_request_lands_in_every_bucket_at_or_above_its_duration() {
        let t = Telemetry::new(&[Endpoint::DeliveryAccount]);
        t.observe_request(
            Endpoint::DeliveryAccount,
            Some(200),
            Duration::from_millis(300),
        );
        t.observe_request(Endpoint::DeliveryAccount, None, Duration::from_secs(20));
        let mut out = String::new();
        write_families(&mut out, &t.families(), Format::Classic);
        assert!(out.contains("mailhost_api_request_duration_seconds_bucket{endpoint=\"delivery_account\",le=\"0.25\"} 0\n"));
        assert!(out.contains("mailhost_api_request_duration_seconds_bucket{endpoint=\"delivery_account\",le=\"0.5\"} 1\n"));
        assert!(out.contains("mailhost_api_request_duration_seconds_bucket{endpoint=\"delivery_account\",le=\"+Inf\"} 2\n"));
        assert!(out.contains(
            "mailhost_api_requests_total{endpoint=\"delivery_account\",code=\"none\"} 1\n"
        ));
        assert!(out.contains(
            "mailhost_api_requests_total{endpoint=\"delivery_account\",code=\"200\"} 1\n"
        ));
    }

    #[test]
    fn the_set_of_logged_shapes_stops_growing_at_its_bound() {
        let t = Telemetry::new(&[Endpoint::TracemailDashboard]);
        let n = MAX_LOGGED_SHAPES * 4;
        for i in 0..n {
            let path = format!("overview.key_{i}");
            t.parse_problem(Endpoint::TracemailDashboard, &path, "string \"x\"");
            // The same path again is neither logged at warn level nor kept twice.
            t.parse_problem(Endpoint::TracemailDashboard, &path, "string \"x\"");
        }
        assert_eq!(t.logged_shapes(), MAX_LOGGED_SHAPES);
        assert!(t.lock().shapes_suppressed);
        let mut out = String::new();
        write_families(&mut out, &t.families(), Format::Classic);
        assert!(
            out.contains(&format!(
                "mailhost_parse_problems_total{{endpoint=\"tracemail_dashboard\"}} {}\n",
                2 * n
            )),
            "every problem is still counted:\n{out}"
        );
    }

    #[test]
    fn long_paths_are_kept_cut_so_the_set_holds_small_keys() {
        let t = Telemetry::new(&[Endpoint::TracemailDashboard]);
        let long = "k".repeat(10_000);
        t.parse_problem(Endpoint::TracemailDashboard, &long, "object");
        let inner = t.lock();
        let (_, kept) = inner.logged.iter().next().unwrap();
        assert_eq!(kept.chars().count(), MAX_LOGGED_PATH_CHARS + 1);
        assert!(kept.ends_with('…'));
    }

    #[test]
    fn token_like_runs_are_redacted_and_field_names_and_numbers_kept() {
        assert_eq!(
            redact("string \"sentinel-Tok3n-9f2c41d7\""),
            "string \"[redacted]\""
        );
        assert_eq!(
            redact("daily_activity[1].abcdef0123456789abcdef.count"),
            "daily_activity[1].[redacted].count"
        );
        assert_eq!(
            redact(&format!("string \"{}\"", "Q".repeat(40))),
            "string \"[redacted]\""
        );
        for kept in [
            "remaining_extra_messages_bought",
            "top_accounts_by_delivery_account[0]",
            "number 1795334400000",
            "string \"2026-11-22T08:00:00Z\"",
            "quota (700) against quota_human",
            "overview.key_123456789",
        ] {
            assert_eq!(redact(kept), kept);
        }
        assert_eq!(shorten("abcdef", 3), "abc…");
        assert_eq!(shorten("é漢🦀", 3), "é漢🦀");
    }
}
