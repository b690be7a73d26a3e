//! `DIR/pace.json`: what each tenant's pacer keeps across a restart, as plain data. Per tenant,
//! keyed by its name and its provider, the pace learned from 429s (the token's and each
//! endpoint's: the rate, its estimate and the rate known to work), the pauses the provider
//! asked for that still run, each endpoint's outage with its next probe and whether its
//! slow-start window was open, and the targets backing off on their own with when their
//! back-off ends. Instants are written as Unix milliseconds ([`Clocks`]). Nothing here is
//! secret: no token and nothing made from one.
//!
//! The pacer fills these records and takes them back (`upstream/pacer/resume.rs`, which knows
//! its private state); the engine writes and reads the file (`engine/paces.rs`).

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::Versioned;

/// The state file of the paces: `DIR/pace.json`.
pub const PACE: &str = "pace";

/// The format of the paces' state file: raised whenever its shape changes.
const FORMAT: u32 = 1;

/// The state file: one entry per tenant whose pacer holds something.
#[derive(Debug, Serialize, Deserialize)]
pub struct PaceFile {
    pub tenants: Vec<TenantPace>,
}

impl Versioned for PaceFile {
    const VERSION: u32 = FORMAT;
}

/// One tenant's pacer, under what it is taken back by: the tenant's name and its provider (the
/// base URL without userinfo, query or fragment).
#[derive(Debug, Serialize, Deserialize)]
pub struct TenantPace {
    pub tenant: String,
    pub origin: String,
    pub pace: KeptPacer,
}

/// The monotonic clock and the wall clock read at the same moment: an instant is kept as the
/// Unix time it stands for, and mapped back to the monotonic clock of the process that reads it.
#[derive(Clone, Copy, Debug)]
pub struct Clocks {
    pub now: Instant,
    /// Milliseconds since the Unix epoch at `now`.
    pub unix_ms: u64,
}

impl Clocks {
    /// Both clocks, read now.
    pub fn now() -> Clocks {
        let unix_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, millis);
        Clocks {
            now: Instant::now(),
            unix_ms,
        }
    }

    /// The Unix time, in milliseconds, that `at` stands for.
    pub fn unix(self, at: Instant) -> u64 {
        if at >= self.now {
            self.unix_ms.saturating_add(millis(at - self.now))
        } else {
            self.unix_ms.saturating_sub(millis(self.now - at))
        }
    }

    /// The instant the Unix time `ms` stands for (`now` at the earliest for a past one that
    /// the monotonic clock cannot go back to).
    pub fn instant(self, ms: u64) -> Instant {
        if ms >= self.unix_ms {
            self.now
                .checked_add(Duration::from_millis(ms - self.unix_ms))
                .unwrap_or(self.now)
        } else {
            self.now
                .checked_sub(Duration::from_millis(self.unix_ms - ms))
                .unwrap_or(self.now)
        }
    }
}

/// A duration as kept: whole milliseconds, saturating.
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// What 429s taught one pace, as plain numbers (requests per second): read from the pacer's
/// `Control::curve` and taken back by its `Control::resume`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeptCurve {
    /// The learned rate calls were paced at.
    pub rate: f64,
    /// The estimate of the last congestion event: the curve's plateau.
    pub estimate: f64,
    /// The rate last known to work (slow start climbs back towards it); the pacer's
    /// `MAX_RATE` while nothing is known to work yet (a cold start's doubling).
    pub known: f64,
    /// The estimate rested on enough successes to widen the plateau by calls.
    pub confident: bool,
    /// Seconds of pause the last event's refusal asked for (the probe's stretch past it).
    pub pause_seconds: f64,
}

/// One pace (the token's or an endpoint's): its learned curve, and the end of a pause in force.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KeptPace {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub curve: Option<KeptCurve>,
    /// When the pause the provider asked for ends (a `Retry-After` in full, or a spent
    /// quota's reset), Unix milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_until_ms: Option<u64>,
}

impl KeptPace {
    /// Whether it holds nothing worth keeping.
    pub fn is_empty(&self) -> bool {
        self.curve.is_none() && self.paused_until_ms.is_none()
    }
}

/// An endpoint's outage in force, Unix milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptOutage {
    pub since_ms: u64,
    pub next_probe_ms: u64,
    pub cooldown_ms: u64,
}

/// One endpoint of the token.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeptEndpoint {
    pub endpoint: String,
    #[serde(default)]
    pub pace: KeptPace,
    /// Its slow-start window no longer limited anything.
    #[serde(default)]
    pub window_open: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outage: Option<KeptOutage>,
}

/// A target refused on its own, backing off alone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptBackoff {
    pub endpoint: String,
    pub target: String,
    /// When its back-off ends, Unix milliseconds.
    pub until_ms: u64,
    /// Its 429s in a row: the next back-off doubles from them.
    pub refused: u32,
}

/// What one token's pacer keeps.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KeptPacer {
    #[serde(default)]
    pub token: KeptPace,
    #[serde(default)]
    pub endpoints: Vec<KeptEndpoint>,
    #[serde(default)]
    pub backoffs: Vec<KeptBackoff>,
}

impl KeptPacer {
    /// Whether it holds nothing worth keeping.
    pub fn is_empty(&self) -> bool {
        self.token.is_empty() && self.endpoints.is_empty() && self.backoffs.is_empty()
    }
}

/// For tests: `endpoint` learned at `rate` a second (the estimate and the rate known to work
/// the same, a confident one), its window open, paused until `paused_until_ms` if given.
#[cfg(test)]
pub(crate) fn learned_endpoint(
    endpoint: &str,
    rate: f64,
    paused_until_ms: Option<u64>,
) -> KeptEndpoint {
    KeptEndpoint {
        endpoint: endpoint.to_owned(),
        pace: KeptPace {
            curve: Some(KeptCurve {
                rate,
                estimate: rate,
                known: rate,
                confident: true,
                pause_seconds: 0.0,
            }),
            paused_until_ms,
        },
        window_open: true,
        outage: None,
    }
}
