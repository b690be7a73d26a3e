//! Collectors: one per API area. A collector knows which upstream calls to make for its
//! targets and turns the typed answers into plain data for the snapshot; it knows nothing of
//! the exposition format, nor of self-metrics (the client counts its own failures and parse
//! problems). The scheduler that runs them lives in [`crate::scraper`].
//!
//! A configured collector is a [`Collector`]: one variant per area holding that area's
//! validated config, so each area's `collect` gets its own typed settings and no other. The
//! table of areas is the set of matches in `impl Collector`: name, endpoints, schedule, jobs
//! (the collect function of each target) and settings; adding an area adds one row to each.

pub mod delivery_account;
pub mod mailbox;
pub mod migration;
pub mod name;
pub mod tracemail_daily;
pub mod tracemail_dashboard;

pub use name::CollectorName;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use jiff::Timestamp;

use crate::config::{
    CollectorsConfig, Config, DailyConfig, DashboardConfig, DeliveryAccountConfig, MailboxConfig,
    MailboxTarget, MigrationConfig, Schedule, TenantConfig, View,
};
use crate::shard::Shard;
use crate::tenant::TenantName;
use crate::upstream::Client;
use crate::upstream::error::{Endpoint, UpstreamError};

/// One thing a collector fetches on each run, as the snapshot knows it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    DeliveryAccount(i32),
    DashboardView(View),
    DailyAccount(i32),
    Migration(String),
    Mailbox(MailboxTarget),
}

impl fmt::Display for Target {
    /// The value of the `target` label, and the name of the target's circuit.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::DeliveryAccount(id) | Target::DailyAccount(id) => write!(f, "{id}"),
            Target::DashboardView(View::All) => f.write_str("all"),
            Target::DashboardView(View::Account(id)) => write!(f, "account:{id}"),
            Target::DashboardView(View::Domain(d)) => write!(f, "domain:{d}"),
            Target::Migration(code) => f.write_str(code),
            Target::Mailbox(m) => f.write_str(&m.mailbox),
        }
    }
}

impl Target {
    /// The Delivery account id of an account target (of `delivery_account` or
    /// `tracemail_daily`), which `/probe` may register.
    pub fn account_id(&self) -> Option<i32> {
        match self {
            Target::DeliveryAccount(id) | Target::DailyAccount(id) => Some(*id),
            _ => None,
        }
    }

    /// The target of account `id` in an account collector; `None` for other collectors.
    pub fn of_account(collector: CollectorName, id: i32) -> Option<Target> {
        match collector {
            CollectorName::DeliveryAccount => Some(Target::DeliveryAccount(id)),
            CollectorName::TracemailDaily => Some(Target::DailyAccount(id)),
            _ => None,
        }
    }

    /// What `--shard` hashes (with the tenant): the account id of every account target, so an
    /// account goes to the same replica in every collector; else the `target` label value.
    pub fn shard_key(&self) -> String {
        match self {
            Target::DeliveryAccount(id)
            | Target::DailyAccount(id)
            | Target::DashboardView(View::Account(id)) => id.to_string(),
            other => other.to_string(),
        }
    }
}

/// The collectors with only `shard`'s targets; a collector left without targets stays
/// configured, so its health series still say it runs.
pub fn in_shard(
    collectors: &CollectorsConfig,
    tenant: &TenantName,
    shard: Shard,
) -> CollectorsConfig {
    let mut out = collectors.clone();
    if shard.count() == 1 {
        return out;
    }
    let owns = |t: Target| shard.owns(tenant.as_str(), &t.shard_key());
    if let Some(c) = &mut out.delivery_account {
        c.accounts.retain(|id| owns(Target::DeliveryAccount(*id)));
    }
    if let Some(c) = &mut out.tracemail_dashboard {
        c.views.retain(|v| owns(Target::DashboardView(v.clone())));
    }
    if let Some(c) = &mut out.tracemail_daily {
        c.accounts.retain(|id| owns(Target::DailyAccount(*id)));
    }
    if let Some(c) = &mut out.migration {
        c.migrations
            .retain(|code| owns(Target::Migration(code.clone())));
    }
    if let Some(c) = &mut out.mailbox {
        c.mailboxes.retain(|m| owns(Target::Mailbox(m.clone())));
    }
    out
}

/// A running collector: its area, then its tenant, so that one area's collectors sort together.
pub type CollectorKey = (CollectorName, TenantName);

