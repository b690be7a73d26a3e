//! Series of the migration collector.

use std::time::Duration;

use super::{GaugeTable, gauge, table_families};
use crate::exposition::{Family, Unit};
use crate::upstream::model::Migration;

const GAUGES: &GaugeTable<Migration> = &[
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

pub fn families(interval: Duration, migrations: &[(String, &Migration)]) -> Vec<Family> {
    let mut out = table_families(GAUGES, interval, "migration", migrations);
    let mut accounts = gauge(
        "mailhost_migration_accounts",
        "Accounts of the migration by state (accounts.<state>; the total is their sum).",
        interval,
    );
    let mut status = gauge(
        "mailhost_migration_status",
        "The migration's status (status): 1 on the series of the current one.",
        interval,
    );
    let mut other = gauge(
        "mailhost_migration_aggregate",
        "Any other numeric leaf of the migration's aggregate statistics, by dotted path (depth 4 and 64 keys at most).",
        interval,
    );
    for (code, m) in migrations {
        for (state, n) in &m.accounts {
            accounts.push(
                vec![("migration", code.clone()), ("state", state.clone())],
                *n,
            );
        }
        if let Some(s) = &m.status {
            status.push(
                vec![("migration", code.clone()), ("status", s.clone())],
                1.0,
            );
        }
        for (key, n) in &m.other {
            other.push(vec![("migration", code.clone()), ("key", key.clone())], *n);
        }
    }
    out.extend([accounts, status, other]);
    out
}
