//! What the generic rooms work with, built from the one list of collectors in [`super`]. The
//! [`collectors!`] macro says only what a trait cannot: it names each collector once, as a variant
//! of [`CollectorName`] and of [`OfCollector`], as a key of the `collectors:` blocks, and in the
//! matches that lead from a variant to its collector's type ([`Listed`]). Every operation on those
//! values is written here once, as generic code over [`Collect`]: [`Dispatch`] for what a collector
//! name leads to, [`Configuration`] for a configured collector.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelValue, LabelValueEncoder};

use super::{
    Collect, CollectorName, Configured, Extra, Item, OfCollector, RawCollectors,
    RawTenantCollectors, Refers, Revealed, TargetKind, kept, run,
};
use crate::collectors::kept::Kept;
use crate::metrics::labels::{Owner, TenantLabel, Value};
use crate::settings::error::{ConfigError, invalid};
use crate::settings::schedule::{self, CollectorBlock, FromBlock, Schedule};
use crate::tenant::TenantName;
use crate::upstream::endpoint::Endpoint;
use crate::upstream::error::{FailureReason, UpstreamError};
use crate::upstream::model::ParseProblem;

/// Which of a collector's values a variant of [`OfCollector`] holds.
pub trait Kind {
    /// The value of collector `A`.
    type Of<A: Collect>;
}

/// The kind of [`Target`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TargetOf;

impl Kind for TargetOf {
    type Of<A: Collect> = A::Target;
}

/// The kind of [`TargetData`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DataOf;

impl Kind for DataOf {
    type Of<A: Collect> = A::Data;
}

/// The kind of [`Collector`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CollectorOf;

impl Kind for CollectorOf {
    type Of<A: Collect> = Arc<Configured<A>>;
}

/// One thing a collector fetches on each run, as the snapshot knows it.
pub type Target = OfCollector<TargetOf>;

/// What one target's successful collection produced.
pub type TargetData = OfCollector<DataOf>;

/// A configured collector: one variant per collector, each with that collector's validated
/// schedule, settings and targets.
pub type Collector = OfCollector<CollectorOf>;

/// A collector of the list, as [`collectors!`] declares it: its key, and the way between its values
/// and every collector's.
pub(super) trait Listed: Collect {
    /// The config key and the `collector` label value: the collector's module.
    const KEY: &'static str;
    /// The collector's value among every collector's.
    fn of<K: Kind>(value: K::Of<Self>) -> OfCollector<K>;
    /// The value, when it is this collector's.
    fn get<K: Kind>(value: &OfCollector<K>) -> Option<&K::Of<Self>>;
    /// The value, when it is this collector's.
    fn get_mut<K: Kind>(value: &mut OfCollector<K>) -> Option<&mut K::Of<Self>>;
    /// The collector's `collectors.<collector>` block.
    fn block(raw: &RawCollectors) -> &Option<Self::Raw>;
    /// The collector's `collectors.<collector>` block.
    fn block_mut(raw: &mut RawCollectors) -> &mut Option<Self::Raw>;
    /// The collector's block in a tenant's `collectors:`.
    fn tenant_block(raw: &mut RawTenantCollectors) -> &mut Option<Self::RawList>;
}

