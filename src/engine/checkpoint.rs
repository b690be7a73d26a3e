//! Checkpoints: what the snapshot knows, kept under `--storage.path` so that a restart starts
//! from it rather than from nothing: `DIR/targets.json` ([`crate::storage::targets`]). Per
//! target, the last good data and when it was fetched, the last attempt's outcome and failure
//! reason ([`Kept`]); per collector, what it was made under (its tenant, the tenant's provider
//! and the collector's settings).
//!
//! - **Written** on a timer and once at shutdown, by [`run`], on a blocking thread from a copy
//!   of the snapshot (a pointer per collector), so that a scrape, a run or the shutdown never
//!   waits for the disk: each write is whole or nothing ([`Dir::write`]). The pacers' learned
//!   state is written beside it, in a file of its own ([`super::paces`]).
//! - **Restored** by [`restore`] before the first run: only what belongs to the current config
//!   (the same tenant, provider, collector, settings and target) and is younger than its
//!   `max_age`; the rest is dropped and said so in one line.
//! - The size follows the fleet: only configured collectors and targets are in the snapshot
//!   (a tenant, collector or target that leaves the config leaves the next checkpoint).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use serde::ser::SerializeSeq;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::engine::Latest;
use crate::engine::paces::{self, Pacers};
use crate::engine::snapshot::{Snapshot, TargetState};
use crate::engine::spec::{CollectorKey, CollectorName, CollectorSpec};
use crate::engine::store::Store;
use crate::metrics::self_metrics::Telemetry;
use crate::storage::targets::{Kept, KeptCollector, TARGETS, TargetsFile, TargetsIn, older};
use crate::storage::{Dir, Found, StorageError};
use crate::tenant::TenantName;
use crate::upstream::error::UpstreamError;

/// How long the checkpoint at shutdown may take; past it the exporter exits and the previous
/// checkpoint stays as it was (a write is whole or nothing).
pub const AT_SHUTDOWN: Duration = Duration::from_secs(3);

/// What a collector was made under: a kept collector is restored only under the same.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Made {
    /// The tenant's provider: its base URL without userinfo, query or fragment.
    origin: String,
    /// The collector's settings, as a key ([`crate::storage::targets::settings_key`]).
    settings: String,
}

/// What each configured collector is made under, as the current config says.
#[derive(Clone, Debug, Default)]
pub struct Identity(HashMap<CollectorKey, Made>);

impl Identity {
    pub fn of(config: &Config, specs: &[CollectorSpec]) -> Identity {
        let origins: HashMap<&TenantName, String> = config
            .tenants
            .iter()
            .map(|t| (&t.name, crate::redact::redact_url(&t.api.base_url)))
            .collect();
        Identity(
            specs
                .iter()
                .filter_map(|s| {
                    let origin = origins.get(&s.tenant)?.clone();
                    let settings = s.collector.settings_key();
                    Some((s.key(), Made { origin, settings }))
                })
                .collect(),
        )
    }
}

/// A collector's targets, each written as [`Kept`] with references into the snapshot.
struct TargetList<'a>(&'a [Arc<TargetState>]);

impl Serialize for TargetList<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for t in self.0 {
            seq.serialize_element(&Kept {
                target: &t.target,
                data: t.data.as_ref().map(|(d, at)| (&**d, *at)),
                last_ok: t.last_ok,
                last_attempt: t.last_attempt,
                last_success: t.last_success,
                last_failure: t.last_failure,
                last_error: t.last_error.as_ref().map(UpstreamError::kept),
            })?;
        }
        seq.end()
    }
}

/// Writes `snapshot`'s configured collectors (those `identity` knows) to `dir`.
pub fn write(
    dir: &Dir,
    snapshot: &Snapshot,
    identity: &Identity,
) -> Result<crate::storage::WriteReport, StorageError> {
    let collectors = snapshot
        .collectors
        .iter()
        .filter_map(|(key, c)| {
            let made = identity.0.get(key)?;
            Some(KeptCollector {
                tenant: c.tenant.as_str(),
                collector: c.name.as_str(),
                origin: &made.origin,
                settings: &made.settings,
                targets: TargetList(&c.targets),
            })
        })
        .collect();
    dir.write(TARGETS, &TargetsFile { collectors })
}

