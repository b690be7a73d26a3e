//! The types the rest of the crate knows a collector's values by, and every operation on them.
//! [`collectors!`] reads the list of collectors in [`super`] and writes an enum with one variant
//! per collector: [`CollectorName`], and [`Target`], [`TargetData`] and [`Collector`], whose
//! variants hold that collector's own target, data or configuration. What a variant answers from
//! its collector's constants or its own value ([`Target::refers_to`], [`TargetData::reveals`],
//! ...) the macro writes as a match; the other operations are written once, as generic code over
//! [`Collect`], and reached through two trait objects: a collector name leads to its collector's
//! [`Ops`], a configured collector is a [`ConfiguredOps`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelValue, LabelValueEncoder};

use super::{
    Collect, Collector, CollectorName, Configured, Extra, Item, RawCollectors, RawTenantCollectors,
    Refers, Target, TargetData, run,
};
use crate::metrics::labels::{Owner, TenantLabel, Value};
use crate::settings::error::{ConfigError, invalid};
use crate::settings::schedule::{self, CollectorBlock, FromBlock, Listing, Schedule};
use crate::storage::targets::{Kept, settings_key};
use crate::tenant::TenantName;
use crate::upstream::endpoint::Endpoint;
use crate::upstream::error::{FailureReason, UpstreamError};
use crate::upstream::model::ParseProblem;

/// Writes, from the list of collectors (`module: Type,` a line), every type that has one variant
/// or one field per collector, and the [`Listed`] conversions of each collector.
macro_rules! collectors {
    ($($module:ident: $Collect:ident,)+) => {
        /// A collector: one collector, with its own switch, interval and health series.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum CollectorName { $($Collect,)+ }

        /// One thing a collector fetches on each run, as the snapshot knows it.
        // Written as the collector's own target, with no tag: the storage directory keeps which
        // collector it is of beside it (see `CollectorName::read_kept`).
        #[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize)]
        #[serde(untagged)]
        pub enum Target { $($Collect(<$module::$Collect as Collect>::Target),)+ }

        /// What one target's successful collection produced.
        // Untagged, as `Target` is.
        #[derive(Clone, Debug, PartialEq, serde::Serialize)]
        #[serde(untagged)]
        pub enum TargetData { $($Collect(<$module::$Collect as Collect>::Data),)+ }

        /// A configured collector: its validated schedule, settings and targets.
        #[derive(Clone, Debug)]
        pub enum Collector { $($Collect(Arc<Configured<$module::$Collect>>),)+ }

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
            pub const ALL: &'static [CollectorName] = &[$(Self::$Collect,)+];

            /// The collector's type, as the trait object of its operations.
            fn ops(self) -> &'static dyn registry::Ops {
                match self { $(Self::$Collect => &$module::$Collect,)+ }
            }

            /// The config key and the `collector` label value.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$Collect => <$module::$Collect as registry::Listed>::KEY,)+ }
            }

            /// The upstream operations one run makes per target.
            pub fn endpoints(self) -> &'static [Endpoint] {
                match self { $(Self::$Collect => <$module::$Collect as Collect>::ENDPOINTS,)+ }
            }

            /// Which targets beyond the configured ones the collector polls.
            pub fn extra(self) -> Extra {
                match self { $(Self::$Collect => <$module::$Collect as Collect>::EXTRA,)+ }
            }

            /// What the collector's data reveals for discovery.
            pub fn reveals(self) -> Extra {
                match self { $(Self::$Collect => <$module::$Collect as Collect>::REVEALS,)+ }
            }
        }

        impl Target {
            /// The collector the target is of.
            pub fn name(&self) -> CollectorName {
                match self { $(Self::$Collect(_) => CollectorName::$Collect,)+ }
            }

            /// The Delivery account id of an account target, which `/probe` may register.
            pub fn account_id(&self) -> Option<i32> {
                match self { $(Self::$Collect(t) => TargetKind::account(t),)+ }
            }

            /// What the target is about.
            pub fn refers_to(&self) -> Refers<'_> {
                match self { $(Self::$Collect(t) => TargetKind::refers_to(t),)+ }
            }

            /// The target of account `id` in the collector `name`, when it polls accounts.
            pub fn of_account(name: CollectorName, id: i32) -> Option<Target> {
                match name {
                    $(CollectorName::$Collect => TargetKind::of_account(id).map(Self::$Collect),)+
                }
            }

            /// The target of sending domain `domain` in the collector `name`, when it polls
            /// domains.
            pub fn of_domain(name: CollectorName, domain: String) -> Option<Target> {
                match name {
                    $(CollectorName::$Collect => TargetKind::of_domain(domain).map(Self::$Collect),)+
                }
            }
        }

        impl fmt::Display for Target {
            /// The value of the `target` label, and the name of the target's circuit.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self { $(Self::$Collect(t) => fmt::Display::fmt(t, f),)+ }
            }
        }

        impl TargetData {
            /// The collector the data is of.
            pub fn name(&self) -> CollectorName {
                match self { $(Self::$Collect(_) => CollectorName::$Collect,)+ }
            }

            /// What the data reveals for discovery.
            pub fn reveals(&self) -> Revealed<'_> {
                match self { $(Self::$Collect(d) => <$module::$Collect as Collect>::reveals(d),)+ }
            }
        }

        impl Collector {
            /// The collector this is a configuration of.
            pub fn name(&self) -> CollectorName {
                match self { $(Self::$Collect(_) => CollectorName::$Collect,)+ }
            }

            fn configured(&self) -> &dyn registry::ConfiguredOps {
                match self { $(Self::$Collect(c) => &**c,)+ }
            }
        }

        $(impl registry::Listed for $module::$Collect {
            const KEY: &'static str = stringify!($module);
            fn wrap_target(t: Self::Target) -> Target { Target::$Collect(t) }
            fn wrap_data(d: Self::Data) -> TargetData { TargetData::$Collect(d) }
            fn wrap_collector(c: Configured<Self>) -> Collector {
                Collector::$Collect(Arc::new(c))
            }
            fn peek_target(t: &Target) -> Option<&Self::Target> {
                match t { Target::$Collect(t) => Some(t), _ => None }
            }
            fn peek_data(d: &TargetData) -> Option<&Self::Data> {
                match d { TargetData::$Collect(d) => Some(d), _ => None }
            }
            fn peek_data_mut(d: &mut TargetData) -> Option<&mut Self::Data> {
                match d { TargetData::$Collect(d) => Some(d), _ => None }
            }
            fn peek_collector(c: &Collector) -> Option<&Configured<Self>> {
                match c { Collector::$Collect(c) => Some(c), _ => None }
            }
            fn peek_collector_mut(c: &mut Collector) -> Option<&mut Arc<Configured<Self>>> {
                match c { Collector::$Collect(c) => Some(c), _ => None }
            }
            fn block(r: &RawCollectors) -> &Option<Self::Raw> { &r.$module }
            fn block_mut(r: &mut RawCollectors) -> &mut Option<Self::Raw> { &mut r.$module }
            fn tenant_block(r: &mut RawTenantCollectors) -> &mut Option<Self::RawList> {
                &mut r.$module
            }
        })+
    };
}

