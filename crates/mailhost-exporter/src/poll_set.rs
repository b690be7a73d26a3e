//! The targets a tenant polls beyond its configured ones: the Delivery accounts Prometheus asks
//! for on `/probe`, and what discovery finds of what the provider reveals (the accounts of the
//! dashboard's top lists, the sending domains of the daily statistics). The web side registers
//! probes; the scraper feeds discovery from its runs, adds the live targets to each collector's
//! poll set, and drops a target once it has not been probed or seen for `probe.idle_intervals`
//! intervals, or at once when the provider answers 404 for it. A probe never fetches: however
//! many Prometheus servers probe an account, it costs one upstream call per interval.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::collector::{CollectorName, CollectorSpec, Target};
use crate::config::{Config, DiscoveryConfig, ProbeConfig, View};
use crate::tenant::TenantName;

/// Every tenant's poll set; a reload keeps those of the tenants it keeps.
#[derive(Default)]
pub struct PollSets {
    tenants: RwLock<BTreeMap<TenantName, Arc<PollSet>>>,
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

/// Where a target comes from, as `/sd` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    Configured,
    Probe,
    Discovered,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Configured => "configured",
            Source::Probe => "probe",
            Source::Discovered => "discovered",
        }
    }
}

/// One tenant's probed and discovered targets.
pub struct PollSet {
    inner: Mutex<Inner>,
    /// Moves on whenever a target is added, so that its collectors fetch it now rather than at
    /// their next tick.
    added: watch::Sender<u64>,
}

/// Targets of one kind, each with when it was last probed or seen.
type Seen<K> = HashMap<K, Instant>;

struct Inner {
    probe: ProbeConfig,
    discovery: DiscoveryConfig,
    /// A probed account not probed for this long leaves: `idle_intervals` times the longest
    /// interval of the account collectors.
    probe_idle: Duration,
    /// A discovered account or domain not seen for this long leaves: `idle_intervals` times the
    /// interval of the collector that finds it.
    accounts_idle: Duration,
    domains_idle: Duration,
    /// Whether an account collector is enabled at all; if not, nothing can be probed.
    takes_accounts: bool,
    /// This process's configured account targets (of any account collector).
    configured: BTreeSet<i32>,
    /// This process's configured dashboard domain views.
    configured_domains: BTreeSet<String>,
    probed: Seen<i32>,
    discovered: Seen<i32>,
    domains: Seen<String>,
    /// Accounts the provider answered 404 for, and when: a top list that still names one does
    /// not bring it back until it has been gone for the discovery idle time.
    gone: Seen<i32>,
}

impl PollSets {
    /// Takes a (re)loaded config: each tenant's settings, idle times and configured targets.
    /// The targets of tenants that stay are kept, trimmed to a smaller cap or allow-list.
    pub fn reconfigure(&self, config: &Config, specs: &[CollectorSpec]) {
        let mut tenants = self
            .tenants
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut next = BTreeMap::new();
        for t in &config.tenants {
            let idle = |interval: Option<Duration>| {
                interval
                    .unwrap_or_default()
                    .saturating_mul(config.probe_idle_intervals)
            };
            let own: Vec<&CollectorSpec> = specs.iter().filter(|s| s.tenant == t.name).collect();
            let interval_of = |name: CollectorName| {
                own.iter()
                    .find(|s| s.name == name)
                    .map(|s| s.schedule.interval)
            };
            let account_interval = own
                .iter()
                .filter(|s| s.name.polls_accounts())
                .map(|s| s.schedule.interval)
                .max();
            let configured = own
                .iter()
                .flat_map(|s| s.targets.iter().filter_map(Target::account_id))
                .collect();
            let configured_domains = own
                .iter()
                .flat_map(|s| s.targets.iter())
                .filter_map(|t| match t {
                    Target::DashboardView(View::Domain(d)) => Some(d.clone()),
                    _ => None,
                })
                .collect();
            let set = tenants
                .get(&t.name)
                .cloned()
                .unwrap_or_else(|| Arc::new(PollSet::new()));
            {
                let mut inner = set.lock();
                inner.probe = t.probe.clone();
                inner.discovery = t.discovery.clone();
                inner.probe_idle = idle(account_interval);
                inner.accounts_idle = idle(interval_of(CollectorName::TracemailDashboard));
                inner.domains_idle = idle(interval_of(CollectorName::TracemailDaily));
                inner.takes_accounts = account_interval.is_some();
                inner.configured = configured;
                inner.configured_domains = configured_domains;
                inner.trim();
            }
            next.insert(t.name.clone(), set);
        }
        *tenants = next;
    }

