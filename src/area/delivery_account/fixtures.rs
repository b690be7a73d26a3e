//! The one fixture of the generic rooms' unit tests (snapshot, store, rendering, scraper, web):
//! a Delivery account collector and the answers of its runs, where all that matters of an
//! account is its `remaining_messages`.

use std::sync::Arc;
use std::time::Duration;

use super::Record;
use crate::area::{Collector, Configured, Target, TargetData};
use crate::collector::CollectorSpec;
use crate::config::Schedule;
use crate::tenant::TenantName;
use crate::upstream::error::UpstreamError;

/// A Delivery account collector over `ids` polled every `interval` (deadline 0.8 and `max_age`
/// 3 intervals).
pub fn accounts(ids: &[i32], interval: Duration) -> CollectorSpec {
    CollectorSpec::new(
        TenantName::default(),
        Collector::DeliveryAccount(Arc::new(Configured {
            schedule: Schedule {
                interval,
                deadline: interval.mul_f64(0.8),
                max_age: interval * 3,
            },
            settings: Arc::new(()),
            targets: ids.to_vec(),
        })),
    )
}

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
