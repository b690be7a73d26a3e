//! Migration: `GET /api/migrations/{code}/stats` for each configured code. One call per
//! migration per interval.

mod model;
mod series;

pub use model::Record;

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use prometheus_client::encoding::DescriptorEncoder;
use serde::Deserialize;

use super::run::Context;
use super::{Area, Item};
use crate::config::error::ConfigError;
use crate::config::fields::codes;
use crate::config::schedule::collector_block;
use crate::upstream::Route;
use crate::upstream::error::{Endpoint, UpstreamError};
use crate::upstream::model::{ParseProblem, read_body};

/// `GET /api/migrations/{migration_code}/stats`
pub const STATS: Endpoint =
    Endpoint::new("migration_stats").at("GET /api/migrations/{migration_code}/stats");

collector_block! {
    /// `collectors.migration`: the schedule and the migration codes.
    pub struct Block {
        #[serde(default)]
        pub migrations: Vec<String>,
    }
}

/// A tenant's migrations.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct List {
    #[serde(default)]
    pub migrations: Vec<String>,
}

/// Migration codes: `MG` and 8 digits.
fn migration_codes(
    field: &str,
    list: &[String],
    required: bool,
) -> Result<Vec<String>, ConfigError> {
    codes(
        &format!("{field}.migrations"),
        list,
        &[("MG", 8)],
        "MG followed by 8 digits, e.g. MG00000001",
        required,
    )
}

/// The area.
#[derive(Debug)]
pub struct Migration;

impl Area for Migration {
    const ENDPOINTS: &'static [Endpoint] = &[STATS];
    const LIST: &'static str = "migrations";
    type Raw = Block;
    type RawList = List;
    type Settings = ();
    type Target = String;
    type Data = Record;

    fn listed(raw: &Block) -> bool {
        !raw.migrations.is_empty()
    }

    fn settings(_raw: &Block, _field: &str) -> Result<(), ConfigError> {
        Ok(())
    }

    fn targets(raw: Block, field: &str, required: bool) -> Result<Vec<String>, ConfigError> {
        migration_codes(field, &raw.migrations, required)
    }

    fn tenant_targets(list: List, field: &str) -> Result<Vec<String>, ConfigError> {
        migration_codes(field, &list.migrations, false)
    }

    /// `code` was validated (`MG` + 8 digits) by the config, so it is safe in a path.
    async fn collect(
        ctx: Context,
        _settings: Arc<()>,
        code: String,
    ) -> Result<Record, UpstreamError> {
        let route = Route::get(format!("/api/migrations/{code}/stats"));
        ctx.client.fetch(STATS, code, route, &()).await
    }

    fn read(
        _settings: &(),
        _code: &String,
        bodies: &[&[u8]],
        _now: Timestamp,
    ) -> Result<(Record, Vec<ParseProblem>), UpstreamError> {
        read_body::<Record>(super::body(bodies, 0), &())
    }

    fn encode(
        enc: &mut DescriptorEncoder,
        interval: Duration,
        items: &[Item<'_, Self>],
    ) -> std::fmt::Result {
        series::encode(enc, interval, items)
    }
}