/// What one target's successful collection produced.
#[derive(Clone, Debug, PartialEq)]
pub enum TargetData {
    DeliveryAccount(delivery_account::AccountData),
    Dashboard(tracemail_dashboard::DashboardData),
    Daily(tracemail_daily::DailyData),
    Migration(migration::MigrationData),
    Mailbox(mailbox::MailboxData),
}

impl TargetData {
    /// This run's data with what carries over from the run before: the daily message
    /// counters, which go on from their last value (or start at zero).
    pub fn carry(mut self, previous: Option<&TargetData>, now: Timestamp) -> TargetData {
        if let TargetData::Daily(d) = &mut self {
            let before = match previous {
                Some(TargetData::Daily(p)) => p.counters.as_ref(),
                _ => None,
            };
            d.counters = Some(tracemail_daily::DayCounters::carry(before, d, now));
        }
        self
    }
}

/// A configured collector: one variant per API area, each with that area's validated config
/// (its schedule, targets and settings).
#[derive(Clone, Debug)]
pub enum Collector {
    DeliveryAccount(Arc<DeliveryAccountConfig>),
    TracemailDashboard(Arc<DashboardConfig>),
    TracemailDaily(Arc<DailyConfig>),
    Migration(Arc<MigrationConfig>),
    Mailbox(Arc<MailboxConfig>),
}

