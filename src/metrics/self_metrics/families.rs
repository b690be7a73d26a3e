//! The exporter's own series: long-lived `prometheus-client` families of upstream requests,
//! failures, retries, latency, parse problems, open circuits, reloads and build facts, and
//! their rendering as the tail of a scrape (with `# EOF` for OpenMetrics). Counters start at
//! zero for every known endpoint, so that `rate()` and alerts see them before the first event.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::text::encode_registry;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use super::storage::StorageSeries;
use crate::metrics::classic;
use crate::metrics::format::{EOF, Format};
use crate::metrics::labels::{
    BuildLabels, Code, EndpointLabels, FailureLabels, ProbeRefusedLabels, RequestLabels,
    TenantEndpointLabels, TenantLabel,
};
use crate::tenant::TenantName;
use crate::upstream::endpoint::Endpoint;
use crate::upstream::error::FailureReason;
use crate::upstream::observe::EndpointPace;

/// Upper bounds of the request latency histogram, in seconds.
pub const DURATION_BUCKETS: [f64; 10] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// Why `/probe` refuses an account: the `reason` of `mailhost_probe_refused_total`.
pub const PROBE_REFUSALS: [&str; 5] = [
    "not_allowed",
    "max_targets",
    "new_accounts",
    "first_fetches",
    "provider_refused",
];

/// What a tenant's pacer shows.
#[derive(Debug, Default, Clone)]
struct PacerFigures {
    allowed: Option<f64>,
    demand: f64,
    paused: bool,
    /// Seconds waited, summed.
    waited: f64,
    /// Each endpoint the tenant has called (a fixed set, declared by the collectors).
    endpoints: Vec<EndpointPace>,
}

/// A tenant's pace as its pacer last published it: for the landing page and the debug view.
#[derive(Clone, Debug, PartialEq)]
pub struct PaceView {
    pub tenant: TenantName,
    /// The rate allowed the whole token (`None`: not limited as a whole).
    pub allowed: Option<f64>,
    pub paused: bool,
    pub endpoints: Vec<EndpointPace>,
}

/// Every tenant's pacer series, written by hand: a family whose only label is `tenant` must
/// have no label set at all for the one tenant of a single-token config (a family of the
/// library would write `name{}`).
#[derive(Debug, Default, Clone)]
struct PacerSeries {
    /// Shared with the copy in the registry.
    tenants: Arc<Mutex<BTreeMap<TenantName, PacerFigures>>>,
}

impl PacerSeries {
    /// The figures are plain numbers, valid at any point: a poisoned lock is used as it is.
    fn lock(&self) -> MutexGuard<'_, BTreeMap<TenantName, PacerFigures>> {
        self.tenants.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One family: a sample per tenant that has one, unlabelled for the unnamed tenant.
    fn family<'a, M: EncodeMetric>(
        encoder: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        unit: Option<&Unit>,
        kind: MetricType,
        samples: impl Iterator<Item = (&'a TenantName, M)>,
    ) -> std::fmt::Result {
        let samples: Vec<_> = samples.collect();
        if samples.is_empty() {
            return Ok(());
        }
        let mut metric = encoder.encode_descriptor(name, help, unit, kind)?;
        if let [(tenant, sample)] = samples.as_slice()
            && tenant.is_default()
        {
            return sample.encode(metric);
        }
        // The unnamed tenant never stands beside named ones but for the moment of a reload
        // from one token to tenants: it is left out then.
        for (tenant, sample) in samples.iter().filter(|(t, _)| !t.is_default()) {
            sample.encode(metric.encode_family(&TenantLabel((*tenant).clone()))?)?;
        }
        Ok(())
    }

    /// One gauge family labelled by tenant (left out for the unnamed one) and endpoint.
    fn by_endpoint<M: EncodeMetric>(
        encoder: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        samples: impl Iterator<Item = (TenantEndpointLabels, M)>,
    ) -> std::fmt::Result {
        let mut samples = samples.peekable();
        if samples.peek().is_none() {
            return Ok(());
        }
        let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for (labels, sample) in samples {
            sample.encode(metric.encode_family(&labels)?)?;
        }
        Ok(())
    }

