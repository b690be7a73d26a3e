//! The dashboard record: any body renders as valid, finite exposition, and what the properties found.

use proptest::prelude::*;
use serde_json::json;

use super::json::envelope;
use super::{Specs, check, config, one_each, render, rendered};

/// The fields the record is read from, so that generated records hit them often.
pub const DASHBOARD: &[&str] = &[
    "daily_activity",
    "overview",
    "status_groups",
    "top_accounts_by_delivery_account",
    "top5_by_delivery_account",
];

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_dashboard_body_renders_as_valid_finite_exposition(
        bodies in prop::collection::vec(envelope(DASHBOARD), 1..=3),
    ) {
        let specs = Specs::new(3);
        let (classic, openmetrics) = render(&[(&specs.dashboard, one_each(bodies))]);
        check(&classic, &openmetrics)?;
    }
}

#[test]
fn a_top_list_naming_one_account_twice_adds_no_duplicate_series() {
    let specs = Specs::new(1);
    let body = json!({"resources": [{"top_accounts_by_delivery_account": [
        {"account_id": 1001, "total": 5},
        {"account_id": "1001", "total": 3},
    ]}]});
    let got = rendered(&specs.dashboard, vec![vec![body]]);
    assert!(got.is_ok(), "{}", got.unwrap_err());
}

#[test]
fn counts_summed_under_one_name_do_not_overflow_to_infinity() {
    let specs = Specs::new(1);
    let body = json!({"resources": [{"status_groups": {"Failed": 1e308, "failed": 1e308}}]});
    let got = rendered(&specs.dashboard, vec![vec![body]]);
    assert!(got.is_ok(), "{}", got.unwrap_err());
}
