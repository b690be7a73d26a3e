//! The targets a tenant polls beyond its configured ones: the Delivery accounts Prometheus asks
//! for on `/probe`, and what discovery finds of what the provider reveals (the accounts of the
//! dashboard's top lists, the sending domains of the daily statistics). The web side registers
//! probes; the poller feeds discovery from its runs, adds the live targets to each collector's
//! poll set, and drops a target once it has not been probed or seen for `probe.idle_intervals`
//! intervals, or at once when the provider answers 404 for it. A probe never fetches: however
//! many Prometheus servers probe an account, it costs one upstream call per interval.
//!
//! A probe can name any id, so what strangers and typos can cost is bounded whatever the
//! provider answers: at most `probe.new_per_interval` new accounts per interval and
//! `probe.first_fetches` first fetches in flight; an id the provider refused (404, 403) is
//! answered from a short cache with no call; an account that never succeeded leaves after its
//! idle time however often it is probed, and `/sd` lists only accounts configured, discovered,
//! or probed and fetched successfully at least once.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::time::Instant;

use crate::collectors::{Extra, Refers};
use crate::config::Config;
use crate::engine::signal::Bell;
use crate::engine::spec::{CollectorName, CollectorSpec, Target};
use crate::engine::unpoisoned;
use crate::settings::{DiscoveryConfig, ProbeConfig};
use crate::tenant::TenantName;
use crate::upstream::error::FailureReason;

/// Ids the provider refused that are remembered per tenant at most (the newest).
pub const MAX_REFUSED: usize = 10_000;

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
    /// The provider refused this id (404 or 403) within the last interval: not polled.
    Refused(FailureReason),
    /// The tenant registered `probe.new_per_interval` new accounts this interval already; the
    /// next interval starts in this long.
    TooManyNew(Duration),
    /// The tenant has `probe.first_fetches` first fetches in flight already.
    TooManyFirstFetches,
}

/// A probed account.
#[derive(Clone, Copy, Debug)]
struct Probed {
    /// When it was registered: an account that never succeeded leaves this long after it.
    since: Instant,
    /// When it was last probed: a confirmed account leaves this long after it.
    seen: Instant,
    /// Its first fetch has ended.
    attempted: bool,
    /// A fetch of it has succeeded.
    confirmed: bool,
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
    added: Bell,
}

/// A collector's subscription to its tenant's poll set: wakes when a target is added.
pub struct Registered {
    set: Arc<PollSet>,
    seen: u64,
}

impl Registered {
    /// Waits until a target is added after the last wait (or the subscription) returned.
    pub async fn added(&mut self) {
        self.set.added.rung_since(&mut self.seen).await;
    }
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
    /// The longest interval of the account collectors: the window of `new_per_interval` and
    /// how long a refusal is remembered.
    account_interval: Duration,
    /// This process's configured account targets (of any account collector).
    configured: BTreeSet<i32>,
    /// Each account collector's configured accounts, in collector order: a probe waits only for
    /// the collectors that poll its account. A list, not a map: a tenant has one or two account
    /// collectors, and a map's first node holds room for eleven (about 300 bytes a tenant).
    configured_in: Vec<(CollectorName, BTreeSet<i32>)>,
    /// This process's configured dashboard domain views.
    configured_domains: BTreeSet<String>,
    probed: HashMap<i32, Probed>,
    discovered: Seen<i32>,
    /// Ids the provider refused, when and why: probes of them are answered from here, with no
    /// call, for an interval. At most [`MAX_REFUSED`].
    refused: HashMap<i32, (Instant, FailureReason)>,
    /// New registrations in the current window: when it started, and how many.
    window: (Instant, usize),
    domains: Seen<String>,
    /// Accounts the provider answered 404 for, and when: a top list that still names one does
    /// not bring it back until it has been gone for the discovery idle time.
    gone: Seen<i32>,
}

