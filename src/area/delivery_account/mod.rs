//! Delivery account collector: `GET /api/delivery/accounts/{id}` for each configured id,
//! giving quota, plan dates and status.

use super::Context;
use crate::upstream::error::UpstreamError;
use crate::upstream::model::DeliveryAccount;

pub type AccountData = DeliveryAccount;

pub async fn collect(ctx: Context, id: i32) -> Result<AccountData, UpstreamError> {
    ctx.client.delivery_account(id).await
}
