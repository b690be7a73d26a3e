//! From snapshot to metric families: the names, help texts and labels of every series that
//! comes from the snapshot. Series are rebuilt from the snapshot on every render, so a value
//! that vanished upstream vanishes here too.

mod delivery_account;
mod mailbox;
mod migration;
mod tracemail;

use std::time::Duration;

use crate::collector::CollectorName;
use crate::collector::{Target, TargetData};
use crate::exposition::{Family, Unit};
use crate::snapshot::{CollectorState, Snapshot};

/// Every family of a snapshot: exporter health first, then each collector's series.
pub fn families(snapshot: &Snapshot) -> Vec<Family> {
    let mut out = health(snapshot);
    for c in snapshot.collectors.values() {
        let interval = c.schedule.interval;
        match c.name {
            CollectorName::DeliveryAccount => {
                let items = current(c, |_, d| match d {
                    TargetData::DeliveryAccount(x) => Some(x),
                    _ => None,
                });
                out.extend(delivery_account::families(interval, &items));
            }
            CollectorName::TracemailDashboard => {
                let views: Vec<_> = c
                    .targets
                    .iter()
                    .filter_map(|t| match (&t.target, t.data.as_ref().map(|(d, _)| d)) {
                        (Target::DashboardView(v), Some(TargetData::Dashboard(x))) => Some((v, x)),
                        _ => None,
                    })
                    .collect();
                out.extend(tracemail::dashboard_families(interval, &views));
            }
            CollectorName::TracemailDaily => {
                let items = current(c, |_, d| match d {
                    TargetData::Daily(x) => Some(x),
                    _ => None,
                });
                out.extend(tracemail::daily_families(interval, &items));
            }
            CollectorName::Migration => {
                let items = current(c, |_, d| match d {
                    TargetData::Migration(x) => Some(x),
                    _ => None,
                });
                out.extend(migration::families(interval, &items));
            }
            CollectorName::Mailbox => {
                let items = current(c, |_, d| match d {
                    TargetData::Mailbox(x) => Some(x),
                    _ => None,
                });
                out.extend(mailbox::families(interval, &items));
            }
        }
    }
    out
}

/// The current data of a collector's targets, with their `target` label value.
fn current<'a, T>(
    c: &'a CollectorState,
    pick: impl Fn(&Target, &'a TargetData) -> Option<&'a T>,
) -> Vec<(String, &'a T)> {
    c.targets
        .iter()
        .filter_map(|t| {
            let (data, _) = t.data.as_ref()?;
            pick(&t.target, data).map(|x| (t.target.to_string(), x))
        })
        .collect()
}

type Getter<T> = fn(&T) -> Option<f64>;

/// A table of plain gauges: name (unit added by [`Unit`]), help naming the source field, value.
type GaugeTable<T> = [(&'static str, &'static str, Option<Unit>, Getter<T>)];

/// One family per row of `table`, one sample per item, labelled `label="<item id>"`.
fn table_families<T>(
    table: &GaugeTable<T>,
    interval: Duration,
    label: &'static str,
    items: &[(String, &T)],
) -> Vec<Family> {
    table
        .iter()
        .map(|(name, help, unit, get)| {
            let mut f = gauge(name, help, interval);
            if let Some(u) = unit {
                f = f.unit(*u);
            }
            for (id, item) in items {
                if let Some(v) = get(item) {
                    f.push(vec![(label, id.clone())], v);
                }
            }
            f
        })
        .collect()
}

/// A gauge family with the "refreshed" sentence appended to its help.
fn gauge(name: &str, help: &str, interval: Duration) -> Family {
    Family::gauge(name, format!("{help} {}", refreshed(interval)))
}

/// The sentence every business metric's help ends with.
fn refreshed(interval: Duration) -> String {
    format!(
        "Refreshed in the background every {}.",
        humantime::format_duration(interval)
    )
}

fn health(snapshot: &Snapshot) -> Vec<Family> {
    let mut up = Family::gauge(
        "mailhost_up",
        "1 when the last run of every collector succeeded (every target answered), else 0.",
    );
    let all_ok = snapshot
        .collectors
        .values()
        .all(|c| c.last_run.is_some_and(|r| r.success));
    up.push(vec![], if all_ok { 1.0 } else { 0.0 });

    let mut success = Family::gauge(
        "mailhost_collector_success",
        "1 when the collector's last run succeeded for every target, else 0.",
    );
    let mut duration = Family::gauge(
        "mailhost_collector_duration",
        "How long the collector's last run took.",
    )
    .unit(Unit::Seconds);
    let mut interval = Family::gauge(
        "mailhost_collector_interval",
        "How often the collector runs (its configured interval); data older than a few intervals is stale.",
    )
    .unit(Unit::Seconds);
    let mut last_success = Family::gauge(
        "mailhost_collector_last_success_timestamp",
        "When the collector last finished a run in which every target succeeded.",
    )
    .unit(Unit::Seconds);
    let mut target_success = Family::gauge(
        "mailhost_target_success",
        "1 when the last attempt to fetch this target succeeded, else 0.",
    );
    let mut target_last_success = Family::gauge(
        "mailhost_target_last_success_timestamp",
        "When this target was last fetched successfully; time() minus this is the age of its values.",
    )
    .unit(Unit::Seconds);
    for c in snapshot.collectors.values() {
        let collector = || vec![("collector", c.name.as_str().to_owned())];
        interval.push(collector(), c.schedule.interval.as_secs_f64());
        if let Some(run) = c.last_run {
            success.push(collector(), if run.success { 1.0 } else { 0.0 });
            duration.push(collector(), run.duration.as_secs_f64());
        }
        if let Some(ts) = c.last_success {
            last_success.push(collector(), seconds(ts));
        }
        for t in &c.targets {
            let labels = || {
                vec![
                    ("collector", c.name.as_str().to_owned()),
                    ("target", t.target.to_string()),
                ]
            };
            if let Some(ok) = t.last_ok {
                target_success.push(labels(), if ok { 1.0 } else { 0.0 });
            }
            if let Some(ts) = t.last_success {
                target_last_success.push(labels(), seconds(ts));
            }
        }
    }
    vec![
        up,
        success,
        duration,
        interval,
        last_success,
        target_success,
        target_last_success,
    ]
}

fn seconds(ts: jiff::Timestamp) -> f64 {
    ts.as_millisecond() as f64 / 1000.0
}
