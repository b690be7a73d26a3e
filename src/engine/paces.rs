//! The pacers' learned state under `--storage.path`: `DIR/pace.json`, a file of its own beside
//! the targets' (`targets.json`), so that a bad one never costs the other; what it holds per
//! tenant is [`crate::storage::pace`]'s to say. Never the token, nor anything made from it: a
//! token changed across a restart starts from the old token's pace and learns the new one's
//! from its answers.
//!
//! - **Written** with the targets by [`super::checkpoint::run`]: on the same timer and at
//!   shutdown within the same bound, whole or nothing ([`Dir::write`]).
//! - **Restored** by [`restore`] before the first run: only into a tenant configured now under
//!   the same name and provider; the rest is dropped and said so in one line. A bad file is
//!   refused in a warn line naming it and counted; the paces start cold, the targets are
//!   restored all the same.

use std::collections::{HashMap, HashSet};

use crate::collectors::CollectorName;
use crate::engine::Latest;
use crate::metrics::self_metrics::Telemetry;
use crate::storage::pace::{PACE, PaceFile, TenantPace};
use crate::storage::{Dir, Found, StorageError, WriteReport};
use crate::tenant::TenantName;
use crate::upstream::pacer::Pacer;

/// A tenant's pacer, with what it is kept under.
#[derive(Clone, Debug)]
pub struct TenantPacer {
    pub tenant: TenantName,
    /// The tenant's provider: its base URL without userinfo, query or fragment.
    pub origin: String,
    pub pacer: Pacer,
}

/// The configured tenants' pacers, changed by a reload.
pub type Pacers = Latest<Vec<TenantPacer>>;

/// Writes what each of `pacers` keeps to `dir` (tenants whose pacer learned nothing left out).
pub fn write(dir: &Dir, pacers: &[TenantPacer]) -> Result<WriteReport, StorageError> {
    let tenants = pacers
        .iter()
        .map(|h| TenantPace {
            tenant: h.tenant.as_str().to_owned(),
            origin: h.origin.clone(),
            pace: h.pacer.keep(),
        })
        .filter(|t| !t.pace.is_empty())
        .collect();
    dir.write(PACE, &PaceFile { tenants })
}

/// What the restore of the paces found, for the log and the series.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PacesRestored {
    /// When the file was written, the tenants dropped and whether it was refused.
    pub found: Found,
    /// Tenants whose pacer took something back.
    pub tenants: usize,
    /// Entries of restored tenants left out: ended since, or of an endpoint this version lacks.
    pub expired: usize,
}

/// Reads `DIR/pace.json` into the configured `pacers` before their first call; never panics,
/// whatever the file holds.
pub fn read(dir: &Dir, pacers: &[TenantPacer]) -> PacesRestored {
    let (found, stored) = Found::read::<PaceFile>(dir, PACE);
    let mut report = PacesRestored {
        found,
        ..PacesRestored::default()
    };
    let Some(stored) = stored else {
        return report;
    };
    let by_name: HashMap<&str, &TenantPacer> =
        pacers.iter().map(|h| (h.tenant.as_str(), h)).collect();
    let known = CollectorName::every_endpoint();
    let mut dropped: HashMap<&'static str, usize> = HashMap::new();
    let mut seen = HashSet::new();
    for t in stored.tenants {
        let why = match by_name.get(t.tenant.as_str()) {
            None => Some("of a tenant no longer configured"),
            Some(h) if h.origin != t.origin => Some("of a tenant whose base URL changed"),
            Some(_) if !seen.insert(t.tenant.clone()) => Some("kept twice"),
            Some(h) => {
                let resumed = h.pacer.resume(&t.pace, &known);
                report.expired += resumed.dropped;
                if resumed.any() {
                    report.tenants += 1;
                }
                None
            }
        };
        if let Some(why) = why {
            *dropped.entry(why).or_default() += 1;
        }
    }
    report.found.dropped(dropped);
    report
}

