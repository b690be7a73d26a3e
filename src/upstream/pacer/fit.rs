//! Whether the tenant's fleet fits what the provider allows: the demand of its collectors
//! against the rate the pacer knows, with hysteresis, and what to tell the operator when that
//! changes. Plain state driven by explicit instants, as [`super::control`]: no clock, no lock,
//! no I/O.
//!
//! The demand comes as sources (a collector, by name) each with its calls per interval and the
//! endpoints they are spread over. The fit is the worst overload `f` (demand over the allowed
//! rate) of the token and of each endpoint: the fleet stops fitting once `f` passes 1 (it needs
//! more than is allowed) and fits again once `f` is clearly below it; each target is then
//! refreshed every `ceil(f)` intervals, a period that moves only when `f` has clearly passed a
//! whole number. "Clearly" is one [`MARGIN`] each way, so a learned rate swinging by a few
//! percent does not flip it. The operator is told once the new
//! fit has held for the longest interval of the demand: the first runs, while the pacer still
//! learns, say nothing they would take back.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::upstream::endpoint::Endpoint;

/// The hysteresis, as a share of the whole number crossed: a refresh period of `k` intervals
/// moves up once the overload passes `k (1 + MARGIN)`, and down once it falls below
/// `(k - 1) (1 - MARGIN)`; a fleet over its limit fits again below `1 - MARGIN` (the same
/// rule, `k` being 2). One band for every crossing: a learned rate swinging by a few percent
/// around any whole number, 1 included, holds the fit as it is.
pub const MARGIN: f64 = 0.05;

/// What a source of demand (a collector) asks of the token: calls per run, once per interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Demand {
    pub calls: u64,
    pub interval: Duration,
    /// The endpoints the calls are spread over, evenly.
    pub endpoints: &'static [Endpoint],
}

impl Demand {
    fn rate(&self) -> f64 {
        self.calls as f64 / self.interval.as_secs_f64().max(1e-3)
    }
}

/// How the fleet compares with what the provider allows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fit {
    Fits,
    /// Each target is refreshed every this many intervals.
    Over(u64),
}

/// What to tell the operator after a change.
#[derive(Debug, PartialEq)]
pub enum Told {
    Over {
        intervals: u64,
        needed: f64,
        allowed: f64,
        /// `name=interval` per source: the intervals at which the fleet would fit.
        fitting: String,
    },
    FitsAgain {
        needed: f64,
        allowed: f64,
    },
}

/// The demand, the fit now and the fit last told.
#[derive(Debug)]
pub struct FleetFit {
    /// What each source (a collector of the tenant: at most a handful) needs. A list, not a
    /// map: a tree's first node has room for eleven (630 bytes for one collector's demand, 6 MiB
    /// at 10,000 tenants).
    demand: Vec<(&'static str, Demand)>,
    /// The fit now (with hysteresis): how long values are kept follows it at once.
    fit: Fit,
    /// Since when `fit` has held.
    since: Instant,
    /// The fit as last told to the operator.
    told: Fit,
}

impl FleetFit {
    pub fn new(now: Instant) -> Self {
        FleetFit {
            demand: Vec::new(),
            fit: Fit::Fits,
            since: now,
            told: Fit::Fits,
        }
    }

    /// Records what `name` needs (`None`: it stopped); whether anything changed.
    pub fn set(&mut self, name: &'static str, demand: Option<Demand>) -> bool {
        let at = self.demand.iter().position(|(n, _)| *n == name);
        match (demand, at) {
            (Some(d), Some(i)) => std::mem::replace(&mut self.demand[i].1, d) != d,
            (Some(d), None) => {
                self.demand.push((name, d));
                true
            }
            (None, Some(i)) => {
                self.demand.swap_remove(i);
                true
            }
            (None, None) => false,
        }
    }

    /// Requests per second the sources need, summed.
    pub fn demand(&self) -> f64 {
        self.demand.iter().map(|(_, d)| d).map(Demand::rate).sum()
    }

    /// What the sources need of each endpoint: a source's calls spread evenly over its
    /// endpoints.
    pub fn by_endpoint(&self) -> HashMap<Endpoint, f64> {
        let mut by = HashMap::new();
        for d in self.demand.iter().map(|(_, d)| d) {
            let share = d.rate() / d.endpoints.len().max(1) as f64;
            for e in d.endpoints {
                *by.entry(*e).or_insert(0.0) += share;
            }
        }
        by
    }

    /// The worst of demand over the token's allowed rate and, per endpoint, its demand over
    /// its own: above 1 the fleet does not fit.
    pub fn overload(&self, token: Option<f64>, endpoint: impl Fn(Endpoint) -> Option<f64>) -> f64 {
        let mut worst = match token {
            Some(allowed) if allowed > 0.0 => self.demand() / allowed,
            _ => 0.0,
        };
        for (e, need) in self.by_endpoint() {
            if let Some(allowed) = endpoint(e)
                && allowed > 0.0
            {
                worst = worst.max(need / allowed);
            }
        }
        worst
    }

    /// The shortest interval of the sources, if any.
    pub fn shortest_interval(&self) -> Option<Duration> {
        self.demand.iter().map(|(_, d)| d).map(|d| d.interval).min()
    }

    /// Each target's refresh period in intervals while the fleet does not fit.
    pub fn refresh_intervals(&self) -> Option<u64> {
        match self.fit {
            Fit::Over(k) => Some(k),
            Fit::Fits => None,
        }
    }

