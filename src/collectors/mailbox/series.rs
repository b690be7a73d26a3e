//! Series of the mailbox collector.

use std::fmt;
use std::time::Duration;

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, LabelSetEncoder};
use prometheus_client::registry::Unit;

use super::model::Record;
use crate::collectors::{InfoLabels, OwnerAnd, owned_table};
use crate::metrics::family::{GaugeTable, refreshed_gauges, refreshed_ones};
use crate::metrics::labels::{Borrowed, Owner, Value, write_label};

/// The archive states always shown as a state set; any other state the API reports is shown too.
pub const ARCHIVE_STATES: [&str; 4] = ["active", "activating", "deactivating", "disabled"];

const GAUGES: &GaugeTable<Record> = &[
    (
        "mailhost_mailbox_quota_used",
        "Space the mailbox uses (quota; MiB unless quota_human shows another unit).",
        Some(Unit::Bytes),
        |m| m.quota_used_bytes,
    ),
    (
        "mailhost_mailbox_quota_limit",
        "Space the mailbox may use (max_email_quota, same unit as quota).",
        Some(Unit::Bytes),
        |m| m.quota_limit_bytes,
    ),
    (
        "mailhost_mailbox_messages",
        "Messages stored in the mailbox (messages).",
        None,
        |m| m.messages,
    ),
    (
        "mailhost_mailbox_vault_used",
        "Space used in the mailbox's vault (vault_quota).",
        Some(Unit::Bytes),
        |m| m.vault_used_bytes,
    ),
    (
        "mailhost_mailbox_vault_messages",
        "Messages in the mailbox's vault (vault_messages).",
        None,
        |m| m.vault_messages,
    ),
    (
        "mailhost_mailbox_outbound_limit",
        "Messages the mailbox may send per outbound-limit period (outbound_limit).",
        None,
        |m| m.outbound_limit,
    ),
    (
        "mailhost_mailbox_outbound_messages",
        "Messages sent in the current outbound-limit period (outbound_limit_status).",
        None,
        |m| m.outbound_sent,
    ),
    (
        "mailhost_mailbox_outbound_limit_reset_timestamp",
        "When the outbound count goes back to zero (reset_outbound_limit_time).",
        Some(Unit::Seconds),
        |m| m.outbound_reset,
    ),
    (
        "mailhost_mailbox_last_auth_timestamp",
        "When someone last logged in to the mailbox (lastauth).",
        Some(Unit::Seconds),
        |m| m.last_auth,
    ),
    (
        "mailhost_mailbox_archive_enabled",
        "1 when archiving is on for the mailbox (archive).",
        None,
        |m| m.archive.map(f64::from),
    ),
    (
        "mailhost_mailbox_password_expired",
        "1 when the mailbox's password has expired (password_expired).",
        None,
        |m| m.password_expired.map(f64::from),
    ),
    (
        "mailhost_mailbox_otp_enabled",
        "1 when the mailbox's user has a second factor (otp).",
        None,
        |m| m.otp.map(f64::from),
    ),
    (
        "mailhost_mailbox_otp_forced",
        "1 when a second factor is required for the mailbox (force_otp).",
        None,
        |m| m.force_otp.map(f64::from),
    ),
    (
        "mailhost_mailbox_domain_otp_forced",
        "1 when the mailbox's domain requires a second factor (domain_force_otp).",
        None,
        |m| m.domain_force_otp.map(f64::from),
    ),
    (
        "mailhost_mailbox_api_enabled",
        "1 when the mailbox may use the API (api_enabled).",
        None,
        |m| m.api_enabled.map(f64::from),
    ),
    (
        "mailhost_mailbox_smtp_disabled",
        "1 when SMTP is disabled for the mailbox (smtp_disabled).",
        None,
        |m| m.smtp_disabled.map(f64::from),
    ),
    (
        "mailhost_mailbox_imap_disabled",
        "1 when IMAP is disabled for the mailbox (imap_disabled).",
        None,
        |m| m.imap_disabled.map(f64::from),
    ),
    (
        "mailhost_mailbox_pop_disabled",
        "1 when POP is disabled for the mailbox (pop_disabled).",
        None,
        |m| m.pop_disabled.map(f64::from),
    ),
    (
        "mailhost_mailbox_webmail_allow_nets_applied",
        "1 when the IP allow-list applies to webmail too (apply_allow_nets_webmail).",
        None,
        |m| m.apply_allow_nets_webmail.map(f64::from),
    ),
];

pub fn encode(
    enc: &mut DescriptorEncoder,
    interval: Duration,
    mailboxes: &[(Owner, &super::Target, &Record)],
) -> fmt::Result {
    owned_table(enc, GAUGES, "mailbox", interval, mailboxes)?;
    let mut archive = Vec::new();
    for (code, _, m) in mailboxes {
        if let Some(current) = &m.archive_status {
            let mut states: Vec<&str> = ARCHIVE_STATES.to_vec();
            if !states.contains(&current.as_str()) {
                states.push(current);
            }
            for s in states {
                let labels = OwnerAnd::new(code, "mailbox", "archive_status", Value::from(s));
                archive.push((labels, if s == current { 1.0 } else { 0.0 }));
            }
        }
    }
    refreshed_gauges(
        enc,
        "mailhost_mailbox_archive_status",
        "Archiving state of the mailbox as a state set (archive_status): 1 on the current state, 0 on the others.",
        interval,
        &archive,
    )?;
    refreshed_ones(
        enc,
        "mailhost_mailbox_info",
        "Descriptive labels of a mailbox; the value is always 1.",
        interval,
        &InfoLabels::of(mailboxes),
    )
}

/// The labels of `mailhost_mailbox_info`: `tenant`, `mailbox`, `address`, `domain`, `status`.
impl EncodeLabelSet for InfoLabels<'_, Record> {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> fmt::Result {
        let m = self.record;
        self.owner.tenant.encode(encoder)?;
        write_label(encoder, "mailbox", &self.owner.id)?;
        write_label(encoder, "address", &Borrowed::from(&m.address))?;
        write_label(encoder, "domain", &Borrowed::from(&m.domain))?;
        write_label(encoder, "status", &Borrowed::from(&m.status))
    }
}
