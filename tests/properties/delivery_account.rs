//! The Delivery account record: any body renders as valid, finite exposition.

use proptest::prelude::*;

use super::json::envelope;
use super::{Specs, check, config, one_each, render};

/// The fields the record is read from, so that generated records hit them often.
pub const DELIVERY: &[&str] = &[
    "remaining_messages",
    "plan_messages_limit",
    "plan_messages_used",
    "messages_sent",
    "extra_messages_total",
    "remaining_extra_messages_bought",
    "status",
    "domains_count",
    "domains",
    "ignore_suppression_list",
    "plan_expiration_date",
    "next_renewal_date",
    "last_renewal_date",
    "username",
    "plan",
    "type",
    "status_detail",
];

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_delivery_account_body_renders_as_valid_finite_exposition(
        bodies in prop::collection::vec(envelope(DELIVERY), 1..=3),
    ) {
        let specs = Specs::new(3);
        let (classic, openmetrics) = render(&[(&specs.delivery, one_each(bodies))]);
        check(&classic, &openmetrics)?;
    }
}
