//! The daily statistics and domains rank: any bodies render as valid, finite exposition, and what
//! the properties found.

use proptest::prelude::*;
use serde_json::json;

use super::json::envelope;
use super::{Specs, check, config, render, rendered};

/// The fields the record is read from, so that generated records hit them often.
pub const DAY: &[&str] = &[
    "date",
    "day",
    "start_date",
    "statuses",
    "counts",
    "delivered",
    "bounced",
    "Delivered",
    "domain",
    "domain_name",
    "name",
    "total",
];

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_daily_and_domains_rank_bodies_render_as_valid_finite_exposition(
        bodies in prop::collection::vec((envelope(DAY), envelope(DAY)), 1..=3),
    ) {
        let specs = Specs::new(3);
        let answers = bodies.into_iter().map(|(days, ranks)| vec![days, ranks]).collect();
        let (classic, openmetrics) = render(&[(&specs.daily, answers)]);
        check(&classic, &openmetrics)?;
    }
}

#[test]
fn a_second_record_of_the_same_domain_adds_no_duplicate_series() {
    let specs = Specs::new(1);
    // A day to read, so that the answer is read and the domains with it.
    let days = json!({"resources": [{"date": "2026-11-22", "delivered": 3}]});
    let ranks = json!({"resources": [
        {"domain": "shop.example", "delivered": 1},
        {"domain": "SHOP.example", "delivered": 2},
    ]});
    let got = rendered(&specs.daily, vec![vec![days, ranks]]);
    assert!(got.is_ok(), "{}", got.unwrap_err());
}
