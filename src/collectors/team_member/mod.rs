//! Team member: `GET /api/team_members/{code}` for each configured code, giving who may use the
//! API from where and with which safeguards (second factor, blocked API access, allow-list,
//! permissions) and the customer's flags. One call per team member per interval.

mod model;
mod series;

pub use model::Record;

use std::sync::Arc;

use jiff::Timestamp;

use super::run::Context;
use super::{Collect, Encode, Read};
use crate::settings::error::ConfigError;
use crate::settings::fields::codes;
use crate::settings::schedule::{FromBlock, collector_block};
use crate::upstream::endpoint::Endpoint;
use crate::upstream::error::UpstreamError;
use crate::upstream::model::{ParseProblem, read_body};

/// `GET /api/team_members/{team_member_code}`
pub const TEAM_MEMBER: Endpoint =
    Endpoint::new("team_member").at("GET /api/team_members/{team_member_code}");

collector_block! {
    /// `collectors.team_member`: the schedule, whether the info series names the person, and
    /// the team member codes.
    pub struct Block {
        #[serde(default)]
        pub identity_labels: bool,
    }
    /// A tenant's team members.
    list team_members: String, tenant List;
}

/// How every team member is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Whether `mailhost_team_member_info` carries the person's name and email address:
    /// personal data, off unless asked for.
    pub identity_labels: bool,
}

impl crate::storage::targets::KeyFields for Settings {
    fn key_fields(&self) -> Vec<(&'static str, String)> {
        vec![("identity_labels", self.identity_labels.to_string())]
    }
}

impl FromBlock<Block> for Settings {
    fn from_block(raw: &Block, _field: &str) -> Result<Self, ConfigError> {
        Ok(Settings {
            identity_labels: raw.identity_labels,
        })
    }
}

/// The collector.
#[derive(Debug)]
pub struct TeamMember;

impl Collect for TeamMember {
    const ENDPOINTS: &'static [Endpoint] = &[TEAM_MEMBER];
    type Raw = Block;
    type RawList = List;
    type Settings = Settings;
    type Target = String;
    type Data = Record;
    const READ: Read<Self> = read;
    const ENCODE: Encode<Self> = series::encode;

    /// Team member codes: `T` and 9 digits.
    fn parse_list(
        field: &str,
        list: &[String],
        required: bool,
    ) -> Result<Vec<String>, ConfigError> {
        codes(
            field,
            list,
            &[("T", 9)],
            "T followed by 9 digits, e.g. T000000101",
            required,
        )
    }

    /// `code` was validated (`T` + 9 digits) by the config, so it is safe in a path.
    async fn collect(
        ctx: Context,
        settings: Arc<Settings>,
        code: String,
    ) -> Result<Record, UpstreamError> {
        let route = TEAM_MEMBER.get(&[&code]);
        ctx.client
            .fetch(TEAM_MEMBER, code, route, &settings.identity_labels)
            .await
    }
}

/// Reads one run's answers (the collector's [`Collect::READ`]).
fn read(
    settings: &Settings,
    _code: &String,
    bodies: &[&[u8]],
    _now: Timestamp,
) -> Result<(Record, Vec<ParseProblem>), UpstreamError> {
    read_body::<Record>(super::body(bodies, 0), &settings.identity_labels)
}
