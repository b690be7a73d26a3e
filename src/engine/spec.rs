//! Configured collectors as the scheduler and the snapshot see them: one per tenant and collector,
//! with its schedule and targets ([`CollectorSpec`]). What each collector fetches and how is in
//! [`crate::collectors`]; the scheduler that runs them is [`crate::engine::poller`].

pub use crate::collectors::run::{Clock, Context, Fetch, Job};
pub use crate::collectors::{Collector, CollectorName, Target, TargetData};

use crate::config::{Config, TenantConfig};
use crate::settings::{Schedule, TargetFailureLog};
use crate::shard::Shard;
use crate::tenant::TenantName;
use crate::upstream::endpoint::Endpoint;

/// The enabled collectors of a tenant with this shard's targets, in the order of the collectors. A
/// collector left without targets stays configured, so its health series still say it runs.
pub fn of_tenant(tenant: &TenantConfig, shard: Shard) -> Vec<Collector> {
    tenant
        .collectors
        .iter()
        .map(|c| {
            if shard.count() == 1 {
                c.clone()
            } else {
                c.retain(|t| shard.owns(tenant.name.as_str(), &t.shard_key()))
            }
        })
        .collect()
}

/// A running collector: its collector, then its tenant, so that one collector's collectors sort
/// together.
pub type CollectorKey = (CollectorName, TenantName);

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
    /// How loud its failing targets are in the log.
    pub failure_log: TargetFailureLog,
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
            failure_log: TargetFailureLog::default(),
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
                of_tenant(t, config.shard)
                    .into_iter()
                    .map(|c| CollectorSpec {
                        failure_log: config.target_failures,
                        ..CollectorSpec::new(t.name.clone(), c)
                    })
            })
            .collect()
    }

    /// The key of this collector in the snapshot and the poller.
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

/// The one collector of the generic rooms' unit tests (snapshot, store, rendering, poller,
/// web); its answers are in `collectors::delivery_account::fixtures`.
#[cfg(test)]
pub(crate) mod fixtures {
    use std::sync::Arc;
    use std::time::Duration;

    use super::CollectorSpec;
    use crate::collectors::{Collector, Configured};
    use crate::settings::Schedule;
    use crate::tenant::TenantName;

    /// A Delivery account collector over `ids` polled every `interval` (deadline 0.8 and `max_age`
    /// 3 intervals).
    pub fn accounts(ids: &[i32], interval: Duration) -> CollectorSpec {
        CollectorSpec::new(
            TenantName::default(),
            Collector::DeliveryAccount(Arc::new(Configured {
                schedule: Schedule {
                    interval,
                    deadline: interval.mul_f64(0.8),
                    max_age: interval * 3,
                },
                settings: Arc::new(()),
                targets: ids.to_vec(),
            })),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collectors::mailbox::Target as MailboxTarget;
    use crate::collectors::tracemail_dashboard::View;
    use crate::collectors::{
        delivery_account, mailbox, migration, tracemail_daily, tracemail_dashboard,
    };

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
            assert_eq!(key, Target::TracemailDaily(id).shard_key());
            assert_eq!(
                key,
                Target::TracemailDashboard(View::Account(id)).shard_key()
            );
        }
        assert_eq!(Target::TracemailDashboard(View::All).shard_key(), "all");
    }

    fn specs(collectors_yaml: &str) -> Vec<CollectorSpec> {
        let yaml = format!("api:\n  base_url: http://127.0.0.1:1\ncollectors:\n{collectors_yaml}");
        CollectorSpec::from_config(&Config::parse(&yaml, Some("t".into())).unwrap())
    }

    /// The collector of the one spec of `collectors_yaml`.
    fn collector(collectors_yaml: &str) -> Collector {
        specs(collectors_yaml).remove(0).collector
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
                    &[delivery_account::ACCOUNT][..],
                    vec![Target::DeliveryAccount(1001), Target::DeliveryAccount(1002)]
                ),
                (
                    CollectorName::TracemailDashboard,
                    &[tracemail_dashboard::DASHBOARD][..],
                    vec![
                        Target::TracemailDashboard(View::All),
                        Target::TracemailDashboard(View::Account(1001)),
                        Target::TracemailDashboard(View::Domain("shop.example".into())),
                    ]
                ),
                (
                    CollectorName::TracemailDaily,
                    &[tracemail_daily::DAILY, tracemail_daily::DOMAINS_RANK][..],
                    vec![Target::TracemailDaily(1003)]
                ),
                (
                    CollectorName::Migration,
                    &[migration::STATS][..],
                    vec![Target::Migration("MG00000001".into())]
                ),
                (
                    CollectorName::Mailbox,
                    &[mailbox::EMAIL_ACCOUNT][..],
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
            Target::TracemailDaily(2),
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
        let daily =
            |extra: &str| collector(&format!("  tracemail_daily:\n    accounts: [1]\n{extra}"));
        let base = daily("");
        assert!(base.same_settings(&daily("")));
        assert!(
            base.same_settings(&collector("  tracemail_daily:\n    accounts: [1, 2]\n")),
            "another target list is the same settings"
        );
        assert!(!base.same_settings(&daily("    top_domains: 3\n")));
        assert!(!base.same_settings(&daily("    timezone: Europe/Rome\n")));
        let dashboard = |extra: &str| collector(&format!("  tracemail_dashboard:\n{extra}"));
        assert!(dashboard("    limit: 5\n").same_settings(&dashboard("    limit: 5\n")));
        assert!(!dashboard("    limit: 5\n").same_settings(&dashboard("    limit: 6\n")));
        assert!(
            !base.same_settings(&dashboard("    limit: 5\n")),
            "another collector"
        );
        let delivery = collector("  delivery_account:\n    accounts: [1]\n");
        assert!(delivery.same_settings(&delivery.clone()));
    }

    /// What the storage directory keeps each collector's targets under: its settings' fields by
    /// name, never their `Debug` text, so another build keeps what this one stored.
    #[test]
    fn every_collectors_settings_key_is_written_from_its_fields_by_name() {
        let keys: Vec<(CollectorName, String)> = specs(
            "  delivery_account:\n    accounts: [1]
  tracemail_dashboard:\n    timezone: Europe/Rome\n    limit: 5
  tracemail_daily:\n    accounts: [1]\n    top_domains: 3\n    date_format: DD/MM/YYYY
  migration:\n    migrations: [MG00000001]
  mailbox:\n    mailboxes: [{domain: D000000001, mailbox: EA00000001}]
  team_member:\n    identity_labels: true\n    team_members: [T000000101]\n",
        )
        .into_iter()
        .map(|s| (s.name, s.collector.settings_key()))
        .collect();
        let key = |name| {
            keys.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, k)| k.as_str())
                .unwrap()
        };
        assert_eq!(keys.len(), 6, "{keys:?}");
        for name in [
            CollectorName::DeliveryAccount,
            CollectorName::Migration,
            CollectorName::Mailbox,
        ] {
            assert_eq!(key(name), "v1");
        }
        assert_eq!(
            key(CollectorName::TracemailDashboard),
            r#"v1;timezone="Europe/Rome";date_format="%Y-%m-%d";limit="5""#
        );
        assert_eq!(
            key(CollectorName::TracemailDaily),
            r#"v1;timezone="UTC";date_format="%d/%m/%Y";top_domains="3""#
        );
        assert_eq!(
            key(CollectorName::TeamMember),
            r#"v1;identity_labels="true""#
        );
    }
}