/// A collector of the list: its key, and the way between its own values and the enums that hold
/// every collector's. A `peek_` gives the collector's own value inside, `None` for another's.
pub(super) trait Listed: Collect {
    /// The config key and the `collector` label value: the collector's module.
    const KEY: &'static str;
    fn wrap_target(target: Self::Target) -> Target;
    fn wrap_data(data: Self::Data) -> TargetData;
    fn wrap_collector(configured: Configured<Self>) -> Collector;
    fn peek_target(target: &Target) -> Option<&Self::Target>;
    fn peek_data(data: &TargetData) -> Option<&Self::Data>;
    fn peek_data_mut(data: &mut TargetData) -> Option<&mut Self::Data>;
    fn peek_collector(collector: &Collector) -> Option<&Configured<Self>>;
    fn peek_collector_mut(collector: &mut Collector) -> Option<&mut Arc<Configured<Self>>>;
    /// The collector's `collectors.<collector>` block.
    fn block(raw: &RawCollectors) -> &Option<Self::Raw>;
    fn block_mut(raw: &mut RawCollectors) -> &mut Option<Self::Raw>;
    /// The collector's block in a tenant's `collectors:`.
    fn tenant_block(raw: &mut RawTenantCollectors) -> &mut Option<Self::RawList>;
}

/// One target of any collector with its tenant and its current data, as the snapshot holds it.
type Entry<'a> = (&'a TenantName, &'a Target, &'a TargetData);