macro_rules! collectors {
    ($($module:ident: $Collect:ident,)+) => {
        /// A collector: one collector, with its own switch, interval and health series.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum CollectorName { $($Collect,)+ }

        /// One value of one collector: its target, its data or its collector, as the kind `K` says.
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum OfCollector<K: Kind> { $($Collect(K::Of<$module::$Collect>),)+ }

        /// The `collectors:` block as written: one key per collector.
        #[derive(Debug, Default, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct RawCollectors {
            $(#[serde(default)] pub $module: Option<<$module::$Collect as Collect>::Raw>,)+
        }

        /// A tenant's `collectors:` block: its own target list per collector.
        #[derive(Debug, Default, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct RawTenantCollectors {
            $(#[serde(default)] pub $module: Option<<$module::$Collect as Collect>::RawList>,)+
        }

        impl CollectorName {
            /// Every collector, in the order of the list.
            pub const ALL: &'static [CollectorName] = &[$(CollectorName::$Collect,)+];

            /// The operations on the collector's values.
            fn ops(self) -> &'static dyn registry::Dispatch {
                match self { $(Self::$Collect => &std::marker::PhantomData::<$module::$Collect>,)+ }
            }
        }

        /// A value is written as its collector's own: which collector it belongs to is kept
        /// beside it (see [`CollectorName::read_kept`]).
        impl<K: Kind> serde::Serialize for OfCollector<K>
        where $(K::Of<$module::$Collect>: serde::Serialize,)+
        {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self { $(Self::$Collect(v) => v.serialize(s),)+ }
            }
        }

        impl<K: Kind> OfCollector<K> {
            /// The collector the value belongs to.
            pub fn name(&self) -> CollectorName {
                match self { $(Self::$Collect(_) => CollectorName::$Collect,)+ }
            }
        }

        impl Collector {
            /// The collector as its collector configured it.
            fn configured(&self) -> &dyn registry::Configuration {
                match self { $(Self::$Collect(c) => &**c,)+ }
            }
        }

        $(
            // With one collector in the list, the `_` arms are never reached.
            #[allow(unreachable_patterns)]
            impl registry::Listed for $module::$Collect {
                const KEY: &'static str = stringify!($module);
                fn of<K: Kind>(v: K::Of<Self>) -> OfCollector<K> { OfCollector::$Collect(v) }
                fn get<K: Kind>(v: &OfCollector<K>) -> Option<&K::Of<Self>> {
                    match v { OfCollector::$Collect(v) => Some(v), _ => None }
                }
                fn get_mut<K: Kind>(v: &mut OfCollector<K>) -> Option<&mut K::Of<Self>> {
                    match v { OfCollector::$Collect(v) => Some(v), _ => None }
                }
                fn block(r: &RawCollectors) -> &Option<Self::Raw> { &r.$module }
                fn block_mut(r: &mut RawCollectors) -> &mut Option<Self::Raw> { &mut r.$module }
                fn tenant_block(r: &mut RawTenantCollectors) -> &mut Option<Self::RawList> {
                    &mut r.$module
                }
            }
        )+
    };
}

/// One target of any collector with its tenant and its current data, as the snapshot holds it.
type Entry<'a> = (&'a TenantName, &'a Target, &'a TargetData);

/// What a collector name leads to ([`CollectorName::collector`]): each operation whose collector is
/// known only when the program runs, written once for every collector. Each method is the one of
/// the same name (`revealed`: `reveals`, `fmt_target`: `fmt`) of [`CollectorName`], [`Target`],
/// [`TargetData`] or the `collectors:` blocks, for this row's collector: a value is handed to the
/// row its own name leads to, so the answers for another collector's (`None`, no text) are never
/// given.
pub(super) trait Dispatch {
    fn key(&self) -> &'static str;
    fn endpoints(&self) -> &'static [Endpoint];
    fn extra(&self) -> Extra;
    fn reveals(&self) -> Extra;
    fn encode<'a>(
        &self,
        enc: &mut DescriptorEncoder<'_>,
        interval: Duration,
        items: &mut dyn Iterator<Item = Entry<'a>>,
    ) -> fmt::Result;
    fn encode_text<'a>(
        &self,
        items: &mut dyn Iterator<Item = Entry<'a>>,
        out: &mut dyn fmt::Write,
    ) -> fmt::Result;
    fn of_account(&self, id: i32) -> Option<Target>;
    fn of_domain(&self, domain: String) -> Option<Target>;
    fn account_id(&self, target: &Target) -> Option<i32>;
    fn refers_to<'t>(&self, target: &'t Target) -> Refers<'t>;
    fn fmt_target(&self, target: &Target, f: &mut fmt::Formatter<'_>) -> fmt::Result;
    fn carry(&self, data: &mut TargetData, previous: Option<&TargetData>, now: Timestamp);
    fn read_kept(&self, json: &str) -> serde_json::Result<Vec<Kept<Target, TargetData>>>;
    fn revealed<'d>(&self, data: &'d TargetData) -> Revealed<'d>;
    fn first_list(&self, raw: &RawCollectors) -> Option<String>;
    fn switch(&self, raw: &mut RawCollectors, on: bool) -> Result<(), ConfigError>;
    fn validate(
        &self,
        raw: &mut RawCollectors,
        required: bool,
    ) -> Result<Option<Collector>, ConfigError>;
    fn forget(&self, raw: &mut RawTenantCollectors);
    fn apply(
        &self,
        raw: &mut RawTenantCollectors,
        collectors: &mut [Collector],
        at: &str,
    ) -> Result<(), ConfigError>;
}