    fn endpoint_families(
        encoder: &mut DescriptorEncoder,
        all: &BTreeMap<TenantName, PacerFigures>,
    ) -> std::fmt::Result {
        let named = all.keys().any(|t| !t.is_default());
        let each = || {
            all.iter()
                .filter(move |(t, _)| !named || !t.is_default())
                .flat_map(|(t, f)| {
                    f.endpoints
                        .iter()
                        .map(move |p| (TenantEndpointLabels::new(t, p.endpoint), p))
                })
        };
        PacerSeries::by_endpoint(
            encoder,
            "mailhost_api_pacer_endpoint_rate",
            "Requests per second the provider allows one endpoint of the tenant's token on its own, as the pacer learned it from 429s that stayed on that endpoint, from that endpoint's rate-limit headers, or as endpoint_rate_limits sets it; absent while the endpoint is not limited on its own.",
            each().filter_map(|(l, p)| p.allowed.map(|r| (l, ConstGauge::new(r)))),
        )?;
        PacerSeries::by_endpoint(
            encoder,
            "mailhost_api_pacer_endpoint_paused",
            "1 while the provider has paused one endpoint of the tenant's token (a burst of 429s with Retry-After there, or its stated quota used up until its reset), else 0.",
            each().map(|(l, p)| (l, ConstGauge::new(i64::from(p.paused)))),
        )?;
        PacerSeries::by_endpoint(
            encoder,
            "mailhost_api_endpoint_outage",
            "1 while every call of one endpoint of the tenant's token fails (5xx without Retry-After, timeouts, refused connections, no answer between): its calls are paused and one probe asks after a cool-down that doubles while it fails; else 0.",
            each().map(|(l, p)| (l, ConstGauge::new(i64::from(p.outage.is_some())))),
        )?;
        PacerSeries::by_endpoint(
            encoder,
            "mailhost_api_endpoint_outage_since_timestamp_seconds",
            "When the endpoint's outage began, in seconds since the epoch; absent while it answers.",
            each().filter_map(|(l, p)| p.outage.map(|o| (l, ConstGauge::new(o.since)))),
        )?;
        PacerSeries::by_endpoint(
            encoder,
            "mailhost_api_endpoint_next_probe_timestamp_seconds",
            "When the next probe of the endpoint's outage may go, in seconds since the epoch (in the past while a probe is on its way); absent while it answers.",
            each().filter_map(|(l, p)| p.outage.map(|o| (l, ConstGauge::new(o.next_probe)))),
        )?;
        PacerSeries::by_endpoint(
            encoder,
            "mailhost_api_throttled_targets",
            "Targets of the endpoint whose HTTP 429s are their own (refused again and again while their neighbours succeed): each backs off alone, fails rate_limited and keeps its values until max_age, and slows no one else.",
            each().map(|(l, p)| {
                (
                    l,
                    ConstGauge::new(i64::try_from(p.backing_off).unwrap_or(i64::MAX)),
                )
            }),
        )
    }
}

impl Collector for PacerSeries {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let all = self.lock().clone();
        PacerSeries::endpoint_families(&mut encoder, &all)?;
        PacerSeries::family(
            &mut encoder,
            "mailhost_api_pacer_rate",
            "Requests per second the provider allows the tenant's token, as its pacer learned it from HTTP 429 answers and rate-limit headers or as rate_limit sets it; absent while the provider has never limited the token.",
            None,
            MetricType::Gauge,
            all.iter()
                .filter_map(|(t, f)| f.allowed.map(|r| (t, ConstGauge::new(r)))),
        )?;
        PacerSeries::family(
            &mut encoder,
            "mailhost_api_pacer_demand",
            "Requests per second the tenant's collectors need to refresh every target once per interval; above mailhost_api_pacer_rate, targets are refreshed every few intervals, oldest first, and keep their values meanwhile.",
            None,
            MetricType::Gauge,
            all.iter().map(|(t, f)| (t, ConstGauge::new(f.demand))),
        )?;
        PacerSeries::family(
            &mut encoder,
            "mailhost_api_pacer_wait",
            "Time the tenant's calls spent waiting for its pacer: the learned pace, and pauses the provider asked for.",
            Some(&Unit::Seconds),
            MetricType::Counter,
            all.iter().map(|(t, f)| (t, ConstCounter::new(f.waited))),
        )?;
        PacerSeries::family(
            &mut encoder,
            "mailhost_api_pacer_paused",
            "1 while the provider has paused the tenant's token (a Retry-After, or a used-up quota until its reset), else 0.",
            None,
            MetricType::Gauge,
            all.iter()
                .map(|(t, f)| (t, ConstGauge::new(i64::from(f.paused)))),
        )
    }
}

