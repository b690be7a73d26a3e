//! Delivery account collector: `GET /api/delivery/accounts/{id}` for each configured id,
//! giving quota, plan dates and status.

use crate::labels::{Endpoint, FailureReason};
use crate::upstream::model::DeliveryAccount;
use crate::upstream::{Client, UpstreamError};

pub type AccountData = DeliveryAccount;

pub async fn collect(client: &Client, id: i32) -> Result<AccountData, UpstreamError> {
    let record = client.delivery_account(id).await?;
    let telemetry = client.telemetry();
    match DeliveryAccount::from_record(&record) {
        Ok((account, problems)) => {
            for p in problems {
                telemetry.parse_problem(Endpoint::DeliveryAccount, &p.path, &p.found);
            }
            Ok(account)
        }
        Err(p) => {
            telemetry.parse_problem(Endpoint::DeliveryAccount, &p.path, &p.found);
            telemetry.observe_failure(Endpoint::DeliveryAccount, FailureReason::Decode);
            Err(UpstreamError::new(
                FailureReason::Decode,
                "account record is not a JSON object",
            ))
        }
    }
}
