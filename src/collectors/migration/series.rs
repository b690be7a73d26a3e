//! Series of the migration collector.

use std::fmt;
use std::time::Duration;

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};
use prometheus_client::registry::Unit;

use super::model::Record;
use crate::collectors::owned_table;
use crate::metrics::family::{GaugeTable, refreshed_gauges, refreshed_ones};
use crate::metrics::labels::{Owner, TenantLabel, Value};

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
    encode_accounts(enc, interval, migrations)?;
    encode_status(enc, interval, migrations)?;
    encode_other(enc, interval, migrations)
}

/// One sample per named figure that `pick` finds in each migration, labelled by `label`.
fn by_name<L>(
    migrations: &Migrations<'_>,
    pick: fn(&Record) -> &[(String, f64)],
    label: impl Fn(&Owner, &String) -> L,
) -> Vec<(L, f64)> {
    migrations
        .iter()
        .flat_map(|(code, _, m)| pick(m).iter().map(|(name, n)| (label(code, name), *n)))
        .collect()
}

/// Each migration's accounts by state.
fn encode_accounts(
    enc: &mut DescriptorEncoder,
    interval: Duration,
    migrations: &Migrations<'_>,
) -> fmt::Result {
    let accounts = by_name(
        migrations,
        |m| &m.accounts,
        |code, state| MigrationStateLabels {
            tenant: code.tenant.clone(),
            migration: code.id.clone(),
            state: Value::from(state),
        },
    );
    refreshed_gauges(
        enc,
        "mailhost_migration_accounts",
        "Accounts of the migration by state (accounts.<state>; the total is their sum).",
        interval,
        &accounts,
    )
}

/// Each migration's current status.
fn encode_status(
    enc: &mut DescriptorEncoder,
    interval: Duration,
    migrations: &Migrations<'_>,
) -> fmt::Result {
    let status: Vec<MigrationStatusLabels> = migrations
        .iter()
        .filter_map(|(code, _, m)| {
            m.status.as_ref().map(|s| MigrationStatusLabels {
                tenant: code.tenant.clone(),
                migration: code.id.clone(),
                status: Value::from(s),
            })
        })
        .collect();
    refreshed_ones(
        enc,
        "mailhost_migration_status",
        "The migration's status (status): 1 on the series of the current one.",
        interval,
        &status,
    )
}

/// Each migration's other numeric leaves, by dotted path.
fn encode_other(
    enc: &mut DescriptorEncoder,
    interval: Duration,
    migrations: &Migrations<'_>,
) -> fmt::Result {
    let other = by_name(
        migrations,
        |m| &m.other,
        |code, key| MigrationKeyLabels {
            tenant: code.tenant.clone(),
            migration: code.id.clone(),
            key: Value::from(key),
        },
    );
    refreshed_gauges(
        enc,
        "mailhost_migration_aggregate",
        "Any other numeric leaf of the migration's aggregate statistics, by dotted path (depth 4 and 64 keys at most).",
        interval,
        &other,
    )
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct MigrationStateLabels {
    #[prometheus(flatten)]
    pub tenant: TenantLabel,
    pub migration: Value,
    pub state: Value,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct MigrationStatusLabels {
    #[prometheus(flatten)]
    pub tenant: TenantLabel,
    pub migration: Value,
    pub status: Value,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct MigrationKeyLabels {
    #[prometheus(flatten)]
    pub tenant: TenantLabel,
    pub migration: Value,
    pub key: Value,
}