impl Collector {
    /// The enabled collectors of a tenant with this shard's targets, in a stable order.
    pub fn of_tenant(tenant: &TenantConfig, shard: Shard) -> Vec<Collector> {
        let c = &in_shard(&tenant.collectors, &tenant.name, shard);
        [
            c.delivery_account
                .clone()
                .map(|x| Collector::DeliveryAccount(Arc::new(x))),
            c.tracemail_dashboard
                .clone()
                .map(|x| Collector::TracemailDashboard(Arc::new(x))),
            c.tracemail_daily
                .clone()
                .map(|x| Collector::TracemailDaily(Arc::new(x))),
            c.migration
                .clone()
                .map(|x| Collector::Migration(Arc::new(x))),
            c.mailbox.clone().map(|x| Collector::Mailbox(Arc::new(x))),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    pub fn name(&self) -> CollectorName {
        match self {
            Collector::DeliveryAccount(_) => CollectorName::DeliveryAccount,
            Collector::TracemailDashboard(_) => CollectorName::TracemailDashboard,
            Collector::TracemailDaily(_) => CollectorName::TracemailDaily,
            Collector::Migration(_) => CollectorName::Migration,
            Collector::Mailbox(_) => CollectorName::Mailbox,
        }
    }

    /// The upstream endpoints this collector calls (for zero-initialised counters and for the
    /// circuits a reload keeps).
    pub fn endpoints(&self) -> &'static [Endpoint] {
        match self {
            Collector::DeliveryAccount(_) => &[Endpoint::DeliveryAccount],
            Collector::TracemailDashboard(_) => &[Endpoint::TracemailDashboard],
            Collector::TracemailDaily(_) => {
                &[Endpoint::TracemailDaily, Endpoint::TracemailDomainsRank]
            }
            Collector::Migration(_) => &[Endpoint::MigrationStats],
            Collector::Mailbox(_) => &[Endpoint::EmailAccount],
        }
    }

    pub fn schedule(&self) -> Schedule {
        match self {
            Collector::DeliveryAccount(c) => c.schedule,
            Collector::TracemailDashboard(c) => c.schedule,
            Collector::TracemailDaily(c) => c.schedule,
            Collector::Migration(c) => c.schedule,
            Collector::Mailbox(c) => c.schedule,
        }
    }

    /// Every configured target, in configured order.
    pub fn targets(&self) -> Vec<Target> {
        match self {
            Collector::DeliveryAccount(c) => c
                .accounts
                .iter()
                .map(|&id| Target::DeliveryAccount(id))
                .collect(),
            Collector::TracemailDashboard(c) => c
                .views
                .iter()
                .map(|v| Target::DashboardView(v.clone()))
                .collect(),
            Collector::TracemailDaily(c) => c
                .accounts
                .iter()
                .map(|&id| Target::DailyAccount(id))
                .collect(),
            Collector::Migration(c) => c
                .migrations
                .iter()
                .map(|code| Target::Migration(code.clone()))
                .collect(),
            Collector::Mailbox(c) => c
                .mailboxes
                .iter()
                .map(|m| Target::Mailbox(m.clone()))
                .collect(),
        }
    }

    /// The fetch of `target` with this collector's settings: any target of its kind (a
    /// configured one, or an account `/probe` registered); `None` for another kind.
    pub fn job(&self, target: &Target) -> Option<Job> {
        let job = match (self, target) {
            (Collector::DeliveryAccount(_), &Target::DeliveryAccount(id)) => Job::new(
                target.clone(),
                move |ctx| delivery_account::collect(ctx, id),
                TargetData::DeliveryAccount,
            ),
            (Collector::TracemailDashboard(c), Target::DashboardView(view)) => {
                let (c, v) = (c.clone(), view.clone());
                Job::new(
                    target.clone(),
                    move |ctx| tracemail_dashboard::collect(ctx, c.clone(), v.clone()),
                    TargetData::Dashboard,
                )
            }
            (Collector::TracemailDaily(c), &Target::DailyAccount(id)) => {
                let c = c.clone();
                Job::new(
                    target.clone(),
                    move |ctx| tracemail_daily::collect(ctx, c.clone(), id),
                    TargetData::Daily,
                )
            }
            (Collector::Migration(_), Target::Migration(code)) => {
                let code = code.clone();
                Job::new(
                    target.clone(),
                    move |ctx| migration::collect(ctx, code.clone()),
                    TargetData::Migration,
                )
            }
            (Collector::Mailbox(_), Target::Mailbox(m)) => {
                let m = m.clone();
                Job::new(
                    target.clone(),
                    move |ctx| mailbox::collect(ctx, m.clone()),
                    TargetData::Mailbox,
                )
            }
            _ => return None,
        };
        Some(job)
    }

    /// Whether this collector fetches each target exactly as `other` would: the same area with
    /// the same settings (schedules and target lists are not compared).
    pub fn same_settings(&self, other: &Collector) -> bool {
        match (self, other) {
            (Collector::TracemailDashboard(a), Collector::TracemailDashboard(b)) => {
                a.timezone_name == b.timezone_name
                    && a.date_format == b.date_format
                    && a.limit == b.limit
            }
            (Collector::TracemailDaily(a), Collector::TracemailDaily(b)) => {
                a.timezone == b.timezone
                    && a.date_format == b.date_format
                    && a.top_domains == b.top_domains
            }
            (Collector::DeliveryAccount(_), Collector::DeliveryAccount(_))
            | (Collector::Migration(_), Collector::Migration(_))
            | (Collector::Mailbox(_), Collector::Mailbox(_)) => true,
            // Another area: never the same, so a collector is restarted rather than kept wrongly.
            _ => false,
        }
    }
}

/// One target's fetch, ready to run.
pub type Fetch = Pin<Box<dyn Future<Output = Result<TargetData, UpstreamError>> + Send>>;

/// One target of a collector, with the fetch of it (its area's collect function, bound to its
/// settings and target).
#[derive(Clone)]
pub struct Job {
    pub target: Target,
    fetch: Arc<dyn Fn(Context) -> Fetch + Send + Sync>,
}

impl Job {
    fn new<T: 'static, F, Fut>(target: Target, collect: F, data: fn(T) -> TargetData) -> Job
    where
        F: Fn(Context) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, UpstreamError>> + Send + 'static,
    {
        Job {
            target,
            fetch: Arc::new(move |ctx| {
                let fetched = collect(ctx);
                Box::pin(async move { fetched.await.map(data) })
            }),
        }
    }

    pub fn run(&self, ctx: Context) -> Fetch {
        (self.fetch)(ctx)
    }
}

impl fmt::Debug for Job {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Job").field("target", &self.target).finish()
    }
}

/// A collector as the scheduler and the snapshot see it: its name, schedule and targets, read
/// once from its [`Collector`].
#[derive(Clone, Debug)]
pub struct CollectorSpec {
    /// The tenant whose token this collector calls with.
    pub tenant: TenantName,
    pub name: CollectorName,
    pub schedule: Schedule,
    pub targets: Vec<Target>,
    pub collector: Collector,
    /// How long values are kept, when longer than `max_age`: while the tenant's fleet does not
    /// fit its rate limit, each target waits several intervals for its turn.
    pub keep_for: Option<std::time::Duration>,
}

