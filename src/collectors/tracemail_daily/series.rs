//! Series of the daily statistics: per account and per sending domain, and the counters of
//! messages by outcome derived from them (written as text, [`super::text`]).

use std::fmt;
use std::time::Duration;

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};

use super::DailyData;
use crate::collectors::OwnerAnd;
use crate::metrics::family::refreshed_gauges;
use crate::metrics::labels::{Owner, TenantLabel, Value};
use crate::upstream::model::counts::Counts;

pub fn encode(
    enc: &mut DescriptorEncoder,
    interval: Duration,
    accounts: &[(Owner, &i32, &DailyData)],
) -> fmt::Result {
    for (name, help, pick) in [
        (
            "mailhost_delivery_current_day_messages",
            "Messages of the Delivery account today (in the configured time zone) by outcome, from the daily statistics (type=account).",
            (|d: &DailyData| d.stats.current_day.as_ref()) as fn(&DailyData) -> Option<&Counts>,
        ),
        (
            "mailhost_delivery_previous_day_messages",
            "Messages of the Delivery account yesterday by outcome, from the daily statistics (type=account).",
            |d: &DailyData| d.stats.previous_day.as_ref(),
        ),
    ] {
        let samples: Vec<(OwnerAnd, f64)> = accounts
            .iter()
            .flat_map(|(id, _, d)| {
                pick(d).into_iter().flatten().map(|(name, n)| {
                    let labels = OwnerAnd::new(id, "account_id", "status", Value::from(name));
                    (labels, *n)
                })
            })
            .collect();
        refreshed_gauges(enc, name, help, interval, &samples)?;
    }
    let domains: Vec<(AccountDomainStatusLabels, f64)> = accounts
        .iter()
        .flat_map(|(id, _, d)| {
            d.domains.iter().flat_map(move |dc| {
                dc.counts.iter().map(move |(name, n)| {
                    let labels = AccountDomainStatusLabels {
                        tenant: id.tenant.clone(),
                        account_id: id.id.clone(),
                        domain: Value::from(&dc.domain),
                        status: Value::from(name),
                    };
                    (labels, *n)
                })
            })
        })
        .collect();
    refreshed_gauges(
        enc,
        "mailhost_delivery_domain_current_day_messages",
        "Messages of today per sending domain and outcome, for the account's top domains by volume (type=domains-rank).",
        interval,
        &domains,
    )
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct AccountDomainStatusLabels {
    #[prometheus(flatten)]
    pub tenant: TenantLabel,
    pub account_id: Value,
    pub domain: Value,
    pub status: Value,
}