/// What a restore found, for the log, the landing page and the series.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotRestored {
    /// When the file was written, what was dropped and whether it was refused.
    pub found: Found,
    /// Targets served from the state.
    pub targets: usize,
    /// Kept targets no longer configured.
    pub unconfigured_targets: usize,
}

/// What the state in `dir` holds for the current collectors, as snapshot states, with what
/// was dropped and why. Reads the file; never panics, whatever it holds.
pub fn read(
    dir: &Dir,
    specs: &[CollectorSpec],
    identity: &Identity,
) -> (Vec<(CollectorKey, Vec<TargetState>)>, SnapshotRestored) {
    let (found, stored) = Found::read_converting::<TargetsIn>(dir, TARGETS, older);
    let mut report = SnapshotRestored {
        found,
        ..SnapshotRestored::default()
    };
    let Some(stored) = stored else {
        return (Vec::new(), report);
    };
    let specs: HashMap<CollectorKey, &CollectorSpec> = specs.iter().map(|s| (s.key(), s)).collect();
    let mut dropped: HashMap<&'static str, usize> = HashMap::new();
    let mut out = Vec::new();
    for c in stored.collectors {
        match take(c, &specs, identity, &mut report) {
            Ok(taken) => out.push(taken),
            Err(why) => *dropped.entry(why).or_default() += 1,
        }
    }
    report.found.dropped(dropped);
    report.targets = out.iter().map(|(_, t): &(_, Vec<_>)| t.len()).sum();
    (out, report)
}

/// One kept collector's targets still configured, or why it is dropped.
fn take(
    c: KeptCollector<String, Box<RawValue>>,
    specs: &HashMap<CollectorKey, &CollectorSpec>,
    identity: &Identity,
    report: &mut SnapshotRestored,
) -> Result<(CollectorKey, Vec<TargetState>), &'static str> {
    let name = CollectorName::from_key(&c.collector).ok_or("of a collector this version lacks")?;
    let tenant = if c.tenant.is_empty() {
        TenantName::default()
    } else {
        TenantName::parse(&c.tenant).map_err(|_| "of a tenant name this version refuses")?
    };
    let key = (name, tenant);
    let (Some(spec), Some(made)) = (specs.get(&key), identity.0.get(&key)) else {
        return Err("of a tenant or collector no longer configured");
    };
    if made.origin != c.origin {
        return Err("of a tenant whose base URL changed");
    }
    if c.settings.is_empty() {
        return Err(
            "of a collector with settings, kept by an older version under a digest this one cannot check",
        );
    }
    if made.settings != c.settings {
        return Err("of a collector whose settings changed");
    }
    let unreadable = "whose targets this version cannot read";
    let kept = name.read_kept(c.targets.get()).map_err(|_| unreadable)?;
    let configured: HashSet<_> = spec.targets.iter().collect();
    let mut targets = Vec::with_capacity(kept.len().min(spec.targets.len()));
    let mut unconfigured = 0;
    for k in kept {
        // A failure reason this version lacks makes the targets unreadable, as any other value.
        let last_error = (k.last_error.as_ref())
            .map(|e| UpstreamError::from_kept(e).ok_or(unreadable))
            .transpose()?;
        if !configured.contains(&k.target) {
            unconfigured += 1;
            continue;
        }
        targets.push(TargetState {
            target: k.target,
            data: k.data.map(|(d, at)| (Arc::new(d), at)),
            last_ok: k.last_ok,
            last_attempt: k.last_attempt,
            last_success: k.last_success,
            last_failure: k.last_failure,
            last_error,
            deferred: false,
            restored: true,
        });
    }
    report.unconfigured_targets += unconfigured;
    Ok((key, targets))
}

