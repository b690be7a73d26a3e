//! The exporter's own series, in one room: what the client observes of its calls (it tells
//! [`Telemetry`] through [`Observer`]), reloads, `/probe` refusals and build information, kept in
//! long-lived families ([`SelfMetrics`]) and rendered as the tail of every scrape, and the
//! bounded logging of parse problems.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

mod families;
mod storage;

pub use families::{DURATION_BUCKETS, PROBE_REFUSALS, PaceView, SelfMetrics};
pub use storage::StorageFigures;

use super::labels::BuildLabels;
use crate::redact::{redact, shorten};
use crate::tenant::TenantName;
use crate::upstream::endpoint::Endpoint;
use crate::upstream::error::FailureReason;
use crate::upstream::observe::{EndpointPace, Observer};

/// Distinct `(endpoint, path)` shapes of parse problems logged at warn level. Paths come from
/// the upstream's keys, so without a bound an upstream whose keys change on every answer would
/// grow the set (and the log) forever; beyond it, new shapes are still counted in
/// `mailhost_parse_problems_total` but logged at debug level, after one warn line saying so.
pub const MAX_LOGGED_SHAPES: usize = 256;
/// Longest path of a parse problem kept and logged, in characters.
pub const MAX_LOGGED_PATH_CHARS: usize = 120;
/// Longest description of a found value that reaches a log line, in characters.
pub const MAX_LOGGED_FOUND_CHARS: usize = 64;

#[derive(Default)]
struct Inner {
    /// Parse problems already logged at warn level: one line per shape, not one per scrape;
    /// at most [`MAX_LOGGED_SHAPES`].
    logged: HashSet<(Endpoint, String)>,
    /// Whether the one line saying that new shapes are no longer logged was written.
    shapes_suppressed: bool,
}

pub struct Telemetry {
    metrics: SelfMetrics,
    /// Counts changes, so that a rendering of the self-metrics can be reused until the next
    /// one. Moved on after each change is made: a rendering made under an older generation is
    /// never taken for a newer one.
    generation: AtomicU64,
    inner: Mutex<Inner>,
}