impl<A: Listed> Dispatch for PhantomData<A> {
    fn key(&self) -> &'static str {
        A::KEY
    }

    fn endpoints(&self) -> &'static [Endpoint] {
        A::ENDPOINTS
    }

    fn extra(&self) -> Extra {
        A::EXTRA
    }

    fn reveals(&self) -> Extra {
        A::REVEALS
    }

    fn encode<'a>(
        &self,
        enc: &mut DescriptorEncoder<'_>,
        interval: Duration,
        items: &mut dyn Iterator<Item = Entry<'a>>,
    ) -> fmt::Result {
        (A::ENCODE)(enc, interval, &items_of::<A>(items))
    }

    fn encode_text<'a>(
        &self,
        items: &mut dyn Iterator<Item = Entry<'a>>,
        out: &mut dyn fmt::Write,
    ) -> fmt::Result {
        if !A::TEXT {
            return Ok(());
        }
        A::encode_text(&items_of::<A>(items), out)
    }

    fn of_account(&self, id: i32) -> Option<Target> {
        <A::Target as TargetKind>::of_account(id).map(A::of)
    }

    fn of_domain(&self, domain: String) -> Option<Target> {
        <A::Target as TargetKind>::of_domain(domain).map(A::of)
    }

    fn account_id(&self, target: &Target) -> Option<i32> {
        A::get(target).and_then(TargetKind::account)
    }

    fn refers_to<'t>(&self, target: &'t Target) -> Refers<'t> {
        A::get(target).map_or(Refers::Other, TargetKind::refers_to)
    }

    fn fmt_target(&self, target: &Target, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        A::get(target).map_or(Ok(()), |t| fmt::Display::fmt(t, f))
    }

    fn carry(&self, data: &mut TargetData, previous: Option<&TargetData>, now: Timestamp) {
        if let Some(data) = A::get_mut(data) {
            A::carry(data, previous.and_then(A::get), now);
        }
    }

    fn read_kept(&self, json: &str) -> serde_json::Result<Vec<Kept<Target, TargetData>>> {
        let kept: Vec<Kept<A::Target, A::Data>> = serde_json::from_str(json)?;
        Ok(kept.into_iter().map(|k| k.map(A::of, A::of)).collect())
    }

    fn revealed<'d>(&self, data: &'d TargetData) -> Revealed<'d> {
        A::get(data).map_or_else(Revealed::default, A::reveals)
    }

    fn first_list(&self, raw: &RawCollectors) -> Option<String> {
        let listed = A::block(raw).as_ref().is_some_and(A::listed);
        listed.then(|| format!("{}.{}", A::KEY, A::LIST))
    }

    fn switch(&self, raw: &mut RawCollectors, on: bool) -> Result<(), ConfigError> {
        let block = A::block_mut(raw);
        match block {
            Some(written) => written.set_enabled(on),
            None if on => {
                let empty = serde_yaml_ng::Value::Mapping(Default::default());
                let mut defaults: A::Raw = serde_yaml_ng::from_value(empty)
                    .map_err(|e| invalid(format!("--collector.{}", A::KEY), e.to_string()))?;
                defaults.set_enabled(true);
                *block = Some(defaults);
            }
            None => {}
        }
        Ok(())
    }

    fn validate(
        &self,
        raw: &mut RawCollectors,
        required: bool,
    ) -> Result<Option<Collector>, ConfigError> {
        let Some(block) = A::block_mut(raw).take() else {
            return Ok(None);
        };
        Ok(configure::<A>(block, required)?.map(|c| A::of(Arc::new(c))))
    }

    fn forget(&self, raw: &mut RawTenantCollectors) {
        *A::tenant_block(raw) = None;
    }

    fn apply(
        &self,
        raw: &mut RawTenantCollectors,
        collectors: &mut [Collector],
        at: &str,
    ) -> Result<(), ConfigError> {
        let Some(list) = A::tenant_block(raw).take() else {
            return Ok(());
        };
        let field = format!("{at}.collectors.{}", A::KEY);
        let configured = collectors
            .iter_mut()
            .find_map(A::get_mut)
            .ok_or_else(|| not_enabled(&field, A::KEY))?;
        let targets = A::tenant_targets(list, &field)?;
        Arc::make_mut(configured).targets = targets;
        Ok(())
    }
}

