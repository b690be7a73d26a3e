//! The storage directory's series (`--storage.path`): its checkpoints, what was restored and
//! what was refused. None of them is written while the storage is off.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

use crate::storage::{Problem, WriteCause};

/// What the storage did, as its series show it.
#[derive(Clone, Debug, Default)]
pub struct StorageFigures {
    /// The last checkpoint's duration, in seconds, whether it succeeded or not.
    pub checkpoint_seconds: Option<f64>,
    /// Size of the last state written.
    pub checkpoint_bytes: Option<u64>,
    /// When a checkpoint last succeeded, in seconds since the epoch.
    pub last_success: Option<f64>,
    /// Failed checkpoints by cause, in the order of [`WriteCause::ALL`].
    pub failures: [u64; WriteCause::ALL.len()],
    /// How long reading and restoring the state took at start.
    pub restore_seconds: Option<f64>,
    /// State files refused at start, by problem, in the order of [`Problem::ALL`].
    pub refused: [u64; Problem::ALL.len()],
    /// Tenants whose learned pace was restored at start.
    pub restored_paces: Option<u64>,
}

impl StorageFigures {
    /// Counts a failed checkpoint.
    pub fn failed(&mut self, cause: WriteCause) {
        if let Some(i) = WriteCause::ALL.iter().position(|c| *c == cause) {
            self.failures[i] += 1;
        }
    }

    /// Counts a state file refused at start.
    pub fn refused(&mut self, problem: Problem) {
        if let Some(i) = Problem::ALL.iter().position(|p| *p == problem) {
            self.refused[i] += 1;
        }
    }
}

/// The storage's series; off (nothing written) until [`StorageSeries::enable`].
#[derive(Clone, Debug, Default)]
pub struct StorageSeries(Arc<Mutex<Option<StorageFigures>>>);

impl StorageSeries {
    /// Nothing here panics while holding the lock; figures are plain values either way.
    fn lock(&self) -> MutexGuard<'_, Option<StorageFigures>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The storage is on: its series are written from now on.
    pub fn enable(&self) {
        self.lock().get_or_insert_with(StorageFigures::default);
    }

    /// Changes the figures, if the storage is on.
    pub fn update(&self, change: impl FnOnce(&mut StorageFigures)) {
        if let Some(figures) = self.lock().as_mut() {
            change(figures);
        }
    }

    pub fn figures(&self) -> Option<StorageFigures> {
        self.lock().clone()
    }

    /// A gauge without labels, left out while it has no sample.
    fn gauge<M: EncodeMetric>(
        encoder: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        unit: Option<&Unit>,
        sample: Option<M>,
    ) -> std::fmt::Result {
        let Some(sample) = sample else {
            return Ok(());
        };
        sample.encode(encoder.encode_descriptor(name, help, unit, MetricType::Gauge)?)
    }

    /// A counter with one sample per value of `label`.
    fn by_label(
        encoder: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        label: &str,
        samples: impl Iterator<Item = (&'static str, u64)>,
    ) -> std::fmt::Result {
        let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
        for (value, count) in samples {
            ConstCounter::new(count).encode(metric.encode_family(&[(label, value)])?)?;
        }
        Ok(())
    }
}

impl Collector for StorageSeries {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let Some(f) = self.figures() else {
            return Ok(());
        };
        let enc = &mut encoder;
        let seconds = Some(&Unit::Seconds);
        Self::gauge(
            enc,
            "mailhost_storage_checkpoint_duration",
            "How long the last checkpoint of the storage directory (--storage.path) took, fsyncs included, whether it succeeded or not.",
            seconds,
            f.checkpoint_seconds.map(ConstGauge::new),
        )?;
        Self::gauge(
            enc,
            "mailhost_storage_checkpoint",
            "Size of the state the last successful checkpoint wrote.",
            Some(&Unit::Bytes),
            f.checkpoint_bytes
                .map(|b| ConstGauge::new(i64::try_from(b).unwrap_or(i64::MAX))),
        )?;
        Self::gauge(
            enc,
            "mailhost_storage_last_checkpoint_success_timestamp",
            "When a checkpoint of the storage directory last succeeded: a restart now restores what was known then.",
            seconds,
            f.last_success.map(ConstGauge::new),
        )?;
        Self::by_label(
            enc,
            "mailhost_storage_checkpoint_failures",
            "Checkpoints that failed, by cause (no_space, not_writable, vanished, too_large, encode, invalid_name, io); the previous state file stays as it was and the exporter goes on serving from memory.",
            "cause",
            WriteCause::ALL
                .iter()
                .zip(f.failures)
                .map(|(c, n)| (c.as_str(), n)),
        )?;
        Self::gauge(
            enc,
            "mailhost_storage_restore_duration",
            "How long reading the storage directory and restoring what belongs to the current config took at start.",
            seconds,
            f.restore_seconds.map(ConstGauge::new),
        )?;
        Self::gauge(
            enc,
            "mailhost_storage_restored_paces",
            "Tenants whose pacer started at the pace an earlier process learned (pace.json: the rate known to work, pauses and targets' own back-offs still in force), rather than from the configured rate or a slow start.",
            None,
            f.restored_paces
                .map(|n| ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX))),
        )?;
        Self::by_label(
            enc,
            "mailhost_storage_state_refused",
            "State files refused at start, by problem (empty, truncated, corrupt, newer_version, older_version, too_large, unreadable): that part started cold; the warn line names the file and why.",
            "problem",
            Problem::ALL
                .iter()
                .zip(f.refused)
                .map(|(p, n)| (p.as_str(), n)),
        )
    }
}