/// The families, registered once; the handles here and in the registry share their values.
pub struct SelfMetrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    failures: Family<FailureLabels, Counter>,
    retries: Family<FailureLabels, Counter>,
    retries_refused: Family<TenantEndpointLabels, Counter>,
    open_circuits: Family<TenantEndpointLabels, Gauge>,
    durations: Family<EndpointLabels, Histogram, fn() -> Histogram>,
    parse_problems: Family<EndpointLabels, Counter>,
    probe_refused: Family<ProbeRefusedLabels, Counter>,
    pacers: PacerSeries,
    storage: StorageSeries,
    reload_success: Gauge,
    reload_time: Gauge<f64, AtomicU64>,
    /// The tenants whose series may be written: those the running config names (the unnamed
    /// one until a config names others). A tenant's series are written with this held for
    /// reading and removed with it held for writing, so that nothing begun before a reload
    /// removed the tenant (a probe answered after it, an upstream answer that lands as its
    /// collector stops) can put one of its series back: nothing would remove it again.
    tenants: RwLock<HashSet<TenantName>>,
}

impl std::fmt::Debug for SelfMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelfMetrics").finish_non_exhaustive()
    }
}

impl SelfMetrics {
    /// `reload_time` is when the configuration was loaded (start counts as a reload), in
    /// seconds since the epoch.
    pub fn new(build: BuildLabels, reload_time: f64) -> Self {
        let m = SelfMetrics {
            registry: Registry::default(),
            requests: Family::default(),
            failures: Family::default(),
            retries: Family::default(),
            retries_refused: Family::default(),
            open_circuits: Family::default(),
            durations: Family::new_with_constructor(|| Histogram::new(DURATION_BUCKETS)),
            parse_problems: Family::default(),
            probe_refused: Family::default(),
            pacers: PacerSeries::default(),
            storage: StorageSeries::default(),
            reload_success: Gauge::default(),
            reload_time: Gauge::default(),
            tenants: RwLock::new(HashSet::from([TenantName::default()])),
        };
        m.reload_success.set(1);
        m.reload_time.set(reload_time);
        let mut registry = Registry::default();
        // The registry ends each help with a period: the texts here have none of their own.
        // Registration order is the order of the families in the exposition.
        registry.register(
            "mailhost_api_requests",
            "Upstream API requests by endpoint and HTTP status code (none: no answer)",
            m.requests.clone(),
        );
        registry.register(
            "mailhost_api_request_failures",
            "Upstream API requests that failed, by endpoint and reason",
            m.failures.clone(),
        );
        registry.register(
            "mailhost_api_retries",
            "Upstream attempts that failed and were retried after a back-off, by endpoint and reason",
            m.retries.clone(),
        );
        registry.register(
            "mailhost_api_retries_refused",
            "Failed upstream attempts not retried because the endpoint's retry budget was spent (retries are at most a tenth of first attempts over 10 s, plus 5): the call failed at once with the reason of its attempt",
            m.retries_refused.clone(),
        );
        registry.register(
            "mailhost_api_open_circuits",
            "Targets of this endpoint whose circuit breaker is open: not called (reason circuit_open) after their own repeated failures, until one probe after the cool-down",
            m.open_circuits.clone(),
        );
        registry.register_with_unit(
            "mailhost_api_request_duration",
            "Upstream API request latency",
            Unit::Seconds,
            m.durations.clone(),
        );
        registry.register(
            "mailhost_parse_problems",
            "Fields of upstream answers whose shape could not be read; the value was skipped, not zeroed",
            m.parse_problems.clone(),
        );
        registry.register(
            "mailhost_probe_refused",
            "Probes refused: the account is not in the tenant's probe.allow list (not_allowed), the tenant has probe.max_targets probed accounts (max_targets), took probe.new_per_interval new accounts this interval (new_accounts) or has probe.first_fetches first fetches in flight (first_fetches), or the provider refused the account (provider_refused: 404 or 403)",
            m.probe_refused.clone(),
        );
        registry.register_collector(Box::new(m.pacers.clone()));
        registry.register_collector(Box::new(m.storage.clone()));
        registry.register(
            "mailhost_config_last_reload_successful",
            "1 when the last configuration reload succeeded (or none was tried since start), 0 when the new file was refused and the old configuration kept running",
            m.reload_success.clone(),
        );
        registry.register_with_unit(
            "mailhost_config_last_reload_success_timestamp",
            "When the configuration was last loaded successfully (at start or by a reload)",
            Unit::Seconds,
            m.reload_time.clone(),
        );
        let info: Family<BuildLabels, Gauge> = Family::default();
        info.get_or_create(&build).set(1);
        registry.register(
            "mailhost_build_info",
            "A metric with a constant value 1, labelled with the version, revision and compiler of this build",
            info,
        );
        SelfMetrics { registry, ..m }
    }