/// What is done with a collector known only when the program runs ([`CollectorName::ops`]), for
/// every collector by the one implementation below. Each method is the one of the same name of
/// [`CollectorName`], [`TargetData`] or the `collectors:` blocks. A value is only ever handed to its own collector's `Ops`, so the
/// answers for another collector's value (`None`, nothing written) are never given.
pub(super) trait Ops {
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
    fn carry(&self, data: &mut TargetData, previous: Option<&TargetData>, now: Timestamp);
    fn read_kept(&self, json: &str) -> serde_json::Result<Vec<Kept<Target, TargetData>>>;
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

// `<A as Collect>::` where `Ops` has a method of the same name.
impl<A: Listed> Ops for A {
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
        <A as Collect>::encode_text(&items_of::<A>(items), out)
    }

    fn carry(&self, data: &mut TargetData, previous: Option<&TargetData>, now: Timestamp) {
        if let Some(data) = A::peek_data_mut(data) {
            <A as Collect>::carry(data, previous.and_then(A::peek_data), now);
        }
    }

    fn read_kept(&self, json: &str) -> serde_json::Result<Vec<Kept<Target, TargetData>>> {
        let kept: Vec<Kept<A::Target, A::Data>> = serde_json::from_str(json)?;
        let wrap = |k: Kept<_, _>| k.map(A::wrap_target, A::wrap_data);
        Ok(kept.into_iter().map(wrap).collect())
    }

    fn first_list(&self, raw: &RawCollectors) -> Option<String> {
        let listed = A::block(raw)
            .as_ref()
            .is_some_and(|b| !b.items().is_empty());
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
        Ok(configure::<A>(block, required)?.map(A::wrap_collector))
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
            .find_map(A::peek_collector_mut)
            .ok_or_else(|| not_enabled(&field, A::KEY))?;
        let targets = A::targets(&list, &field, false)?;
        Arc::make_mut(configured).targets = targets;
        Ok(())
    }
}

/// The items of one collector out of every collector's, each with its tenant and `target` label.
fn items_of<'a, A: Listed>(items: &mut dyn Iterator<Item = Entry<'a>>) -> Vec<Item<'a, A>> {
    items
        .filter_map(|(tenant, target, data)| {
            let (target, data) = (A::peek_target(target)?, A::peek_data(data)?);
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
    let targets = A::targets(&raw, &field, required)?;
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

/// What a configured collector of any collector does ([`Collector::configured`]); each method is
/// the one of the same name of [`Collector`].
pub(super) trait ConfiguredOps {
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

impl<A: Listed> ConfiguredOps for Configured<A> {
    fn schedule(&self) -> Schedule {
        self.schedule
    }

    fn targets(&self) -> Vec<Target> {
        self.targets.iter().cloned().map(A::wrap_target).collect()
    }

    fn job(&self, target: &Target) -> Option<run::Job> {
        let (settings, t) = (Arc::clone(&self.settings), A::peek_target(target)?.clone());
        Some(run::Job::new(
            target.clone(),
            move |ctx| A::collect(ctx, Arc::clone(&settings), t.clone()),
            A::wrap_data,
        ))
    }

    fn same_settings(&self, other: &Collector) -> bool {
        // Another collector: never the same, so a collector is restarted rather than kept wrongly.
        A::peek_collector(other).is_some_and(|other| self.settings == other.settings)
    }

    fn settings_key(&self) -> String {
        settings_key(&*self.settings)
    }

    fn retain(&self, keep: &dyn Fn(&Target) -> bool) -> Collector {
        let mut c = self.clone();
        c.targets.retain(|t| keep(&A::wrap_target(t.clone())));
        A::wrap_collector(c)
    }

    fn read(
        &self,
        target: &Target,
        bodies: &[&[u8]],
        now: Timestamp,
    ) -> Result<(TargetData, Vec<ParseProblem>), UpstreamError> {
        let Some(target) = A::peek_target(target) else {
            return Err(UpstreamError::new(
                FailureReason::ClientError,
                "a target of another collector",
            ));
        };
        (A::READ)(&self.settings, target, bodies, now).map(|(d, p)| (A::wrap_data(d), p))
    }
}

impl CollectorName {
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
    /// What `--shard` hashes (with the tenant): the account id of every target about an
    /// account, so an account goes to the same replica in every collector; else the `target`
    /// label value.
    pub fn shard_key(&self) -> String {
        match self.refers_to() {
            Refers::Account(id) => id.to_string(),
            _ => self.to_string(),
        }
    }
}

impl TargetData {
    /// This run's data with what carries over from the run before.
    pub fn carry(mut self, previous: Option<&TargetData>, now: Timestamp) -> TargetData {
        self.name().ops().carry(&mut self, previous, now);
        self
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
    /// [`settings_key`]).
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
