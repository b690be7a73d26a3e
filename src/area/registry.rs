//! The macro behind the one list of areas in [`super`]: from `module: Type` lines (each module
//! declared beside the list) it generates the enums and tables the generic rooms use, each arm
//! handing over to that area's [`super::Area`] implementation. Written once, so that no table
//! of areas is kept by hand anywhere.

use std::sync::Arc;

use super::{Area, Configured};
use crate::config::error::{ConfigError, invalid};
use crate::config::schedule::{self, CollectorBlock, FromBlock};

/// The collector of the block `collectors.<name>`, validated; `None` when it is disabled.
pub(super) fn configure<A: Area>(
    raw: A::Raw,
    name: &str,
    required: bool,
) -> Result<Option<Configured<A>>, ConfigError> {
    let keys = raw.schedule_keys();
    if !keys.enabled {
        return Ok(None);
    }
    let field = format!("collectors.{name}");
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
pub(super) fn not_enabled(field: &str, name: &str) -> ConfigError {
    invalid(
        field,
        format!(
            "the {name} collector is not enabled; add collectors.{name} (its settings) to the config"
        ),
    )
}

macro_rules! areas {
    ($($module:ident: $Area:ident,)+) => {

        /// A collector: one API area, with its own switch, interval and health series.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum CollectorName {
            $($Area,)+
        }

        impl CollectorName {
            /// Every area, in the order of the list.
            pub const ALL: &'static [CollectorName] = &[$(CollectorName::$Area,)+];

            /// The config key and the `collector` label value.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(CollectorName::$Area => stringify!($module),)+
                }
            }

            /// Every endpoint of every area, in the order of the list, each once.
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
                match self {
                    $(CollectorName::$Area => <$module::$Area as Area>::ENDPOINTS,)+
                }
            }

            /// Which targets beyond the configured ones the area polls.
            pub fn extra(self) -> Extra {
                match self {
                    $(CollectorName::$Area => <$module::$Area as Area>::EXTRA,)+
                }
            }

            /// What the area's data reveals for discovery.
            pub fn reveals(self) -> Extra {
                match self {
                    $(CollectorName::$Area => <$module::$Area as Area>::REVEALS,)+
                }
            }

            /// Whether the area's targets are Delivery accounts, which `/probe` may add to.
            pub fn polls_accounts(self) -> bool {
                self.extra() == Extra::Accounts
            }

            /// The area's series of `items`: every tenant's targets of the area with their
            /// current data.
            pub fn encode<'a>(
                self,
                enc: &mut DescriptorEncoder,
                interval: Duration,
                items: impl Iterator<Item = (&'a TenantName, &'a Target, &'a TargetData)>,
            ) -> fmt::Result {
                match self {
                    $(CollectorName::$Area => {
                        (<$module::$Area as Area>::ENCODE)(enc, interval, &items_of(items, |t, d| match (t, d) {
                            (Target::$Area(t), TargetData::$Area(d)) => Some((t, d)),
                            #[allow(unreachable_patterns)]
                            _ => None,
                        }))
                    })+
                }
            }

            /// The area's families written as text, after the others.
            pub fn encode_text<'a>(
                self,
                items: impl Iterator<Item = (&'a TenantName, &'a Target, &'a TargetData)>,
                out: &mut dyn fmt::Write,
            ) -> fmt::Result {
                match self {
                    $(CollectorName::$Area if <$module::$Area as Area>::TEXT => {
                        <$module::$Area as Area>::encode_text(&items_of(items, |t, d| match (t, d) {
                            (Target::$Area(t), TargetData::$Area(d)) => Some((t, d)),
                            #[allow(unreachable_patterns)]
                            _ => None,
                        }), out)
                    })+
                    _ => Ok(()),
                }
            }
        }

        impl fmt::Display for CollectorName {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl prometheus_client::encoding::EncodeLabelValue for CollectorName {
            fn encode(
                &self,
                encoder: &mut prometheus_client::encoding::LabelValueEncoder,
            ) -> fmt::Result {
                fmt::Write::write_str(encoder, self.as_str())
            }
        }

        /// One thing a collector fetches on each run, as the snapshot knows it.
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum Target {
            $($Area(<$module::$Area as Area>::Target),)+
        }

        impl Target {
            /// The area the target belongs to.
            pub fn name(&self) -> CollectorName {
                match self {
                    $(Target::$Area(_) => CollectorName::$Area,)+
                }
            }

            /// The Delivery account id of an account target, which `/probe` may register.
            pub fn account_id(&self) -> Option<i32> {
                match self {
                    $(Target::$Area(t) => t.account(),)+
                }
            }

            /// What the target is about.
            pub fn refers_to(&self) -> Refers<'_> {
                match self {
                    $(Target::$Area(t) => t.refers_to(),)+
                }
            }

            /// What `--shard` hashes (with the tenant): the account id of every target about an
            /// account, so an account goes to the same replica in every collector; else the
            /// `target` label value.
            pub fn shard_key(&self) -> String {
                match self.refers_to() {
                    Refers::Account(id) => id.to_string(),
                    _ => self.to_string(),
                }
            }

            /// The target of account `id` in the area `name`, when it polls accounts.
            pub fn of_account(name: CollectorName, id: i32) -> Option<Target> {
                match name {
                    $(CollectorName::$Area => <<$module::$Area as Area>::Target as TargetKind>::of_account(id).map(Target::$Area),)+
                }
            }

            /// The target of sending domain `domain` in the area `name`, when it polls domains.
            pub fn of_domain(name: CollectorName, domain: String) -> Option<Target> {
                match name {
                    $(CollectorName::$Area => <<$module::$Area as Area>::Target as TargetKind>::of_domain(domain).map(Target::$Area),)+
                }
            }
        }

        impl fmt::Display for Target {
            /// The value of the `target` label, and the name of the target's circuit.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $(Target::$Area(t) => fmt::Display::fmt(t, f),)+
                }
            }
        }

        /// What one target's successful collection produced.
        #[derive(Clone, Debug, PartialEq)]
        pub enum TargetData {
            $($Area(<$module::$Area as Area>::Data),)+
        }

        impl TargetData {
            /// This run's data with what carries over from the run before.
            pub fn carry(mut self, previous: Option<&TargetData>, now: Timestamp) -> TargetData {
                match &mut self {
                    $(TargetData::$Area(d) => {
                        let before = match previous {
                            Some(TargetData::$Area(p)) => Some(p),
                            #[allow(unreachable_patterns)]
                            _ => None,
                        };
                        <$module::$Area as Area>::carry(d, before, now);
                    })+
                }
                self
            }

            /// What the data reveals for discovery.
            pub fn reveals(&self) -> Revealed<'_> {
                match self {
                    $(TargetData::$Area(d) => <$module::$Area as Area>::reveals(d),)+
                }
            }
        }

        /// A configured collector: one variant per area, each with that area's validated
        /// schedule, settings and targets.
        #[derive(Clone, Debug)]
        pub enum Collector {
            $($Area(Arc<Configured<$module::$Area>>),)+
        }

        impl Collector {
            pub fn name(&self) -> CollectorName {
                match self {
                    $(Collector::$Area(_) => CollectorName::$Area,)+
                }
            }

            /// The upstream endpoints this collector calls (for zero-initialised counters and
            /// for the circuits a reload keeps).
            pub fn endpoints(&self) -> &'static [Endpoint] {
                self.name().endpoints()
            }

            pub fn schedule(&self) -> Schedule {
                match self {
                    $(Collector::$Area(c) => c.schedule,)+
                }
            }

            /// Every configured target, in configured order.
            pub fn targets(&self) -> Vec<Target> {
                match self {
                    $(Collector::$Area(c) => c.targets.iter().cloned().map(Target::$Area).collect(),)+
                }
            }

            /// The fetch of `target` with this collector's settings: any target of its area (a
            /// configured one, or one `/probe` or discovery added); `None` for another area.
            pub fn job(&self, target: &Target) -> Option<run::Job> {
                match (self, target) {
                    $((Collector::$Area(c), Target::$Area(t)) => {
                        let (settings, t) = (Arc::clone(&c.settings), t.clone());
                        Some(run::Job::new(
                            target.clone(),
                            move |ctx| <$module::$Area as Area>::collect(ctx, Arc::clone(&settings), t.clone()),
                            TargetData::$Area,
                        ))
                    })+
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }

            /// Whether this collector fetches each target exactly as `other` would: the same
            /// area with the same settings (schedules and target lists are not compared).
            pub fn same_settings(&self, other: &Collector) -> bool {
                match (self, other) {
                    $((Collector::$Area(a), Collector::$Area(b)) => a.settings == b.settings,)+
                    // Another area: never the same, so a collector is restarted rather than
                    // kept wrongly.
                    #[allow(unreachable_patterns)]
                    _ => false,
                }
            }

            /// This collector with only the targets `keep` keeps.
            pub fn retain(&self, keep: impl Fn(&Target) -> bool) -> Collector {
                match self {
                    $(Collector::$Area(c) => {
                        let mut c = (**c).clone();
                        c.targets.retain(|t| keep(&Target::$Area(t.clone())));
                        Collector::$Area(Arc::new(c))
                    })+
                }
            }

            /// Reads one run's answers for `target` as a fetch at `now` would: one body per
            /// endpoint. The seam of the golden, property and fuzz tests.
            pub fn read(
                &self,
                target: &Target,
                bodies: &[&[u8]],
                now: Timestamp,
            ) -> Result<(TargetData, Vec<ParseProblem>), UpstreamError> {
                match (self, target) {
                    $((Collector::$Area(c), Target::$Area(t)) => {
                        (<$module::$Area as Area>::READ)(&c.settings, t, bodies, now)
                            .map(|(d, p)| (TargetData::$Area(d), p))
                    })+
                    #[allow(unreachable_patterns)]
                    _ => Err(UpstreamError::new(
                        crate::upstream::error::FailureReason::ClientError,
                        "a target of another area",
                    )),
                }
            }
        }

        /// The `collectors:` block as written: one key per area.
        #[derive(Debug, Default, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct RawCollectors {
            $(
                #[serde(default)]
                pub $module: Option<<$module::$Area as Area>::Raw>,
            )+
        }

        /// A tenant's `collectors:` block: its own target list per area.
        #[derive(Debug, Default, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct RawTenantCollectors {
            $(
                #[serde(default)]
                pub $module: Option<<$module::$Area as Area>::RawList>,
            )+
        }

        impl RawCollectors {
            /// The first block that lists targets, as `<area>.<list key>`.
            pub fn first_list(&self) -> Option<String> {
                $(
                    if self.$module.as_ref().is_some_and(<$module::$Area as Area>::listed) {
                        return Some(format!(
                            "{}.{}",
                            stringify!($module),
                            <$module::$Area as Area>::LIST
                        ));
                    }
                )+
                None
            }

            /// Switches collector `name` on (with a block of defaults when the config has
            /// none) or off, over what the config says.
            pub fn switch(&mut self, name: CollectorName, on: bool) -> Result<(), ConfigError> {
                $(
                    if name == CollectorName::$Area {
                        match (&mut self.$module, on) {
                            (Some(block), _) => block.set_enabled(on),
                            (None, true) => {
                                let empty = serde_yaml_ng::Value::Mapping(Default::default());
                                let mut block: <$module::$Area as Area>::Raw =
                                    serde_yaml_ng::from_value(empty).map_err(|e| {
                                        crate::config::invalid(format!("--collector.{}", stringify!($module)), e.to_string())
                                    })?;
                                block.set_enabled(true);
                                self.$module = Some(block);
                            }
                            (None, false) => {}
                        }
                    }
                )+
                Ok(())
            }

            /// Every enabled collector, validated, in the order of the list of areas; with
            /// `required`, each must list targets.
            pub fn validate(self, required: bool) -> Result<Vec<Collector>, ConfigError> {
                let mut out = Vec::new();
                $(
                    if let Some(raw) = self.$module {
                        if let Some(c) = registry::configure::<$module::$Area>(raw, stringify!($module), required)? {
                            out.push(Collector::$Area(Arc::new(c)));
                        }
                    }
                )+
                Ok(out)
            }
        }

        impl RawTenantCollectors {
            /// Forgets the tenant's targets of collector `name` (switched off by a flag).
            pub fn forget(&mut self, name: CollectorName) {
                $(
                    if name == CollectorName::$Area {
                        self.$module = None;
                    }
                )+
            }

            /// Gives the collectors of `collectors` the target lists of the tenant at `at`.
            pub fn apply(self, collectors: &mut [Collector], at: &str) -> Result<(), ConfigError> {
                $(
                    if let Some(list) = self.$module {
                        let field = format!("{at}.collectors.{}", stringify!($module));
                        let configured = collectors
                            .iter_mut()
                            .find_map(|c| match c {
                                Collector::$Area(c) => Some(c),
                                #[allow(unreachable_patterns)]
                                _ => None,
                            })
                            .ok_or_else(|| registry::not_enabled(&field, stringify!($module)))?;
                        let targets = <$module::$Area as Area>::tenant_targets(list, &field)?;
                        Arc::make_mut(configured).targets = targets;
                    }
                )+
                Ok(())
            }
        }

        /// The items of one area out of every area's, each with its tenant and `target` label.
        fn items_of<'a, T: fmt::Display, D>(
            items: impl Iterator<Item = (&'a TenantName, &'a Target, &'a TargetData)>,
            pick: impl Fn(&'a Target, &'a TargetData) -> Option<(&'a T, &'a D)>,
        ) -> Vec<(Owner, &'a T, &'a D)> {
            items
                .filter_map(|(tenant, t, d)| {
                    let (t, d) = pick(t, d)?;
                    let owner = Owner {
                        tenant: TenantLabel(tenant.clone()),
                        id: Value::from(t.to_string()),
                    };
                    Some((owner, t, d))
                })
                .collect()
        }
    };
}
