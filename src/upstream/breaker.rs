//! A circuit breaker per target: after N consecutive failures of the kind that say "this call
//! is broken" ([`FailureReason::TRANSIENT`]; never a 429, which is the token's state and the
//! pacer's business, see [`super::pacer`]), calls for that one target fail
//! at once with reason `circuit_open` for a cool-down, then one probe goes through; its outcome
//! closes or reopens the circuit. A broken account then costs one call per cool-down, and it
//! never costs a healthy account anything: circuits are keyed by (endpoint, target), the
//! smallest unit that fails alone, as Envoy's outlier detection ejects one host and not the
//! cluster.
//!
//! Only circuits with a failure on record are kept; a success removes its entry. The map is
//! bounded by [`MAX_CIRCUITS`] (keys come from the config, not from upstream answers); past it a
//! new failing target is simply not tracked, so every call of it is let through.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::time::Instant;

use crate::settings::BreakerPolicy;
use crate::upstream::cooldown::CoolDown;
use crate::upstream::endpoint::Endpoint;
use crate::upstream::error::FailureReason;

/// Most circuits with a failure on record at once.
pub const MAX_CIRCUITS: usize = 1_000_000;

/// A circuit: one target of one endpoint (the account id, view, migration or mailbox code).
pub type CircuitKey = (Endpoint, String);

#[derive(Debug, Default)]
struct State {
    consecutive: u32,
    /// Set while open: calls are refused until it ends, then one probe asks (half-open).
    open: Option<CoolDown>,
}

/// A circuit has one probe at a time, and it is abandoned by its circuit: no sequence number
/// is needed to tell it.
const PROBE: u64 = 0;

#[derive(Debug)]
struct Inner {
    policy: BreakerPolicy,
    states: HashMap<CircuitKey, State>,
    /// Open circuits per endpoint, kept in step with `states` for the gauge.
    open: HashMap<Endpoint, usize>,
}

/// A circuit as [`Breakers::state`] tells it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Circuit {
    pub consecutive: u32,
    pub open: bool,
    /// The breaker is off: no circuit ever opens.
    pub off: bool,
}

/// Why a call was not let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Open;

#[derive(Debug)]
pub struct Breakers {
    inner: Mutex<Inner>,
    /// Circuits with a failure on record at most; [`MAX_CIRCUITS`] outside tests.
    capacity: usize,
}

impl Inner {
    fn set_open(&mut self, endpoint: Endpoint, was: bool, is: bool) {
        let n = self.open.entry(endpoint).or_default();
        match (was, is) {
            (false, true) => *n += 1,
            (true, false) => *n = n.saturating_sub(1),
            _ => {}
        }
    }
}

impl Breakers {
    pub fn new(policy: BreakerPolicy) -> Self {
        Self::with_capacity(policy, MAX_CIRCUITS)
    }

    fn with_capacity(policy: BreakerPolicy, capacity: usize) -> Self {
        Breakers {
            inner: Mutex::new(Inner {
                policy,
                states: HashMap::new(),
                open: HashMap::new(),
            }),
            capacity,
        }
    }

    /// Nothing below panics while holding the lock, but a poisoned lock must never turn every
    /// later call into a failure: the state is plain counters, valid at any point.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a call for `key` may go out now. After the cool-down, exactly one probe is
    /// admitted.
    pub fn admit(&self, key: &CircuitKey, now: Instant) -> Result<(), Open> {
        let mut inner = self.lock();
        let Some(s) = inner.states.get_mut(key) else {
            return Ok(());
        };
        match s.open.as_mut().map(|open| open.ask(now, PROBE)) {
            Some(false) => Err(Open),
            _ => Ok(()),
        }
    }

    /// An admitted call ended without an outcome (its future was dropped: deadline, shutdown).
    /// A probe must not stay in flight forever, or the circuit would never close.
    pub fn abandon(&self, key: &CircuitKey) {
        if let Some(open) = self
            .lock()
            .states
            .get_mut(key)
            .and_then(|s| s.open.as_mut())
        {
            open.abandoned(PROBE);
        }
    }