/// Reads `DIR/pace.json` into `pacers` before the first run; logs what it did in one line (and
/// one warn line for a refused file) and records it in the series.
pub fn restore(dir: &Dir, pacers: &[TenantPacer], telemetry: &Telemetry) -> PacesRestored {
    let report = read(dir, pacers);
    if let Some((_, refused)) = &report.found.refused {
        tracing::warn!(
            "the storage directory's learned paces were refused, and the pacers start cold (the targets are restored apart): {refused}"
        );
    }
    telemetry.observe_storage(|f| {
        f.restored_paces = Some(report.tenants as u64);
        if let Some((problem, _)) = report.found.refused {
            f.refused(problem);
        }
    });
    if let Some(written_at) = report.found.written_at_text() {
        tracing::info!(
            path = %dir.file(PACE).display(),
            written_at,
            restored_paces = report.tenants,
            ended_since = report.expired,
            dropped = report.found.dropped_words("tenant"),
            "restored the learned paces the storage directory kept"
        );
    }
    report
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;
    use crate::storage::Problem;
    use crate::storage::pace::{KeptPacer, learned_endpoint};

    fn held(tenant: &str, origin: &str) -> TenantPacer {
        let tenant = TenantName::parse(tenant).unwrap();
        TenantPacer {
            tenant: tenant.clone(),
            origin: origin.to_owned(),
            pacer: Pacer::new(
                tenant,
                8,
                None,
                BTreeMap::new(),
                crate::settings::BreakerPolicy::default(),
                Arc::new(crate::upstream::observe::Nothing),
            ),
        }
    }

    /// A pacer that learned `rate` a second on `delivery_account`.
    fn paced(tenant: &str, origin: &str, rate: f64) -> TenantPacer {
        let h = held(tenant, origin);
        let kept = KeptPacer {
            endpoints: vec![learned_endpoint("delivery_account", rate, None)],
            ..KeptPacer::default()
        };
        let resumed = h.pacer.resume(&kept, &CollectorName::every_endpoint());
        assert_eq!(resumed.rates, 1);
        h
    }

    const ORIGIN: &str = "https://api.example.net/v1";

    #[test]
    fn a_pace_is_taken_back_only_by_the_same_tenant_at_the_same_provider() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open(tmp.path()).unwrap();
        let before = [
            paced("acme", ORIGIN, 7.0),
            paced("beta", ORIGIN, 3.0),
            paced("gone", ORIGIN, 5.0),
            held("idle", ORIGIN),
        ];
        write(&dir, &before).unwrap();
        let text = std::fs::read_to_string(dir.file(PACE)).unwrap();
        assert!(
            !text.contains("idle"),
            "a pacer that learned nothing is left out: {text}"
        );
        let after = [
            held("acme", ORIGIN),
            held("beta", "https://elsewhere.example.net/v1"),
            held("idle", ORIGIN),
        ];
        let report = read(&dir, &after);
        assert_eq!(report.tenants, 1);
        assert_eq!(
            report.found.dropped,
            vec![
                ("of a tenant no longer configured", 1),
                ("of a tenant whose base URL changed", 1)
            ]
        );
        assert!(report.found.refused.is_none());
        let allowed = after[0].pacer.allowed().unwrap();
        assert!((allowed - 7.0).abs() < 1e-9, "{allowed}");
        assert_eq!(after[1].pacer.allowed(), None);
        assert_eq!(after[2].pacer.allowed(), None);
    }

    #[test]
    fn a_bad_pace_file_is_refused_naming_it_and_the_pacers_start_cold() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open(tmp.path()).unwrap();
        std::fs::write(dir.file(PACE), "{\"version\":1,\"data\":garbage").unwrap();
        let after = [held("acme", ORIGIN)];
        let report = read(&dir, &after);
        let (problem, reason) = report.found.refused.unwrap();
        assert_eq!(problem, Problem::Corrupt);
        assert!(reason.contains("pace.json"), "{reason}");
        assert_eq!(report.tenants, 0);
        assert_eq!(after[0].pacer.allowed(), None);
    }
}
