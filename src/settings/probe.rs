//! The `probe:` block, at the top level and in a tenant: as written, validated, and what
//! `/probe` may register for a tenant ([`ProbeConfig`]).

use std::collections::BTreeSet;

use serde::Deserialize;

use super::fields::{account_set, in_range};
use super::{ConfigError, defaults, limits};

/// `/probe` settings; `max_targets` and `allow` are the defaults of every tenant.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProbe {
    pub(crate) idle_intervals: Option<u32>,
    pub(crate) max_targets: Option<usize>,
    pub(crate) new_per_interval: Option<usize>,
    pub(crate) first_fetches: Option<usize>,
    pub(crate) allow: Option<Vec<i64>>,
}

/// A tenant's `probe:` block: the top level's settings but the idle intervals.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTenantProbe {
    pub(crate) max_targets: Option<usize>,
    pub(crate) new_per_interval: Option<usize>,
    pub(crate) first_fetches: Option<usize>,
    pub(crate) allow: Option<Vec<i64>>,
}

/// What `/probe` may register for a tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeConfig {
    /// Probe-registered targets at most (0: `/probe` registers none).
    pub max_targets: usize,
    /// New accounts registered per interval of the account collectors at most, counted when
    /// registered, whatever their fetch then says.
    pub new_per_interval: usize,
    /// Registered accounts whose first fetch has not ended yet, at most.
    pub first_fetches: usize,
    /// When set, only these accounts may be probed.
    pub allow: Option<BTreeSet<i32>>,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            max_targets: defaults::PROBE_MAX_TARGETS,
            new_per_interval: defaults::PROBE_NEW_PER_INTERVAL,
            first_fetches: defaults::PROBE_FIRST_FETCHES,
            allow: None,
        }
    }
}

/// The `probe:` block: the idle intervals after which a probed target is dropped, and the
/// defaults of every tenant's probe settings.
pub(crate) fn probe(raw: Option<RawProbe>) -> Result<(u32, ProbeConfig), ConfigError> {
    let Some(raw) = raw else {
        return Ok((defaults::PROBE_IDLE_INTERVALS, ProbeConfig::default()));
    };
    let idle = in_range(
        "probe.idle_intervals",
        raw.idle_intervals.unwrap_or(defaults::PROBE_IDLE_INTERVALS),
        1..=limits::MAX_IDLE_INTERVALS,
        format_args!("use 1 to {}, e.g. 3", limits::MAX_IDLE_INTERVALS),
    )?;
    let settings = tenant_probe(
        "probe",
        RawTenantProbe {
            max_targets: raw.max_targets,
            new_per_interval: raw.new_per_interval,
            first_fetches: raw.first_fetches,
            allow: raw.allow,
        },
        &ProbeConfig::default(),
    )?;
    Ok((idle, settings))
}

/// A tenant's `probe:` block over `defaults` (the top-level block's); `field` names it in
/// messages.
pub(crate) fn tenant_probe(
    field: &str,
    raw: RawTenantProbe,
    defaults: &ProbeConfig,
) -> Result<ProbeConfig, ConfigError> {
    // Both counts run from 0 (`/probe` registers none) to the targets one exporter holds.
    let count = |key: &str, value: usize, none: &str, example: &str| {
        let fix = format!(
            "use 0 (no probe registers {none}) to {}{example}",
            limits::MAX_TARGETS
        );
        in_range(
            format!("{field}.{key}"),
            value,
            0..=limits::MAX_TARGETS,
            fix,
        )
    };
    let max_targets = raw.max_targets.unwrap_or(defaults.max_targets);
    let max_targets = count("max_targets", max_targets, "a target", "")?;
    let new_per_interval = raw.new_per_interval.unwrap_or(defaults.new_per_interval);
    let new_per_interval = count(
        "new_per_interval",
        new_per_interval,
        "a new account",
        ", e.g. 100",
    )?;
    let first_fetches = in_range(
        format!("{field}.first_fetches"),
        raw.first_fetches.unwrap_or(defaults.first_fetches),
        1..=limits::MAX_FIRST_FETCHES,
        format_args!("use 1 to {}, e.g. 16", limits::MAX_FIRST_FETCHES),
    )?;
    let allow = account_set(&format!("{field}.allow"), raw.allow)?;
    Ok(ProbeConfig {
        max_targets,
        new_per_interval,
        first_fetches,
        allow: allow.or_else(|| defaults.allow.clone()),
    })
}
