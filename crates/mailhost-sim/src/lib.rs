//! Simulator of the upstream Management and Send APIs, following `shared/upstream-api.md`: used by
//! the demo mode, the end-to-end tests and the benchmarks. The shapes the interface leaves open
//! are described in `docs/upstream.md`.
//!
//! `world` is the provider's state and its rules, with no HTTP in it; `api` is the service on the
//! wire (router, handlers, the `/_sim/` control plane, fault injection) and reads and changes the
//! world, never the reverse. [`Simulator`] joins them: the world behind one lock, the clock, the
//! faults, the management tokens and their rate limits (per token, and per route of a token).
//!
//! The layers, each importing only from its own or those below, with no files in a circle
//! (the exporter's `tests/layers.rs` holds them):
//!
//! | layer | modules | what they hold |
//! |---|---|---|
//! | 1 vocabulary | `route` | the operations of the service by name, shared by the world's config, fault injection and the router |
//! | 2 world | `world` | the provider's state and rules, no HTTP |
//! | 3 traffic | `traffic` | the traffic model that moves the world |
//! | 4 api | `api` | the service on the wire and the control plane |
//! | 5 assembly | `lib` | the simulator put together |

mod api;
mod route;
pub mod traffic;
mod world;

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use jiff::Timestamp;
use jiff::civil::Date;
use jiff::tz::TimeZone;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

// The public surface, wherever each item lives: the provider's state and rules (`world`) or the
// service on the wire (`api`).
pub use api::{
    ApiError, BodyFault, DASHBOARD_MAX_DAYS, DASHBOARD_MAX_LIMIT, DEFAULT_OVERSIZED_BYTES,
    FaultSpec, MANAGEMENT_TOKEN_HEADER, MAX_FAULT_WINDOW, NO_ANSWER_HOLD, PAYMENT_METHODS, Route,
    SEND_BULK_MAX_MESSAGES, SEND_MAX_MESSAGES, TOP_ACCOUNTS_DEFAULT_LIMIT, TOP5_MAX, UnknownRoute,
};
pub use world::{
    ACCOUNT_RECORD_FIELDS, ARCHIVE_STATUSES, Account, AccountSeed, AccountState, ApiTokenState,
    BOUNCE_DOMAIN, DAILY_DAYS, DEFAULT_REFUSAL_STATUS, DELEGATE_RECORD_FIELDS,
    DEMO_ARCHIVE_ACTIVATING, DEMO_BUSY, DEMO_DISABLED, DEMO_EXPIRING, DEMO_FILLING,
    DEMO_MIGRATION_COMPLETED, DEMO_MIGRATION_RUNNING, DEMO_MIGRATION_WITH_FAILURES,
    DEMO_NEARLY_EXHAUSTED, DEMO_OUTBOUND_AT_LIMIT, DEMO_POSTMASTER, DEMO_SEED,
    DEMO_TEAM_MEMBER_API_BLOCKED, DEMO_TEAM_MEMBER_NO_OTP, DEMO_TEAM_MEMBER_SECURED, DemoTargets,
    MAILBOX_RECORD_FIELDS, MAX_BURST, MAX_RATE, MAX_RETRY_AFTER_SECS, MESSAGES_PER_VOLUME_UNIT,
    MIN_RATE, Mailbox, MailboxSeed, MailboxState, ManagementToken, MigrationSeed,
    OUTBOUND_PERIOD_HOURS, OUTCOMES, Outcome, PERMISSION_KEY_MAX_CHARS, RECENT_REQUESTS,
    REFUSAL_STATUSES, RateLimit, RateLimitHeaders, RateLimitStats, RetryAfterStyle, RouteRateLimit,
    SendIdentity, SimClock, SimConfig, SimConfigError, SuppressionReason,
    TEAM_MEMBER_MAX_PERMISSIONS, TEAM_MEMBER_PASSWORD_MAX_CHARS, TEAM_MEMBER_PASSWORD_MIN_CHARS,
    TEAM_MEMBER_RECORD_FIELDS, TOKEN_RECORD_FIELDS, TeamMember, TeamMemberState, TokenRateLimit,
    TokenSeed, format_datetime,
};

