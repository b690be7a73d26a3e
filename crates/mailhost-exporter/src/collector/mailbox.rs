//! Mailbox collector: `GET /api/domains/{domain_code}/email_accounts/{email_account_code}` for
//! each configured pair: quota, messages, outbound limit, archiving, authentication.

use super::Context;
use crate::config::MailboxTarget;
use crate::labels::Endpoint;
use crate::upstream::UpstreamError;
use crate::upstream::model::Mailbox;

pub type MailboxData = Mailbox;

pub async fn collect(ctx: &Context, target: &MailboxTarget) -> Result<MailboxData, UpstreamError> {
    let record = ctx
        .client
        .email_account(&target.domain, &target.mailbox)
        .await?;
    let endpoint = Endpoint::EmailAccount;
    let (mailbox, problems) = Mailbox::from_record(&record)
        .map_err(|p| ctx.unreadable(endpoint, p, "the email account record"))?;
    ctx.report(endpoint, problems);
    Ok(mailbox)
}
