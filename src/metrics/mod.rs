//! From snapshot to exposition: the one rendering seam, [`render`]. The snapshot's series are
//! emitted by a `prometheus-client` [`Collector`] as const metrics, rebuilt from the snapshot on
//! every render, so a value that vanished upstream vanishes here too. The model writes
//! OpenMetrics; the classic text is rewritten from that same text ([`classic`]). Self-metrics,
//! which change between renders, are in [`self_metrics`].

mod classic;
pub mod family;
pub mod format;
pub mod labels;
pub mod process;
pub mod self_metrics;

use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::encoding::text::encode_registry;
use prometheus_client::registry::{Registry, Unit};

use crate::collectors::{CollectorName, Target, TargetData};
use crate::engine::snapshot::{CollectorState, Snapshot};
use crate::tenant::TenantName;
use family::{counters, flag, gauges, single};
use labels::{CollectorLabels, TargetFailureLabels, TargetLabels, TenantLabel, Value};

pub use format::{EOF, Format};

/// A snapshot's series in both formats, without `# EOF`, so that the self-metrics can follow.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Exposition {
    pub classic: String,
    pub openmetrics: String,
}

impl Exposition {
    pub fn text(&self, format: Format) -> &str {
        match format {
            Format::Classic => &self.classic,
            Format::OpenMetrics => &self.openmetrics,
        }
    }
}

/// A part of the exposition that is rendered, stored and served on its own: no metric family
/// spans two sections, so any selection of them, in this order, is a valid exposition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Section {
    /// The exporter's health: `mailhost_up` and the collector and target health series of every
    /// collector.
    Health,
    /// The series one collector produces from the provider's answers.
    Collector(CollectorName),
}

/// The sections of a snapshot, in the order they are served.
pub fn sections(snapshot: &Snapshot) -> Vec<Section> {
    std::iter::once(Section::Health)
        .chain(snapshot.collectors().into_iter().map(Section::Collector))
        .collect()
}

/// Renders every series of a snapshot: exporter health first, then each collector's series.
/// Pure: the same snapshot gives the same text, and it is the concatenation of
/// [`stream_section`] over [`sections`].
pub fn render(snapshot: &Arc<Snapshot>) -> Exposition {
    let mut whole = Exposition::default();
    for section in sections(snapshot) {
        stream_section(snapshot, section, &mut whole);
    }
    whole
}

/// Where a rendering goes: the text of each format, piece by piece, in order.
pub trait Sink {
    fn write(&mut self, format: Format, text: &str);
}

impl Sink for Exposition {
    fn write(&mut self, format: Format, text: &str) {
        match format {
            Format::Classic => self.classic.push_str(text),
            Format::OpenMetrics => self.openmetrics.push_str(text),
        }
    }
}

/// Renders one section of a snapshot into `sink` as the text is produced: both formats come out
/// a piece at a time, so a section of a hundred megabytes is never held whole here (the store
/// gzips the pieces as they come). Takes the snapshot shared because the collector that the
/// encoder calls must own what it reads.
pub fn stream_section(snapshot: &Arc<Snapshot>, section: Section, sink: &mut dyn Sink) {
    encode(snapshot, section, false, sink);
}

/// The answer of `/probe`: a snapshot holding one target (in each account collector of its
/// tenant) as its own series and its target health series, without the collector-wide health
/// (`mailhost_up`, `mailhost_collector_*`), which belong to `/metrics`.
pub fn render_probe(snapshot: &Arc<Snapshot>) -> Exposition {
    let mut whole = Exposition::default();
    for section in sections(snapshot) {
        encode(snapshot, section, true, &mut whole);
    }
    whole
}

/// OpenMetrics text gathered up to this size before it goes to the sink and the classic
/// rewriting.
const PIECE_BYTES: usize = 64 * 1024;

/// The encoder's output cut into pieces: each goes to the sink as OpenMetrics, and through the
/// classic rewriting as classic text.
struct Pieces<'a> {
    buf: String,
    rewriter: classic::Rewriter,
    sink: &'a mut dyn Sink,
}

impl Pieces<'_> {
    fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        self.sink.write(Format::OpenMetrics, &self.buf);
        let mut classic = String::with_capacity(self.buf.len() + 256);
        self.rewriter.push(&self.buf, &mut |s| classic.push_str(s));
        self.sink.write(Format::Classic, &classic);
        self.buf.clear();
    }

    fn finish(mut self) {
        self.flush();
        let mut classic = String::new();
        self.rewriter.finish(&mut |s| classic.push_str(s));
        self.sink.write(Format::Classic, &classic);
    }
}

