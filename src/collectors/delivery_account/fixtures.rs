//! The answers of the generic rooms' unit tests (snapshot, store, rendering, poller, web),
//! where all that matters of a Delivery account is its `remaining_messages`; the collector
//! they run is `engine::spec::fixtures::accounts`.

use super::Record;
use crate::collectors::{Target, TargetData};
use crate::upstream::error::UpstreamError;

/// What an account's fetch yields when all that matters is its `remaining_messages`.
pub fn remaining(remaining: f64) -> TargetData {
    TargetData::DeliveryAccount(Record {
        remaining_messages: Some(remaining),
        ..Default::default()
    })
}

/// The results of a run in which each `(account, remaining)` answered.
pub fn answered(accounts: &[(i32, f64)]) -> Vec<(Target, Result<TargetData, UpstreamError>)> {
    accounts
        .iter()
        .map(|&(id, left)| (Target::DeliveryAccount(id), Ok(remaining(left))))
        .collect()
}
