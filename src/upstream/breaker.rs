//! A circuit breaker per endpoint: after N consecutive failures of the kind that say "the API is
//! broken" (timeouts, connection failures, 5xx, 429), calls fail at once for a cool-down, then
//! one probe goes through; its outcome closes or reopens the circuit. A broken API then costs
//! one call per cool-down instead of a storm of retries.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::time::Instant;

use crate::config::BreakerPolicy;
use crate::labels::{Endpoint, FailureReason};

#[derive(Debug, Default)]
struct State {
    consecutive: u32,
    /// Set while open: calls before this instant are refused.
    open_until: Option<Instant>,
    /// A probe is in flight (half-open).
    probing: bool,
    /// The reason of the failure that opened the circuit: short-circuited calls carry it.
    reason: Option<FailureReason>,
}

/// Why a call was not let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Open {
    pub reason: FailureReason,
}

#[derive(Debug)]
pub struct Breakers {
    policy: BreakerPolicy,
    states: Mutex<HashMap<Endpoint, State>>,
}

/// Failures that count towards opening: the API (not one target) is in trouble.
fn counts(reason: FailureReason) -> bool {
    matches!(
        reason,
        FailureReason::Timeout
            | FailureReason::Connect
            | FailureReason::ServerError
            | FailureReason::RateLimited
    )
}

impl Breakers {
    pub fn new(policy: BreakerPolicy) -> Self {
        Breakers {
            policy,
            states: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Endpoint, State>> {
        self.states.lock().expect("breaker lock poisoned")
    }

    /// Whether a call may go out now. After the cool-down, exactly one probe is admitted.
    pub fn admit(&self, endpoint: Endpoint, now: Instant) -> Result<(), Open> {
        let mut states = self.lock();
        let s = states.entry(endpoint).or_default();
        let Some(until) = s.open_until else {
            return Ok(());
        };
        let reason = s.reason.unwrap_or(FailureReason::ServerError);
        if now < until || s.probing {
            return Err(Open { reason });
        }
        s.probing = true;
        Ok(())
    }

    /// An admitted call ended without an outcome (its future was dropped: deadline, shutdown,
    /// reload). A probe must not stay in flight forever, or the circuit would never close.
    pub fn abandon(&self, endpoint: Endpoint) {
        if let Some(s) = self.lock().get_mut(&endpoint) {
            s.probing = false;
        }
    }

    /// Records the outcome of an admitted call; returns whether the circuit is now open.
    pub fn record(
        &self,
        endpoint: Endpoint,
        outcome: Result<(), FailureReason>,
        now: Instant,
    ) -> bool {
        let mut states = self.lock();
        let s = states.entry(endpoint).or_default();
        match outcome {
            // Any answer that is not a sign of a broken API closes the circuit.
            Err(reason) if counts(reason) && self.policy.failures > 0 => {
                s.consecutive += 1;
                if s.probing || s.consecutive >= self.policy.failures {
                    s.open_until = Some(now + self.policy.cooldown);
                    s.reason = Some(reason);
                }
                s.probing = false;
            }
            _ => *s = State::default(),
        }
        s.open_until.is_some()
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

    const E: Endpoint = Endpoint::DeliveryAccount;

    /// Three failed calls: the circuit of `breakers()` opens at `t`.
    fn trip(b: &Breakers, t: Instant) {
        for _ in 0..3 {
            b.admit(E, t).unwrap();
            b.record(E, Err(FailureReason::ServerError), t);
        }
    }

    #[test]
    fn the_circuit_opens_after_n_consecutive_failures_and_refuses_calls() {
        let b = breakers();
        let t = Instant::now();
        for _ in 0..2 {
            assert!(b.admit(E, t).is_ok());
            assert!(!b.record(E, Err(FailureReason::ServerError), t));
        }
        assert!(b.admit(E, t).is_ok());
        assert!(b.record(E, Err(FailureReason::Timeout), t));
        assert_eq!(
            b.admit(E, t + Duration::from_secs(59)),
            Err(Open {
                reason: FailureReason::Timeout
            })
        );
    }

    #[test]
    fn after_the_cool_down_one_probe_goes_through_and_its_success_closes() {
        let b = breakers();
        let t = Instant::now();
        trip(&b, t);
        let later = t + Duration::from_secs(61);
        assert!(b.admit(E, later).is_ok(), "the probe");
        assert!(b.admit(E, later).is_err(), "only one probe at a time");
        assert!(!b.record(E, Ok(()), later));
        assert!(b.admit(E, later).is_ok());
    }

    #[test]
    fn a_failed_probe_reopens_for_another_cool_down() {
        let b = breakers();
        let t = Instant::now();
        trip(&b, t);
        let later = t + Duration::from_secs(61);
        b.admit(E, later).unwrap();
        assert!(b.record(E, Err(FailureReason::Connect), later));
        assert!(b.admit(E, later + Duration::from_secs(30)).is_err());
        assert!(b.admit(E, later + Duration::from_secs(61)).is_ok());
    }

    #[test]
    fn an_abandoned_probe_lets_the_next_one_through() {
        let b = breakers();
        let t = Instant::now();
        trip(&b, t);
        let later = t + Duration::from_secs(61);
        b.admit(E, later).unwrap();
        b.abandon(E);
        assert!(
            b.admit(E, later).is_ok(),
            "a dropped probe does not wedge the circuit open"
        );
    }

    #[test]
    fn target_specific_failures_do_not_count() {
        let b = breakers();
        let t = Instant::now();
        for _ in 0..10 {
            b.admit(E, t).unwrap();
            assert!(!b.record(E, Err(FailureReason::NotFound), t));
        }
    }
}