impl Telemetry {
    /// Counters of the given endpoints start at zero, so that `rate()` and alerts see them
    /// before the first failure.
    pub fn new(endpoints: &[Endpoint]) -> Self {
        let metrics = SelfMetrics::new(BuildLabels::current(), now_seconds());
        metrics.ensure_endpoints(endpoints, &[TenantName::default()]);
        Telemetry {
            metrics,
            generation: AtomicU64::new(0),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The families, for rendering.
    pub fn metrics(&self) -> &SelfMetrics {
        &self.metrics
    }

    /// The logged shapes stay valid whatever panicked while holding them: a poisoned lock
    /// must not turn every later parse problem into a panic.
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Called after every change to a series.
    fn changed(&self) {
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Moves on whenever a counter, gauge or the reload outcome changed; equal generations
    /// render equal series.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Zero-initialises the counters of endpoints (and tenants) a config adds.
    pub fn ensure_endpoints(&self, endpoints: &[Endpoint], tenants: &[TenantName]) {
        self.metrics.ensure_endpoints(endpoints, tenants);
        self.changed();
    }

    /// Turns the storage directory's series on (`--storage.path`).
    pub fn enable_storage(&self) {
        self.metrics.storage().enable();
        self.changed();
    }

    /// Records what the storage did, if it is on.
    pub fn observe_storage(&self, change: impl FnOnce(&mut StorageFigures)) {
        self.metrics.storage().update(change);
        self.changed();
    }

    /// What the storage did, if it is on: for the landing page.
    pub fn storage(&self) -> Option<StorageFigures> {
        self.metrics.storage().figures()
    }

    /// Records the outcome of a config reload.
    pub fn observe_reload(&self, success: bool) {
        self.metrics.reload(success, now_seconds());
        self.changed();
    }

    /// The pace of each tenant (`only`: one), at most `limit`, for the landing page and the
    /// debug view.
    pub fn paces(&self, only: Option<&TenantName>, limit: usize) -> Vec<PaceView> {
        self.metrics.paces(only, limit)
    }

    /// Tenants a config names: their series may be written from now on (their pacer's first
    /// figures, their failures). Until then, and once removed, a tenant's writes are dropped.
    pub fn admit_tenants(&self, tenants: &[TenantName]) {
        self.metrics.admit_tenants(tenants);
    }

    /// A tenant no longer configured: every series labelled with it goes (`endpoints`: every
    /// endpoint its series may name), and nothing that comes later (a probe that resolved the
    /// tenant before the reload, an upstream answer of a run that was stopping) puts one back.
    pub fn remove_tenant(&self, tenant: &TenantName, endpoints: &[Endpoint]) {
        self.metrics.remove_tenant(tenant, endpoints);
        self.changed();
    }

    /// A probe refused, for one of [`crate::metrics::self_metrics::PROBE_REFUSALS`]; not
    /// counted once the tenant has been removed.
    pub fn observe_probe_refused(&self, tenant: &TenantName, reason: &'static str) {
        self.metrics.probe_refused(tenant, reason);
        self.changed();
    }
}

impl Observer for Telemetry {
    fn observe_request(&self, endpoint: Endpoint, code: Option<u16>, duration: Duration) {
        self.metrics.request(endpoint, code, duration.as_secs_f64());
        self.changed();
    }

    fn observe_retry(&self, tenant: &TenantName, endpoint: Endpoint, reason: FailureReason) {
        self.metrics.retry(tenant, endpoint, reason);
        self.changed();
    }

    fn observe_retry_refused(&self, tenant: &TenantName, endpoint: Endpoint) {
        self.metrics.retry_refused(tenant, endpoint);
        self.changed();
    }

    fn set_open_circuits(&self, tenant: &TenantName, endpoint: Endpoint, open: usize) {
        let before = self.metrics.set_open_circuits(tenant, endpoint, open);
        if before != open {
            self.changed();
            tracing::info!(
                tenant = tenant.as_str(),
                endpoint = endpoint.as_str(),
                open_circuits = open,
                "targets with an open circuit breaker changed"
            );
        }
    }

    fn observe_failure(&self, tenant: &TenantName, endpoint: Endpoint, reason: FailureReason) {
        self.metrics.failure(tenant, endpoint, reason);
        self.changed();
    }

    fn set_pacer(&self, tenant: &TenantName, allowed: Option<f64>, demand: f64, paused: bool) {
        if self.metrics.set_pacer(tenant, allowed, demand, paused) {
            self.changed();
        }
    }

    fn set_endpoint_paces(&self, tenant: &TenantName, paces: &[EndpointPace]) {
        if self.metrics.set_endpoint_paces(tenant, paces) {
            self.changed();
        }
    }

    fn observe_pacer_wait(&self, tenant: &TenantName, waited: Duration) {
        self.metrics.pacer_wait(tenant, waited.as_secs_f64());
        self.changed();
    }

    fn parse_problem(&self, endpoint: Endpoint, path: &str, found: &str) {
        let path = shorten(path, MAX_LOGGED_PATH_CHARS);
        self.metrics.parse_problem(endpoint);
        self.changed();
        let (first, suppressing) = {
            let mut inner = self.lock();
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
}

fn now_seconds() -> f64 {
    jiff::Timestamp::now().as_millisecond() as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::assert_holds;
    use crate::metrics::format::Format;

    fn classic(t: &Telemetry) -> String {
        t.metrics().render(Format::Classic)
    }

    #[test]
    fn failures_start_at_zero_for_every_reason() {
        let t = Telemetry::new(&[Endpoint::new("delivery_account")]);
        let lines = FailureReason::ALL.map(|r| {
            format!("mailhost_api_request_failures_total{{endpoint=\"delivery_account\",reason=\"{r}\"}} 0\n")
        });
        assert_holds(&classic(&t), &lines.each_ref().map(String::as_str));
    }

    #[test]
    fn a_request_lands_in_every_bucket_at_or_above_its_duration() {
        let endpoint = Endpoint::new("delivery_account");
        let t = Telemetry::new(&[endpoint]);
        t.observe_request(endpoint, Some(200), Duration::from_millis(300));
        t.observe_request(endpoint, None, Duration::from_secs(20));
        assert_holds(
            &classic(&t),
            &[
                "mailhost_api_request_duration_seconds_bucket{le=\"0.25\",endpoint=\"delivery_account\"} 0\n",
                "mailhost_api_request_duration_seconds_bucket{le=\"0.5\",endpoint=\"delivery_account\"} 1\n",
                "mailhost_api_request_duration_seconds_bucket{le=\"+Inf\",endpoint=\"delivery_account\"} 2\n",
                "mailhost_api_requests_total{endpoint=\"delivery_account\",code=\"none\"} 1\n",
                "mailhost_api_requests_total{endpoint=\"delivery_account\",code=\"200\"} 1\n",
            ],
        );
    }

    #[test]
    fn the_set_of_logged_shapes_stops_growing_at_its_bound() {
        let endpoint = Endpoint::new("tracemail_dashboard");
        let t = Telemetry::new(&[endpoint]);
        let n = MAX_LOGGED_SHAPES * 4;
        for i in 0..n {
            let path = format!("overview.key_{i}");
            t.parse_problem(endpoint, &path, "string \"x\"");
            // The same path again is neither logged at warn level nor kept twice.
            t.parse_problem(endpoint, &path, "string \"x\"");
        }
        assert_eq!(t.lock().logged.len(), MAX_LOGGED_SHAPES);
        assert!(t.lock().shapes_suppressed);
        let out = classic(&t);
        assert!(
            out.contains(&format!(
                "mailhost_parse_problems_total{{endpoint=\"tracemail_dashboard\"}} {}\n",
                2 * n
            )),
            "every problem is still counted:\n{out}"
        );
    }

    #[test]
    fn what_comes_after_a_tenant_was_removed_brings_none_of_its_series_back() {
        let endpoint = Endpoint::new("delivery_account");
        let t = Telemetry::new(&[endpoint]);
        let (gone, kept) = (
            TenantName::parse("gone").unwrap(),
            TenantName::parse("kept").unwrap(),
        );
        t.admit_tenants(&[gone.clone(), kept.clone()]);
        t.ensure_endpoints(&[endpoint], &[gone.clone(), kept.clone()]);
        t.observe_probe_refused(&gone, "provider_refused");
        assert!(classic(&t).contains("tenant=\"gone\""));
        t.remove_tenant(&gone, &[endpoint]);
        // A probe answered 404 after the reload, and an upstream answer of a run that was
        // stopping: every kind of per-tenant write.
        for tenant in [&gone, &kept] {
            t.observe_probe_refused(tenant, "provider_refused");
            t.observe_failure(tenant, endpoint, FailureReason::NotFound);
            t.observe_retry(tenant, endpoint, FailureReason::Timeout);
            t.observe_retry_refused(tenant, endpoint);
            t.set_open_circuits(tenant, endpoint, 1);
            t.set_pacer(tenant, Some(2.0), 1.0, false);
            t.set_endpoint_paces(tenant, &[]);
            t.observe_pacer_wait(tenant, Duration::from_millis(5));
        }
        let out = classic(&t);
        assert!(!out.contains("gone"), "{out}");
        assert_holds(
            &out,
            &[
                "mailhost_probe_refused_total{tenant=\"kept\",reason=\"provider_refused\"} 1\n",
                "mailhost_api_pacer_rate{tenant=\"kept\"} 2",
            ],
        );
        // Configured again: its series come back, counters from zero.
        t.admit_tenants(std::slice::from_ref(&gone));
        t.observe_probe_refused(&gone, "provider_refused");
        assert!(classic(&t).contains(
            "mailhost_probe_refused_total{tenant=\"gone\",reason=\"provider_refused\"} 1\n"
        ));
    }

    #[test]
    fn long_paths_are_kept_cut_so_the_set_holds_small_keys() {
        let t = Telemetry::new(&[Endpoint::new("tracemail_dashboard")]);
        let long = "k".repeat(10_000);
        t.parse_problem(Endpoint::new("tracemail_dashboard"), &long, "object");
        let inner = t.lock();
        let (_, kept) = inner.logged.iter().next().unwrap();
        assert_eq!(kept.chars().count(), MAX_LOGGED_PATH_CHARS + 1);
        assert!(kept.ends_with('…'));
    }
}
