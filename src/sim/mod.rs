//! Simulator of the upstream Management and Send APIs, following `shared/upstream-api.md`: used by
//! the demo mode, the end-to-end tests and the benchmarks. The shapes the interface leaves open
//! are described in `docs/upstream.md`.

mod clock;
mod config;
mod control;
mod error;
mod extract;
mod faults;
mod fleet;
mod management;
mod routes;
mod send;
mod state;
pub mod traffic;

#[cfg(test)]
mod tests;

use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use clock::{SimClock, format_datetime};
pub use config::{AccountSeed, ManagementToken, SendIdentity, SimConfig, TokenSeed};
pub use error::{ApiError, SimConfigError};
pub use extract::MANAGEMENT_TOKEN_HEADER;
pub use faults::FaultSpec;
pub use fleet::{DEMO_BUSY, DEMO_DISABLED, DEMO_EXPIRING, DEMO_NEARLY_EXHAUSTED, DEMO_SEED};
pub use management::PAYMENT_METHODS;
pub use routes::{Route, UnknownRoute};
pub use send::{BOUNCE_DOMAIN, SEND_BULK_MAX_MESSAGES, SEND_MAX_MESSAGES};
pub use state::{
    ACCOUNT_RECORD_FIELDS, AccountState, ApiTokenState, MESSAGES_PER_VOLUME_UNIT,
    SuppressionReason, TOKEN_RECORD_FIELDS,
};

use faults::Faults;
use state::World;

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
        let sim = Self {
            inner: Arc::new(Inner {
                clock,
                world: Mutex::new(World::default()),
                faults: Arc::new(Faults::new(config.seed)),
                management_tokens: config.management_tokens,
            }),
        };
        for seed in &config.accounts {
            sim.insert_account(seed)?;
        }
        Ok(sim)
    }

    /// Adds an account (with its send tokens and domains) to a running simulator.
    pub fn insert_account(&self, seed: &AccountSeed) -> Result<(), SimConfigError> {
        let account = AccountState::from_seed(seed, self.inner.clock.now())?;
        let mut world = self.world();
        if world.accounts.contains_key(&seed.id) {
            return Err(SimConfigError::DuplicateAccount(seed.id));
        }
        for token in &seed.send_tokens {
            if world.send_tokens.contains_key(&token.token) {
                return Err(SimConfigError::DuplicateToken { account: seed.id });
            }
        }
        for token in &seed.send_tokens {
            world
                .send_tokens
                .insert(token.token.clone(), (seed.id, token.id));
        }
        for domain in &seed.domains {
            world.domains.register(domain);
        }
        world.accounts.insert(seed.id, account);
        Ok(())
    }

    /// The full application: every route behind its fault layer, plus the `/_sim/` control plane.
    /// The Send API needs the peer address: serve it with connect info (as [`Simulator::serve`]
    /// does) or add `MockConnectInfo` in tests.
    pub fn router(&self) -> axum::Router {
        routes::build(self)
    }

    /// Serves until `shutdown` is cancelled, then finishes the requests in flight.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: CancellationToken,
    ) -> std::io::Result<()> {
        let app = self
            .router()
            .into_make_service_with_connect_info::<SocketAddr>();
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await
    }

    /// Replaces the fault of `route`; `FaultSpec::default()` heals it. Rates outside 0..=1 are
    /// clamped when rolled.
    pub fn set_fault(&self, route: Route, spec: FaultSpec) {
        self.inner.faults.set(route, spec);
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
