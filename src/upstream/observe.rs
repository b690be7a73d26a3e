//! What the client tells about its calls: the one way `upstream/` reports, so that it depends
//! on no one's series. The exporter's self-metrics implement [`Observer`].

use std::time::Duration;

use super::endpoint::Endpoint;

use super::error::FailureReason;
use crate::tenant::TenantName;

/// Told of every call, failure, retry, parse problem and change of a token's pace.
pub trait Observer: Send + Sync {
    /// An answer (`code`), or none, after `duration`.
    fn observe_request(&self, endpoint: Endpoint, code: Option<u16>, duration: Duration);
    /// A call of the tenant failed for `reason`.
    fn observe_failure(&self, tenant: &TenantName, endpoint: Endpoint, reason: FailureReason);
    /// A call of the tenant is tried again after `reason`.
    fn observe_retry(&self, tenant: &TenantName, endpoint: Endpoint, reason: FailureReason);
    /// A failed call's retry was refused by its endpoint's retry budget.
    fn observe_retry_refused(&self, tenant: &TenantName, endpoint: Endpoint);
    /// `open` of the tenant's circuits of `endpoint` are open now.
    fn set_open_circuits(&self, tenant: &TenantName, endpoint: Endpoint, open: usize);
    /// A field of an answer could not be read; `path` and `found` come from the answer.
    fn parse_problem(&self, endpoint: Endpoint, path: &str, found: &str);
    /// The tenant's pace now: the rate allowed (`None`: not learned), the rate its fleet needs,
    /// and whether the token is paused.
    fn set_pacer(&self, tenant: &TenantName, allowed: Option<f64>, demand: f64, paused: bool);
    /// A call of the tenant waited this long for its turn.
    fn observe_pacer_wait(&self, tenant: &TenantName, waited: Duration);
    /// The pace of each endpoint the tenant has called, as it stands.
    fn set_endpoint_paces(&self, tenant: &TenantName, paces: &[EndpointPace]);
}

/// One endpoint's pace within a token.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EndpointPace {
    pub endpoint: Endpoint,
    /// The rate allowed on this endpoint alone (`None`: not limited on its own).
    pub allowed: Option<f64>,
    /// The provider has paused this endpoint (a burst of 429s with `Retry-After`, or its stated
    /// quota used up).
    pub paused: bool,
    /// Targets of this endpoint whose 429s are their own: each backs off alone.
    pub backing_off: usize,
    /// The endpoint fails everywhere: paused, probed after a cool-down.
    pub outage: Option<OutageView>,
    /// Calls it may have in flight while its limit is not known yet (`None`: open).
    pub window: Option<f64>,
    /// Failed calls not retried because its retry budget was spent, since the pacer began.
    pub retries_refused: u64,
}

/// An endpoint's outage as the series and pages show it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OutageView {
    /// When it began, seconds since the epoch.
    pub since: f64,
    /// When its next probe may go, seconds since the epoch.
    pub next_probe: f64,
    /// A probe is on its way.
    pub probing: bool,
}

/// An observer that keeps nothing, for the unit tests of `upstream/`.
#[cfg(test)]
#[derive(Debug, Default)]
pub struct Nothing;

#[cfg(test)]
impl Observer for Nothing {
    fn observe_request(&self, _: Endpoint, _: Option<u16>, _: Duration) {}
    fn observe_failure(&self, _: &TenantName, _: Endpoint, _: FailureReason) {}
    fn observe_retry(&self, _: &TenantName, _: Endpoint, _: FailureReason) {}
    fn observe_retry_refused(&self, _: &TenantName, _: Endpoint) {}
    fn set_open_circuits(&self, _: &TenantName, _: Endpoint, _: usize) {}
    fn parse_problem(&self, _: Endpoint, _: &str, _: &str) {}
    fn set_pacer(&self, _: &TenantName, _: Option<f64>, _: f64, _: bool) {}
    fn observe_pacer_wait(&self, _: &TenantName, _: Duration) {}
    fn set_endpoint_paces(&self, _: &TenantName, _: &[EndpointPace]) {}
}