/// The items of one collector out of every collector's, each with its tenant and `target` label.
fn items_of<'a, A: Listed>(items: &mut dyn Iterator<Item = Entry<'a>>) -> Vec<Item<'a, A>> {
    items
        .filter_map(|(tenant, target, data)| {
            let (target, data) = (A::get(target)?, A::get(data)?);
            let owner = Owner {
                tenant: TenantLabel(tenant.clone()),
                id: Value::from(target.to_string()),
            };
            Some((owner, target, data))
        })
        .collect()
}

/// The collector of the block `collectors.<collector>`, validated; `None` when it is disabled.
fn configure<A: Listed>(raw: A::Raw, required: bool) -> Result<Option<Configured<A>>, ConfigError> {
    let keys = raw.schedule_keys();
    if !keys.enabled {
        return Ok(None);
    }
    let field = format!("collectors.{}", A::KEY);
    let schedule = schedule::from_keys(&field, keys)?;
    let settings = Arc::new(A::Settings::from_block(&raw, &field)?);
    let targets = A::targets(raw, &field, required)?;
    Ok(Some(Configured {
        schedule,
        settings,
        targets,
    }))
}

/// A tenant lists targets of a collector that is not enabled.
fn not_enabled(field: &str, name: &str) -> ConfigError {
    invalid(
        field,
        format!(
            "the {name} collector is not enabled; add collectors.{name} (its settings) to the config"
        ),
    )
}

/// A configured collector of any collector ([`Collector::configured`]); each method is the one of
/// the same name of [`Collector`].
pub(super) trait Configuration {
    fn schedule(&self) -> Schedule;
    fn targets(&self) -> Vec<Target>;
    fn job(&self, target: &Target) -> Option<run::Job>;
    fn same_settings(&self, other: &Collector) -> bool;
    fn settings_key(&self) -> String;
    fn retain(&self, keep: &dyn Fn(&Target) -> bool) -> Collector;
    fn read(
        &self,
        target: &Target,
        bodies: &[&[u8]],
        now: Timestamp,
    ) -> Result<(TargetData, Vec<ParseProblem>), UpstreamError>;
}

impl<A: Listed> Configuration for Configured<A> {
    fn schedule(&self) -> Schedule {
        self.schedule
    }

    fn targets(&self) -> Vec<Target> {
        self.targets.iter().cloned().map(A::of).collect()
    }

    fn job(&self, target: &Target) -> Option<run::Job> {
        let (settings, t) = (Arc::clone(&self.settings), A::get(target)?.clone());
        Some(run::Job::new(
            target.clone(),
            move |ctx| A::collect(ctx, Arc::clone(&settings), t.clone()),
            A::of::<DataOf>,
        ))
    }