    /// The refresh period the operator was last told of (`None`: that the fleet fits).
    #[cfg(test)]
    pub fn told(&self) -> Option<u64> {
        match self.told {
            Fit::Over(k) => Some(k),
            Fit::Fits => None,
        }
    }

    /// The fit for overload `f`, with hysteresis from the fit now.
    fn next(&self, f: f64) -> Fit {
        match self.fit {
            // Past 1 the fleet needs more than is allowed: no margin, it does not fit.
            Fit::Fits if f > 1.0 => Fit::Over(f.ceil() as u64),
            Fit::Over(_) if f < 1.0 - MARGIN => Fit::Fits,
            Fit::Over(k) => {
                let k = k as f64;
                if f > k * (1.0 + MARGIN) || f < (k - 1.0) * (1.0 - MARGIN) {
                    Fit::Over(f.ceil().max(2.0) as u64)
                } else {
                    Fit::Over(k as u64)
                }
            }
            fits => fits,
        }
    }

    /// Takes the overload `f` at `now` (and `allowed`, the token's rate, for the message);
    /// what to tell the operator, once a changed fit has held for the longest interval of the
    /// demand.
    pub fn check(&mut self, now: Instant, f: f64, allowed: Option<f64>) -> Option<Told> {
        let fit = self.next(f);
        if fit != self.fit {
            self.fit = fit;
            self.since = now;
        }
        let settle = self
            .demand
            .iter()
            .map(|(_, d)| d.interval)
            .max()
            .unwrap_or(Duration::ZERO);
        if fit == self.told || now.saturating_duration_since(self.since) < settle {
            return None;
        }
        let was = std::mem::replace(&mut self.told, fit);
        if fit == Fit::Fits && was == Fit::Fits {
            return None;
        }
        let needed = self.demand();
        let allowed = if f > 0.0 {
            needed / f
        } else {
            allowed.unwrap_or(f64::INFINITY)
        };
        Some(match fit {
            Fit::Over(intervals) => {
                let fitting = self
                    .demand
                    .iter()
                    .map(|(name, d)| {
                        let secs = (d.interval.as_secs_f64() * f).ceil();
                        format!(
                            "{name}={}",
                            humantime::format_duration(Duration::from_secs_f64(secs))
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(",");
                Told::Over {
                    intervals,
                    needed,
                    allowed,
                    fitting,
                }
            }
            Fit::Fits => Told::FitsAgain { needed, allowed },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Endpoint = Endpoint::new("delivery_account");
    const B: Endpoint = Endpoint::new("tracemail_daily");

    fn demand(calls: u64, endpoints: &'static [Endpoint]) -> Option<Demand> {
        Some(Demand {
            calls,
            interval: Duration::from_secs(10),
            endpoints,
        })
    }

    #[test]
    fn the_overload_is_the_worst_of_the_token_and_each_endpoint() {
        let mut f = FleetFit::new(Instant::now());
        assert!(f.set("delivery_account", demand(100, &[A])));
        assert!(!f.set("delivery_account", demand(100, &[A])), "unchanged");
        assert!(f.set("tracemail_daily", demand(200, &[B, B])));
        assert!((f.demand() - 30.0).abs() < 1e-9);
        // The token allows 60: 0.5. The second endpoint allows 5 of its 20: 4.
        let over = f.overload(Some(60.0), |e| (e == B).then_some(5.0));
        assert!((over - 4.0).abs() < 1e-9, "{over}");
        assert_eq!(f.overload(None, |_| None), 0.0, "nothing known: fits");
        assert!(f.set("tracemail_daily", None));
        assert!((f.demand() - 10.0).abs() < 1e-9);
    }

    #[test]
    fn the_fit_enters_leaves_and_moves_with_hysteresis_and_is_told_once_it_held() {
        let t0 = Instant::now();
        let mut f = FleetFit::new(t0);
        f.set("delivery_account", demand(100, &[A]));
        assert_eq!(f.check(t0, 1.0, Some(10.0)), None);
        assert_eq!(f.refresh_intervals(), None, "at the boundary it still fits");
        assert_eq!(f.check(t0, 2.5, Some(4.0)), None, "not told before it held");
        assert_eq!(f.refresh_intervals(), Some(3), "kept values follow at once");
        let told = f
            .check(t0 + Duration::from_secs(10), 2.5, Some(4.0))
            .unwrap();
        assert_eq!(
            told,
            Told::Over {
                intervals: 3,
                needed: 10.0,
                allowed: 4.0,
                fitting: "delivery_account=25s".to_owned()
            }
        );
        assert_eq!(f.told(), Some(3));
        // Within the hysteresis: 3 intervals hold from 1.9 to 3.15.
        for over in [1.91, 3.149] {
            f.check(t0 + Duration::from_secs(20), over, None);
            assert_eq!(f.refresh_intervals(), Some(3), "{over}");
        }
        f.check(t0 + Duration::from_secs(20), 3.2, None);
        assert_eq!(f.refresh_intervals(), Some(4));
        f.check(t0 + Duration::from_secs(20), 0.96, None);
        assert_eq!(f.refresh_intervals(), Some(2), "never below 2 while over");
        f.check(t0 + Duration::from_secs(20), 1.0 - MARGIN - 0.01, None);
        assert_eq!(f.refresh_intervals(), None);
        let told = f.check(t0 + Duration::from_secs(30), 0.5, Some(20.0));
        assert!(
            matches!(told, Some(Told::FitsAgain { needed, allowed }) if needed == 10.0 && allowed == 20.0),
            "{told:?}"
        );
    }
}