impl CollectorSpec {
    pub fn new(tenant: TenantName, collector: Collector) -> Self {
        CollectorSpec {
            tenant,
            name: collector.name(),
            schedule: collector.schedule(),
            targets: collector.targets(),
            collector,
            keep_for: None,
        }
    }

    /// Upstream calls one run makes per target (one per endpoint the collector calls).
    pub fn calls_per_target(&self) -> u64 {
        self.endpoints().len() as u64
    }

    /// Every tenant's collectors, tenant by tenant in configured order.
    pub fn from_config(config: &Config) -> Vec<CollectorSpec> {
        config
            .tenants
            .iter()
            .flat_map(|t| {
                Collector::of_tenant(t, config.shard)
                    .into_iter()
                    .map(|c| CollectorSpec::new(t.name.clone(), c))
            })
            .collect()
    }

    /// The key of this collector in the snapshot and the scraper.
    pub fn key(&self) -> CollectorKey {
        (self.name, self.tenant.clone())
    }

    pub fn endpoints(&self) -> &'static [Endpoint] {
        self.collector.endpoints()
    }

    /// The jobs of `targets` that are of this collector's kind, in the order given.
    pub fn jobs_for(&self, targets: &[Target]) -> Vec<Job> {
        targets
            .iter()
            .filter_map(|t| self.collector.job(t))
            .collect()
    }
}

/// Where "now" comes from: the system clock, or in tests the simulator's, so that a midnight
/// rollover can be driven without waiting for one.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> Timestamp + Send + Sync>);

impl Clock {
    pub fn system() -> Self {
        Clock(Arc::new(Timestamp::now))
    }

    pub fn from_fn(f: impl Fn() -> Timestamp + Send + Sync + 'static) -> Self {
        Clock(Arc::new(f))
    }

    pub fn now(&self) -> Timestamp {
        (self.0)()
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Clock")
    }
}

/// What a collector run works with.
#[derive(Clone)]
pub struct Context {
    pub client: Client,
    pub clock: Clock,
}

/// What a Delivery account run yields when all that matters is its `remaining_messages`, for
/// the unit tests of the snapshot and the store.
#[cfg(test)]
impl TargetData {
    pub(crate) fn delivery_remaining(remaining: f64) -> TargetData {
        TargetData::DeliveryAccount(crate::upstream::model::DeliveryAccount {
            remaining_messages: Some(remaining),
            ..Default::default()
        })
    }
}

