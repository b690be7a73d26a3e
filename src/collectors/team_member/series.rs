//! Series of the team member collector.

use std::fmt;
use std::time::Duration;

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, LabelSetEncoder};

use super::model::Record;
use crate::collectors::owned_table;
use crate::metrics::family::{GaugeTable, refreshed_ones};
use crate::metrics::labels::{Owner, TenantLabel, Value};

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
    let info: Vec<TeamMemberInfoLabels> = members
        .iter()
        .map(|(code, _, m)| TeamMemberInfoLabels {
            base: InfoBase {
                tenant: code.tenant.clone(),
                team_member: code.id.clone(),
                status: Value::from(&m.status),
                status_detail: Value::from(&m.status_detail),
                member_type: Value::from(&m.member_type),
                language: Value::from(&m.language),
                customer_code: Value::from(&m.customer_code),
            },
            identity: (m.fullname.is_some() || m.email_address.is_some()).then(|| Identity {
                fullname: Value::from(&m.fullname),
                email_address: Value::from(&m.email_address),
            }),
        })
        .collect();
    refreshed_ones(
        enc,
        "mailhost_team_member_info",
        "Descriptive labels of a team member (the name and email address only with identity_labels); the value is always 1.",
        interval,
        &info,
    )
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct InfoBase {
    #[prometheus(flatten)]
    pub tenant: TenantLabel,
    pub team_member: Value,
    pub status: Value,
    pub status_detail: Value,
    pub member_type: Value,
    pub language: Value,
    pub customer_code: Value,
}

/// Personal data: only with `identity_labels`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct Identity {
    pub fullname: Value,
    pub email_address: Value,
}

/// The info series' labels: the person's name and address only when the config asks for them
/// (a record read without `identity_labels` keeps neither).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TeamMemberInfoLabels {
    pub base: InfoBase,
    pub identity: Option<Identity>,
}

impl EncodeLabelSet for TeamMemberInfoLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> fmt::Result {
        self.base.encode(encoder)?;
        match &self.identity {
            Some(identity) => identity.encode(encoder),
            None => Ok(()),
        }
    }
}
