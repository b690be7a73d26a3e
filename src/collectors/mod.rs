//! The collectors: one folder each, holding the collector's config block, its fetch and model, its
//! series and its tests. A collector is a type that implements [`Collect`]. The one list of
//! collectors is the [`collectors!`] call below: from it `registry.rs` writes the enums the rest of
//! the crate names a collector's values by ([`CollectorName`], [`Target`], [`TargetData`],
//! [`Collector`]) and the `collectors:` blocks of the config, and holds every operation on them.
//! Nothing else in `src/` names a collector: adding one is a folder here, its `mod` line and a line
//! in that list.

#[macro_use]
mod registry;
pub mod run;

use std::fmt::{self, Debug, Display};
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, LabelSetEncoder};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::metrics::family::{GaugeTable, table};
use crate::metrics::labels::{Owner, OwnerLabels, Value, write_label};
use crate::settings::error::ConfigError;
use crate::settings::schedule::{CollectorBlock, FromBlock, Listing, Schedule};
use crate::storage::targets::KeyFields;
use crate::upstream::endpoint::Endpoint;
use crate::upstream::error::UpstreamError;
use crate::upstream::model::{Model, ParseProblem, read_body};
use run::Context;

// Each collector's folder, declared here rather than by the macro so that rustfmt and other tools
// that follow `mod` items reach it.
pub mod delivery_account;
pub mod mailbox;
pub mod migration;
pub mod team_member;
pub mod tracemail_daily;
pub mod tracemail_dashboard;

collectors! {
    delivery_account: DeliveryAccount,
    tracemail_dashboard: TracemailDashboard,
    tracemail_daily: TracemailDaily,
    migration: Migration,
    mailbox: Mailbox,
    team_member: TeamMember,
}

/// Targets beyond the configured ones: those of a collector a tenant's poll set adds, or those a
/// collector's data reveals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extra {
    /// None: only configured targets.
    None,
    /// Delivery accounts: those `/probe` registers and those discovery finds.
    Accounts,
    /// Sending domains that discovery finds.
    Domains,
}

/// What a target is about, as the poll set and `--shard` see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refers<'a> {
    /// One Delivery account: an account goes to the same shard in every collector.
    Account(i32),
    /// One sending domain.
    Domain(&'a str),
    Other,
}

/// What a kind of target is about, for `/probe`, discovery and `--shard`. The defaults fit a
/// target that no account id or domain names (a code, a mailbox).
pub trait TargetKind: Sized {
    /// The Delivery account the target is, which `/probe` may register.
    fn account(&self) -> Option<i32> {
        None
    }
    /// What the target is about.
    fn refers_to(&self) -> Refers<'_> {
        Refers::Other
    }
    /// The target of an extra account, for a collector that polls them ([`Extra::Accounts`]).
    fn of_account(_id: i32) -> Option<Self> {
        None
    }
    /// The target of an extra sending domain, for a collector that polls them ([`Extra::Domains`]).
    fn of_domain(_domain: String) -> Option<Self> {
        None
    }
}

/// A Delivery account id.
impl TargetKind for i32 {
    fn account(&self) -> Option<i32> {
        Some(*self)
    }
    fn refers_to(&self) -> Refers<'_> {
        Refers::Account(*self)
    }
    fn of_account(id: i32) -> Option<i32> {
        Some(id)
    }
}

/// A code (a migration's, a team member's).
impl TargetKind for String {}

/// What a fetch's data reveals for discovery: accounts of the customer, or sending domains.
#[derive(Debug, Default)]
pub enum Revealed<'a> {
    #[default]
    Nothing,
    Accounts(Vec<i32>),
    Domains(Vec<&'a str>),
}

/// One item of a collector's series: the labels every series of a target carries (its tenant and
/// its `target` label value), the target and its current data.
pub type Item<'a, A> = (Owner, &'a <A as Collect>::Target, &'a <A as Collect>::Data);

