//! The trail of one target's poll: each call's route template, its attempts with their HTTP
//! status, the waits (pacer, back-off, `Retry-After`), the field a decode stumbled on, and the
//! circuit's state after it. `/probe?debug=true` prints it, as blackbox_exporter's `debug=true`
//! prints a probe's log. It names route templates, never URLs, and holds no header value: the
//! token cannot be in it. Every part of it is bounded ([`MAX_STEPS`], [`MAX_TEXT`]). It is
//! plain text and numbers, so that a failed call's error can carry it.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use jiff::Timestamp;
use tokio::time::Instant;

use crate::redact;

/// Steps kept per poll; later ones are counted, not kept. A poll makes at most
/// `api.max_retries + 1` attempts per call and a handful of calls, so this is rarely reached.
pub const MAX_STEPS: usize = 32;
/// Characters kept of a detail or a field path.
pub const MAX_TEXT: usize = 160;

/// One thing that happened during a poll.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Not called: the target's circuit is open.
    CircuitOpen { route: &'static str },
    /// A failed attempt was not retried: the endpoint's retry budget was spent.
    RetryRefused { route: &'static str },
    /// An attempt that went out: how long it waited for its turn (the token's pacer and the
    /// cap on calls in flight), the HTTP status of the answer (none when there was no answer),
    /// how long the exchange took, why it failed, and the `Retry-After` of a 429.
    Attempt {
        route: &'static str,
        number: u32,
        waited: Duration,
        status: Option<u16>,
        took: Duration,
        failure: Option<&'static str>,
        retry_after: Option<Duration>,
    },
    /// An attempt that never went out: the pacer or the deadline gave it no turn.
    NotSent {
        route: &'static str,
        number: u32,
        waited: Duration,
        reason: &'static str,
    },
    /// An attempt not sent because its target backs off past the deadline, after its own 429s
    /// or the `Retry-After` of a lone one.
    BackingOff {
        route: &'static str,
        number: u32,
        left: Duration,
        retry_after: Option<Duration>,
        own: bool,
    },
    /// A pause before the next attempt.
    Backoff { wait: Duration },
    /// A field of the answer that could not be read as expected (the answer may still be used).
    Field {
        route: &'static str,
        path: String,
        found: String,
    },
    /// The answer could not be read at all.
    Unreadable { route: &'static str, detail: String },
    /// The target's circuit after the call.
    Circuit {
        route: &'static str,
        consecutive_failures: u32,
        open: bool,
        /// The breaker is off (`api.circuit_breaker_failures: 0`).
        off: bool,
    },
}

/// The trail of one poll, finished.
#[derive(Clone, Debug, PartialEq)]
pub struct Trail {
    pub started: Timestamp,
    /// Each step with the time since the start of the poll.
    pub steps: Vec<(Duration, Step)>,
    /// Steps past [`MAX_STEPS`], not kept.
    pub dropped: usize,
}

/// Where the client writes a poll's steps while it runs. Cheap to clone: clones share it.
#[derive(Clone, Debug)]
pub struct Recorder(Arc<Mutex<Trail>>, Instant);

impl Recorder {
    pub fn start(started: Timestamp) -> Recorder {
        Recorder(
            Arc::new(Mutex::new(Trail {
                started,
                steps: Vec::new(),
                dropped: 0,
            })),
            Instant::now(),
        )
    }

    pub fn step(&self, step: Step) {
        let at = self.1.elapsed();
        // Plain data: a panic elsewhere cannot leave it half-written.
        let mut trail = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if trail.steps.len() >= MAX_STEPS {
            trail.dropped = trail.dropped.saturating_add(1);
        } else {
            trail.steps.push((at, step));
        }
    }

    /// The trail as it stands.
    pub fn finish(&self) -> Trail {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// `text` cut to [`MAX_TEXT`] characters, with anything token-like masked.
pub fn bounded(text: &str) -> String {
    redact::shorten(&redact::redact(text), MAX_TEXT)
}

fn secs(d: Duration) -> String {
    format!("{:.3}s", d.as_secs_f64())
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::CircuitOpen { route } => {
                write!(f, "{route}: not called, the target's circuit is open")
            }
            Step::RetryRefused { route } => {
                write!(
                    f,
                    "{route}: not retried, the endpoint's retry budget is spent"
                )
            }
            Step::Attempt {
                route,
                number,
                waited,
                status,
                took,
                failure,
                retry_after,
            } => {
                write!(f, "{route} attempt {number}")?;
                if *waited >= Duration::from_millis(1) {
                    write!(f, " (waited {} for its turn)", secs(*waited))?;
                }
                write_answer(f, *status, *took, *failure, *retry_after)
            }
            Step::NotSent {
                route,
                number,
                waited,
                reason,
            } => write!(
                f,
                "{route} attempt {number}: not sent after waiting {} for a turn ({reason})",
                secs(*waited)
            ),
            Step::BackingOff {
                route,
                number,
                left,
                retry_after,
                own,
            } => write_backing_off(f, route, *number, *left, *retry_after, *own),
            Step::Backoff { wait } => write!(f, "back-off {} before the next attempt", secs(*wait)),
            Step::Field { route, path, found } => {
                write!(f, "{route}: field {path} could not be read, found {found}")
            }
            Step::Unreadable { route, detail } => write!(f, "{route}: answer unreadable: {detail}"),
            Step::Circuit {
                route,
                consecutive_failures,
                open,
                off,
            } => write_circuit(f, route, *consecutive_failures, *open, *off),
        }
    }
}

/// How an attempt that went out ended: the answer's status (or none), how long it took, why it
/// failed and the `Retry-After` it carried.
fn write_answer(
    f: &mut fmt::Formatter<'_>,
    status: Option<u16>,
    took: Duration,
    failure: Option<&str>,
    retry_after: Option<Duration>,
) -> fmt::Result {
    match status {
        Some(code) => write!(f, ": HTTP {code}")?,
        None => f.write_str(": no answer")?,
    }
    write!(f, " after {}", secs(took))?;
    if let Some(reason) = failure {
        write!(f, ", failed {reason}")?;
    }
    if let Some(wait) = retry_after {
        write!(f, ", Retry-After {}", secs(wait))?;
    }
    Ok(())
}

/// An attempt not sent because its target backs off, and whether it was refused on its own.
fn write_backing_off(
    f: &mut fmt::Formatter<'_>,
    route: &str,
    number: u32,
    left: Duration,
    retry_after: Option<Duration>,
    own: bool,
) -> fmt::Result {
    write!(
        f,
        "{route} attempt {number}: not sent, the target backs off {} more after its HTTP 429",
        secs(left)
    )?;
    if let Some(wait) = retry_after {
        write!(f, " (Retry-After {})", secs(wait))?;
    }
    if own {
        write!(
            f,
            "; refused on its own while its neighbours succeed, so no one else is slowed"
        )?;
    }
    Ok(())
}

/// The target's circuit after a call, or that the breaker is off.
fn write_circuit(
    f: &mut fmt::Formatter<'_>,
    route: &str,
    consecutive_failures: u32,
    open: bool,
    off: bool,
) -> fmt::Result {
    if off {
        return write!(f, "{route}: circuit breaker off");
    }
    let state = if open { "open" } else { "closed" };
    write!(
        f,
        "{route}: circuit {state}, {consecutive_failures} consecutive failures"
    )
}

impl fmt::Display for Trail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "poll started {}", self.started)?;
        for (at, step) in &self.steps {
            writeln!(f, "    +{} {step}", secs(*at))?;
        }
        if self.dropped > 0 {
            writeln!(f, "    ({} more steps not kept)", self.dropped)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const E: &str = "GET /api/delivery/accounts/{id}";

    #[test]
    fn a_trail_keeps_at_most_its_bound_of_steps_and_counts_the_rest() {
        let r = Recorder::start(Timestamp::UNIX_EPOCH);
        for _ in 0..MAX_STEPS + 5 {
            r.step(Step::Backoff {
                wait: Duration::from_millis(10),
            });
        }
        let t = r.finish();
        assert_eq!((t.steps.len(), t.dropped), (MAX_STEPS, 5));
        assert!(t.to_string().contains("(5 more steps not kept)"));
    }

    #[test]
    fn a_step_names_the_route_template_and_what_happened() {
        let step = Step::Attempt {
            route: E,
            number: 2,
            waited: Duration::from_millis(1500),
            status: Some(429),
            took: Duration::from_millis(3),
            failure: Some("rate_limited"),
            retry_after: Some(Duration::from_secs(2)),
        };
        assert_eq!(
            step.to_string(),
            "GET /api/delivery/accounts/{id} attempt 2 (waited 1.500s for its turn): HTTP 429 after 0.003s, failed rate_limited, Retry-After 2.000s"
        );
    }

    #[test]
    fn a_decode_step_names_the_field_and_a_circuit_step_its_state() {
        let field = Step::Field {
            route: E,
            path: "resources[0].remaining_messages".to_owned(),
            found: "string \"lots\"".to_owned(),
        };
        assert_eq!(
            field.to_string(),
            "GET /api/delivery/accounts/{id}: field resources[0].remaining_messages could not be read, found string \"lots\""
        );
        let circuit = |open, off| Step::Circuit {
            route: E,
            consecutive_failures: 3,
            open,
            off,
        };
        assert!(
            circuit(true, false)
                .to_string()
                .ends_with("circuit open, 3 consecutive failures")
        );
        assert!(
            circuit(false, true)
                .to_string()
                .ends_with("circuit breaker off")
        );
    }

    #[test]
    fn bounded_text_is_cut_and_masks_what_looks_like_a_token() {
        let long = "x ".repeat(500);
        assert!(bounded(&long).chars().count() <= MAX_TEXT + 1);
        let leaked = bounded("token abcdefghijklmnopqrstuvwxyz0123456789ABCD in the body");
        assert!(
            !leaked.contains("abcdefghijklmnopqrstuvwxyz0123456789ABCD"),
            "{leaked}"
        );
    }
}
