//! A circuit breaker per target: after N consecutive failures of the kind that say "this call
//! is broken" ([`FailureReason::TRANSIENT`]; never a 429, which is the token's state and the
//! pacer's business, see [`super::pacer`]), calls for that one target fail
//! at once with reason `circuit_open` for a cool-down, then one probe goes through; its outcome
//! closes or reopens the circuit. A broken account then costs one call per cool-down, and it
//! never costs a healthy account anything: circuits are keyed by (endpoint, target), the
//! smallest unit that fails alone, as Envoy's outlier detection ejects one host and not the
//! cluster.
//!
//! This file is one circuit's rules. Where circuits are kept is the pacer's record of each
//! target (`pacer/targets.rs`), beside the target's 429s, under one bound: a circuit with a
//! failure on record has an entry there, a success removes it.

use tokio::time::Instant;

use crate::settings::BreakerPolicy;
use crate::upstream::cooldown::CoolDown;
use crate::upstream::endpoint::Endpoint;
use crate::upstream::error::FailureReason;

/// A circuit: one target of one endpoint (the account id, view, migration or mailbox code).
pub type CircuitKey = (Endpoint, String);

/// One target's circuit with a failure on record.
#[derive(Clone, Copy, Debug, Default)]
pub struct Breaker {
    consecutive: u32,
    /// Set while open: calls are refused until it ends, then one probe asks (half-open).
    open: Option<CoolDown>,
}

/// A circuit has one probe at a time, and it is abandoned by its circuit: no sequence number
/// is needed to tell it.
const PROBE: u64 = 0;

/// A circuit as it is told (the debug trail, the outage's standing of a target).
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

impl Breaker {
    /// Whether a call may go out now. After the cool-down, exactly one probe is admitted.
    pub fn admit(&mut self, now: Instant) -> Result<(), Open> {
        match self.open.as_mut().map(|open| open.ask(now, PROBE)) {
            Some(false) => Err(Open),
            _ => Ok(()),
        }
    }

    /// An admitted call ended without an outcome (its future was dropped: deadline, shutdown).
    /// A probe must not stay in flight forever, or the circuit would never close.
    pub fn abandon(&mut self) {
        if let Some(open) = &mut self.open {
            open.abandoned(PROBE);
        }
    }

    /// A failure that says the call is broken (`reason.is_transient()`, the caller checks):
    /// counted; the circuit opens at `policy.failures` in a row, or again when its probe
    /// failed.
    pub fn failed(&mut self, policy: BreakerPolicy, now: Instant) {
        self.consecutive = self.consecutive.saturating_add(1);
        let probed = self.open.is_some_and(|open| open.asking());
        if probed || self.consecutive >= policy.failures {
            self.open = Some(CoolDown::new(now, policy.cooldown, true));
        } else if let Some(open) = &mut self.open {
            open.abandoned(PROBE);
        }
    }

    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// The circuit as it is told, under `policy`.
    pub fn told(&self, policy: BreakerPolicy) -> Circuit {
        Circuit {
            consecutive: self.consecutive,
            open: self.is_open(),
            off: policy.failures == 0,
        }
    }
}

/// Whether `outcome` counts towards a circuit under `policy`: a failure that says the call is
/// broken, with the breaker on. Any other answer closes the circuit.
pub fn counts(outcome: Result<(), FailureReason>, policy: BreakerPolicy) -> bool {
    matches!(outcome, Err(reason) if reason.is_transient() && policy.failures > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const POLICY: BreakerPolicy = BreakerPolicy {
        failures: 3,
        cooldown: Duration::from_secs(60),
    };

    /// Three failed calls: the circuit opens at `t`.
    fn tripped(t: Instant) -> Breaker {
        let mut b = Breaker::default();
        for _ in 0..3 {
            b.admit(t).unwrap();
            b.failed(POLICY, t);
        }
        b
    }

    #[test]
    fn the_circuit_opens_after_n_consecutive_failures_and_refuses_calls() {
        let t = Instant::now();
        let mut b = Breaker::default();
        for _ in 0..2 {
            assert!(b.admit(t).is_ok());
            b.failed(POLICY, t);
            assert!(!b.is_open());
        }
        assert!(b.admit(t).is_ok());
        b.failed(POLICY, t);
        assert!(b.is_open());
        assert_eq!(b.admit(t + Duration::from_secs(59)), Err(Open));
        assert_eq!(
            b.told(POLICY),
            Circuit {
                consecutive: 3,
                open: true,
                off: false
            }
        );
    }

    #[test]
    fn after_the_cool_down_one_probe_goes_through() {
        let t = Instant::now();
        let mut b = tripped(t);
        let later = t + Duration::from_secs(61);
        assert!(b.admit(later).is_ok(), "the probe");
        assert!(b.admit(later).is_err(), "only one probe at a time");
    }

    #[test]
    fn a_failed_probe_reopens_for_another_cool_down() {
        let t = Instant::now();
        let mut b = tripped(t);
        let later = t + Duration::from_secs(61);
        b.admit(later).unwrap();
        b.failed(POLICY, later);
        assert!(b.admit(later + Duration::from_secs(30)).is_err());
        assert!(b.admit(later + Duration::from_secs(61)).is_ok());
    }

    #[test]
    fn an_abandoned_probe_lets_the_next_one_through() {
        let t = Instant::now();
        let mut b = tripped(t);
        let later = t + Duration::from_secs(61);
        b.admit(later).unwrap();
        b.abandon();
        assert!(
            b.admit(later).is_ok(),
            "a dropped probe does not wedge the circuit open"
        );
    }

    #[test]
    fn only_failures_that_say_the_call_is_broken_count_and_only_with_the_breaker_on() {
        use FailureReason::*;
        for (reason, broken) in [
            (Timeout, true),
            (Connect, true),
            (ServerError, true),
            (NotFound, false),
            (RateLimited, false),
            (Decode, false),
        ] {
            assert_eq!(counts(Err(reason), POLICY), broken, "{reason:?}");
        }
        assert!(!counts(Ok(()), POLICY));
        let off = BreakerPolicy {
            failures: 0,
            ..POLICY
        };
        assert!(!counts(Err(FailureReason::Timeout), off));
    }

    #[test]
    fn a_cool_down_past_the_end_of_the_clock_does_not_panic() {
        let policy = BreakerPolicy {
            failures: 1,
            cooldown: Duration::MAX,
        };
        let t = Instant::now();
        let mut b = Breaker::default();
        b.admit(t).unwrap();
        b.failed(policy, t);
        assert!(b.admit(t).is_err());
    }
}