    fn same_settings(&self, other: &Collector) -> bool {
        // Another collector: never the same, so a collector is restarted rather than kept wrongly.
        A::get(other).is_some_and(|other| self.settings == other.settings)
    }

    fn settings_key(&self) -> String {
        kept::settings_key(&*self.settings)
    }

    fn retain(&self, keep: &dyn Fn(&Target) -> bool) -> Collector {
        let mut c = self.clone();
        c.targets.retain(|t| keep(&A::of(t.clone())));
        A::of(Arc::new(c))
    }

    fn read(
        &self,
        target: &Target,
        bodies: &[&[u8]],
        now: Timestamp,
    ) -> Result<(TargetData, Vec<ParseProblem>), UpstreamError> {
        let Some(target) = A::get(target) else {
            return Err(UpstreamError::new(
                FailureReason::ClientError,
                "a target of another collector",
            ));
        };
        (A::READ)(&self.settings, target, bodies, now).map(|(d, p)| (A::of(d), p))
    }
}

impl CollectorName {
    /// The config key and the `collector` label value.
    pub fn as_str(self) -> &'static str {
        self.ops().key()
    }

    /// Every endpoint of every collector, in the order of the list, each once.
    pub fn every_endpoint() -> Vec<Endpoint> {
        let mut all: Vec<Endpoint> = Vec::new();
        for e in Self::ALL.iter().flat_map(|c| c.endpoints()) {
            if !all.contains(e) {
                all.push(*e);
            }
        }
        all
    }

    /// The upstream operations one run makes per target.
    pub fn endpoints(self) -> &'static [Endpoint] {
        self.ops().endpoints()
    }

    /// Which targets beyond the configured ones the collector polls.
    pub fn extra(self) -> Extra {
        self.ops().extra()
    }

    /// What the collector's data reveals for discovery.
    pub fn reveals(self) -> Extra {
        self.ops().reveals()
    }

    /// The targets of this collector kept under `--storage.path`: `json` is a list of
    /// [`Kept`] as the snapshot wrote it, read with the collector's own types.
    pub fn read_kept(self, json: &str) -> serde_json::Result<Vec<Kept<Target, TargetData>>> {
        self.ops().read_kept(json)
    }

    /// The collector with this config key, if there is one.
    pub fn from_key(key: &str) -> Option<CollectorName> {
        Self::ALL.iter().copied().find(|c| c.as_str() == key)
    }

    /// Whether the collector's targets are Delivery accounts, which `/probe` may add to.
    pub fn polls_accounts(self) -> bool {
        self.extra() == Extra::Accounts
    }

    /// The collector's series of `items`: every tenant's targets of the collector with their
    /// current data.
    pub fn encode<'a>(
        self,
        enc: &mut DescriptorEncoder,
        interval: Duration,
        mut items: impl Iterator<Item = Entry<'a>>,
    ) -> fmt::Result {
        self.ops().encode(enc, interval, &mut items)
    }

    /// The collector's families written as text, after the others.
    pub fn encode_text<'a>(
        self,
        mut items: impl Iterator<Item = Entry<'a>>,
        out: &mut dyn fmt::Write,
    ) -> fmt::Result {
        self.ops().encode_text(&mut items, out)
    }
}

impl fmt::Display for CollectorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl EncodeLabelValue for CollectorName {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> fmt::Result {
        fmt::Write::write_str(encoder, self.as_str())
    }
}

impl Target {
    /// The Delivery account id of an account target, which `/probe` may register.
    pub fn account_id(&self) -> Option<i32> {
        self.name().ops().account_id(self)
    }

    /// What the target is about.
    pub fn refers_to(&self) -> Refers<'_> {
        self.name().ops().refers_to(self)
    }

    /// What `--shard` hashes (with the tenant): the account id of every target about an
    /// account, so an account goes to the same replica in every collector; else the `target`
    /// label value.
    pub fn shard_key(&self) -> String {
        match self.refers_to() {
            Refers::Account(id) => id.to_string(),
            _ => self.to_string(),
        }
    }

    /// The target of account `id` in the collector `name`, when it polls accounts.
    pub fn of_account(name: CollectorName, id: i32) -> Option<Target> {
        name.ops().of_account(id)
    }

    /// The target of sending domain `domain` in the collector `name`, when it polls domains.
    pub fn of_domain(name: CollectorName, domain: String) -> Option<Target> {
        name.ops().of_domain(domain)
    }
}