    /// Tenants a config names: their series may be written from now on, until
    /// [`SelfMetrics::remove_tenant`].
    pub fn admit_tenants(&self, tenants: &[TenantName]) {
        let mut admitted = self.tenants.write().unwrap_or_else(PoisonError::into_inner);
        admitted.extend(tenants.iter().cloned());
    }

    /// Runs `write` on a tenant's series if the tenant is still configured, with the set of
    /// tenants held so that its removal cannot come in between; `None` if it is not.
    fn if_configured<R>(&self, tenant: &TenantName, write: impl FnOnce() -> R) -> Option<R> {
        let admitted = self.tenants.read().unwrap_or_else(PoisonError::into_inner);
        admitted.contains(tenant).then(write)
    }

    /// Zero-initialises the series of `endpoints` that do not exist yet, the per-tenant ones
    /// (and each tenant's probe refusals) for each of `tenants`.
    pub fn ensure_endpoints(&self, endpoints: &[Endpoint], tenants: &[TenantName]) {
        // Creating a series is the point; the guard each call returns is not needed.
        for tenant in tenants {
            for reason in PROBE_REFUSALS {
                let _ = self.probe_refused.get_or_create(&ProbeRefusedLabels {
                    tenant: TenantLabel(tenant.clone()),
                    reason,
                });
            }
        }
        for &endpoint in endpoints {
            for tenant in tenants {
                for reason in FailureReason::ALL {
                    let labels = FailureLabels::new(tenant, endpoint, reason);
                    let _ = self.failures.get_or_create(&labels);
                    if FailureReason::RETRIED.contains(&reason) {
                        let _ = self.retries.get_or_create(&labels);
                    }
                }
                let labels = TenantEndpointLabels::new(tenant, endpoint);
                let _ = self.retries_refused.get_or_create(&labels);
                let _ = self.open_circuits.get_or_create(&labels);
            }
            let e = EndpointLabels { endpoint };
            let _ = self.parse_problems.get_or_create(&e);
            let _ = self.durations.get_or_create(&e);
        }
    }

    pub fn request(&self, endpoint: Endpoint, code: Option<u16>, seconds: f64) {
        self.requests
            .get_or_create(&RequestLabels {
                endpoint,
                code: Code(code),
            })
            .inc();
        self.durations
            .get_or_create(&EndpointLabels { endpoint })
            .observe(seconds);
    }