use api::Faults;
use world::World;
use world::rate_limit::RateLimiter;
use world::stats::Filter;

/// A running simulated service. Cheap to clone: clones share one state.
#[derive(Clone)]
pub struct Simulator {
    inner: Arc<Inner>,
}

struct Inner {
    clock: SimClock,
    world: Mutex<World>,
    faults: Arc<Faults>,
    management_tokens: Vec<ManagementToken>,
    /// Apart from the world's lock: the limiter answers before any handler takes that lock.
    rate_limits: Arc<RateLimiter>,
}

impl fmt::Debug for Simulator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // try_lock: printing a simulator while its state is locked must not deadlock.
        let accounts = self
            .inner
            .world
            .try_lock()
            .map(|world| world.accounts.keys().copied().collect::<Vec<_>>())
            .ok();
        f.debug_struct("Simulator")
            .field("now", &self.inner.clock.now())
            .field("accounts", &accounts)
            .finish_non_exhaustive()
    }
}

impl Simulator {
    /// # Panics
    /// If the configuration is invalid (see [`Simulator::try_new`]); configurations are written
    /// by tests and the demo, so a mistake there should stop the program loudly.
    pub fn new(config: SimConfig) -> Self {
        match Self::try_new(config) {
            Ok(sim) => sim,
            Err(error) => panic!("invalid simulator configuration: {error}"),
        }
    }

    /// A simulator on the wall clock.
    pub fn try_new(config: SimConfig) -> Result<Self, SimConfigError> {
        Self::try_with_clock(config, SimClock::new())
    }

    /// A simulator on `clock`; seeded dates are computed from `clock.now()`, so a frozen clock
    /// gives exact dates.
    pub fn try_with_clock(config: SimConfig, clock: SimClock) -> Result<Self, SimConfigError> {
        let rate_limits = RateLimiter::new(
            config
                .management_tokens
                .iter()
                .map(|known| known.token.as_str()),
        );
        let now = tokio::time::Instant::now();
        for (index, entry) in config.rate_limits.iter().enumerate() {
            rate_limits
                .set(Some(&entry.token), None, Some(entry.limit.clone()), now)
                .map_err(|reason| SimConfigError::BadRateLimit { index, reason })?;
        }
        for (index, entry) in config.route_rate_limits.iter().enumerate() {
            let limit = Some(entry.limit.clone());
            rate_limits
                .set(Some(&entry.token), Some(entry.route), limit, now)
                .map_err(|reason| SimConfigError::BadRouteRateLimit { index, reason })?;
        }
        let sim = Self {
            inner: Arc::new(Inner {
                clock,
                world: Mutex::new(World::new(config.seed)),
                faults: Arc::new(Faults::new(config.seed)),
                management_tokens: config.management_tokens,
                rate_limits: Arc::new(rate_limits),
            }),
        };
        for seed in &config.accounts {
            sim.insert_account(seed)?;
        }
        if config.history {
            let now = sim.inner.clock.now();
            sim.world().seed_history(config.seed, &config.accounts, now);
        }
        for seed in &config.migrations {
            sim.insert_migration(seed)?;
        }
        for seed in &config.mailboxes {
            sim.insert_mailbox(seed)?;
        }
        for seed in &config.team_members {
            sim.insert_team_member(seed)?;
        }
        Ok(sim)
    }

    /// Adds a migration to a running simulator; its start is computed from the clock now.
    pub fn insert_migration(&self, seed: &MigrationSeed) -> Result<(), SimConfigError> {
        let now = self.inner.clock.now();
        self.world().insert_migration(seed, now)
    }

    /// Adds a mailbox to a running simulator. Its code must be new, and its domain code must not
    /// name another domain (sending domains included).
    pub fn insert_mailbox(&self, seed: &MailboxSeed) -> Result<(), SimConfigError> {
        let now = self.inner.clock.now();
        self.world().insert_mailbox(seed, now)
    }

    /// Adds a team member to a running simulator; its code must be new.
    pub fn insert_team_member(&self, seed: &TeamMember) -> Result<(), SimConfigError> {
        let now = self.inner.clock.now();
        self.world().insert_team_member(seed, now)
    }

