//! Probe-registered targets: the Delivery accounts Prometheus asks for on `/probe`, per tenant.
//! The web side registers and touches them; the scraper adds the live ones to the poll set of
//! each account collector (`delivery_account`, `tracemail_daily`) and forgets those not probed
//! for `probe.idle_intervals` intervals. A probe never fetches: however many Prometheus servers
//! probe an account, it costs one upstream call per interval.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::collector::{CollectorSpec, Target};
use crate::config::{Config, ProbeConfig};
use crate::tenant::TenantName;

/// Every tenant's probe registry; replaced per tenant on reload, keeping what was registered.
#[derive(Default)]
pub struct Probes {
    tenants: RwLock<BTreeMap<TenantName, Arc<TenantProbes>>>,
}

/// What a probe of an account did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Registration {
    /// A configured target of this process: polled anyway.
    Configured,
    /// Already registered; its idle time starts again.
    Known,
    /// Registered now: the account collectors fetch it at once.
    Added,
    /// Not in the tenant's `probe.allow` list.
    NotAllowed,
    /// The tenant has `probe.max_targets` registered targets already.
    Full,
}

/// Where a target of `/sd` comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    Configured,
    Probe,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Configured => "configured",
            Source::Probe => "probe",
        }
    }
}

/// One tenant's registered accounts.
pub struct TenantProbes {
    inner: Mutex<Inner>,
    /// Moves on whenever an account is registered, so that the account collectors fetch it now
    /// rather than at their next tick.
    added: watch::Sender<u64>,
}

struct Inner {
    settings: ProbeConfig,
    /// A target not probed for this long leaves the poll set: `idle_intervals` times the
    /// longest interval of the account collectors.
    idle: Duration,
    /// Whether an account collector is enabled at all; if not, nothing can be probed.
    accounts: bool,
    /// This process's configured account targets (of any account collector).
    configured: BTreeSet<i32>,
    /// Registered accounts and when each was last probed.
    seen: HashMap<i32, Instant>,
}

impl Probes {
    /// Takes a (re)loaded config: each tenant's settings, idle time and configured accounts;
    /// registrations of tenants that stay are kept (trimmed to a smaller cap or allow-list).
    pub fn reconfigure(&self, config: &Config, specs: &[CollectorSpec]) {
        let mut tenants = self
            .tenants
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut next = BTreeMap::new();
        for t in &config.tenants {
            let own = specs.iter().filter(|s| s.tenant == t.name);
            let mut interval = None::<Duration>;
            let mut configured = BTreeSet::new();
            for spec in own {
                if !spec.name.polls_accounts() {
                    continue;
                }
                interval = Some(
                    interval.map_or(spec.schedule.interval, |i| i.max(spec.schedule.interval)),
                );
                configured.extend(spec.targets.iter().filter_map(Target::account_id));
            }
            let idle = interval
                .unwrap_or_default()
                .saturating_mul(config.probe_idle_intervals);
            let probes = tenants
                .get(&t.name)
                .cloned()
                .unwrap_or_else(|| Arc::new(TenantProbes::new()));
            {
                let mut inner = probes.lock();
                inner.settings = t.probe.clone();
                inner.idle = idle;
                inner.accounts = interval.is_some();
                inner.configured = configured;
                let Inner { settings, seen, .. } = &mut *inner;
                seen.retain(|id, _| settings.allow.as_ref().is_none_or(|a| a.contains(id)));
                if seen.len() > settings.max_targets {
                    // The least recently probed go first.
                    let mut by_age: Vec<(i32, Instant)> =
                        seen.iter().map(|(id, at)| (*id, *at)).collect();
                    by_age.sort_by_key(|(_, at)| std::cmp::Reverse(*at));
                    by_age.truncate(settings.max_targets);
                    *seen = by_age.into_iter().collect();
                }
            }
            next.insert(t.name.clone(), probes);
        }
        *tenants = next;
    }

    pub fn get(&self, tenant: &TenantName) -> Option<Arc<TenantProbes>> {
        self.tenants
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(tenant)
            .cloned()
    }

    /// The configured tenants' names, in order.
    pub fn tenants(&self) -> Vec<TenantName> {
        self.tenants
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }
}

impl TenantProbes {
    fn new() -> Self {
        TenantProbes {
            inner: Mutex::new(Inner {
                settings: ProbeConfig::default(),
                idle: Duration::ZERO,
                accounts: false,
                configured: BTreeSet::new(),
                seen: HashMap::new(),
            }),
            added: watch::Sender::new(0),
        }
    }

    /// Nothing panics under this lock; if something did, the registry is still a valid one.
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether any account collector is enabled for this tenant.
    pub fn takes_accounts(&self) -> bool {
        self.lock().accounts
    }