/// One collector: its config block, its targets, its fetch and its series.
pub trait Collect: Sized + Debug + Send + Sync + 'static {
    /// The upstream operations one run makes per target, in the order [`Collect::read`] takes
    /// their bodies.
    const ENDPOINTS: &'static [Endpoint];
    /// Which targets beyond the configured ones the collector polls.
    const EXTRA: Extra = Extra::None;
    /// What the collector's data reveals for discovery ([`Collect::reveals`]).
    const REVEALS: Extra = Extra::None;

    /// The `collectors.<collector>` block as written (declared with
    /// [`crate::settings::schedule::collector_block!`]).
    type Raw: DeserializeOwned + CollectorBlock + Listing + Debug;
    /// A tenant's `tenants[].collectors.<collector>` block: its own target list, declared with the
    /// collector's block.
    type RawList: DeserializeOwned + Listing<Item = <Self::Raw as Listing>::Item> + Debug;
    /// The validated settings every target's fetch uses, read from the block.
    type Settings: FromBlock<Self::Raw> + Debug + PartialEq + KeyFields + Send + Sync + 'static;
    /// One thing fetched; its `Display` is the `target` label value, its kind what it is about.
    /// Kept under `--storage.path` as it serializes ([`crate::storage::targets`]).
    type Target: TargetKind
        + Clone
        + Debug
        + Display
        + Eq
        + Hash
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static;
    /// What one target's fetch yields; kept under `--storage.path` as it serializes
    /// ([`crate::storage::targets`]).
    type Data: Clone + Debug + PartialEq + Serialize + DeserializeOwned + Send + Sync + 'static;

    /// The targets of the list at `field` (`<block>.<key>`), each checked; an empty list is
    /// refused when `required`.
    fn parse_list(
        field: &str,
        list: &[<Self::Raw as Listing>::Item],
        required: bool,
    ) -> Result<Vec<Self::Target>, ConfigError>;

    /// The key of the target list in the block, for messages.
    const LIST: &'static str = <Self::Raw as Listing>::KEY;
    /// The targets the block at `field` lists (`collectors.<collector>` or a tenant's); an empty
    /// list is refused when `required`.
    fn targets<L: Listing<Item = <Self::Raw as Listing>::Item>>(
        block: &L,
        field: &str,
        required: bool,
    ) -> Result<Vec<Self::Target>, ConfigError> {
        Self::parse_list(&format!("{field}.{}", Self::LIST), block.items(), required)
    }

    /// Fetches one target.
    fn collect(
        ctx: Context,
        settings: Arc<Self::Settings>,
        target: Self::Target,
    ) -> impl Future<Output = Result<Self::Data, UpstreamError>> + Send;
    /// Reads the answers of one run at `now`, one body per endpoint of [`Collect::ENDPOINTS`], as
    /// a fetch reads them: the seam of the golden, property and fuzz tests. [`one_body`] for a
    /// collector whose one answer is its data.
    const READ: Read<Self>;
    /// This run's data with what carries over from the run before.
    fn carry(_data: &mut Self::Data, _previous: Option<&Self::Data>, _now: Timestamp) {}
    /// What the data reveals for discovery.
    fn reveals(_data: &Self::Data) -> Revealed<'_> {
        Revealed::default()
    }

    /// Writes the collector's series of every tenant's targets, as families of const metrics: the
    /// collector's `series::encode`.
    const ENCODE: Encode<Self>;
    /// Whether the collector writes families as text after the others ([`Collect::encode_text`]).
    const TEXT: bool = false;
    /// Families written as text after the others (counters with `_created`).
    fn encode_text(_items: &[Item<'_, Self>], _out: &mut dyn fmt::Write) -> fmt::Result {
        Ok(())
    }
}

/// How a collector reads the bodies of one run at an instant ([`Collect::READ`]).
pub type Read<A> = fn(
    &<A as Collect>::Settings,
    &<A as Collect>::Target,
    &[&[u8]],
    Timestamp,
) -> Result<(<A as Collect>::Data, Vec<ParseProblem>), UpstreamError>;

/// The read of a collector that makes one call whose answer, read without parameters, is its data.
pub fn one_body<A: Collect>(
    _settings: &A::Settings,
    _target: &A::Target,
    bodies: &[&[u8]],
    _now: Timestamp,
) -> Result<(A::Data, Vec<ParseProblem>), UpstreamError>
where
    A::Data: Model<Params = ()>,
{
    read_body::<A::Data>(body(bodies, 0), &())
}

/// The families of `rows` for `items`, each labelled by its owner: `tenant` and the target's
/// label value as `key` (`account_id`, `mailbox`, ...), borrowed from the items.
pub fn owned_table<T, D>(
    enc: &mut DescriptorEncoder,
    rows: &GaugeTable<D>,
    key: &'static str,
    interval: Duration,
    items: &[(Owner, &T, &D)],
) -> fmt::Result {
    let labelled: Vec<(OwnerLabels, &D)> = items
        .iter()
        .map(|(owner, _, data)| (OwnerLabels { owner, key }, *data))
        .collect();
    table(enc, rows, interval, &labelled)
}

