//! Mailbox collector: `GET /api/domains/{domain_code}/email_accounts/{email_account_code}` for
//! each configured pair: quota, messages, outbound limit, archiving, authentication.

use super::Context;
use crate::config::MailboxTarget;
use crate::upstream::error::UpstreamError;
use crate::upstream::model::Mailbox;

pub type MailboxData = Mailbox;

pub async fn collect(ctx: Context, target: MailboxTarget) -> Result<MailboxData, UpstreamError> {
    ctx.client
        .email_account(&target.domain, &target.mailbox)
        .await
}