impl fmt::Write for Pieces<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.buf.push_str(s);
        if self.buf.len() >= PIECE_BYTES {
            self.flush();
        }
        Ok(())
    }
}

/// One section of `snapshot` into `sink` (`targets_only`: see [`SnapshotCollector`]).
fn encode(snapshot: &Arc<Snapshot>, section: Section, targets_only: bool, sink: &mut dyn Sink) {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(SnapshotCollector {
        snapshot: Arc::clone(snapshot),
        section,
        targets_only,
    }));
    let mut pieces = Pieces {
        buf: String::with_capacity(PIECE_BYTES + 1024),
        rewriter: classic::Rewriter::default(),
        sink,
    };
    // Writing into the pieces cannot fail, and nothing in the collector fails on its own.
    let _ = encode_registry(&mut pieces, &registry);
    // A collector's families written as text follow its other families.
    if let Section::Collector(name) = section {
        let _ = name.encode_text(items(snapshot, name), &mut pieces);
    }
    pieces.finish();
}

/// The current data of every tenant's targets of a collector, with their tenant.
fn items(
    snapshot: &Snapshot,
    name: CollectorName,
) -> impl Iterator<Item = (&TenantName, &Target, &TargetData)> {
    snapshot.of_collector(name).flat_map(|c| {
        c.targets.iter().filter_map(|t| {
            let (data, _) = t.data.as_ref()?;
            Some((&c.tenant, &t.target, &**data))
        })
    })
}

/// One section of the snapshot's series as const metrics, built at encoding time.
#[derive(Debug)]
struct SnapshotCollector {
    snapshot: Arc<Snapshot>,
    section: Section,
    /// The health section holds only the per-target series (for `/probe`).
    targets_only: bool,
}

impl Collector for SnapshotCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let snapshot = &self.snapshot;
        let enc = &mut encoder;
        let name = match self.section {
            Section::Health if self.targets_only => return target_health(enc, snapshot),
            Section::Health => return health(enc, snapshot),
            Section::Collector(name) => name,
        };
        // Every tenant's collector of the collector: a family holds all tenants' samples.
        let Some(first) = snapshot.of_collector(name).next() else {
            return Ok(());
        };
        name.encode(enc, first.schedule.interval, items(snapshot, name))
    }
}

fn health(enc: &mut DescriptorEncoder, snapshot: &Snapshot) -> fmt::Result {
    let all_ok = snapshot
        .collectors
        .values()
        .all(|c| c.last_run.is_some_and(|r| r.success));
    single(
        enc,
        "mailhost_up",
        "1 when the last run of every collector succeeded (every target answered), else 0.",
        None,
        flag(all_ok),
    )?;
    let collectors: Vec<(CollectorLabels, &CollectorState)> = snapshot
        .collectors
        .values()
        .map(|c| {
            let labels = CollectorLabels {
                tenant: TenantLabel(c.tenant.clone()),
                collector: c.name.as_str(),
            };
            (labels, &**c)
        })
        .collect();
    let seconds_unit = Some(&Unit::Seconds);
    gauges(
        enc,
        "mailhost_collector_success",
        "1 when, after the collector's last run, the last attempt of every target succeeded (targets deferred by the tenant's rate limit keep theirs), else 0.",
        None,
        collectors
            .iter()
            .filter_map(|(l, c)| c.last_run.map(|r| (l, flag(r.success)))),
    )?;
    gauges(
        enc,
        "mailhost_collector_duration",
        "How long the collector's last run took.",
        seconds_unit,
        collectors
            .iter()
            .filter_map(|(l, c)| c.last_run.map(|r| (l, r.duration.as_secs_f64()))),
    )?;
    gauges(
        enc,
        "mailhost_collector_interval",
        "How often the collector runs (its configured interval); data older than a few intervals is stale.",
        seconds_unit,
        collectors
            .iter()
            .map(|(l, c)| (l, c.schedule.interval.as_secs_f64())),
    )?;
    gauges(
        enc,
        "mailhost_collector_deferred_targets",
        "Targets whose latest run did not reach them before its deadline because of the tenant's rate limit: not failed, they keep their values and go first in the next run.",
        None,
        collectors
            .iter()
            .filter_map(|(l, c)| c.last_run.map(|_| (l, c.deferred as f64))),
    )?;
    gauges(
        enc,
        "mailhost_storage_restored_targets",
        "Targets whose values were restored at start from the storage directory (--storage.path) and that this process has not attempted yet: served with the time they were fetched; absent for collectors nothing was restored into.",
        None,
        collectors
            .iter()
            .filter(|(_, c)| c.restored)
            .map(|(l, c)| (l, c.still_restored() as f64)),
    )?;
    gauges(
        enc,
        "mailhost_collector_last_success_timestamp",
        "When the collector last finished a run in which every target succeeded.",
        seconds_unit,
        collectors
            .iter()
            .filter_map(|(l, c)| c.last_success.map(|ts| (l, seconds(ts)))),
    )?;
    counters(
        enc,
        "mailhost_collector_restarts",
        "Times the collector's loop panicked and was started again after a back-off (from 1 s, doubling while it keeps panicking, at most its interval); its targets keep their values until max_age meanwhile, and the log has the panic.",
        collectors.iter().map(|(l, c)| (l, c.restarts)),
    )?;
    target_health(enc, snapshot)
}

