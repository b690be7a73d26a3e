//! Series of the migration collector.

use std::fmt;
use std::time::Duration;

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;

use super::model::Record;
use crate::collectors::{OwnerAnd, owned_table};
use crate::metrics::family::{GaugeTable, refreshed_gauges, refreshed_ones};
use crate::metrics::labels::{Owner, Value};

const GAUGES: &GaugeTable<Record> = &[
    (
        "mailhost_migration_messages",
        "Messages the migration has to move (messages.total).",
        None,
        |m| m.messages_total,
    ),
    (
        "mailhost_migration_messages_migrated",
        "Messages moved so far (messages.migrated).",
        None,
        |m| m.messages_migrated,
    ),
    (
        "mailhost_migration_size",
        "Size of the mail the migration has to move (bytes.total).",
        Some(Unit::Bytes),
        |m| m.bytes_total,
    ),
    (
        "mailhost_migration_migrated",
        "Size of the mail moved so far (bytes.migrated).",
        Some(Unit::Bytes),
        |m| m.bytes_migrated,
    ),
    (
        "mailhost_migration_errors",
        "Errors the migration met (errors).",
        None,
        |m| m.errors,
    ),
    (
        "mailhost_migration_started_timestamp",
        "When the migration started (started_at).",
        Some(Unit::Seconds),
        |m| m.started,
    ),
    (
        "mailhost_migration_updated_timestamp",
        "When the migration's statistics last changed (updated_at).",
        Some(Unit::Seconds),
        |m| m.updated,
    ),
];

/// Each migration with the code it is known by.
type Migrations<'a> = [(Owner, &'a String, &'a Record)];

pub fn encode(
    enc: &mut DescriptorEncoder,
    interval: Duration,
    migrations: &Migrations<'_>,
) -> fmt::Result {
    owned_table(enc, GAUGES, "migration", interval, migrations)?;
    refreshed_gauges(
        enc,
        "mailhost_migration_accounts",
        "Accounts of the migration by state (accounts.<state>; the total is their sum).",
        interval,
        &by_name(migrations, |m| &m.accounts, "state"),
    )?;
    let status: Vec<OwnerAnd> = migrations
        .iter()
        .filter_map(|(code, _, m)| {
            let status = Value::from(m.status.as_ref()?);
            Some(OwnerAnd::new(code, "migration", "status", status))
        })
        .collect();
    refreshed_ones(
        enc,
        "mailhost_migration_status",
        "The migration's status (status): 1 on the series of the current one.",
        interval,
        &status,
    )?;
    refreshed_gauges(
        enc,
        "mailhost_migration_aggregate",
        "Any other numeric leaf of the migration's aggregate statistics, by dotted path (depth 4 and 64 keys at most).",
        interval,
        &by_name(migrations, |m| &m.other, "key"),
    )
}

/// One sample per named figure that `pick` finds in each migration (its accounts by state, its
/// other numeric leaves by dotted path), the name labelled `label`.
fn by_name<'a>(
    migrations: &'a Migrations<'_>,
    pick: fn(&Record) -> &[(String, f64)],
    label: &'static str,
) -> Vec<(OwnerAnd<'a>, f64)> {
    migrations
        .iter()
        .flat_map(|(code, _, m)| {
            pick(m).iter().map(move |(name, n)| {
                let labels = OwnerAnd::new(code, "migration", label, Value::from(name));
                (labels, *n)
            })
        })
        .collect()
}
