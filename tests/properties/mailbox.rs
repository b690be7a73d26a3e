//! The email account record: any body renders as valid, finite exposition, and what the
//! properties found.

use proptest::prelude::*;
use serde_json::json;

use super::json::envelope;
use super::{Specs, check, config, one_each, render, rendered};

/// The fields the record is read from, so that generated records hit them often.
pub const MAILBOX: &[&str] = &[
    "quota",
    "quota_human",
    "max_email_quota",
    "vault_quota",
    "vault_quota_human",
    "messages",
    "vault_messages",
    "outbound_limit",
    "outbound_limit_status",
    "reset_outbound_limit_time",
    "lastauth",
    "lastauth_datetime",
    "archive",
    "archive_status",
    "password_expired",
    "email_address",
    "domain_name",
    "status",
    "otp",
    "force_otp",
    "domain_force_otp",
    "api_enabled",
    "smtp_disabled",
    "imap_disabled",
    "pop_disabled",
    "apply_allow_nets_webmail",
];

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_email_account_body_renders_as_valid_finite_exposition(
        bodies in prop::collection::vec(envelope(MAILBOX), 1..=3),
    ) {
        let specs = Specs::new(3);
        let (classic, openmetrics) = render(&[(&specs.mailbox, one_each(bodies))]);
        check(&classic, &openmetrics)?;
    }
}

#[test]
fn a_huge_quota_in_mib_does_not_become_an_infinite_byte_count() {
    let specs = Specs::new(1);
    let body = json!({"resources": [{"quota": 1e303, "max_email_quota": 1e308}]});
    let got = rendered(&specs.mailbox, vec![vec![body]]);
    assert!(got.is_ok(), "{}", got.unwrap_err());
}