    /// Adds an account (with its send tokens and domains) to a running simulator.
    pub fn insert_account(&self, seed: &AccountSeed) -> Result<(), SimConfigError> {
        let now = self.inner.clock.now();
        self.world().insert_account(seed, now)
    }

    /// The full application: every route behind its fault layer, plus the `/_sim/` control plane.
    /// The Send API needs the peer address: serve it with connect info (as [`Simulator::serve`]
    /// does) or add `MockConnectInfo` in tests. Requests it holds unanswered
    /// ([`FaultSpec::no_answer_rate`]) end when their client goes away or after
    /// [`NO_ANSWER_HOLD`]; [`Simulator::serve`] also ends them when it shuts down.
    pub fn router(&self) -> axum::Router {
        api::build(self, &CancellationToken::new())
    }

    /// Serves until `shutdown` is cancelled, then finishes the requests in flight; those held
    /// unanswered are closed at once, still unanswered.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: CancellationToken,
    ) -> std::io::Result<()> {
        let app = api::build(&self, &shutdown).into_make_service_with_connect_info::<SocketAddr>();
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await
    }

    /// Replaces the fault of `route`; `FaultSpec::default()` heals it. Rates outside 0..=1 are
    /// clamped when rolled. Its window (`starts_after`, `lasts`) is measured from now, on
    /// `tokio::time::Instant`, so a test on paused time moves it with `advance`.
    pub fn set_fault(&self, route: Route, spec: FaultSpec) {
        self.inner.faults.set([route], spec);
    }

    /// Replaces the fault of every route of [`Route::ALL`] (the Send API included) with `spec`,
    /// one window for all: an outage of the whole API. `FaultSpec::default()` heals every route.
    pub fn set_fault_on_every_route(&self, spec: FaultSpec) {
        self.inner.faults.set(Route::ALL, spec);
    }

    /// Adds a fault to `route` beside those in force, for mixing per-target faults (each with
    /// its own `only_ids`) on one route; the first whose `only_ids` names a request applies.
    pub fn add_fault(&self, route: Route, spec: FaultSpec) {
        self.inner.faults.add(route, spec);
    }

    /// Sets (`Some(limit)`) or lifts (`None`) the token-wide rate limit of one management token
    /// (`Some(token)`), or of every management token (`None`), each with its own bucket; the
    /// token's route limits ([`Simulator::set_route_rate_limit`]) stay as they are. It applies
    /// at once: a token already limited keeps the tokens its bucket holds, clamped to the new
    /// burst; a newly limited token starts with a full bucket; lifting a limit forgets the bucket
    /// and its counters. Refused: an invalid limit (see [`RateLimit::validate`]), a token that is
    /// not one of the configuration's management tokens.
    pub fn set_rate_limit(
        &self,
        token: Option<&str>,
        limit: Option<RateLimit>,
    ) -> Result<(), String> {
        self.inner
            .rate_limits
            .set(token, None, limit, tokio::time::Instant::now())
    }

    /// Sets (`Some(limit)`) or lifts (`None`) the limit of one Management API route of one
    /// management token (`Some(token)`), or of every management token (`None`), each (token,
    /// route) with its own bucket, beside the token-wide limit of [`Simulator::set_rate_limit`]
    /// and the token's other routes, which stay as they are. A request on `route` then goes
    /// through only if this bucket and the token-wide one (if set) both have a token; the route's
    /// is asked first, and a refused request takes a token from neither. Its 429 and rate-limit
    /// headers are the refusing limit's, or this limit's when both let it through. Changes apply
    /// at once as with [`Simulator::set_rate_limit`]. Refused: an invalid limit, a token that is
    /// not one of the configuration's management tokens, a route of the Send API (never limited).
    pub fn set_route_rate_limit(
        &self,
        token: Option<&str>,
        route: Route,
        limit: Option<RateLimit>,
    ) -> Result<(), String> {
        self.inner
            .rate_limits
            .set(token, Some(route), limit, tokio::time::Instant::now())
    }

    /// What the token-wide limit did with the requests of management token `token` since it was
    /// limited (requests a route limit refused first are not among them); `None` when it is not
    /// limited as a whole.
    pub fn rate_limit_stats(&self, token: &str) -> Option<RateLimitStats> {
        self.inner.rate_limits.stats(token, None)
    }

    /// What the limit of `route` of management token `token` did with its requests since it was
    /// set (requests its token-wide limit refused are not among them); `None` when that route of
    /// that token is not limited.
    pub fn route_rate_limit_stats(&self, token: &str, route: Route) -> Option<RateLimitStats> {
        self.inner.rate_limits.stats(token, Some(route))
    }

    /// How many requests reached exactly `path` (e.g. `/api/delivery/accounts/1001`), whatever
    /// their answer.
    pub fn hits(&self, path: &str) -> u64 {
        self.inner.faults.hits(path)
    }

    /// Requests held unanswered now ([`FaultSpec::no_answer_rate`]): at most one per open
    /// connection.
    pub fn held_requests(&self) -> usize {
        self.inner.faults.held()
    }

    /// Requests received per path.
    pub fn all_hits(&self) -> std::collections::BTreeMap<String, u64> {
        self.inner.faults.all_hits()
    }

    pub fn clear_faults(&self) {
        self.inner.faults.clear();
    }

    /// The fault in force on `route`, if any.
    pub fn fault(&self, route: Route) -> Option<FaultSpec> {
        self.inner.faults.get(route)
    }

    /// A copy of the current state of account `id`.
    pub fn account(&self, id: i32) -> Option<AccountState> {
        self.world().accounts.get(&id).cloned()
    }

    /// Exactly what `GET /api/delivery/accounts/{id}` returns in `resources[0]`, without faults.
    pub fn account_record(&self, id: i32) -> Option<serde_json::Value> {
        self.world().record(id)
    }

    /// Changes account `id` in place (counters, dates, ...); false if there is no such account.
    pub fn update_account(&self, id: i32, change: impl FnOnce(&mut AccountState)) -> bool {
        match self.world().accounts.get_mut(&id) {
            Some(account) => {
                change(account);
                true
            }
            None => false,
        }
    }

    /// Removes account `id` and its send tokens; later requests for it answer 404 (Management
    /// API) or 401 (Send API).
    pub fn remove_account(&self, id: i32) -> bool {
        self.world().remove_account(id)
    }

    /// Adds a suppression entry, as `POST /api/delivery/suppression_lists` would; `accounts`
    /// `None` is a global entry.
    pub fn suppress(&self, email: &str, reason: SuppressionReason, accounts: Option<Vec<i32>>) {
        let now = self.inner.clock.now();
        let accounts = accounts.map(|ids| ids.iter().map(i32::to_string).collect());
        self.world().suppress(email, reason, accounts, now);
    }

    /// Outcome name -> messages on local date `date` in the account's own time zone, every
    /// outcome of [`OUTCOMES`] present (zeros included). An unknown account gives zeros.
    pub fn day_totals(&self, account: i32, date: Date) -> BTreeMap<String, i64> {
        let tz = self
            .world()
            .accounts
            .get(&account)
            .map_or(TimeZone::UTC, AccountState::time_zone);
        self.day_totals_in(Some(account), None, &tz, date)
    }

    /// Like [`Simulator::day_totals`] with the day cut in `tz`, over one account or all of them
    /// (`None`), one sending domain (case-insensitive) or all of them (`None`).
    pub fn day_totals_in(
        &self,
        account: Option<i32>,
        domain: Option<&str>,
        tz: &TimeZone,
        date: Date,
    ) -> BTreeMap<String, i64> {
        let filter = Filter {
            accounts: account.map(|id| vec![id]),
            domain: domain.map(str::to_owned),
        };
        self.world().stats.day(&filter, tz, date).to_map()
    }

    /// Adds statistics directly, as if messages of `account` sent from `domain` had these
    /// outcomes at `at`; minutes older than the retention (nine days before the clock) are
    /// dropped.
    ///
    /// # Panics
    /// If an outcome name is not one of [`OUTCOMES`]: a typo in a test should fail loudly.
    pub fn record_outcomes(
        &self,
        account: i32,
        domain: &str,
        at: Timestamp,
        outcomes: &[(&str, i64)],
    ) {
        let now = self.inner.clock.now();
        let mut world = self.world();
        for (name, n) in outcomes {
            let outcome = Outcome::parse(name)
                .unwrap_or_else(|| panic!("unknown outcome {name:?}; known: {OUTCOMES:?}"));
            world.stats.record(account, domain, at, outcome, *n);
        }
        world.stats.prune(now);
    }

    /// Exactly the body `GET /api/migrations/{code}/stats` returns now, without faults.
    pub fn migration_stats(&self, code: &str) -> Option<serde_json::Value> {
        let now = self.inner.clock.now();
        self.world().migrations.get(code).map(|m| m.stats(now))
    }

    /// Exactly what `GET /api/domains/{domain_code}/email_accounts/{code}` returns in
    /// `resources[0]` now, without faults; `None` unless the mailbox is in that domain.
    pub fn mailbox_record(&self, domain_code: &str, code: &str) -> Option<serde_json::Value> {
        let now = self.inner.clock.now();
        self.world()
            .mailboxes
            .get(code)
            .filter(|m| m.domain_code == domain_code)
            .map(|m| m.record(now))
    }

    /// A copy of mailbox `code` with its counters brought to the current instant.
    pub fn mailbox(&self, code: &str) -> Option<MailboxState> {
        let now = self.inner.clock.now();
        self.world().mailboxes.get(code).cloned().map(|mut m| {
            m.materialize(now);
            m
        })
    }

    /// Changes mailbox `code`: its counters are first brought to the current instant, so what
    /// `change` sets is what the record shows now (and moves on from there). False if there is
    /// no such mailbox.
    pub fn update_mailbox(&self, code: &str, change: impl FnOnce(&mut MailboxState)) -> bool {
        let now = self.inner.clock.now();
        match self.world().mailboxes.get_mut(code) {
            Some(mailbox) => {
                mailbox.materialize(now);
                change(mailbox);
                true
            }
            None => false,
        }
    }

    /// A copy of team member `code`.
    pub fn team_member(&self, code: &str) -> Option<TeamMemberState> {
        self.world().team_members.get(code).cloned()
    }

    /// Exactly what `GET /api/team_members/{code}` returns in `resources[0]`, without faults.
    pub fn team_member_record(&self, code: &str) -> Option<serde_json::Value> {
        self.world().team_members.get(code).map(|t| t.record())
    }

    /// Changes team member `code` in place (second factor, API access, networks, ...); false if
    /// there is no such team member. `updated_at` is left as `change` leaves it.
    pub fn update_team_member(
        &self,
        code: &str,
        change: impl FnOnce(&mut TeamMemberState),
    ) -> bool {
        match self.world().team_members.get_mut(code) {
            Some(member) => {
                change(member);
                true
            }
            None => false,
        }
    }

    /// Removes team member `code`; later requests for it answer 404.
    pub fn remove_team_member(&self, code: &str) -> bool {
        self.world().team_members.remove(code).is_some()
    }

    pub fn clock(&self) -> &SimClock {
        &self.inner.clock
    }

    pub(crate) fn world(&self) -> MutexGuard<'_, World> {
        self.inner
            .world
            .lock()
            .expect("simulator state mutex poisoned")
    }

    pub(crate) fn faults(&self) -> Arc<Faults> {
        Arc::clone(&self.inner.faults)
    }

    pub(crate) fn rate_limiter(&self) -> Arc<RateLimiter> {
        Arc::clone(&self.inner.rate_limits)
    }

    /// The account scope of a management token: `Some(None)` for an unrestricted token, `None`
    /// when the token is unknown.
    pub(crate) fn management_scope(&self, presented: &str) -> Option<Option<Vec<i32>>> {
        self.inner
            .management_tokens
            .iter()
            .find(|known| !known.token.is_empty() && known.token == presented)
            .map(|known| known.accounts.clone())
    }
}
