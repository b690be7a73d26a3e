//! A migration's stats: any body renders as valid, finite exposition, and what the properties
//! found.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::json::value;
use super::{Specs, check, config, one_each, render, rendered};

/// The fields the record is read from, so that generated records hit them often.
pub const MIGRATION: &[&str] = &[
    "status",
    "state",
    "accounts",
    "messages",
    "messages_total",
    "messages_migrated",
    "bytes",
    "size",
    "bytes_total",
    "bytes_migrated",
    "errors",
    "error_count",
    "started_at",
    "updated_at",
    "Odd Key",
    "odd_key",
];

/// A migration stats body: mostly `{aggregate: {...}}`.
pub fn stats_body() -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => super::json::record(MIGRATION).prop_map(|a| json!({"aggregate": a})),
        1 => value(),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_migration_stats_body_renders_as_valid_finite_exposition(
        bodies in prop::collection::vec(stats_body(), 1..=3),
    ) {
        let specs = Specs::new(3);
        let (classic, openmetrics) = render(&[(&specs.migration, one_each(bodies))]);
        check(&classic, &openmetrics)?;
    }
}

#[test]
fn aggregate_keys_equal_once_sanitised_add_no_duplicate_series() {
    let specs = Specs::new(1);
    let body = json!({"aggregate": {"Odd Key": 1, "odd_key": 2}});
    let got = rendered(&specs.migration, vec![vec![body]]);
    assert!(got.is_ok(), "{}", got.unwrap_err());
}