/// A Delivery account collector over `accounts` polled every `interval` (deadline 0.8 and
/// `max_age` 3 intervals), for the unit tests of the snapshot, the store and the rendering.
#[cfg(test)]
impl CollectorSpec {
    pub(crate) fn delivery_accounts(
        accounts: Vec<i32>,
        interval: std::time::Duration,
    ) -> CollectorSpec {
        CollectorSpec::new(
            TenantName::default(),
            Collector::DeliveryAccount(Arc::new(DeliveryAccountConfig {
                schedule: crate::config::Schedule {
                    interval,
                    deadline: interval.mul_f64(0.8),
                    max_age: interval * 3,
                },
                accounts,
            })),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_account_belongs_to_exactly_one_shard_and_the_shards_are_near_even() {
        let shards: Vec<Shard> = (0..3).map(|i| format!("{i}/3").parse().unwrap()).collect();
        let mut sizes = [0usize; 3];
        for id in 1..=3000 {
            let key = Target::DeliveryAccount(id).shard_key();
            let owners: Vec<u32> = shards
                .iter()
                .filter(|s| s.owns("", &key))
                .map(|s| s.index())
                .collect();
            assert_eq!(owners.len(), 1, "account {id}: {owners:?}");
            sizes[owners[0] as usize] += 1;
        }
        assert!(
            sizes.iter().all(|&n| (800..=1200).contains(&n)),
            "{sizes:?}"
        );
    }

    #[test]
    fn an_account_is_owned_by_the_same_shard_in_every_collector() {
        for id in 1..200 {
            let key = Target::DeliveryAccount(id).shard_key();
            assert_eq!(key, Target::DailyAccount(id).shard_key());
            assert_eq!(key, Target::DashboardView(View::Account(id)).shard_key());
        }
        assert_eq!(Target::DashboardView(View::All).shard_key(), "all");
    }

    fn specs(collectors_yaml: &str) -> Vec<CollectorSpec> {
        let yaml = format!("api:\n  base_url: http://127.0.0.1:1\ncollectors:\n{collectors_yaml}");
        CollectorSpec::from_config(&Config::parse(&yaml, Some("t".into())).unwrap())
    }

    const ALL: &str = "  delivery_account:\n    accounts: [1001, 1002]
  tracemail_dashboard:\n    views: [{account: 1001}, {domain: shop.example}]
  tracemail_daily:\n    accounts: [1003]
  migration:\n    migrations: [MG00000001]
  mailbox:\n    mailboxes: [{domain: D000000001, mailbox: EA00000001}]\n";

    #[test]
    fn every_area_gets_its_row_with_its_targets_in_configured_order() {
        let specs = specs(ALL);
        let rows: Vec<_> = specs
            .iter()
            .map(|s| (s.name, s.endpoints(), s.targets.clone()))
            .collect();
        assert_eq!(
            rows,
            vec![
                (
                    CollectorName::DeliveryAccount,
                    &[Endpoint::DeliveryAccount][..],
                    vec![Target::DeliveryAccount(1001), Target::DeliveryAccount(1002)]
                ),
                (
                    CollectorName::TracemailDashboard,
                    &[Endpoint::TracemailDashboard][..],
                    vec![
                        Target::DashboardView(View::All),
                        Target::DashboardView(View::Account(1001)),
                        Target::DashboardView(View::Domain("shop.example".into())),
                    ]
                ),
                (
                    CollectorName::TracemailDaily,
                    &[Endpoint::TracemailDaily, Endpoint::TracemailDomainsRank][..],
                    vec![Target::DailyAccount(1003)]
                ),
                (
                    CollectorName::Migration,
                    &[Endpoint::MigrationStats][..],
                    vec![Target::Migration("MG00000001".into())]
                ),
                (
                    CollectorName::Mailbox,
                    &[Endpoint::EmailAccount][..],
                    vec![Target::Mailbox(MailboxTarget {
                        domain: "D000000001".into(),
                        mailbox: "EA00000001".into(),
                    })]
                ),
            ]
        );
        for s in &specs {
            assert_eq!(s.schedule, s.collector.schedule(), "{}", s.name);
        }
    }

    #[test]
    fn jobs_come_in_the_order_asked_and_only_for_targets_of_the_collectors_kind() {
        let spec = specs("  delivery_account:\n    accounts: [1, 2, 3]\n").remove(0);
        // 9 is not configured: an account /probe registered is fetched all the same.
        let asked = [
            Target::DeliveryAccount(3),
            Target::DailyAccount(2),
            Target::DeliveryAccount(9),
            Target::Migration("MG00000001".into()),
            Target::DeliveryAccount(1),
        ];
        let got: Vec<_> = spec
            .jobs_for(&asked)
            .into_iter()
            .map(|j| j.target)
            .collect();
        assert_eq!(
            got,
            vec![
                Target::DeliveryAccount(3),
                Target::DeliveryAccount(9),
                Target::DeliveryAccount(1)
            ]
        );
    }

    #[test]
    fn only_a_change_in_how_targets_are_fetched_counts_as_other_settings() {
        let daily = |extra: &str| {
            specs(&format!("  tracemail_daily:\n    accounts: [1]\n{extra}"))
                .remove(0)
                .collector
        };
        let base = daily("");
        assert!(base.same_settings(&daily("")));
        assert!(
            base.same_settings(
                &specs("  tracemail_daily:\n    accounts: [1, 2]\n")
                    .remove(0)
                    .collector
            ),
            "another target list is the same settings"
        );
        assert!(!base.same_settings(&daily("    top_domains: 3\n")));
        assert!(!base.same_settings(&daily("    timezone: Europe/Rome\n")));
        let dashboard = |extra: &str| {
            specs(&format!("  tracemail_dashboard:\n{extra}"))
                .remove(0)
                .collector
        };
        assert!(dashboard("    limit: 5\n").same_settings(&dashboard("    limit: 5\n")));
        assert!(!dashboard("    limit: 5\n").same_settings(&dashboard("    limit: 6\n")));
        assert!(
            !base.same_settings(&dashboard("    limit: 5\n")),
            "another area"
        );
        let delivery = specs("  delivery_account:\n    accounts: [1]\n").remove(0);
        assert!(
            delivery
                .collector
                .same_settings(&delivery.collector.clone())
        );
    }
}
