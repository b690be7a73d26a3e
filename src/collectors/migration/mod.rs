//! Migration: `GET /api/migrations/{code}/stats` for each configured code. One call per
//! migration per interval.

mod model;
mod series;

pub use model::Record;

use std::sync::Arc;

use super::run::Context;
use super::{Collect, Encode, Read, one_body};
use crate::settings::error::ConfigError;
use crate::settings::fields::codes;
use crate::settings::schedule::collector_block;
use crate::upstream::endpoint::Endpoint;
use crate::upstream::error::UpstreamError;

/// `GET /api/migrations/{migration_code}/stats`
pub const STATS: Endpoint =
    Endpoint::new("migration_stats").at("GET /api/migrations/{migration_code}/stats");

collector_block! {
    /// `collectors.migration`: the schedule and the migration codes.
    pub struct Block {}
    /// A tenant's migrations.
    list migrations: String, tenant List;
}

/// The collector.
#[derive(Debug)]
pub struct Migration;

impl Collect for Migration {
    const ENDPOINTS: &'static [Endpoint] = &[STATS];
    type Raw = Block;
    type RawList = List;
    type Settings = ();
    type Target = String;
    type Data = Record;
    const READ: Read<Self> = one_body::<Self>;
    const ENCODE: Encode<Self> = series::encode;

    /// Migration codes: `MG` and 8 digits.
    fn parse_list(
        field: &str,
        list: &[String],
        required: bool,
    ) -> Result<Vec<String>, ConfigError> {
        codes(
            field,
            list,
            &[("MG", 8)],
            "MG followed by 8 digits, e.g. MG00000001",
            required,
        )
    }

    /// `code` was validated (`MG` + 8 digits) by the config, so it is safe in a path.
    async fn collect(
        ctx: Context,
        _settings: Arc<()>,
        code: String,
    ) -> Result<Record, UpstreamError> {
        let route = STATS.get(&[&code]);
        ctx.client.fetch(STATS, code, route, &()).await
    }
}
