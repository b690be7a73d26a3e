//! Handler of the email account (mailbox) records of hosted domains.

use axum::Json;
use axum::extract::State;
use serde_json::Value;

use super::envelope::envelope;
use super::error::ApiError;
use super::extract::{MailboxPath, Management};
use crate::Simulator;

/// `GET /api/domains/{domain_code}/email_accounts/{email_account_code}`. Mailboxes are not
/// Delivery accounts, so a scoped token sees them too.
pub(crate) async fn get_mailbox(
    State(sim): State<Simulator>,
    _auth: Management,
    MailboxPath { domain, code }: MailboxPath,
) -> Result<Json<Value>, ApiError> {
    let record = sim.mailbox_record(&domain, &code).ok_or_else(|| {
        ApiError::NotFound(format!("email account {code} not found in domain {domain}"))
    })?;
    Ok(envelope(vec![record]))
}