    /// A probe of account `id` at `now`.
    pub fn register(&self, id: i32, now: Instant) -> Registration {
        let outcome = {
            let mut inner = self.lock();
            if inner.configured.contains(&id) {
                return Registration::Configured;
            }
            if let Some(at) = inner.seen.get_mut(&id) {
                *at = now;
                return Registration::Known;
            }
            if inner
                .settings
                .allow
                .as_ref()
                .is_some_and(|a| !a.contains(&id))
            {
                return Registration::NotAllowed;
            }
            if inner.seen.len() >= inner.settings.max_targets {
                Registration::Full
            } else {
                inner.seen.insert(id, now);
                Registration::Added
            }
        };
        if outcome == Registration::Added {
            self.added.send_modify(|n| *n = n.wrapping_add(1));
        }
        outcome
    }

    /// The registered accounts probed within the idle time, in id order; the others are
    /// forgotten.
    pub fn live(&self, now: Instant) -> Vec<i32> {
        let mut inner = self.lock();
        let idle = inner.idle;
        inner
            .seen
            .retain(|_, at| now.saturating_duration_since(*at) <= idle);
        let mut ids: Vec<i32> = inner.seen.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// Registered accounts now (live or not yet pruned).
    pub fn registered(&self) -> usize {
        self.lock().seen.len()
    }

    /// Every account this process knows for the tenant, with where it comes from: configured
    /// ones, then live probed ones, each in id order.
    pub fn known(&self, now: Instant) -> Vec<(i32, Source)> {
        let live = self.live(now);
        let inner = self.lock();
        inner
            .configured
            .iter()
            .map(|id| (*id, Source::Configured))
            .chain(live.into_iter().map(|id| (id, Source::Probe)))
            .collect()
    }

    /// Wakes when an account is registered.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.added.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(probe: &str) -> (Config, Vec<CollectorSpec>) {
        let yaml = format!(
            "api:\n  base_url: http://127.0.0.1:1\ncollectors:\n  delivery_account:\n    interval: 10s\n  tracemail_daily:\n    interval: 20s\n{probe}tenants:\n  - name: a\n    token_env: T\n    collectors:\n      delivery_account:\n        accounts: [1, 2]\n"
        );
        let config = Config::parse_with_env(&yaml, &|_| Some("t".to_owned())).unwrap();
        let specs = CollectorSpec::from_config(&config);
        (config, specs)
    }

    #[test]
    fn a_probe_registers_once_within_the_cap_and_allow_list_and_leaves_when_idle() {
        let (config, specs) =
            config("probe:\n  idle_intervals: 2\n  max_targets: 2\n  allow: [1, 5, 6, 7]\n");
        let probes = Probes::default();
        probes.reconfigure(&config, &specs);
        let a = probes.get(&TenantName::parse("a").unwrap()).unwrap();
        assert!(a.takes_accounts());
        let t0 = Instant::now();
        let mut added = a.subscribe();
        assert_eq!(a.register(1, t0), Registration::Configured);
        assert_eq!(a.register(9, t0), Registration::NotAllowed);
        assert_eq!(a.register(5, t0), Registration::Added);
        assert!(added.has_changed().unwrap());
        added.mark_unchanged();
        assert_eq!(a.register(5, t0), Registration::Known);
        assert!(!added.has_changed().unwrap());
        assert_eq!(a.register(6, t0), Registration::Added);
        assert_eq!(a.register(7, t0), Registration::Full);
        assert_eq!(a.live(t0), [5, 6]);
        // Idle is 2 x the longest account interval (20s): 6 probed again at 30s stays.
        assert_eq!(
            a.register(6, t0 + Duration::from_secs(30)),
            Registration::Known
        );
        assert_eq!(a.live(t0 + Duration::from_secs(41)), [6]);
        assert_eq!(
            a.known(t0 + Duration::from_secs(41)),
            [
                (1, Source::Configured),
                (2, Source::Configured),
                (6, Source::Probe)
            ]
        );
        assert!(probes.get(&TenantName::parse("b").unwrap()).is_none());
    }

    #[test]
    fn a_reload_keeps_registrations_within_the_new_cap_and_allow_list() {
        let (config, specs) = config("");
        let probes = Probes::default();
        probes.reconfigure(&config, &specs);
        let a = probes.get(&TenantName::parse("a").unwrap()).unwrap();
        let t0 = Instant::now();
        for (i, id) in [10, 11, 12, 13].into_iter().enumerate() {
            assert_eq!(
                a.register(id, t0 + Duration::from_secs(i as u64)),
                Registration::Added
            );
        }
        let (config, specs) = config_with("probe:\n  max_targets: 2\n  allow: [10, 12, 13]\n");
        probes.reconfigure(&config, &specs);
        let same = probes.get(&TenantName::parse("a").unwrap()).unwrap();
        assert!(Arc::ptr_eq(&a, &same));
        // 11 is not allowed any more; of 10, 12 and 13 the two probed last stay.
        assert_eq!(a.live(t0 + Duration::from_secs(5)), [12, 13]);
    }

    fn config_with(probe: &str) -> (Config, Vec<CollectorSpec>) {
        config(probe)
    }
}