impl PollSets {
    /// Takes a (re)loaded config: each tenant's settings, idle times and configured targets.
    /// The targets of tenants that stay are kept, trimmed to a smaller cap or allow-list.
    pub fn reconfigure(&self, config: &Config, specs: &[CollectorSpec]) {
        let mut tenants = unpoisoned(self.tenants.write());
        let mut next = BTreeMap::new();
        for t in &config.tenants {
            let idle = |interval: Option<Duration>| {
                interval
                    .unwrap_or_default()
                    .saturating_mul(config.probe_idle_intervals)
            };
            let own: Vec<&CollectorSpec> = specs.iter().filter(|s| s.tenant == t.name).collect();
            // Discovered accounts and domains live as long as the collectors that reveal them run.
            let interval_of = |reveals: Extra| {
                own.iter()
                    .filter(|s| s.name.reveals() == reveals)
                    .map(|s| s.schedule.interval)
                    .max()
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
            let configured_in = own
                .iter()
                .filter(|s| s.name.polls_accounts())
                .map(|s| {
                    let ids = s.targets.iter().filter_map(Target::account_id).collect();
                    (s.name, ids)
                })
                .collect::<BTreeMap<_, _>>()
                .into_iter()
                .collect();
            let configured_domains = own
                .iter()
                .flat_map(|s| s.targets.iter())
                .filter_map(|t| match t.refers_to() {
                    Refers::Domain(d) if t.name().extra() == Extra::Domains => Some(d.to_owned()),
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
                inner.accounts_idle = idle(interval_of(Extra::Accounts));
                inner.domains_idle = idle(interval_of(Extra::Domains));
                inner.takes_accounts = account_interval.is_some();
                inner.account_interval = account_interval.unwrap_or_default();
                inner.configured = configured;
                inner.configured_in = configured_in;
                inner.configured_domains = configured_domains;
                inner.trim();
            }
            next.insert(t.name.clone(), set);
        }
        *tenants = next;
    }

    pub fn get(&self, tenant: &TenantName) -> Option<Arc<PollSet>> {
        unpoisoned(self.tenants.read()).get(tenant).cloned()
    }

    /// The configured tenants' names, in order.
    pub fn tenants(&self) -> Vec<TenantName> {
        unpoisoned(self.tenants.read()).keys().cloned().collect()
    }
}

impl Inner {
    /// Applies the current settings to what is registered: allow and deny lists, then caps
    /// (the least recently seen go first).
    fn trim(&mut self) {
        let probe = &self.probe;
        self.probed
            .retain(|id, _| probe.allow.as_ref().is_none_or(|a| a.contains(id)));
        keep_newest(&mut self.probed, probe.max_targets, |p| p.seen);
        let d = &self.discovery;
        if !d.accounts {
            self.discovered.clear();
        }
        if !d.domains {
            self.domains.clear();
        }
        self.discovered.retain(|id, _| d.takes(*id));
        keep_newest(&mut self.discovered, d.max_accounts, |at| *at);
        keep_newest(&mut self.domains, d.max_domains, |at| *at);
    }
}

impl DiscoveryConfig {
    /// Whether a found account passes the allow and deny lists.
    fn takes(&self, id: i32) -> bool {
        !self.deny.contains(&id) && self.allow.as_ref().is_none_or(|a| a.contains(&id))
    }
}

/// Keeps the `cap` entries most recently seen, as `seen` reads when.
fn keep_newest<K: Eq + std::hash::Hash, V>(
    map: &mut HashMap<K, V>,
    cap: usize,
    seen: impl Fn(&V) -> Instant,
) {
    if map.len() <= cap {
        return;
    }
    let mut by_age: Vec<(K, V)> = map.drain().collect();
    by_age.sort_by_key(|(_, v)| std::cmp::Reverse(seen(v)));
    by_age.truncate(cap);
    *map = by_age.into_iter().collect();
}

/// Sees `key` (again) at `now`, a new one only while `seen` holds fewer than `cap`; whether it
/// was new.
fn see<K: Eq + std::hash::Hash>(seen: &mut Seen<K>, key: K, now: Instant, cap: usize) -> bool {
    if let Some(at) = seen.get_mut(&key) {
        *at = now;
        return false;
    }
    seen.len() < cap && seen.insert(key, now).is_none()
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
                account_interval: Duration::ZERO,
                configured: BTreeSet::new(),
                configured_in: Vec::new(),
                configured_domains: BTreeSet::new(),
                probed: HashMap::new(),
                discovered: HashMap::new(),
                refused: HashMap::new(),
                window: (Instant::now(), 0),
                domains: HashMap::new(),
                gone: HashMap::new(),
            }),
            added: Bell::default(),
        }
    }

    /// Nothing panics under this lock; if something did, the sets are still valid ones.
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        unpoisoned(self.inner.lock())
    }

    fn notify(&self) {
        self.added.ring();
    }

    /// Whether any account collector is enabled for this tenant.
    pub fn takes_accounts(&self) -> bool {
        self.lock().takes_accounts
    }

    /// A probe of account `id` at `now`.
    pub fn register(&self, id: i32, now: Instant) -> Registration {
        let mut inner = self.lock();
        if inner.configured.contains(&id) {
            return Registration::Configured;
        }
        if let Some(p) = inner.probed.get_mut(&id) {
            p.seen = now;
            return Registration::Known;
        }
        if inner.probe.allow.as_ref().is_some_and(|a| !a.contains(&id)) {
            return Registration::NotAllowed;
        }
        let ttl = inner.account_interval;
        if let Some((at, reason)) = inner.refused.get(&id).copied() {
            if now.saturating_duration_since(at) < ttl {
                return Registration::Refused(reason);
            }
            inner.refused.remove(&id);
        }
        if inner.probed.len() >= inner.probe.max_targets {
            return Registration::Full;
        }
        let (start, count) = inner.window;
        let elapsed = now.saturating_duration_since(start);
        if elapsed >= ttl {
            inner.window = (now, 0);
        } else if count >= inner.probe.new_per_interval {
            return Registration::TooManyNew(ttl - elapsed);
        }
        let in_flight = inner.probed.values().filter(|p| !p.attempted).count();
        if in_flight >= inner.probe.first_fetches {
            return Registration::TooManyFirstFetches;
        }
        inner.window.1 += 1;
        inner.probed.insert(
            id,
            Probed {
                since: now,
                seen: now,
                attempted: false,
                confirmed: false,
            },
        );
        drop(inner);
        self.notify();
        Registration::Added
    }

    /// Why the provider refused `id` (404 or 403), if it did within the last interval.
    pub fn refusal(&self, id: i32, now: Instant) -> Option<FailureReason> {
        let inner = self.lock();
        inner
            .refused
            .get(&id)
            .filter(|(at, _)| now.saturating_duration_since(*at) < inner.account_interval)
            .map(|(_, reason)| *reason)
    }

    /// The account collectors that poll account `id`: those that list it, or all of them for
    /// an account probed or discovered. A probe waits for these and no other.
    pub fn polled_by(&self, id: i32) -> Vec<CollectorName> {
        let inner = self.lock();
        let everywhere = inner.probed.contains_key(&id) || inner.discovered.contains_key(&id);
        inner
            .configured_in
            .iter()
            .filter(|(_, ids)| everywhere || ids.contains(&id))
            .map(|(name, _)| *name)
            .collect()
    }

    /// What a run learned of the accounts it fetched: `ok` succeeded (a probed one is
    /// confirmed: `/sd` lists it from now on), `failed` failed for another reason (its first
    /// fetch has ended), `refused` were refused by the provider (404, 403): they leave, and
    /// probes of them are answered from a cache for an interval.
    pub fn record(
        &self,
        ok: &[i32],
        failed: &[i32],
        refused: &[(i32, FailureReason)],
        now: Instant,
    ) {
        let mut inner = self.lock();
        for id in ok {
            if let Some(p) = inner.probed.get_mut(id) {
                p.attempted = true;
                p.confirmed = true;
            }
        }
        for id in failed {
            if let Some(p) = inner.probed.get_mut(id) {
                p.attempted = true;
            }
        }
        for &(id, reason) in refused {
            if inner.probed.remove(&id).is_some() {
                if inner.refused.len() >= MAX_REFUSED
                    && let Some((&oldest, _)) = inner.refused.iter().min_by_key(|(_, (at, _))| *at)
                {
                    inner.refused.remove(&oldest);
                }
                inner.refused.insert(id, (now, reason));
            }
            if reason == FailureReason::NotFound
                && inner.discovered.remove(&id).is_some()
                && inner.gone.len() < inner.discovery.max_accounts
            {
                inner.gone.insert(id, now);
            }
        }
        // Refusals older than an interval are of no use any more.
        let ttl = inner.account_interval;
        inner
            .refused
            .retain(|_, (at, _)| now.saturating_duration_since(*at) < ttl);
    }

    /// Accounts the dashboard's top lists named: each passing the allow and deny lists is
    /// (again) seen now, new ones up to `discovery.max_accounts`.
    pub fn discover_accounts(&self, ids: impl IntoIterator<Item = i32>, now: Instant) {
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
            let cap = inner.discovery.max_accounts;
            added |= see(&mut inner.discovered, id, now, cap);
        }
        drop(inner);
        if added {
            self.notify();
        }
    }

    /// Sending domains the daily statistics named: each (again) seen now as a dashboard view,
    /// new ones up to `discovery.max_domains`; names that are not domain names are skipped.
    pub fn discover_domains<'a>(&self, names: impl IntoIterator<Item = &'a str>, now: Instant) {
        let mut inner = self.lock();
        if !inner.discovery.domains {
            return;
        }
        let mut added = false;
        for name in names
            .into_iter()
            .filter_map(crate::upstream::model::names::domain_name)
        {
            if inner.configured_domains.contains(&name) {
                continue;
            }
            let cap = inner.discovery.max_domains;
            added |= see(&mut inner.domains, name, now, cap);
        }
        drop(inner);
        if added {
            self.notify();
        }
    }

    /// The provider says this target is gone (404): a probed or discovered one leaves now, and
    /// discovery does not take a discovered account back for its idle time.
    pub fn forget(&self, target: &Target, now: Instant) {
        let mut inner = self.lock();
        match target.refers_to() {
            Refers::Account(id) => {
                inner.probed.remove(&id);
                if inner.discovered.remove(&id).is_some()
                    && inner.gone.len() < inner.discovery.max_accounts
                {
                    inner.gone.insert(id, now);
                }
            }
            Refers::Domain(d) => {
                inner.domains.remove(d);
            }
            Refers::Other => {}
        }
    }

    /// The live accounts, probed and discovered, in id order, each with whether it has been
    /// fetched successfully (a discovered one counts as such: the provider named it).
    fn live_accounts(&self, now: Instant) -> Vec<(i32, Source, bool)> {
        let mut inner = self.lock();
        let Inner {
            probed,
            discovered,
            probe_idle,
            accounts_idle,
            ..
        } = &mut *inner;
        // A confirmed account lives while it is probed; one that never succeeded leaves its
        // idle time after it came, however often it is probed.
        probed.retain(|_, p| {
            let from = if p.confirmed { p.seen } else { p.since };
            now.saturating_duration_since(from) <= *probe_idle
        });
        let probed = probed
            .iter()
            .map(|(id, p)| (*id, Source::Probe, p.confirmed));
        let discovered = live(discovered, *accounts_idle, now).into_iter();
        let discovered = discovered.map(|id| (id, Source::Discovered, true));
        let mut all: Vec<(i32, Source, bool)> = probed.chain(discovered).collect();
        // Probed before discovered for an account that is both: one entry each.
        all.sort_unstable_by_key(|(id, source, _)| (*id, *source));
        all.dedup_by_key(|(id, ..)| *id);
        all
    }

    /// The targets `collector` polls beyond its configured ones now: live accounts for an
    /// account collector, live domains as views for the dashboard.
    pub fn targets(&self, collector: CollectorName, now: Instant) -> Vec<Target> {
        match collector.extra() {
            Extra::Domains => {
                let mut inner = self.lock();
                let idle = inner.domains_idle;
                live(&mut inner.domains, idle, now)
                    .into_iter()
                    .filter_map(|d| Target::of_domain(collector, d))
                    .collect()
            }
            Extra::Accounts => self
                .live_accounts(now)
                .into_iter()
                .filter_map(|(id, ..)| Target::of_account(collector, id))
                .collect(),
            Extra::None => Vec::new(),
        }
    }

    /// Every account this process knows for the tenant, with where it comes from: configured
    /// ones, then live discovered ones and probed ones fetched successfully at least once, each
    /// in id order. A probed id that never succeeded is not listed: `/sd` must not turn a
    /// stranger's typo into a target that some scraper keeps probing.
    pub fn known(&self, now: Instant) -> Vec<(i32, Source)> {
        let extra = self.live_accounts(now);
        let inner = self.lock();
        inner
            .configured
            .iter()
            .map(|id| (*id, Source::Configured))
            .chain(
                extra
                    .into_iter()
                    .filter(|(_, _, confirmed)| *confirmed)
                    .map(|(id, source, _)| (id, source)),
            )
            .collect()
    }

    /// Whether the remembered refusals are within their bound.
    #[cfg(test)]
    fn record_size_is_bounded(&self) -> bool {
        self.lock().refused.len() <= MAX_REFUSED
    }

    /// Wakes when a target is added.
    pub fn subscribe(self: &Arc<Self>) -> Registered {
        Registered {
            set: self.clone(),
            seen: self.added.rung(),
        }
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

    /// The poll sets of [`config`] with `extra`, and tenant `a`'s.
    fn sets_of(extra: &str) -> (PollSets, Arc<PollSet>) {
        let (config, specs) = config(extra);
        let sets = PollSets::default();
        sets.reconfigure(&config, &specs);
        let a = tenant_a(&sets);
        (sets, a)
    }

    #[test]
    fn a_probe_registers_once_within_the_cap_and_allow_list_and_leaves_when_idle() {
        let (sets, a) =
            sets_of("probe:\n  idle_intervals: 2\n  max_targets: 2\n  allow: [1, 5, 6, 7]\n");
        assert!(a.takes_accounts());
        let t0 = Instant::now();
        let mut added = a.subscribe();
        assert_eq!(a.register(1, t0), Registration::Configured);
        assert_eq!(a.register(9, t0), Registration::NotAllowed);
        assert_eq!(a.register(5, t0), Registration::Added);
        assert_eq!(added.seen + 1, a.added.rung());
        added.seen = a.added.rung();
        assert_eq!(a.register(5, t0), Registration::Known);
        assert_eq!(added.seen, a.added.rung());
        assert_eq!(a.register(6, t0), Registration::Added);
        assert_eq!(a.register(7, t0), Registration::Full);
        let accounts = |at| a.targets(CollectorName::DeliveryAccount, at);
        assert_eq!(
            accounts(t0),
            [Target::DeliveryAccount(5), Target::DeliveryAccount(6)]
        );
        // 6 was fetched successfully: from now on it lives while it is probed. Idle is 2 x the
        // longest account interval (20s): 6 probed again at 30s stays, 5 (never confirmed)
        // leaves 40s after it came.
        a.record(&[6], &[5], &[], t0);
        let (t30, t41) = (t0 + Duration::from_secs(30), t0 + Duration::from_secs(41));
        assert_eq!(a.register(6, t30), Registration::Known);
        assert_eq!(
            a.targets(CollectorName::TracemailDaily, t41),
            [Target::TracemailDaily(6)]
        );
        assert_eq!(
            a.known(t41),
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
        let (sets, a) = sets_of("");
        let t0 = Instant::now();
        for (i, id) in (0..).zip([10, 11, 12, 13]) {
            let at = t0 + Duration::from_secs(i);
            assert_eq!(a.register(id, at), Registration::Added);
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
        let (_sets, a) = sets_of(
            "discovery:\n  accounts: true\n  domains: true\n  max_accounts: 3\n  max_domains: 2\n  deny: [4]\n",
        );
        let t0 = Instant::now();
        // 1 is configured, 4 denied, -3 is no id; 5, 6 and 7 fill the cap of 3, 8 waits.
        a.discover_accounts([1, 4, -3, 5, 6, 7, 8], t0);
        a.register(6, t0);
        a.record(&[6], &[], &[], t0);
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
        a.record(&[], &[], &[(5, FailureReason::NotFound)], t0);
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
        use crate::collectors::tracemail_dashboard::View;
        let view = |d: &str| Target::TracemailDashboard(View::Domain(d.into()));
        assert_eq!(
            a.targets(CollectorName::TracemailDashboard, t0),
            [view("news.example"), view("x.example")]
        );
    }

    #[test]
    fn strangers_cost_a_bounded_number_of_new_accounts_and_refused_ids_are_answered_from_a_cache() {
        let (_sets, a) =
            sets_of("probe:\n  max_targets: 20\n  new_per_interval: 5\n  first_fetches: 3\n");
        let t0 = Instant::now();
        // Three first fetches in flight at most.
        for id in 100..103 {
            assert_eq!(a.register(id, t0), Registration::Added);
        }
        assert_eq!(a.register(103, t0), Registration::TooManyFirstFetches);
        // Their fetches end: 100 is unknown to the provider, 101 forbidden, 102 answers.
        a.record(
            &[102],
            &[],
            &[
                (100, FailureReason::NotFound),
                (101, FailureReason::Forbidden),
            ],
            t0,
        );
        assert_eq!(a.refusal(100, t0), Some(FailureReason::NotFound));
        assert_eq!(
            a.register(101, t0),
            Registration::Refused(FailureReason::Forbidden)
        );
        // The budget counts registrations, whatever their fetch said: 2 more this interval.
        assert_eq!(a.register(103, t0), Registration::Added);
        assert_eq!(a.register(104, t0), Registration::Added);
        assert!(matches!(a.register(105, t0), Registration::TooManyNew(_)));
        // /sd lists only the account that answered.
        let probed: Vec<_> = a
            .known(t0)
            .into_iter()
            .filter(|(_, s)| *s == Source::Probe)
            .collect();
        assert_eq!(probed, [(102, Source::Probe)]);
        // The next interval (20s, the longest account interval): a new budget, and the
        // refusals are forgotten, so a refused id may be tried again once.
        let t20 = t0 + Duration::from_secs(20);
        a.record(&[], &[103, 104], &[], t20);
        assert_eq!(a.refusal(100, t20), None);
        assert_eq!(a.register(100, t20), Registration::Added);
        // An account that never answers leaves its idle time (3 x 20s) after it came, however
        // often it is probed; one that answered stays while it is probed.
        for t in [30, 50, 61] {
            let at = t0 + Duration::from_secs(t);
            a.register(103, at);
            a.register(102, at);
        }
        let ids: Vec<i32> = a
            .targets(CollectorName::DeliveryAccount, t0 + Duration::from_secs(61))
            .iter()
            .filter_map(Target::account_id)
            .collect();
        assert!(ids.contains(&102) && !ids.contains(&103), "{ids:?}");
        assert!(a.record_size_is_bounded());
    }

    #[test]
    fn a_probe_waits_only_for_the_collectors_that_poll_its_account() {
        let (_sets, a) = sets_of("");
        // 1 is configured in delivery_account only; a probed account is polled by both.
        assert_eq!(a.polled_by(1), [CollectorName::DeliveryAccount]);
        assert_eq!(a.register(7, Instant::now()), Registration::Added);
        assert_eq!(
            a.polled_by(7),
            [
                CollectorName::DeliveryAccount,
                CollectorName::TracemailDaily
            ]
        );
        assert!(a.polled_by(99).is_empty());
    }

    #[test]
    fn nothing_is_discovered_unless_asked() {
        let (_sets, a) = sets_of("");
        let t0 = Instant::now();
        a.discover_accounts([5], t0);
        a.discover_domains(["news.example"], t0);
        assert_eq!(a.known(t0).len(), 2);
        assert!(a.targets(CollectorName::TracemailDashboard, t0).is_empty());
    }
}