    /// Records the outcome of an admitted call; returns how many circuits of the endpoint are
    /// open now.
    pub fn record(
        &self,
        key: &CircuitKey,
        outcome: Result<(), FailureReason>,
        now: Instant,
    ) -> usize {
        let mut inner = self.lock();
        let endpoint = key.0;
        let policy = inner.policy;
        match outcome {
            Err(reason) if reason.is_transient() && policy.failures > 0 => {
                if !inner.states.contains_key(key) && inner.states.len() >= self.capacity {
                    return inner.open.get(&endpoint).copied().unwrap_or(0);
                }
                let s = inner.states.entry(key.clone()).or_default();
                let was_open = s.open.is_some();
                s.consecutive = s.consecutive.saturating_add(1);
                let probed = s.open.is_some_and(|open| open.asking());
                if probed || s.consecutive >= policy.failures {
                    s.open = Some(CoolDown::new(now, policy.cooldown, true));
                } else if let Some(open) = &mut s.open {
                    open.abandoned(PROBE);
                }
                let is_open = s.open.is_some();
                inner.set_open(endpoint, was_open, is_open);
            }
            // Any answer that is not a sign of a broken call closes the circuit.
            _ => {
                if let Some(s) = inner.states.remove(key) {
                    inner.set_open(endpoint, s.open.is_some(), false);
                }
            }
        }
        inner.open.get(&endpoint).copied().unwrap_or(0)
    }

    /// Takes a reloaded policy and forgets the circuits of targets no longer configured; the
    /// others keep their state. Returns the open count per endpoint afterwards.
    pub fn reconfigure(
        &self,
        policy: BreakerPolicy,
        keep: impl Fn(&CircuitKey) -> bool,
    ) -> Vec<(Endpoint, usize)> {
        let mut inner = self.lock();
        inner.policy = policy;
        let mut dropped = Vec::new();
        inner.states.retain(|k, s| {
            let kept = keep(k);
            if !kept && s.open.is_some() {
                dropped.push(k.0);
            }
            kept
        });
        for endpoint in dropped {
            inner.set_open(endpoint, true, false);
        }
        inner.open.iter().map(|(e, n)| (*e, *n)).collect()
    }

    /// The circuit of `key` as it stands: its consecutive failures, and whether it is open.
    pub fn state(&self, key: &CircuitKey) -> Circuit {
        let inner = self.lock();
        let off = inner.policy.failures == 0;
        inner.states.get(key).map_or(
            Circuit {
                off,
                ..Circuit::default()
            },
            |s| Circuit {
                consecutive: s.consecutive,
                open: s.open.is_some(),
                off,
            },
        )
    }