impl fmt::Display for Target {
    /// The value of the `target` label, and the name of the target's circuit.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.name().ops().fmt_target(self, f)
    }
}

impl TargetData {
    /// This run's data with what carries over from the run before.
    pub fn carry(mut self, previous: Option<&TargetData>, now: Timestamp) -> TargetData {
        self.name().ops().carry(&mut self, previous, now);
        self
    }

    /// What the data reveals for discovery.
    pub fn reveals(&self) -> Revealed<'_> {
        self.name().ops().revealed(self)
    }
}

impl Collector {
    /// The upstream endpoints this collector calls (for zero-initialised counters and for the
    /// circuits a reload keeps).
    pub fn endpoints(&self) -> &'static [Endpoint] {
        self.name().endpoints()
    }

    pub fn schedule(&self) -> Schedule {
        self.configured().schedule()
    }

    /// Every configured target, in configured order.
    pub fn targets(&self) -> Vec<Target> {
        self.configured().targets()
    }

    /// The fetch of `target` with this collector's settings: any target of its collector (a
    /// configured one, or one `/probe` or discovery added); `None` for another collector.
    pub fn job(&self, target: &Target) -> Option<run::Job> {
        self.configured().job(target)
    }

    /// Whether this collector fetches each target exactly as `other` would: the same collector with
    /// the same settings (schedules and target lists are not compared).
    pub fn same_settings(&self, other: &Collector) -> bool {
        self.configured().same_settings(other)
    }

    /// The settings as a key: equal for collectors that fetch each target alike (see
    /// [`kept::settings_key`]).
    pub fn settings_key(&self) -> String {
        self.configured().settings_key()
    }

    /// This collector with only the targets `keep` keeps.
    pub fn retain(&self, keep: impl Fn(&Target) -> bool) -> Collector {
        self.configured().retain(&keep)
    }

    /// Reads one run's answers for `target` as a fetch at `now` would: one body per endpoint.
    /// The seam of the golden, property and fuzz tests.
    pub fn read(
        &self,
        target: &Target,
        bodies: &[&[u8]],
        now: Timestamp,
    ) -> Result<(TargetData, Vec<ParseProblem>), UpstreamError> {
        self.configured().read(target, bodies, now)
    }
}

impl RawCollectors {
    /// The first block that lists targets, as `<collector>.<list key>`.
    pub fn first_list(&self) -> Option<String> {
        CollectorName::ALL
            .iter()
            .find_map(|name| name.ops().first_list(self))
    }

    /// Switches collector `name` on (with a block of defaults when the config has none) or
    /// off, over what the config says.
    pub fn switch(&mut self, name: CollectorName, on: bool) -> Result<(), ConfigError> {
        name.ops().switch(self, on)
    }

    /// Every enabled collector, validated, in the order of the list of collectors; with `required`,
    /// each must list targets.
    pub fn validate(mut self, required: bool) -> Result<Vec<Collector>, ConfigError> {
        let mut out = Vec::new();
        for name in CollectorName::ALL {
            out.extend(name.ops().validate(&mut self, required)?);
        }
        Ok(out)
    }
}

impl RawTenantCollectors {
    /// Forgets the tenant's targets of collector `name` (switched off by a flag).
    pub fn forget(&mut self, name: CollectorName) {
        name.ops().forget(self);
    }

    /// Gives the collectors of `collectors` the target lists of the tenant at `at`.
    pub fn apply(mut self, collectors: &mut [Collector], at: &str) -> Result<(), ConfigError> {
        for name in CollectorName::ALL {
            name.ops().apply(&mut self, collectors, at)?;
        }
        Ok(())
    }
}
