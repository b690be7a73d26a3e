//! What a collector's runs say in the log: a debug line per run, and at most one warn line per
//! failure reason per interval ([`Warnings`]), however many targets failed.

use std::collections::HashMap;

use tokio::time::Instant;

use crate::engine::spec::{CollectorSpec, Target};
use crate::settings::TargetFailureLog;
use crate::upstream::error::{FailureReason, UpstreamError};

/// The debug lines of a finished run: its figures, and each target that failed (at warn level
/// with `--log.target-failures=target`).
pub(super) fn log_run<T>(
    spec: &CollectorSpec,
    results: &[(Target, Result<T, UpstreamError>)],
    started: Instant,
) {
    let errors = results.iter().filter_map(|(_, r)| r.as_ref().err());
    let deferred = errors.clone().filter(|e| e.deferred).count();
    let failed = errors.count() - deferred;
    tracing::debug!(
        tenant = spec.tenant.as_str(),
        collector = spec.name.as_str(),
        targets = results.len(),
        failed,
        deferred,
        elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "collector run finished"
    );
    let loud = spec.failure_log == TargetFailureLog::Target;
    for (target, result) in results {
        if let Err(e) = result
            && !e.deferred
        {
            if loud {
                tracing::warn!(tenant = spec.tenant.as_str(),
                    collector = spec.name.as_str(), target = %target, reason = e.reason.as_str(), detail = %e.detail, "target failed");
            } else {
                tracing::debug!(tenant = spec.tenant.as_str(),
                    collector = spec.name.as_str(), target = %target, reason = e.reason.as_str(), detail = %e.detail, "target failed");
            }
        }
    }
}

/// The warn lines of a collector: one per failure reason per interval, however many runs it
/// makes (first fetches of probed accounts, catch-ups, reloads), so that strangers probing
/// made-up ids cannot fill the log; the failures of the runs not logged are counted into the
/// next line of their reason.
#[derive(Default)]
pub(super) struct Warnings {
    /// Per reason: when its last line was written, and failures since that were not.
    pub(super) last: HashMap<FailureReason, (Instant, usize)>,
}

impl Warnings {
    pub(super) fn say(&mut self, spec: &CollectorSpec, failures: Vec<Failures>, now: Instant) {
        for failure in failures {
            if let Some((at, held)) = self.last.get_mut(&failure.reason)
                && now.saturating_duration_since(*at) < spec.schedule.interval
            {
                *held += failure.count;
                continue;
            }
            let held_back = self
                .last
                .insert(failure.reason, (now, 0))
                .map_or(0, |(_, held)| held);
            tracing::warn!(
                tenant = spec.tenant.as_str(),
                collector = spec.name.as_str(),
                reason = failure.reason.as_str(),
                failed = failure.count,
                targets = %failure.examples,
                detail = %failure.detail,
                also_failed_since_the_last_line = held_back,
                "targets failed"
            );
        }
    }
}

/// Targets named in a run's warning for one reason, at most; debug level names every one.
const MAX_NAMED_TARGETS: usize = 5;

/// One warning line of a run: the targets that failed for one reason.
#[derive(Debug, PartialEq)]
pub(super) struct Failures {
    pub(super) reason: FailureReason,
    pub(super) count: usize,
    /// The first few targets, and how many more.
    pub(super) examples: String,
    /// The first target's detail: the others of a reason usually say the same.
    pub(super) detail: String,
}

/// A run's failures, one entry per reason in the order the reasons first occurred: a run over
/// a hundred thousand accounts that all time out logs one line, not a hundred thousand.
pub(super) fn summarize_failures<T>(
    results: &[(Target, Result<T, UpstreamError>)],
) -> Vec<Failures> {
    let mut out: Vec<(Failures, Vec<String>)> = Vec::new();
    for (target, result) in results {
        // A deferred target did not fail: the pacer tells once when the fleet does not fit.
        let Err(e) = result else { continue };
        if e.deferred {
            continue;
        }
        let i = out.iter().position(|(f, _)| f.reason == e.reason);
        let i = i.unwrap_or_else(|| {
            let first = Failures {
                reason: e.reason,
                count: 0,
                examples: String::new(),
                detail: e.detail.clone(),
            };
            out.push((first, Vec::new()));
            out.len() - 1
        });
        let (failures, named) = &mut out[i];
        failures.count += 1;
        if named.len() < MAX_NAMED_TARGETS {
            named.push(target.to_string());
        }
    }
    out.into_iter()
        .map(|(mut f, named)| {
            let more = f.count - named.len();
            f.examples = named.join(", ");
            if more > 0 {
                f.examples.push_str(&format!(" and {more} more"));
            }
            f
        })
        .collect()
}
