//! Daily statistics: `GET /api/delivery/tracemail/daily/{account}` with `type=account` (today
//! and yesterday by outcome) and `type=domains-rank` (today per sending domain, the top N kept)
//! for each account. Two calls per account per interval.

mod counters;
mod model;
mod series;
mod text;

pub use counters::{DayCounters, MAX_COUNTED_STATUSES};
pub use model::{
    DailyParams, DailyStats, DomainCounts, DomainsRank, read_daily, read_domains_rank,
};

use std::sync::Arc;

use jiff::Timestamp;
use jiff::civil::Date;

use super::run::Context;
use super::{Collect, Encode, Extra, Item, Read, Revealed};
use crate::settings::error::ConfigError;
use crate::settings::fields::{Day, account_list, in_bounds};
use crate::settings::schedule::{FromBlock, collector_block};
use crate::settings::{defaults, limits};
use crate::upstream::endpoint::Endpoint;
use crate::upstream::error::UpstreamError;
use crate::upstream::model::{ParseProblem, read_body};

/// `GET /api/delivery/tracemail/daily/{account}?type=account`
pub const DAILY: Endpoint =
    Endpoint::new("tracemail_daily").at("GET /api/delivery/tracemail/daily/{account}?type=account");
/// `GET /api/delivery/tracemail/daily/{account}?type=domains-rank`
pub const DOMAINS_RANK: Endpoint = Endpoint::new("tracemail_domains_rank")
    .at("GET /api/delivery/tracemail/daily/{account}?type=domains-rank");

collector_block! {
    /// `collectors.tracemail_daily`: the schedule, the day's zone and format, how many sending
    /// domains are kept, and the account ids.
    pub struct Block {
        day;
        pub top_domains: Option<i64>,
    }
    /// A tenant's accounts.
    list accounts: i64, tenant List;
}

/// How every account is asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub day: Day,
    pub top_domains: usize,
}

impl crate::storage::targets::KeyFields for Settings {
    fn key_fields(&self) -> Vec<(&'static str, String)> {
        self.day.key_fields_and("top_domains", self.top_domains)
    }
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DailyData {
    pub stats: DailyStats,
    /// At most `top_domains`, largest first.
    pub domains: Vec<DomainCounts>,
    /// The day `stats.current_day` is (today in the collector's time zone when it asked).
    pub today: Date,
    /// Messages by outcome as counters, carried from one run to the next by the snapshot
    /// ([`DayCounters::carry`]); `None` as the collector returns it.
    pub counters: Option<DayCounters>,
}

fn params(settings: &Settings, now: Timestamp) -> DailyParams {
    DailyParams {
        date_format: settings.day.date_format.clone(),
        today: settings.day.zoned(now).date(),
    }
}

fn data(stats: DailyStats, domains: DomainsRank, today: Date) -> DailyData {
    DailyData {
        stats,
        domains: domains.0,
        today,
        counters: None,
    }
}

impl FromBlock<Block> for Settings {
    fn from_block(raw: &Block, field: &str) -> Result<Self, ConfigError> {
        let top = raw.top_domains.unwrap_or(defaults::TOP_DOMAINS);
        let top = in_bounds(format!("{field}.top_domains"), top, limits::TOP_DOMAINS)?;
        Ok(Settings {
            day: Day::from_keys(field, raw.timezone.clone(), raw.date_format.clone())?,
            top_domains: top as usize,
        })
    }
}

/// The collector.
#[derive(Debug)]
pub struct TracemailDaily;

impl Collect for TracemailDaily {
    const ENDPOINTS: &'static [Endpoint] = &[DAILY, DOMAINS_RANK];
    const EXTRA: Extra = Extra::Accounts;
    const REVEALS: Extra = Extra::Domains;
    type Raw = Block;
    type RawList = List;
    type Settings = Settings;
    type Target = i32;
    type Data = DailyData;
    const READ: Read<Self> = read;
    const ENCODE: Encode<Self> = series::encode;

    fn parse_list(field: &str, ids: &[i64], required: bool) -> Result<Vec<i32>, ConfigError> {
        account_list(field, ids, required)
    }

    async fn collect(
        ctx: Context,
        settings: Arc<Settings>,
        account: i32,
    ) -> Result<DailyData, UpstreamError> {
        let params = params(&settings, ctx.clock.now());
        let id = account.to_string();
        let (stats, ranks) = tokio::join!(
            ctx.client
                .fetch::<DailyStats>(DAILY, id.clone(), DAILY.get(&[&id]), &params),
            ctx.client.fetch::<DomainsRank>(
                DOMAINS_RANK,
                id.clone(),
                DOMAINS_RANK.get(&[&id]),
                &settings.top_domains,
            )
        );
        Ok(data(stats?, ranks?, params.today))
    }

    /// The bodies of `type=account` and of `type=domains-rank`.
    /// The daily message counters go on from their last value (or start at zero).
    fn carry(data: &mut DailyData, previous: Option<&DailyData>, now: Timestamp) {
        let before = previous.and_then(|p| p.counters.as_ref());
        data.counters = Some(DayCounters::carry(before, data, now));
    }

    /// The account's sending domains.
    fn reveals(data: &DailyData) -> Revealed<'_> {
        Revealed::Domains(data.domains.iter().map(|d| d.domain.as_str()).collect())
    }

    const TEXT: bool = true;

    fn encode_text(items: &[Item<'_, Self>], out: &mut dyn std::fmt::Write) -> std::fmt::Result {
        text::delivery_messages(items, out)
    }
}

/// Reads one run's answers (the collector's [`Collect::READ`]).
fn read(
    settings: &Settings,
    _account: &i32,
    bodies: &[&[u8]],
    now: Timestamp,
) -> Result<(DailyData, Vec<ParseProblem>), UpstreamError> {
    let params = params(settings, now);
    let (stats, mut problems) = read_body::<DailyStats>(super::body(bodies, 0), &params)?;
    let (ranks, more) = read_body::<DomainsRank>(super::body(bodies, 1), &settings.top_domains)?;
    problems.extend(more);
    Ok((data(stats, ranks, params.today), problems))
}
