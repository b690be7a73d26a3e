//! Mailbox: `GET /api/domains/{domain_code}/email_accounts/{email_account_code}` for each
//! configured mailbox, giving its quota, archive and outbound limits. One call per mailbox per
//! interval.

mod model;
mod series;

pub use model::{Record, parse_size};

use std::fmt;
use std::sync::Arc;

use serde::Deserialize;

use super::run::Context;
use super::{Collect, Encode, Read, TargetKind, one_body};
use crate::settings::error::ConfigError;
use crate::settings::fields::{code, distinct};
use crate::settings::schedule::collector_block;
use crate::upstream::endpoint::Endpoint;
use crate::upstream::error::UpstreamError;

/// `GET /api/domains/{domain_code}/email_accounts/{email_account_code}`
pub const EMAIL_ACCOUNT: Endpoint = Endpoint::new("email_account")
    .at("GET /api/domains/{domain_code}/email_accounts/{email_account_code}");

/// A mailbox: its domain's code and its own; the `target` label is the mailbox code.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Target {
    pub domain: String,
    pub mailbox: String,
}

/// A mailbox is no account or domain of Delivery.
impl TargetKind for Target {}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.mailbox)
    }
}

/// A mailbox as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTarget {
    pub domain: String,
    pub mailbox: String,
}

collector_block! {
    /// `collectors.mailbox`: the schedule and the mailboxes.
    pub struct Block {}
    /// A tenant's mailboxes.
    list mailboxes: RawTarget, tenant List;
}

/// Validates distinct mailboxes; an empty list is refused when `required`.
fn mailbox_list(
    field: &str,
    list: &[RawTarget],
    required: bool,
) -> Result<Vec<Target>, ConfigError> {
    let target = |at: &str, t: &RawTarget| {
        let domain = code(
            &format!("{at}.domain"),
            &t.domain,
            &[("D", 9)],
            "D followed by 9 digits, e.g. D000000101",
        )?;
        let mailbox = code(
            &format!("{at}.mailbox"),
            &t.mailbox,
            &[("EA", 8), ("P", 9)],
            "EA followed by 8 digits (e.g. EA00000001), or P followed by 9 digits for a postmaster",
        )?;
        Ok(Target { domain, mailbox })
    };
    distinct(
        field,
        list,
        required.then_some("is empty; list pairs like {domain: D000000101, mailbox: EA00000001}"),
        target,
        |t| t.mailbox.clone(),
        |mailbox| format!("mailbox {mailbox} is listed twice"),
    )
}

/// The collector.
#[derive(Debug)]
pub struct Mailbox;

impl Collect for Mailbox {
    const ENDPOINTS: &'static [Endpoint] = &[EMAIL_ACCOUNT];
    type Raw = Block;
    type RawList = List;
    type Settings = ();
    type Target = Target;
    type Data = Record;
    const READ: Read<Self> = one_body::<Self>;
    const ENCODE: Encode<Self> = series::encode;

    fn parse_list(
        field: &str,
        list: &[RawTarget],
        required: bool,
    ) -> Result<Vec<Target>, ConfigError> {
        mailbox_list(field, list, required)
    }

    /// Both codes were validated by the config, so they are safe in a path.
    async fn collect(
        ctx: Context,
        _settings: Arc<()>,
        target: Target,
    ) -> Result<Record, UpstreamError> {
        let route = EMAIL_ACCOUNT.get(&[&target.domain, &target.mailbox]);
        ctx.client
            .fetch(EMAIL_ACCOUNT, target.mailbox, route, &())
            .await
    }
}