    pub fn get(&self, tenant: &TenantName) -> Option<Arc<PollSet>> {
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

impl Inner {
    /// Applies the current settings to what is registered: allow and deny lists, then caps
    /// (the least recently seen go first).
    fn trim(&mut self) {
        let probe = &self.probe;
        self.probed
            .retain(|id, _| probe.allow.as_ref().is_none_or(|a| a.contains(id)));
        keep_newest(&mut self.probed, probe.max_targets);
        let d = &self.discovery;
        if !d.accounts {
            self.discovered.clear();
        }
        if !d.domains {
            self.domains.clear();
        }
        self.discovered.retain(|id, _| d.takes(*id));
        keep_newest(&mut self.discovered, d.max_accounts);
        keep_newest(&mut self.domains, d.max_domains);
    }
}

impl DiscoveryConfig {
    /// Whether a found account passes the allow and deny lists.
    fn takes(&self, id: i32) -> bool {
        !self.deny.contains(&id) && self.allow.as_ref().is_none_or(|a| a.contains(&id))
    }
}

/// Keeps the `cap` most recently seen entries.
fn keep_newest<K: Clone + Eq + std::hash::Hash>(seen: &mut Seen<K>, cap: usize) {
    if seen.len() <= cap {
        return;
    }
    let mut by_age: Vec<(K, Instant)> = seen.iter().map(|(k, at)| (k.clone(), *at)).collect();
    by_age.sort_by_key(|(_, at)| std::cmp::Reverse(*at));
    by_age.truncate(cap);
    *seen = by_age.into_iter().collect();
}

/// The entries seen within `idle` of `now`; the others are forgotten.
fn live<K: Clone + Ord + std::hash::Hash>(
    seen: &mut Seen<K>,
    idle: Duration,
    now: Instant,
) -> Vec<K> {
    seen.retain(|_, at| now.saturating_duration_since(*at) <= idle);
    let mut keys: Vec<K> = seen.keys().cloned().collect();
    keys.sort_unstable();
    keys
}

/// A domain name as the provider reports it, if it is one: lower case, at most 253 characters
/// of letters, digits, dots and hyphens. It becomes a label value and a request field.
fn domain_name(raw: &str) -> Option<String> {
    let d = raw.trim().to_ascii_lowercase();
    let ok = !d.is_empty()
        && d.len() <= 253
        && d.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
    ok.then_some(d)
}

impl PollSet {
    fn new() -> Self {
        PollSet {
            inner: Mutex::new(Inner {
                probe: ProbeConfig::default(),
                discovery: DiscoveryConfig::default(),
                probe_idle: Duration::ZERO,
                accounts_idle: Duration::ZERO,
                domains_idle: Duration::ZERO,
                takes_accounts: false,
                configured: BTreeSet::new(),
                configured_domains: BTreeSet::new(),
                probed: HashMap::new(),
                discovered: HashMap::new(),
                domains: HashMap::new(),
                gone: HashMap::new(),
            }),
            added: watch::Sender::new(0),
        }
    }

    /// Nothing panics under this lock; if something did, the sets are still valid ones.
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn notify(&self) {
        self.added.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Whether any account collector is enabled for this tenant.
    pub fn takes_accounts(&self) -> bool {
        self.lock().takes_accounts
    }

    /// A probe of account `id` at `now`.
    pub fn register(&self, id: i32, now: Instant) -> Registration {
        let outcome = {
            let mut inner = self.lock();
            if inner.configured.contains(&id) {
                return Registration::Configured;
            }
            if let Some(at) = inner.probed.get_mut(&id) {
                *at = now;
                return Registration::Known;
            }
            if inner.probe.allow.as_ref().is_some_and(|a| !a.contains(&id)) {
                return Registration::NotAllowed;
            }
            if inner.probed.len() >= inner.probe.max_targets {
                Registration::Full
            } else {
                inner.probed.insert(id, now);
                Registration::Added
            }
        };
        if outcome == Registration::Added {
            self.notify();
        }
        outcome
    }

    /// Accounts the dashboard's top lists named: each passing the allow and deny lists is
    /// (again) seen now, new ones up to `discovery.max_accounts`.
    pub fn discover_accounts(&self, ids: impl IntoIterator<Item = i32>, now: Instant) {
        let added = {
            let mut inner = self.lock();
            if !inner.discovery.accounts {
                return;
            }
            let idle = inner.accounts_idle;
            live(&mut inner.gone, idle, now);
            let mut added = false;
            for id in ids {
                if id <= 0
                    || inner.configured.contains(&id)
                    || !inner.discovery.takes(id)
                    || inner.gone.contains_key(&id)
                {
                    continue;
                }
                let full = inner.discovered.len() >= inner.discovery.max_accounts;
                match inner.discovered.get_mut(&id) {
                    Some(at) => *at = now,
                    None if !full => {
                        inner.discovered.insert(id, now);
                        added = true;
                    }
                    None => {}
                }
            }
            added
        };
        if added {
            self.notify();
        }
    }

    /// Sending domains the daily statistics named: each (again) seen now as a dashboard view,
    /// new ones up to `discovery.max_domains`; names that are not domain names are skipped.
    pub fn discover_domains<'a>(&self, names: impl IntoIterator<Item = &'a str>, now: Instant) {
        let added = {
            let mut inner = self.lock();
            if !inner.discovery.domains {
                return;
            }
            let mut added = false;
            for name in names.into_iter().filter_map(domain_name) {
                if inner.configured_domains.contains(&name) {
                    continue;
                }
                let full = inner.domains.len() >= inner.discovery.max_domains;
                match inner.domains.get_mut(&name) {
                    Some(at) => *at = now,
                    None if !full => {
                        inner.domains.insert(name, now);
                        added = true;
                    }
                    None => {}
                }
            }
            added
        };
        if added {
            self.notify();
        }
    }

    /// The provider says this target is gone (404): a probed or discovered one leaves now, and
    /// discovery does not take a discovered account back for its idle time.
    pub fn forget(&self, target: &Target, now: Instant) {
        let mut inner = self.lock();
        match target {
            Target::DeliveryAccount(id)
            | Target::DailyAccount(id)
            | Target::DashboardView(View::Account(id)) => {
                inner.probed.remove(id);
                if inner.discovered.remove(id).is_some()
                    && inner.gone.len() < inner.discovery.max_accounts
                {
                    inner.gone.insert(*id, now);
                }
            }
            Target::DashboardView(View::Domain(d)) => {
                inner.domains.remove(d);
            }
            _ => {}
        }
    }

    /// The live accounts, probed and discovered, in id order.
    fn live_accounts(&self, now: Instant) -> Vec<(i32, Source)> {
        let mut inner = self.lock();
        let Inner {
            probed,
            discovered,
            probe_idle,
            accounts_idle,
            ..
        } = &mut *inner;
        let probed = live(probed, *probe_idle, now);
        let discovered = live(discovered, *accounts_idle, now);
        let mut all: Vec<(i32, Source)> = probed
            .into_iter()
            .map(|id| (id, Source::Probe))
            .chain(discovered.into_iter().map(|id| (id, Source::Discovered)))
            .collect();
        // Probed before discovered for an account that is both: one entry each.
        all.sort_unstable();
        all.dedup_by_key(|(id, _)| *id);
        all
    }

    /// The targets `collector` polls beyond its configured ones now: live accounts for an
    /// account collector, live domains as views for the dashboard.
    pub fn targets(&self, collector: CollectorName, now: Instant) -> Vec<Target> {
        match collector {
            CollectorName::TracemailDashboard => {
                let mut inner = self.lock();
                let idle = inner.domains_idle;
                live(&mut inner.domains, idle, now)
                    .into_iter()
                    .map(|d| Target::DashboardView(View::Domain(d)))
                    .collect()
            }
            name if name.polls_accounts() => self
                .live_accounts(now)
                .into_iter()
                .filter_map(|(id, _)| Target::of_account(name, id))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Probed accounts registered now (live or not yet pruned).
    pub fn registered(&self) -> usize {
        self.lock().probed.len()
    }

    /// Every account this process knows for the tenant, with where it comes from: configured
    /// ones, then live probed or discovered ones, each in id order.
    pub fn known(&self, now: Instant) -> Vec<(i32, Source)> {
        let extra = self.live_accounts(now);
        let inner = self.lock();
        inner
            .configured
            .iter()
            .map(|id| (*id, Source::Configured))
            .chain(extra)
            .collect()
    }

    /// Wakes when a target is added.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.added.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> (Config, Vec<CollectorSpec>) {
        let yaml = format!(
            "api:\n  base_url: http://127.0.0.1:1\ncollectors:\n  delivery_account:\n    interval: 10s\n  tracemail_daily:\n    interval: 20s\n  tracemail_dashboard:\n    interval: 30s\n{extra}tenants:\n  - name: a\n    token_env: T\n    collectors:\n      delivery_account:\n        accounts: [1, 2]\n      tracemail_dashboard:\n        views: [{{domain: shop.example}}]\n"
        );
        let config = Config::parse_with_env(&yaml, &|_| Some("t".to_owned())).unwrap();
        let specs = CollectorSpec::from_config(&config);
        (config, specs)
    }

    fn tenant_a(sets: &PollSets) -> Arc<PollSet> {
        sets.get(&TenantName::parse("a").unwrap()).unwrap()
    }

    #[test]
    fn a_probe_registers_once_within_the_cap_and_allow_list_and_leaves_when_idle() {
        let (config, specs) =
            config("probe:\n  idle_intervals: 2\n  max_targets: 2\n  allow: [1, 5, 6, 7]\n");
        let sets = PollSets::default();
        sets.reconfigure(&config, &specs);
        let a = tenant_a(&sets);
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
        let accounts = |at| a.targets(CollectorName::DeliveryAccount, at);
        assert_eq!(
            accounts(t0),
            [Target::DeliveryAccount(5), Target::DeliveryAccount(6)]
        );
        // Idle is 2 x the longest account interval (20s): 6 probed again at 30s stays.
        let t30 = t0 + Duration::from_secs(30);
        assert_eq!(a.register(6, t30), Registration::Known);
        assert_eq!(
            a.targets(CollectorName::TracemailDaily, t0 + Duration::from_secs(41)),
            [Target::DailyAccount(6)]
        );
        assert_eq!(
            a.known(t0 + Duration::from_secs(41)),
            [
                (1, Source::Configured),
                (2, Source::Configured),
                (6, Source::Probe)
            ]
        );
        assert!(sets.get(&TenantName::parse("b").unwrap()).is_none());
    }

    #[test]
    fn a_reload_keeps_registrations_within_the_new_cap_and_allow_list() {
        let (first, specs) = config("");
        let sets = PollSets::default();
        sets.reconfigure(&first, &specs);
        let a = tenant_a(&sets);
        let t0 = Instant::now();
        for (i, id) in [10, 11, 12, 13].into_iter().enumerate() {
            assert_eq!(
                a.register(id, t0 + Duration::from_secs(i as u64)),
                Registration::Added
            );
        }
        let (second, specs) = config("probe:\n  max_targets: 2\n  allow: [10, 12, 13]\n");
        sets.reconfigure(&second, &specs);
        assert!(Arc::ptr_eq(&a, &tenant_a(&sets)));
        // 11 is not allowed any more; of 10, 12 and 13 the two probed last stay.
        assert_eq!(
            a.targets(CollectorName::DeliveryAccount, t0 + Duration::from_secs(5)),
            [Target::DeliveryAccount(12), Target::DeliveryAccount(13)]
        );
    }

    #[test]
    fn discovery_follows_the_lists_within_allow_deny_and_caps_and_a_404_removes() {
        let (config, specs) = config(
            "discovery:\n  accounts: true\n  domains: true\n  max_accounts: 3\n  max_domains: 2\n  deny: [4]\n",
        );
        let sets = PollSets::default();
        sets.reconfigure(&config, &specs);
        let a = tenant_a(&sets);
        let t0 = Instant::now();
        // 1 is configured, 4 denied, -3 is no id; 5, 6 and 7 fill the cap of 3, 8 waits.
        a.discover_accounts([1, 4, -3, 5, 6, 7, 8], t0);
        a.register(6, t0);
        assert_eq!(
            a.known(t0),
            [
                (1, Source::Configured),
                (2, Source::Configured),
                (5, Source::Discovered),
                (6, Source::Probe),
                (7, Source::Discovered)
            ]
        );
        // The provider says 5 is gone: a top list naming it again does not bring it back.
        a.forget(&Target::DeliveryAccount(5), t0);
        a.discover_accounts([5, 8], t0);
        assert_eq!(
            a.targets(CollectorName::DeliveryAccount, t0),
            [6, 7, 8].map(Target::DeliveryAccount)
        );
        // Seen again keeps an account; not seen for 3 dashboard intervals (90s) drops it.
        let t60 = t0 + Duration::from_secs(60);
        a.discover_accounts([7], t60);
        assert_eq!(
            a.targets(CollectorName::DeliveryAccount, t0 + Duration::from_secs(95)),
            [Target::DeliveryAccount(7)]
        );
        // Domains: the configured view is skipped, odd names too, and the cap holds.
        a.discover_domains(
            [
                "Shop.Example",
                "a b",
                "news.example",
                "x.example",
                "y.example",
            ],
            t0,
        );
        assert_eq!(
            a.targets(CollectorName::TracemailDashboard, t0),
            [
                Target::DashboardView(View::Domain("news.example".into())),
                Target::DashboardView(View::Domain("x.example".into()))
            ]
        );
    }

    #[test]
    fn nothing_is_discovered_unless_asked() {
        let (config, specs) = config("");
        let sets = PollSets::default();
        sets.reconfigure(&config, &specs);
        let a = tenant_a(&sets);
        let t0 = Instant::now();
        a.discover_accounts([5], t0);
        a.discover_domains(["news.example"], t0);
        assert_eq!(a.known(t0).len(), 2);
        assert!(a.targets(CollectorName::TracemailDashboard, t0).is_empty());
    }
}
