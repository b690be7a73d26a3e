//! Series of the Delivery account collector.

use std::fmt;
use std::time::Duration;

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, LabelSetEncoder};
use prometheus_client::registry::Unit;

use super::model::Record;
use crate::collectors::{InfoLabels, owned_table};
use crate::metrics::family::{GaugeTable, refreshed_ones};
use crate::metrics::labels::{Borrowed, Owner, write_label};

/// Plain gauges and timestamps: name, help (the source field is named), unit, value.
const GAUGES: &GaugeTable<Record> = &[
    (
        "mailhost_delivery_remaining_messages",
        "Messages the Delivery account can still send: plan quota left plus bought extras (remaining_messages).",
        None,
        |a| a.remaining_messages,
    ),
    (
        "mailhost_delivery_plan_messages_limit",
        "Messages included in the plan per period (plan_messages_limit).",
        None,
        |a| a.plan_messages_limit,
    ),
    (
        "mailhost_delivery_plan_messages_used",
        "Plan messages used in the current period (plan_messages_used).",
        None,
        |a| a.plan_messages_used,
    ),
    (
        "mailhost_delivery_messages_sent",
        "Messages sent by the account, as the provider counts them (messages_sent).",
        None,
        |a| a.messages_sent,
    ),
    (
        "mailhost_delivery_extra_messages",
        "Extra messages bought in packs, in total (extra_messages_total).",
        None,
        |a| a.extra_messages_total,
    ),
    (
        "mailhost_delivery_remaining_extra_messages",
        "Bought extra messages not used yet (remaining_extra_messages_bought).",
        None,
        |a| a.remaining_extra_messages_bought,
    ),
    (
        "mailhost_delivery_account_status",
        "The account's status as the raw integer the API returns (status).",
        None,
        |a| a.status,
    ),
    (
        "mailhost_delivery_domains",
        "Sending domains assigned to the account (domains_count, or the length of domains).",
        None,
        |a| a.domains,
    ),
    (
        "mailhost_delivery_ignore_suppression_list",
        "1 when the account ignores suppression-list checks, else 0 (ignore_suppression_list).",
        None,
        |a| a.ignore_suppression_list.map(f64::from),
    ),
    (
        "mailhost_delivery_plan_expiration_timestamp",
        "When the account's plan expires (plan_expiration_date).",
        Some(Unit::Seconds),
        |a| a.plan_expiration,
    ),
    (
        "mailhost_delivery_next_renewal_timestamp",
        "When the plan renews next (next_renewal_date).",
        Some(Unit::Seconds),
        |a| a.next_renewal,
    ),
    (
        "mailhost_delivery_last_renewal_timestamp",
        "When the plan last renewed (last_renewal_date).",
        Some(Unit::Seconds),
        |a| a.last_renewal,
    ),
    (
        "mailhost_delivery_allow_nets",
        "Networks in the account's IP allow-list (allow_nets); 0 means any address may send with a Send API token of the account.",
        None,
        |a| a.allow_nets,
    ),
    (
        "mailhost_delivery_allow_nets_fingerprint",
        "A fingerprint of the account's IP allow-list as a set (allow_nets): it changes when the list changes, and says nothing of what it holds.",
        None,
        |a| a.allow_nets_fingerprint,
    ),
    (
        "mailhost_delivery_bounce_notification_configured",
        "1 when bounce notifications go to an address (bounce_notification set), else 0.",
        None,
        |a| a.bounce_notification.map(f64::from),
    ),
    (
        "mailhost_delivery_delete_timestamp",
        "When the provider will delete the account (delete_on); absent while none is scheduled.",
        Some(Unit::Seconds),
        |a| a.delete_on,
    ),
    (
        "mailhost_delivery_extra_messages_expiration_timestamp",
        "When the bought extra messages expire (extra_messages_expires_at).",
        Some(Unit::Seconds),
        |a| a.extra_messages_expires_at,
    ),
    (
        "mailhost_delivery_pending_order",
        "1 while an order of the account is pending (has_pending_order), else 0.",
        None,
        |a| a.has_pending_order.map(f64::from),
    ),
];

/// The account's series. The label sets borrow from the items (each account's owner and record):
/// a rendering of 100,000 accounts copies no label (it copied seven strings an account, and
/// held them all at once: 16 MB).
pub fn encode(
    enc: &mut DescriptorEncoder,
    interval: Duration,
    accounts: &[(Owner, &i32, &Record)],
) -> fmt::Result {
    owned_table(enc, GAUGES, "account_id", interval, accounts)?;
    refreshed_ones(
        enc,
        "mailhost_delivery_account_info",
        "Descriptive labels of a Delivery account; the value is always 1.",
        interval,
        &InfoLabels::of(accounts),
    )
}

/// The labels of `mailhost_delivery_account_info`: `tenant`, `account_id`, `username`, `plan`,
/// `account_type`, `status_detail`.
impl EncodeLabelSet for InfoLabels<'_, Record> {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> fmt::Result {
        let a = self.record;
        self.owner.tenant.encode(encoder)?;
        write_label(encoder, "account_id", &self.owner.id)?;
        write_label(encoder, "username", &Borrowed::from(&a.username))?;
        write_label(encoder, "plan", &Borrowed::from(&a.plan))?;
        write_label(encoder, "account_type", &Borrowed::from(&a.account_type))?;
        write_label(encoder, "status_detail", &Borrowed::from(&a.status_detail))
    }
}