    /// Counts one event of `tenant` in `family`, if the tenant is still configured: the
    /// per-tenant writes are dropped for a tenant no longer configured (see
    /// [`SelfMetrics::if_configured`]).
    fn count<S: Clone + std::hash::Hash + Eq>(
        &self,
        tenant: &TenantName,
        family: &Family<S, Counter>,
        labels: S,
    ) {
        self.if_configured(tenant, || family.get_or_create(&labels).inc());
    }

    pub fn failure(&self, tenant: &TenantName, endpoint: Endpoint, reason: FailureReason) {
        let labels = FailureLabels::new(tenant, endpoint, reason);
        self.count(tenant, &self.failures, labels);
    }

    pub fn retry(&self, tenant: &TenantName, endpoint: Endpoint, reason: FailureReason) {
        let labels = FailureLabels::new(tenant, endpoint, reason);
        self.count(tenant, &self.retries, labels);
    }

    pub fn retry_refused(&self, tenant: &TenantName, endpoint: Endpoint) {
        let labels = TenantEndpointLabels::new(tenant, endpoint);
        self.count(tenant, &self.retries_refused, labels);
    }

    /// A refused probe of `tenant`, counted only while the tenant is configured: a probe that
    /// resolved its tenant before a reload removed it may be answered after.
    pub fn probe_refused(&self, tenant: &TenantName, reason: &'static str) {
        let labels = ProbeRefusedLabels {
            tenant: TenantLabel(tenant.clone()),
            reason,
        };
        self.count(tenant, &self.probe_refused, labels);
    }

    pub fn parse_problem(&self, endpoint: Endpoint) {
        self.parse_problems
            .get_or_create(&EndpointLabels { endpoint })
            .inc();
    }

    /// Sets a tenant's pacer series: the allowed rate (`None`: unlimited, no series), the
    /// demand, and whether the token is paused. Returns whether anything changed.
    pub fn set_pacer(
        &self,
        tenant: &TenantName,
        allowed: Option<f64>,
        demand: f64,
        paused: bool,
    ) -> bool {
        self.if_configured(tenant, || {
            let mut all = self.pacers.lock();
            let p = all.entry(tenant.clone()).or_default();
            let before = (p.allowed, p.demand, p.paused);
            p.allowed = allowed;
            p.demand = demand;
            p.paused = paused;
            before != (allowed, demand, paused)
        })
        .unwrap_or(false)
    }

    /// Sets the pace of each endpoint of a tenant. Returns whether anything changed.
    pub fn set_endpoint_paces(&self, tenant: &TenantName, paces: &[EndpointPace]) -> bool {
        self.if_configured(tenant, || {
            let mut all = self.pacers.lock();
            let p = all.entry(tenant.clone()).or_default();
            if p.endpoints == paces {
                return false;
            }
            p.endpoints = paces.to_vec();
            true
        })
        .unwrap_or(false)
    }

    /// Time a tenant's call waited for its pacer.
    pub fn pacer_wait(&self, tenant: &TenantName, seconds: f64) {
        self.if_configured(tenant, || {
            self.pacers.lock().entry(tenant.clone()).or_default().waited += seconds;
        });
    }

    /// The pace of each tenant as last published (`only`: that tenant's alone), tenants in
    /// name order, at most `limit`.
    pub fn paces(&self, only: Option<&TenantName>, limit: usize) -> Vec<PaceView> {
        self.pacers
            .lock()
            .iter()
            .filter(|(t, _)| only.is_none_or(|o| o == *t))
            .take(limit)
            .map(|(t, f)| PaceView {
                tenant: t.clone(),
                allowed: f.allowed,
                paused: f.paused,
                endpoints: f.endpoints.clone(),
            })
            .collect()
    }

