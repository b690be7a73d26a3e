//! Delivery account: `GET /api/delivery/accounts/{id}` for each configured id, giving quota,
//! plan dates and status. One call per account per interval.

#[cfg(test)]
pub(crate) mod fixtures;
mod model;
mod series;

pub use model::Record;

use std::sync::Arc;

use super::run::Context;
use super::{Collect, Encode, Extra, Read, one_body};
use crate::settings::error::ConfigError;
use crate::settings::fields::account_list;
use crate::settings::schedule::collector_block;
use crate::upstream::endpoint::Endpoint;
use crate::upstream::error::UpstreamError;

/// `GET /api/delivery/accounts/{id}`
pub const ACCOUNT: Endpoint =
    Endpoint::new("delivery_account").at("GET /api/delivery/accounts/{id}");

collector_block! {
    /// `collectors.delivery_account`: the schedule and the account ids.
    pub struct Block {}
    /// A tenant's accounts.
    list accounts: i64, tenant List;
}

/// The collector.
#[derive(Debug)]
pub struct DeliveryAccount;

impl Collect for DeliveryAccount {
    const ENDPOINTS: &'static [Endpoint] = &[ACCOUNT];
    const EXTRA: Extra = Extra::Accounts;
    type Raw = Block;
    type RawList = List;
    type Settings = ();
    type Target = i32;
    type Data = Record;
    const READ: Read<Self> = one_body::<Self>;
    const ENCODE: Encode<Self> = series::encode;

    fn parse_list(field: &str, ids: &[i64], required: bool) -> Result<Vec<i32>, ConfigError> {
        account_list(field, ids, required)
    }

    async fn collect(ctx: Context, _settings: Arc<()>, id: i32) -> Result<Record, UpstreamError> {
        let route = ACCOUNT.get(&[&id.to_string()]);
        ctx.client.fetch(ACCOUNT, id.to_string(), route, &()).await
    }
}