/// Each target's health series.
fn target_health(enc: &mut DescriptorEncoder, snapshot: &Snapshot) -> fmt::Result {
    let seconds_unit = Some(&Unit::Seconds);
    let targets: Vec<(TargetLabels, &crate::engine::snapshot::TargetState)> = snapshot
        .collectors
        .values()
        .flat_map(|c| {
            c.targets.iter().map(|t| {
                let labels = TargetLabels {
                    tenant: TenantLabel(c.tenant.clone()),
                    collector: c.name.as_str(),
                    target: Value::from(t.target.to_string()),
                };
                (labels, &**t)
            })
        })
        .collect();
    gauges(
        enc,
        "mailhost_target_success",
        "1 when the last attempt to fetch this target succeeded, else 0.",
        None,
        targets
            .iter()
            .filter_map(|(l, t)| t.last_ok.map(|ok| (l, flag(ok)))),
    )?;
    gauges(
        enc,
        "mailhost_target_last_success_timestamp",
        "When this target was last fetched successfully; time() minus this is the age of its values.",
        seconds_unit,
        targets
            .iter()
            .filter_map(|(l, t)| t.last_success.map(|ts| (l, seconds(ts)))),
    )?;
    // Present while the target fails, one series per target: its reason from the fixed
    // vocabulary, never an error's text.
    let failures: Vec<TargetFailureLabels> = targets
        .iter()
        .filter(|(_, t)| t.last_ok == Some(false))
        .filter_map(|(l, t)| {
            t.last_error.as_ref().map(|e| TargetFailureLabels {
                tenant: l.tenant.clone(),
                collector: l.collector,
                target: l.target.clone(),
                reason: e.reason,
            })
        })
        .collect();
    gauges(
        enc,
        "mailhost_target_failure_info",
        "Why this target's last attempt failed, as a reason of the fixed vocabulary (timeout, connect, unauthorized, forbidden, not_found, rate_limited, server_error, client_error, decode, circuit_open); present only while the target fails, one series per target; the value is always 1.",
        None,
        failures.iter().map(|l| (l, 1.0)),
    )?;
    gauges(
        enc,
        "mailhost_target_last_failure_timestamp",
        "When an attempt to fetch this target last failed.",
        seconds_unit,
        targets
            .iter()
            .filter_map(|(l, t)| t.last_failure.map(|ts| (l, seconds(ts)))),
    )
}

fn seconds(ts: jiff::Timestamp) -> f64 {
    ts.as_millisecond() as f64 / 1000.0
}