    /// Drops every series labelled with a tenant no longer configured (`endpoints`: every
    /// endpoint its series may name): its failures, retries, open circuits, probe refusals and
    /// pacer series. A tenant that comes back starts its counters at zero, a counter reset.
    /// From now on, until it is admitted again, nothing writes a series of it.
    pub fn remove_tenant(&self, tenant: &TenantName, endpoints: &[Endpoint]) {
        // Held until every series is gone: a write that checked the tenant before comes first.
        let mut admitted = self.tenants.write().unwrap_or_else(PoisonError::into_inner);
        admitted.remove(tenant);
        let label = TenantLabel(tenant.clone());
        for reason in PROBE_REFUSALS {
            self.probe_refused.remove(&ProbeRefusedLabels {
                tenant: label.clone(),
                reason,
            });
        }
        for &endpoint in endpoints {
            for reason in FailureReason::ALL {
                let labels = FailureLabels::new(tenant, endpoint, reason);
                self.failures.remove(&labels);
                self.retries.remove(&labels);
            }
            let labels = TenantEndpointLabels::new(tenant, endpoint);
            self.retries_refused.remove(&labels);
            self.open_circuits.remove(&labels);
        }
        self.pacers.lock().remove(tenant);
        drop(admitted);
    }

    /// Sets the open circuits of a tenant's `endpoint`; returns the number before (`open`
    /// itself for a tenant no longer configured: nothing changed).
    pub fn set_open_circuits(&self, tenant: &TenantName, endpoint: Endpoint, open: usize) -> usize {
        let before = self.if_configured(tenant, || {
            self.open_circuits
                .get_or_create(&TenantEndpointLabels::new(tenant, endpoint))
                .set(i64::try_from(open).unwrap_or(i64::MAX))
        });
        before.map_or(open, |b| usize::try_from(b).unwrap_or(0))
    }

    /// The storage directory's series (written only once it is on).
    pub fn storage(&self) -> &StorageSeries {
        &self.storage
    }

    /// The outcome of a reload; `at` (seconds since the epoch) is kept only on success.
    pub fn reload(&self, success: bool, at: f64) {
        self.reload_success.set(i64::from(success));
        if success {
            self.reload_time.set(at);
        }
    }

