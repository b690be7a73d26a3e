//! Delivery account collector: `GET /api/delivery/accounts/{id}` for each configured id,
//! giving quota, plan dates and status.

use super::Context;
use crate::labels::Endpoint;
use crate::upstream::UpstreamError;
use crate::upstream::model::DeliveryAccount;

pub type AccountData = DeliveryAccount;

pub async fn collect(ctx: &Context, id: i32) -> Result<AccountData, UpstreamError> {
    let record = ctx.client.delivery_account(id).await?;
    let endpoint = Endpoint::DeliveryAccount;
    let (account, problems) = DeliveryAccount::from_record(&record)
        .map_err(|p| ctx.unreadable(endpoint, p, "the account record"))?;
    ctx.report(endpoint, problems);
    Ok(account)
}
