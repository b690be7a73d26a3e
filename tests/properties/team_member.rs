//! The team member record: any body renders as valid, finite exposition, with the person's name
//! and address only where the config asks for them.

use proptest::prelude::*;
use serde_json::json;

use super::json::envelope;
use super::{Specs, check, config, one_each, render};

/// The fields the record is read from, so that generated records hit them often.
pub const TEAM_MEMBER: &[&str] = &[
    "status",
    "status_detail",
    "type",
    "otp",
    "api_access_blocked",
    "allow_nets",
    "permissions",
    "language",
    "customer_code",
    "is_customer_disabled",
    "is_customer_trial",
    "is_customer_reseller",
    "can_access_delivery",
    "fullname",
    "email_address",
];

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_team_member_body_renders_as_valid_finite_exposition(
        bodies in prop::collection::vec(envelope(TEAM_MEMBER), 1..=3),
    ) {
        let specs = Specs::new(3);
        let (classic, openmetrics) = render(&[(&specs.team_member, one_each(bodies))]);
        check(&classic, &openmetrics)?;
    }
}

#[test]
fn the_email_address_is_a_label_only_when_the_config_asks() {
    let body = json!({"resources": [{"email_address": "ada@example.com", "fullname": "Ada"}]});
    let specs = Specs::new(1);
    let (with, _) = render(&[(&specs.team_member, vec![vec![body.clone()]])]);
    assert!(with.contains("email_address=\"ada@example.com\""), "{with}");
    let without = super::spec_from("  team_member:\n    team_members: [T000000001]\n");
    let (text, _) = render(&[(&without, vec![vec![body]])]);
    assert!(
        !text.contains("ada@example.com") && !text.contains("Ada"),
        "{text}"
    );
    assert!(
        text.contains("mailhost_team_member_info{team_member=\"T000000001\""),
        "{text}"
    );
}