    /// The self-metrics as the tail of a scrape in `format`, with the `# EOF` that ends an
    /// OpenMetrics response.
    pub fn render(&self, format: Format) -> String {
        let mut openmetrics = String::with_capacity(8 * 1024);
        // Writing into a String cannot fail.
        let _ = encode_registry(&mut openmetrics, &self.registry);
        match format {
            Format::Classic => classic::from_openmetrics(&openmetrics),
            Format::OpenMetrics => openmetrics + EOF,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::assert_holds;

    fn metrics() -> SelfMetrics {
        let m = SelfMetrics::new(
            BuildLabels {
                version: "1.2.3",
                revision: "abc",
                rustc_version: "1.95.0",
            },
            1_795_334_400.0,
        );
        m.ensure_endpoints(
            &[Endpoint::new("delivery_account")],
            &[TenantName::default()],
        );
        m
    }

    #[test]
    fn openmetrics_declares_counters_without_total_and_units_and_ends_with_eof() {
        let m = metrics();
        m.request(Endpoint::new("delivery_account"), Some(200), 0.3);
        let out = m.render(Format::OpenMetrics);
        assert_holds(
            &out,
            &[
                "# HELP mailhost_api_requests Upstream API requests by endpoint and HTTP status code (none: no answer).\n\
                 # TYPE mailhost_api_requests counter\n\
                 mailhost_api_requests_total{endpoint=\"delivery_account\",code=\"200\"} 1\n",
                "# TYPE mailhost_api_request_duration_seconds histogram\n# UNIT mailhost_api_request_duration_seconds seconds\n",
                "mailhost_build_info{version=\"1.2.3\",revision=\"abc\",rustc_version=\"1.95.0\"} 1\n",
            ],
        );
        assert!(out.ends_with("\n# EOF\n"));
        assert_eq!(out.matches("# EOF").count(), 1);
    }

    #[test]
    fn classic_text_names_counters_with_total_and_has_no_unit_or_eof() {
        let m = metrics();
        let out = m.render(Format::Classic);
        assert_holds(
            &out,
            &[
                "# HELP mailhost_api_request_failures_total Upstream API requests that failed, by endpoint and reason.\n\
                 # TYPE mailhost_api_request_failures_total counter\n",
                "# TYPE mailhost_config_last_reload_success_timestamp_seconds gauge\n",
                "mailhost_config_last_reload_success_timestamp_seconds 1795334400.0\n",
            ],
        );
        assert!(!out.contains("# UNIT") && !out.contains("# EOF"));
        // Requests are counted per code only once one was made.
        assert!(!out.contains("mailhost_api_requests"));
    }

    #[test]
    fn pacer_series_carry_the_tenant_label_only_for_named_tenants_and_every_series_leaves_with_its_tenant()
     {
        let m = metrics();
        m.set_pacer(&TenantName::default(), None, 4.5, false);
        m.pacer_wait(&TenantName::default(), 0.25);
        let out = m.render(Format::Classic);
        assert_holds(
            &out,
            &[
                "\nmailhost_api_pacer_demand 4.5\n",
                "\nmailhost_api_pacer_wait_seconds_total 0.25\n",
                "\nmailhost_api_pacer_paused 0\n",
            ],
        );
        assert!(
            !out.contains("# TYPE mailhost_api_pacer_rate"),
            "unlimited: no rate\n{out}"
        );
        assert!(!out.contains("{}"), "{out}");
        let m = metrics();
        let acme = TenantName::parse("acme").unwrap();
        let beta = TenantName::parse("beta").unwrap();
        m.admit_tenants(&[acme.clone(), beta.clone()]);
        assert!(m.set_pacer(&acme, Some(12.5), 30.0, true));
        assert!(
            !m.set_pacer(&acme, Some(12.5), 30.0, true),
            "nothing changed"
        );
        assert_holds(
            &m.render(Format::OpenMetrics),
            &[
                "mailhost_api_pacer_rate{tenant=\"acme\"} 12.5\n",
                "mailhost_api_pacer_paused{tenant=\"acme\"} 1\n",
                "# TYPE mailhost_api_pacer_wait_seconds counter\n# UNIT mailhost_api_pacer_wait_seconds seconds\n",
            ],
        );
        // Every series of the tenant, counters included, goes with it; the others stay.
        let endpoint = Endpoint::new("delivery_account");
        m.ensure_endpoints(&[endpoint], &[acme.clone(), beta.clone()]);
        m.failure(&acme, endpoint, FailureReason::Timeout);
        m.retry(&acme, endpoint, FailureReason::Timeout);
        m.probe_refused(&acme, PROBE_REFUSALS[0]);
        m.set_open_circuits(&acme, endpoint, 2);
        assert!(m.render(Format::OpenMetrics).contains("tenant=\"acme\""));
        m.remove_tenant(&acme, &[endpoint]);
        let out = m.render(Format::OpenMetrics);
        assert!(!out.contains("acme"), "{out}");
        let failures = "mailhost_api_request_failures_total{tenant=\"TENANT\",endpoint=\"delivery_account\",reason=\"timeout\"} 0\n";
        assert_holds(&out, &[&failures.replace("TENANT", "beta")]);
        // Written after its removal (a late probe, a late upstream answer): nothing comes back.
        m.probe_refused(&acme, PROBE_REFUSALS[4]);
        m.failure(&acme, endpoint, FailureReason::Timeout);
        m.pacer_wait(&acme, 0.5);
        assert!(!m.render(Format::OpenMetrics).contains("acme"));
        // Back again: its counters start at zero.
        m.admit_tenants(std::slice::from_ref(&acme));
        m.ensure_endpoints(&[endpoint], std::slice::from_ref(&acme));
        let out = m.render(Format::OpenMetrics);
        assert_holds(&out, &[&failures.replace("TENANT", "acme")]);
    }

    #[test]
    fn a_refused_reload_keeps_the_time_of_the_last_good_one() {
        let m = metrics();
        m.reload(false, 1_800_000_000.0);
        assert_holds(
            &m.render(Format::Classic),
            &[
                "mailhost_config_last_reload_successful 0\n",
                "mailhost_config_last_reload_success_timestamp_seconds 1795334400.0\n",
            ],
        );
        m.reload(true, 1_800_000_000.0);
        let out = m.render(Format::Classic);
        assert_holds(&out, &["mailhost_config_last_reload_successful 1\n"]);
    }
}