    /// How many circuits have a failure on record (for tests of the bound).
    pub fn tracked(&self) -> usize {
        self.lock().states.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn breakers() -> Breakers {
        Breakers::new(BreakerPolicy {
            failures: 3,
            cooldown: Duration::from_secs(60),
        })
    }

    fn key(target: &str) -> CircuitKey {
        (Endpoint::new("delivery_account"), target.to_owned())
    }

    /// Three failed calls: the circuit of `target` opens at `t`.
    fn trip(b: &Breakers, target: &str, t: Instant) {
        for _ in 0..3 {
            b.admit(&key(target), t).unwrap();
            b.record(&key(target), Err(FailureReason::ServerError), t);
        }
    }

    #[test]
    fn the_circuit_opens_after_n_consecutive_failures_and_refuses_calls() {
        let b = breakers();
        let k = key("1");
        let t = Instant::now();
        for _ in 0..2 {
            assert!(b.admit(&k, t).is_ok());
            assert_eq!(b.record(&k, Err(FailureReason::ServerError), t), 0);
        }
        assert!(b.admit(&k, t).is_ok());
        assert_eq!(b.record(&k, Err(FailureReason::Timeout), t), 1);
        assert_eq!(b.admit(&k, t + Duration::from_secs(59)), Err(Open));
    }

    #[test]
    fn a_broken_target_never_opens_the_circuit_of_another() {
        let b = breakers();
        let t = Instant::now();
        trip(&b, "broken", t);
        assert_eq!(b.admit(&key("broken"), t), Err(Open));
        assert!(b.admit(&key("healthy"), t).is_ok());
        assert_eq!(b.record(&key("healthy"), Ok(()), t), 1);
        assert!(
            b.admit(&(Endpoint::new("tracemail_daily"), "broken".to_owned()), t)
                .is_ok(),
            "the same id on another endpoint is another circuit"
        );
    }

    #[test]
    fn after_the_cool_down_one_probe_goes_through_and_its_success_closes() {
        let b = breakers();
        let t = Instant::now();
        trip(&b, "1", t);
        let later = t + Duration::from_secs(61);
        assert!(b.admit(&key("1"), later).is_ok(), "the probe");
        assert!(
            b.admit(&key("1"), later).is_err(),
            "only one probe at a time"
        );
        assert_eq!(b.record(&key("1"), Ok(()), later), 0);
        assert!(b.admit(&key("1"), later).is_ok());
        assert_eq!(b.tracked(), 0, "a closed circuit keeps no entry");
    }

    #[test]
    fn a_failed_probe_reopens_for_another_cool_down() {
        let b = breakers();
        let t = Instant::now();
        trip(&b, "1", t);
        let later = t + Duration::from_secs(61);
        b.admit(&key("1"), later).unwrap();
        assert_eq!(b.record(&key("1"), Err(FailureReason::Connect), later), 1);
        assert!(b.admit(&key("1"), later + Duration::from_secs(30)).is_err());
        assert!(b.admit(&key("1"), later + Duration::from_secs(61)).is_ok());
    }

    #[test]
    fn an_abandoned_probe_lets_the_next_one_through() {
        let b = breakers();
        let t = Instant::now();
        trip(&b, "1", t);
        let later = t + Duration::from_secs(61);
        b.admit(&key("1"), later).unwrap();
        b.abandon(&key("1"));
        assert!(
            b.admit(&key("1"), later).is_ok(),
            "a dropped probe does not wedge the circuit open"
        );
    }

    #[test]
    fn target_specific_failures_do_not_count() {
        let b = breakers();
        let t = Instant::now();
        for _ in 0..10 {
            b.admit(&key("1"), t).unwrap();
            assert_eq!(b.record(&key("1"), Err(FailureReason::NotFound), t), 0);
        }
        assert_eq!(b.tracked(), 0);
    }

    #[test]
    fn circuits_on_record_are_bounded_and_a_closed_one_keeps_no_entry() {
        let b = Breakers::with_capacity(
            BreakerPolicy {
                failures: 3,
                cooldown: Duration::from_secs(60),
            },
            4,
        );
        let t = Instant::now();
        for i in 0..10 {
            b.record(&key(&i.to_string()), Err(FailureReason::Timeout), t);
        }
        assert_eq!(
            b.tracked(),
            4,
            "past the bound a failing target is not tracked"
        );
        b.record(&key("0"), Ok(()), t);
        assert_eq!(b.tracked(), 3);
        assert!(
            b.admit(&key("9"), t).is_ok(),
            "an untracked target is let through"
        );
    }

    #[test]
    fn a_cool_down_past_the_end_of_the_clock_does_not_panic() {
        let b = Breakers::new(BreakerPolicy {
            failures: 1,
            cooldown: Duration::MAX,
        });
        let t = Instant::now();
        b.admit(&key("1"), t).unwrap();
        assert_eq!(b.record(&key("1"), Err(FailureReason::Timeout), t), 1);
        assert!(b.admit(&key("1"), t).is_err());
    }

    #[test]
    fn a_reload_keeps_the_state_of_configured_targets_and_forgets_the_rest() {
        let b = breakers();
        let t = Instant::now();
        trip(&b, "kept", t);
        trip(&b, "gone", t);
        let open = b.reconfigure(
            BreakerPolicy {
                failures: 3,
                cooldown: Duration::from_secs(60),
            },
            |k| k.1 == "kept",
        );
        assert_eq!(open, vec![(Endpoint::new("delivery_account"), 1)]);
        assert!(b.admit(&key("kept"), t).is_err(), "still open");
        assert!(b.admit(&key("gone"), t).is_ok());
    }
}
