//! Series of the team member collector.

use std::fmt;
use std::time::Duration;

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, LabelSetEncoder};

use super::model::Record;
use crate::collectors::{InfoLabels, owned_table};
use crate::metrics::family::{GaugeTable, refreshed_ones};
use crate::metrics::labels::{Borrowed, Owner, write_label};

const GAUGES: &GaugeTable<Record> = &[
    (
        "mailhost_team_member_enabled",
        "1 when the team member is enabled (status is enabled), else 0.",
        None,
        |m| m.enabled.map(f64::from),
    ),
    (
        "mailhost_team_member_otp_enabled",
        "1 when the team member signs in with a second factor (otp), else 0.",
        None,
        |m| m.otp.map(f64::from),
    ),
    (
        "mailhost_team_member_api_access_blocked",
        "1 when the team member's API access is blocked (api_access_blocked), else 0.",
        None,
        |m| m.api_access_blocked.map(f64::from),
    ),
    (
        "mailhost_team_member_allow_nets",
        "Networks in the team member's IP allow-list (allow_nets); 0 means any address.",
        None,
        |m| m.allow_nets,
    ),
    (
        "mailhost_team_member_permissions",
        "Permission keys granted to the team member (permissions).",
        None,
        |m| m.permissions,
    ),
    (
        "mailhost_team_member_customer_disabled",
        "1 when the team member's customer is disabled (is_customer_disabled), else 0.",
        None,
        |m| m.customer_disabled.map(f64::from),
    ),
    (
        "mailhost_team_member_customer_trial",
        "1 when the team member's customer is on trial (is_customer_trial), else 0.",
        None,
        |m| m.customer_trial.map(f64::from),
    ),
    (
        "mailhost_team_member_customer_reseller",
        "1 when the team member's customer is a reseller (is_customer_reseller), else 0.",
        None,
        |m| m.customer_reseller.map(f64::from),
    ),
    (
        "mailhost_team_member_can_access_delivery",
        "1 when the team member may use the Delivery product (can_access_delivery), else 0.",
        None,
        |m| m.can_access_delivery.map(f64::from),
    ),
];

pub fn encode(
    enc: &mut DescriptorEncoder,
    interval: Duration,
    members: &[(Owner, &String, &Record)],
) -> fmt::Result {
    owned_table(enc, GAUGES, "team_member", interval, members)?;
    refreshed_ones(
        enc,
        "mailhost_team_member_info",
        "Descriptive labels of a team member (the name and email address only with identity_labels); the value is always 1.",
        interval,
        &InfoLabels::of(members),
    )
}

/// The labels of `mailhost_team_member_info`: `tenant`, `team_member`, `status`,
/// `status_detail`, `member_type`, `language`, `customer_code`, then the person's `fullname` and
/// `email_address`.
impl EncodeLabelSet for InfoLabels<'_, Record> {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> fmt::Result {
        let m = self.record;
        self.owner.tenant.encode(encoder)?;
        write_label(encoder, "team_member", &self.owner.id)?;
        write_label(encoder, "status", &Borrowed::from(&m.status))?;
        write_label(encoder, "status_detail", &Borrowed::from(&m.status_detail))?;
        write_label(encoder, "member_type", &Borrowed::from(&m.member_type))?;
        write_label(encoder, "language", &Borrowed::from(&m.language))?;
        write_label(encoder, "customer_code", &Borrowed::from(&m.customer_code))?;
        // Personal data: only when the config asks for it (a record read without
        // `identity_labels` keeps neither).
        if m.fullname.is_none() && m.email_address.is_none() {
            return Ok(());
        }
        write_label(encoder, "fullname", &Borrowed::from(&m.fullname))?;
        write_label(encoder, "email_address", &Borrowed::from(&m.email_address))
    }
}