/// A target's labels and one more, `label="value"`: the labels of a target's figures by state,
/// status or path. The target's are borrowed from its owner: `tenant`, and its label value as
/// `key` (`account_id`, `mailbox`, ...).
#[derive(Debug)]
pub struct OwnerAnd<'a> {
    owner: OwnerLabels<'a>,
    label: &'static str,
    value: Value,
}

impl<'a> OwnerAnd<'a> {
    pub fn new(owner: &'a Owner, key: &'static str, label: &'static str, value: Value) -> Self {
        let owner = OwnerLabels { owner, key };
        OwnerAnd {
            owner,
            label,
            value,
        }
    }
}

impl EncodeLabelSet for OwnerAnd<'_> {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> fmt::Result {
        self.owner.encode(encoder)?;
        write_label(encoder, self.label, &self.value)
    }
}

/// The labels of a collector's info series, borrowed from a target's owner and record; the
/// collector writes them from its record (`EncodeLabelSet` in its `series.rs`).
pub struct InfoLabels<'a, R> {
    pub owner: &'a Owner,
    pub record: &'a R,
}

impl<'a, R> InfoLabels<'a, R> {
    /// The info labels of each item.
    pub fn of<T>(items: &'a [(Owner, &T, &'a R)]) -> Vec<Self> {
        items
            .iter()
            .map(|(owner, _, record)| Self { owner, record })
            .collect()
    }
}

/// How a collector writes its series (`series::encode` of each collector).
pub type Encode<A> = fn(&mut DescriptorEncoder<'_>, Duration, &[Item<'_, A>]) -> fmt::Result;

/// A configured collector of collector `A`: its schedule, settings and targets.
#[derive(Debug)]
pub struct Configured<A: Collect> {
    pub schedule: Schedule,
    pub settings: Arc<A::Settings>,
    pub targets: Vec<A::Target>,
}

impl<A: Collect> Clone for Configured<A> {
    fn clone(&self) -> Self {
        Configured {
            schedule: self.schedule,
            settings: Arc::clone(&self.settings),
            targets: self.targets.clone(),
        }
    }
}

/// The body at `i` of one run's answers; a missing one is an empty body, which reads as
/// `decode`.
pub fn body<'a>(bodies: &[&'a [u8]], i: usize) -> &'a [u8] {
    bodies.get(i).copied().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::model::Model;
    use serde_json::json;

    fn bytes(v: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn a_record_that_is_not_an_object_is_unreadable_and_names_the_record() {
        let body = bytes(json!({"resources": ["x"]}));
        let record = delivery_account::Record::decode(&body).unwrap();
        let e = delivery_account::Record::read(&record, &()).unwrap_err();
        assert_eq!(e.detail, "the account record is not a JSON object");
        assert!(e.problem.is_some(), "the record itself is the problem");
        let e = mailbox::Record::read(&record, &()).unwrap_err();
        assert_eq!(e.detail, "the email account record is not a JSON object");
        let params = tracemail_dashboard::DashboardParams {
            date_format: crate::settings::date_format::DateFormat::default(),
            today: jiff::civil::Date::constant(2026, 11, 22),
            limit: 5,
        };
        let e = tracemail_dashboard::Dashboard::read(&record, &params).unwrap_err();
        assert_eq!(e.detail, "the dashboard record is not a JSON object");
    }

    #[test]
    fn an_answer_with_no_days_is_unreadable_but_no_field_is_at_fault() {
        let days = tracemail_daily::DailyStats::decode(&bytes(json!({"resources": []}))).unwrap();
        let params = tracemail_daily::DailyParams {
            date_format: crate::settings::date_format::DateFormat::default(),
            today: jiff::civil::Date::constant(2026, 11, 22),
        };
        let e = tracemail_daily::DailyStats::read(&days, &params).unwrap_err();
        assert_eq!(e.problem, None);
        assert_eq!(e.detail, "resources is empty: no days in the answer");
        let (ranks, problems) = tracemail_daily::DomainsRank::read(&days, &5).unwrap();
        assert!(
            ranks.0.is_empty() && problems.is_empty(),
            "no domains is an answer"
        );
    }

    #[test]
    fn an_empty_or_missing_aggregate_fails_to_decode() {
        for (body, detail) in [
            (json!({"aggregate": {}}), "aggregate is empty"),
            (json!({"other": 1}), "no aggregate object in the body"),
        ] {
            let e = migration::Record::decode(&bytes(body)).unwrap_err();
            assert_eq!(e.detail, detail);
        }
        let aggregate =
            migration::Record::decode(&bytes(json!({"aggregate": {"total": 3}}))).unwrap();
        assert!(migration::Record::read(&aggregate, &()).is_ok());
    }
}