/// Asserts that `text` holds every one of `lines`, naming the first missing one.
#[cfg(test)]
pub(crate) fn assert_holds(text: &str, lines: &[&str]) {
    for line in lines {
        assert!(text.contains(line), "{line} missing in\n{text}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::collectors::delivery_account::Record as DeliveryAccount;

    #[test]
    fn values_are_written_as_both_formats_read_them_and_non_finite_ones_are_left_out() {
        let spec = crate::engine::spec::fixtures::accounts(&[1], Duration::from_secs(60));
        let account = DeliveryAccount {
            remaining_messages: Some(-3.0),
            plan_messages_limit: Some(0.25),
            plan_messages_used: Some(1e300),
            messages_sent: Some(1.5e-9),
            extra_messages_total: Some(f64::INFINITY),
            remaining_extra_messages_bought: Some(f64::NAN),
            plan_expiration: Some(1_700_000_000.0),
            ..DeliveryAccount::default()
        };
        let mut snapshot = Snapshot::default();
        snapshot.apply_run(
            &spec,
            vec![(
                Target::DeliveryAccount(1),
                Ok(TargetData::DeliveryAccount(account)),
            )],
            Duration::ZERO,
            jiff::Timestamp::from_second(1_795_334_400).unwrap(),
        );
        let e = render(&Arc::new(snapshot));
        for text in [&e.classic, &e.openmetrics] {
            assert_holds(
                text,
                &[
                    "mailhost_delivery_remaining_messages{account_id=\"1\"} -3.0\n",
                    "mailhost_delivery_plan_messages_limit{account_id=\"1\"} 0.25\n",
                    "mailhost_delivery_plan_messages_used{account_id=\"1\"} 1e300\n",
                    "mailhost_delivery_messages_sent{account_id=\"1\"} 1.5e-9\n",
                    "mailhost_delivery_plan_expiration_timestamp_seconds{account_id=\"1\"} 1700000000.0\n",
                ],
            );
            // Nothing to show, so no family either.
            assert!(!text.contains("mailhost_delivery_extra_messages"), "{text}");
            assert!(!text.contains("mailhost_delivery_remaining_extra_messages"));
        }
    }

    #[test]
    fn ten_thousand_failing_targets_have_one_failure_reason_series_each_gone_at_success() {
        use crate::collectors::delivery_account::fixtures::answered;
        use crate::engine::spec::fixtures::accounts;
        use crate::upstream::error::{FailureReason, UpstreamError};
        let ids: Vec<i32> = (1..=10_000).collect();
        let spec = accounts(&ids, Duration::from_secs(60));
        let t0 = jiff::Timestamp::from_second(1_795_334_400).unwrap();
        let mut snapshot = Snapshot::default();
        // Every target fails, with one of several reasons, in two runs that change the reason:
        // still one series per target, with the latest reason.
        for (run, reasons) in [
            (0, [FailureReason::Timeout, FailureReason::ServerError]),
            (1, [FailureReason::Decode, FailureReason::NotFound]),
        ] {
            let results = ids
                .iter()
                .map(|&id| {
                    let reason = reasons[usize::try_from(id).unwrap() % 2];
                    (
                        Target::DeliveryAccount(id),
                        Err(UpstreamError::new(reason, "x")),
                    )
                })
                .collect();
            snapshot.apply_run(
                &spec,
                results,
                Duration::ZERO,
                t0 + jiff::SignedDuration::from_secs(run),
            );
        }
        let text = render(&Arc::new(snapshot.clone())).classic;
        let info: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("mailhost_target_failure_info{"))
            .collect();
        assert_eq!(info.len(), ids.len());
        let targets: std::collections::HashSet<&str> = info
            .iter()
            .map(|l| l.split(",reason=").next().unwrap())
            .collect();
        assert_eq!(targets.len(), ids.len(), "one series per target");
        assert_holds(
            &text,
            &[
                "mailhost_target_failure_info{collector=\"delivery_account\",target=\"2\",reason=\"decode\"} 1.0",
                "mailhost_target_last_failure_timestamp_seconds{collector=\"delivery_account\",target=\"1\"} 1795334401.0",
            ],
        );
        // One success: its series goes, the others stay.
        snapshot.apply_run(&spec, answered(&[(2, 1.0)]), Duration::ZERO, t0);
        let text = render(&Arc::new(snapshot)).classic;
        assert!(!text.contains("target=\"2\",reason="));
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("mailhost_target_failure_info{"))
                .count(),
            ids.len() - 1
        );
    }

    #[test]
    fn an_empty_snapshot_renders_only_the_up_series_in_both_formats() {
        let e = render(&Arc::new(Snapshot::default()));
        assert_eq!(
            e.classic,
            "# HELP mailhost_up 1 when the last run of every collector succeeded (every target answered), else 0.\n\
             # TYPE mailhost_up gauge\nmailhost_up 1.0\n"
        );
        assert_eq!(e.openmetrics, e.classic, "no counter, no unit: one text");
        assert!(!e.openmetrics.contains("# EOF"));
    }
}