/// Reads the state in `dir` into `store` before the first run; logs what it did in one line
/// (and one warn line for a refused file) and records it in the series.
pub fn restore(
    dir: &Dir,
    store: &Store,
    specs: &[CollectorSpec],
    identity: &Identity,
    telemetry: &Telemetry,
) -> SnapshotRestored {
    let started = Instant::now();
    let (states, mut report) = read(dir, specs, identity);
    let read_took = started.elapsed().as_secs_f64();
    if let Some((_, refused)) = &report.found.refused {
        tracing::warn!(
            "the storage directory's state was refused, and the targets start cold: {refused}"
        );
    }
    report.targets = store.restore(states);
    let took = started.elapsed().as_secs_f64();
    telemetry.observe_storage(|f| {
        f.restore_seconds = Some(took);
        if let Some((problem, _)) = report.found.refused {
            f.refused(problem);
        }
    });
    if let Some(written_at) = report.found.written_at_text() {
        tracing::info!(
            path = %dir.file(TARGETS).display(),
            written_at,
            restored_targets = report.targets,
            unconfigured_targets = report.unconfigured_targets,
            dropped = report.found.dropped_words("collector"),
            took_seconds = took,
            read_seconds = read_took,
            "restored what the storage directory kept"
        );
    }
    report
}

/// What the checkpoints are made under, changed by a reload.
pub type Current = Latest<Identity>;

/// Writes a checkpoint every `every` until `shutdown`, then one last within [`AT_SHUTDOWN`].
/// A failed checkpoint is logged (one line, naming the file and the cause) and counted; the
/// next one tries again.
pub async fn run(
    dir: Arc<Dir>,
    (store, pacers): (Arc<Store>, Pacers),
    identity: Current,
    telemetry: Arc<Telemetry>,
    every: Duration,
    shutdown: CancellationToken,
) {
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            _ = ticker.tick() => {
                let write = once(&dir, (&store, &pacers), &identity, &telemetry);
                // A checkpoint under way finishes before the next starts: `write` is awaited.
                let _ = write.await;
            }
        }
    }
    let last = once(&dir, (&store, &pacers), &identity, &telemetry);
    if tokio::time::timeout(AT_SHUTDOWN, last).await.is_err() {
        tracing::warn!(
            path = %dir.file(TARGETS).display(),
            "the checkpoint at shutdown took longer than {AT_SHUTDOWN:?}: exiting without it; the previous checkpoint stays"
        );
    }
}

/// One checkpoint of what the store and the pacers know now, on a blocking thread: the
/// targets' file and the paces' file, each whole or nothing and each failing alone.
async fn once(
    dir: &Arc<Dir>,
    (store, pacers): (&Arc<Store>, &Pacers),
    identity: &Current,
    telemetry: &Arc<Telemetry>,
) -> Option<()> {
    let (dir, snapshot, identity, pacers) =
        (dir.clone(), store.snapshot(), identity.get(), pacers.get());
    let started = Instant::now();
    let (targets, paces) = tokio::task::spawn_blocking(move || {
        (
            write(&dir, &snapshot, &identity),
            paces::write(&dir, &pacers),
        )
    })
    .await
    .ok()?;
    let took = started.elapsed().as_secs_f64();
    let failed = |e: &StorageError| {
        tracing::warn!("checkpoint failed, the previous one stays: {e}");
        e.cause().unwrap_or(crate::storage::WriteCause::Io)
    };
    let causes: Vec<_> = [targets.as_ref().err(), paces.as_ref().err()]
        .into_iter()
        .flatten()
        .map(failed)
        .collect();
    telemetry.observe_storage(|f| {
        f.checkpoint_seconds = Some(took);
        // One checkpoint, counted once, by its first file's cause (each file has its line).
        if let Some(cause) = causes.first() {
            f.failed(*cause);
        }
        // The targets' file says when a restart's values date from; the paces' file adds its
        // size when it was written too (a failure of it is counted above).
        if let Ok(t) = &targets {
            let pace_bytes = paces.as_ref().map_or(0, |p| p.bytes);
            f.checkpoint_bytes = Some(t.bytes.saturating_add(pace_bytes));
            f.last_success = Some(
                t.written_at
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64()),
            );
        }
    });
    Some(())
}
