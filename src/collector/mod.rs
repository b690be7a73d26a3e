//! Collectors: one per API area. A collector knows which upstream calls to make for its
//! targets and turns the answers into plain data for the snapshot; it knows nothing of the
//! exposition format. The scheduler that runs them lives in [`crate::scraper`].

pub mod delivery_account;

use std::fmt;

use crate::config::{Config, Schedule};
use crate::labels::{CollectorName, Endpoint};
use crate::upstream::{Client, UpstreamError};

/// One thing a collector fetches on each run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    DeliveryAccount(i32),
}

impl fmt::Display for Target {
    /// The value of the `target` label.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::DeliveryAccount(id) => write!(f, "{id}"),
        }
    }
}

/// What one target's successful collection produced.
#[derive(Clone, Debug, PartialEq)]
pub enum TargetData {
    DeliveryAccount(delivery_account::AccountData),
}

/// A collector as configured: its schedule and targets.
#[derive(Clone, Debug)]
pub struct CollectorSpec {
    pub name: CollectorName,
    pub schedule: Schedule,
    pub targets: Vec<Target>,
}

impl CollectorSpec {
    /// The enabled collectors of a config, in a stable order.
    pub fn from_config(config: &Config) -> Vec<CollectorSpec> {
        let mut specs = Vec::new();
        if let Some(d) = &config.collectors.delivery_account {
            specs.push(CollectorSpec {
                name: CollectorName::DeliveryAccount,
                schedule: d.schedule,
                targets: d
                    .accounts
                    .iter()
                    .map(|id| Target::DeliveryAccount(*id))
                    .collect(),
            });
        }
        specs
    }

    /// The upstream endpoints this collector calls (for zero-initialised counters).
    pub fn endpoints(&self) -> &'static [Endpoint] {
        match self.name {
            CollectorName::DeliveryAccount => &[Endpoint::DeliveryAccount],
        }
    }
}

/// Fetches one target.
pub async fn collect(client: &Client, target: &Target) -> Result<TargetData, UpstreamError> {
    match target {
        Target::DeliveryAccount(id) => delivery_account::collect(client, *id)
            .await
            .map(TargetData::DeliveryAccount),
    }
}
