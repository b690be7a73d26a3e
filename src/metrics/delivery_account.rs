//! Series of the Delivery account collector.

use std::time::Duration;

use super::refreshed;
use crate::exposition::{Family, Unit};
use crate::upstream::model::DeliveryAccount;

type Getter = fn(&DeliveryAccount) -> Option<f64>;

/// Plain gauges: name, help (the source field is named), value.
const GAUGES: &[(&str, &str, Getter)] = &[
    (
        "mailhost_delivery_remaining_messages",
        "Messages the Delivery account can still send: plan quota left plus bought extras (remaining_messages).",
        |a| a.remaining_messages,
    ),
    (
        "mailhost_delivery_plan_messages_limit",
        "Messages included in the plan per period (plan_messages_limit).",
        |a| a.plan_messages_limit,
    ),
    (
        "mailhost_delivery_plan_messages_used",
        "Plan messages used in the current period (plan_messages_used).",
        |a| a.plan_messages_used,
    ),
    (
        "mailhost_delivery_messages_sent",
        "Messages sent by the account, as the provider counts them (messages_sent).",
        |a| a.messages_sent,
    ),
    (
        "mailhost_delivery_extra_messages",
        "Extra messages bought in packs, in total (extra_messages_total).",
        |a| a.extra_messages_total,
    ),
    (
        "mailhost_delivery_remaining_extra_messages",
        "Bought extra messages not used yet (remaining_extra_messages_bought).",
        |a| a.remaining_extra_messages_bought,
    ),
    (
        "mailhost_delivery_account_status",
        "The account's status as the raw integer the API returns (status).",
        |a| a.status,
    ),
    (
        "mailhost_delivery_domains",
        "Sending domains assigned to the account (domains_count, or the length of domains).",
        |a| a.domains,
    ),
    (
        "mailhost_delivery_ignore_suppression_list",
        "1 when the account ignores suppression-list checks, else 0 (ignore_suppression_list).",
        |a| a.ignore_suppression_list.map(f64::from),
    ),
];

/// Timestamps: name without the unit, help, value in Unix seconds.
const TIMESTAMPS: &[(&str, &str, Getter)] = &[
    (
        "mailhost_delivery_plan_expiration_timestamp",
        "When the account's plan expires (plan_expiration_date).",
        |a| a.plan_expiration,
    ),
    (
        "mailhost_delivery_next_renewal_timestamp",
        "When the plan renews next (next_renewal_date).",
        |a| a.next_renewal,
    ),
    (
        "mailhost_delivery_last_renewal_timestamp",
        "When the plan last renewed (last_renewal_date).",
        |a| a.last_renewal,
    ),
];

pub fn families(interval: Duration, accounts: &[(String, &DeliveryAccount)]) -> Vec<Family> {
    let suffix = refreshed(interval);
    let mut out = Vec::with_capacity(GAUGES.len() + TIMESTAMPS.len() + 1);
    let tables = GAUGES
        .iter()
        .map(|g| (g, None))
        .chain(TIMESTAMPS.iter().map(|g| (g, Some(Unit::Seconds))));
    for ((name, help, get), unit) in tables {
        let mut f = Family::gauge(name, format!("{help} {suffix}"));
        if let Some(u) = unit {
            f = f.unit(u);
        }
        for (id, a) in accounts {
            if let Some(v) = get(a) {
                f.push(vec![("account_id", id.clone())], v);
            }
        }
        out.push(f);
    }
    let mut info = Family::gauge(
        "mailhost_delivery_account_info",
        format!("Descriptive labels of a Delivery account; the value is always 1. {suffix}"),
    );
    for (id, a) in accounts {
        let s = |v: &Option<String>| v.clone().unwrap_or_default();
        info.push(
            vec![
                ("account_id", id.clone()),
                ("username", s(&a.username)),
                ("plan", s(&a.plan)),
                ("account_type", s(&a.account_type)),
                ("status_detail", s(&a.status_detail)),
            ],
            1.0,
        );
    }
    out.push(info);
    out
}
