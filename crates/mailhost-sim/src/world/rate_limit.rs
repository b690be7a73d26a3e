//! Rate limits of the Management API: a token bucket per limited management token and one per
//! limited (token, route) pair, their rules (refill, cap, what a refused request is told, how the
//! two buckets of one request combine) and their counters. The wire form (status, headers) is
//! `crate::api::rate_limit`'s business.
//!
//! Route limits are keyed by [`Route`], the operations' names that the configuration, fault
//! injection and the control plane share; besides it, only the message refusing a route that
//! cannot be limited comes from the routes' vocabulary (`route.rs`).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::route::{Route, not_a_limited_route};

/// Smallest accepted [`RateLimit::rate`], in requests per second.
pub const MIN_RATE: f64 = 0.01;
/// Largest accepted [`RateLimit::rate`], in requests per second.
pub const MAX_RATE: f64 = 100_000.0;
/// Largest accepted [`RateLimit::burst`].
pub const MAX_BURST: f64 = 10_000_000.0;
/// Largest accepted [`RateLimit::retry_after_secs`]: a day.
pub const MAX_RETRY_AFTER_SECS: u64 = 86_400;
/// Requests remembered per limit (token-wide or of one route) in [`RateLimitStats::recent`].
pub const RECENT_REQUESTS: usize = 10_000;
/// The status a refusal carries unless [`RateLimit::status`] says otherwise.
pub const DEFAULT_REFUSAL_STATUS: u16 = 429;
/// The statuses a limit may refuse with: 429, and those real services throttle with instead
/// (S3's SlowDown and Azure's ServerBusy answer 503; gateways 502 or 504; some APIs 403). Any other
/// status would not read as a refusal, so it is not offered.
pub const REFUSAL_STATUSES: [u16; 5] = [429, 503, 502, 504, 403];

/// Float rounding of `elapsed × rate` must not refuse a client that waited exactly as long as it
/// was told, nor show one token fewer than it has: counts within this of a whole number are
/// taken as that number.
const SLACK: f64 = 1e-9;

/// How a 429 of the limiter says when to come back. Written in snake_case in JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryAfterStyle {
    /// `Retry-After: <seconds>`.
    #[default]
    Seconds,
    /// `Retry-After: <IMF-fixdate>`, dated with the simulator clock.
    HttpDate,
    /// No `Retry-After` at all.
    None,
}

/// Which rate-limit headers every answer a limit governs carries (see [`RateLimiter::take`] for
/// which limit governs an answer when a token and its route are both limited). Written in
/// snake_case in JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RateLimitHeaders {
    /// None.
    #[default]
    None,
    /// `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (delta seconds).
    #[serde(rename = "x_ratelimit")]
    XRateLimit,
    /// `RateLimit-Policy` and `RateLimit` of draft-ietf-httpapi-ratelimit-headers.
    Ietf,
    /// All five.
    Both,
}

impl RateLimitHeaders {
    pub(crate) fn x_ratelimit(self) -> bool {
        matches!(self, Self::XRateLimit | Self::Both)
    }

    pub(crate) fn ietf(self) -> bool {
        matches!(self, Self::Ietf | Self::Both)
    }
}

/// A limit of the Management API, on one management token as a whole or on one of its routes: a
/// token bucket.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// Tokens added per second (requests per second sustained); 0.01 to 100_000.
    pub rate: f64,
    /// Bucket size: requests that may go at once after an idle time. Default (None): max(1, rate).
    #[serde(default)]
    pub burst: Option<f64>,
    /// How a 429 says when to come back.
    #[serde(default)]
    pub retry_after: RetryAfterStyle,
    /// A fixed Retry-After in seconds instead of the computed one.
    #[serde(default)]
    pub retry_after_secs: Option<u64>,
    /// Which rate-limit headers every answer governed by this limit carries.
    #[serde(default)]
    pub headers: RateLimitHeaders,
    /// Status of a refusal: one of [`REFUSAL_STATUSES`], [`DEFAULT_REFUSAL_STATUS`] when absent.
    /// Whatever the status, a refusal carries the same `Retry-After` and headers, and counts as
    /// refused.
    #[serde(default = "default_refusal_status")]
    pub status: u16,
}

fn default_refusal_status() -> u16 {
    DEFAULT_REFUSAL_STATUS
}

impl RateLimit {
    /// A limit of `rate` requests per second with every other member at its default.
    pub fn per_second(rate: f64) -> Self {
        Self {
            rate,
            burst: None,
            retry_after: RetryAfterStyle::default(),
            retry_after_secs: None,
            headers: RateLimitHeaders::default(),
            status: DEFAULT_REFUSAL_STATUS,
        }
    }

    /// The bucket size in force: `burst`, or max(1, rate) when it is not set.
    pub fn effective_burst(&self) -> f64 {
        self.burst.unwrap_or(self.rate.max(1.0))
    }

    /// Refuses values the bucket could not honour (or would honour absurdly), naming the member
    /// and the accepted range.
    pub fn validate(&self) -> Result<(), String> {
        if !self.rate.is_finite() || !(MIN_RATE..=MAX_RATE).contains(&self.rate) {
            return Err(format!(
                "`rate` must be a number of requests per second from {MIN_RATE} to {MAX_RATE}, \
                 got {}",
                self.rate
            ));
        }
        if let Some(burst) = self.burst
            && (!burst.is_finite() || !(1.0..=MAX_BURST).contains(&burst))
        {
            return Err(format!(
                "`burst` must be a number of requests from 1 to {MAX_BURST}, got {burst}; omit it \
                 for max(1, rate)"
            ));
        }
        if let Some(secs) = self.retry_after_secs {
            if secs > MAX_RETRY_AFTER_SECS {
                return Err(format!(
                    "`retry_after_secs` must be at most {MAX_RETRY_AFTER_SECS} (a day), got {secs}"
                ));
            }
            if self.retry_after == RetryAfterStyle::None {
                return Err(
                    "`retry_after_secs` needs a Retry-After header, but `retry_after` is \"none\": \
                     set `retry_after` to \"seconds\" or \"http_date\", or drop `retry_after_secs`"
                        .to_owned(),
                );
            }
        }
        if !REFUSAL_STATUSES.contains(&self.status) {
            let allowed: Vec<String> = REFUSAL_STATUSES.iter().map(u16::to_string).collect();
            return Err(format!(
                "`status` must be one of {}, got {}",
                allowed.join(", "),
                self.status
            ));
        }
        Ok(())
    }
}

/// What the requests of a limited token (or of a limited route of a token) met so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RateLimitStats {
    /// Requests this limit let through (a token was taken from its bucket).
    pub allowed: u64,
    /// Requests this limit refused, with 429 or its own [`RateLimit::status`] (not those the other
    /// limit of the request refused).
    pub limited: u64,
    /// The most recent requests (at most [`RECENT_REQUESTS`]), oldest first: when each came (wall
    /// clock) and whether it was let through.
    pub recent: Vec<(std::time::Instant, bool)>,
}

/// A continuously refilled token bucket. Time is `tokio::time::Instant`, so tests can pause and
/// advance it.
#[derive(Clone, Debug)]
pub(crate) struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    updated: Instant,
}

impl Bucket {
    /// A full bucket.
    pub(crate) fn full(rate: f64, burst: f64, now: Instant) -> Self {
        Self {
            rate,
            burst,
            tokens: burst,
            updated: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        // saturating: an instant older than the last update (clock read before a concurrent
        // change) adds nothing rather than going back in time.
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.updated = self.updated.max(now);
    }

    /// Whether there is a token at `now` (refilling up to it), without taking it.
    fn has_token(&mut self, now: Instant) -> bool {
        self.refill(now);
        self.tokens + SLACK >= 1.0
    }

    /// Takes the token [`Bucket::has_token`] found.
    fn take_one(&mut self) {
        self.tokens = (self.tokens - 1.0).max(0.0);
    }

    /// Tokens left at the last update.
    pub(crate) fn tokens(&self) -> f64 {
        self.tokens
    }

    /// Seconds from the last update until one token is available.
    pub(crate) fn until_available(&self) -> f64 {
        ((1.0 - self.tokens) / self.rate).max(0.0)
    }

    /// Seconds from the last update until the bucket is full.
    pub(crate) fn until_full(&self) -> f64 {
        ((self.burst - self.tokens) / self.rate).max(0.0)
    }

    /// A new rate and size from `now` on: the tokens earned so far are kept, clamped to the new
    /// size.
    pub(crate) fn reconfigure(&mut self, rate: f64, burst: f64, now: Instant) {
        self.refill(now);
        self.rate = rate;
        self.burst = burst;
        self.tokens = self.tokens.min(burst);
    }
}

/// Whole seconds, rounding up (a client told to wait less than needed would be refused again).
fn ceil_secs(secs: f64) -> u64 {
    // `as` saturates: the largest possible value (burst / rate = 1e9 s) fits anyway.
    (secs - SLACK).max(0.0).ceil() as u64
}

fn floor_count(count: f64) -> u64 {
    (count + SLACK).max(0.0).floor() as u64
}

/// The limiter's answer to one request of a limited token, with every number its wire form needs,
/// computed after this request's token was taken (or not), from the limit that governs the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Decision {
    pub allowed: bool,
    /// floor(burst).
    pub limit: u64,
    /// floor(tokens left); 0 when refused.
    pub remaining: u64,
    /// Whole seconds until the bucket is full again (0 when full).
    pub reset_secs: u64,
    /// max(1, ceil(burst / rate)): the window of the IETF policy.
    pub window_secs: u64,
    /// Whole seconds until one token is available (at least 1), or the configured fixed value;
    /// meaningful when refused.
    pub retry_after_secs: u64,
    pub retry_after: RetryAfterStyle,
    pub headers: RateLimitHeaders,
    /// The status of a refusal ([`RateLimit::status`]); meaningful when refused.
    pub status: u16,
}

/// The bucket and counters of one limit (of a token, or of one route of a token).
#[derive(Debug)]
struct Limited {
    limit: RateLimit,
    bucket: Bucket,
    allowed: u64,
    refused: u64,
    recent: VecDeque<(std::time::Instant, bool)>,
}

impl Limited {
    fn new(limit: RateLimit, now: Instant) -> Self {
        Self {
            bucket: Bucket::full(limit.rate, limit.effective_burst(), now),
            limit,
            allowed: 0,
            refused: 0,
            recent: VecDeque::new(),
        }
    }

    /// What `current` becomes when `limit` is set (`Some`) or lifted (`None`) at `now`: see
    /// [`RateLimiter::set`].
    fn reconfigured(
        current: Option<Self>,
        limit: &Option<RateLimit>,
        now: Instant,
    ) -> Option<Self> {
        match (current, limit) {
            (_, None) => None,
            (Some(mut limited), Some(limit)) => {
                limited
                    .bucket
                    .reconfigure(limit.rate, limit.effective_burst(), now);
                limited.limit = limit.clone();
                Some(limited)
            }
            (None, Some(limit)) => Some(Self::new(limit.clone(), now)),
        }
    }

    fn has_token(&mut self, now: Instant) -> bool {
        self.bucket.has_token(now)
    }

    /// Takes a token if there is one at `now`, counts the request and decides it.
    fn take(&mut self, now: Instant) -> Decision {
        let allowed = self.has_token(now);
        self.settle(allowed)
    }

    /// Counts one request this limit let through (taking the token [`Limited::has_token`] found)
    /// or refused, and decides it, as of the bucket's last refill.
    fn settle(&mut self, allowed: bool) -> Decision {
        if allowed {
            self.bucket.take_one();
            self.allowed = self.allowed.saturating_add(1);
        } else {
            self.refused = self.refused.saturating_add(1);
        }
        if self.recent.len() >= RECENT_REQUESTS {
            self.recent.pop_front();
        }
        self.recent.push_back((std::time::Instant::now(), allowed));
        let burst = self.limit.effective_burst();
        Decision {
            allowed,
            limit: floor_count(burst),
            remaining: if allowed {
                floor_count(self.bucket.tokens())
            } else {
                0
            },
            reset_secs: ceil_secs(self.bucket.until_full()),
            window_secs: ceil_secs(burst / self.limit.rate).max(1),
            retry_after_secs: self
                .limit
                .retry_after_secs
                .unwrap_or_else(|| ceil_secs(self.bucket.until_available()).max(1)),
            retry_after: self.limit.retry_after,
            headers: self.limit.headers,
            status: self.limit.status,
        }
    }

    fn stats(&self) -> RateLimitStats {
        RateLimitStats {
            allowed: self.allowed,
            limited: self.refused,
            recent: self.recent.iter().copied().collect(),
        }
    }
}

/// One management token as the limiter knows it.
#[derive(Debug)]
struct Slot {
    /// Its place among the management tokens, so listings follow the configuration.
    position: usize,
    /// Its token-wide limit.
    limited: Option<Limited>,
    /// Its limits of one route each: at most one per [`Route`], so at most `Route::ALL.len()`.
    routes: BTreeMap<Route, Limited>,
}

/// A limit as the control plane lists it: never the whole token.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct LimitedToken {
    /// See [`preview`].
    pub token: String,
    /// The route the limit is scoped to; `None` (null) for the token-wide limit.
    pub route: Option<Route>,
    pub limit: RateLimit,
    pub allowed: u64,
    pub limited: u64,
}

/// The rate limits of every management token, token-wide and per route. It holds a slot for each
/// known management token from the start and never adds one, so requests carrying made-up tokens
/// cannot grow it; each slot holds at most one limit per [`Route`], so there are at most
/// tokens × `Route::ALL.len()` route buckets.
pub(crate) struct RateLimiter {
    slots: Mutex<HashMap<String, Slot>>,
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The keys are secrets: only how many limits there are is shown.
        let counts = self
            .slots
            .try_lock()
            .map(|slots| {
                let tokens = slots.values().filter(|s| s.limited.is_some()).count();
                let routes = slots.values().map(|s| s.routes.len()).sum::<usize>();
                (tokens, routes)
            })
            .ok();
        f.debug_struct("RateLimiter")
            .field("limited_tokens", &counts.map(|(tokens, _)| tokens))
            .field("route_limits", &counts.map(|(_, routes)| routes))
            .finish_non_exhaustive()
    }
}

impl RateLimiter {
    /// A limiter knowing these management tokens, none of them limited yet. Empty tokens are
    /// skipped (they authenticate nobody).
    pub(crate) fn new<'a>(tokens: impl IntoIterator<Item = &'a str>) -> Self {
        let mut slots = HashMap::new();
        for (position, token) in tokens.into_iter().enumerate() {
            if !token.is_empty() {
                slots.entry(token.to_owned()).or_insert(Slot {
                    position,
                    limited: None,
                    routes: BTreeMap::new(),
                });
            }
        }
        Self {
            slots: Mutex::new(slots),
        }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        self.slots.lock().expect("rate limiter mutex poisoned")
    }

    /// Sets (`Some`) or lifts (`None`) the token-wide limit (`route` `None`) or the limit of one
    /// Management API route (`route` `Some`) of one management token, or of every one when
    /// `token` is `None` (each with its own bucket). The other limits of the token stay as they
    /// are. A limit already set keeps the tokens its bucket holds, clamped to the new burst, and
    /// its counters; a new one starts full; a lifted one forgets its bucket and counters.
    pub(crate) fn set(
        &self,
        token: Option<&str>,
        route: Option<Route>,
        limit: Option<RateLimit>,
        now: Instant,
    ) -> Result<(), String> {
        if let Some(route) = route
            && !route.is_management()
        {
            return Err(not_a_limited_route(route.name()));
        }
        if let Some(limit) = &limit {
            limit.validate()?;
        }
        let mut slots = self.slots();
        let apply = |slot: &mut Slot| match route {
            None => slot.limited = Limited::reconfigured(slot.limited.take(), &limit, now),
            Some(route) => {
                let current = slot.routes.remove(&route);
                if let Some(limited) = Limited::reconfigured(current, &limit, now) {
                    slot.routes.insert(route, limited);
                }
            }
        };
        match token {
            Some(token) => {
                let slot = slots.get_mut(token).ok_or_else(|| {
                    "`token` is not one of the simulator's management tokens: name one of \
                     `SimConfig::management_tokens`, or leave `token` out to limit every one"
                        .to_owned()
                })?;
                apply(slot);
            }
            None => slots.values_mut().for_each(apply),
        }
        Ok(())
    }

    /// Takes one request of `token` on `route` at `now`; `None` when neither the token nor its
    /// route is limited (unknown tokens included: the handler answers them).
    ///
    /// With both limits set, the request goes through only if both buckets have a token. The
    /// route's bucket is asked first and the token-wide one only if the route's has a token; a
    /// token is taken from each only when both have one (both are checked and taken under this
    /// one lock, so nothing is ever taken and given back). So a refused request spends nothing:
    /// a 429 of the route leaves the token-wide bucket for the token's other routes. Each limit
    /// counts what it decided: both count a request they let through, only the refusing one a
    /// 429. The [`Decision`] (its 429's Retry-After, the answer's rate-limit headers) is that of
    /// the limit that refused, or, when both let the request through, the route's, so headers
    /// differ from route to route.
    pub(crate) fn take(&self, token: &str, route: Route, now: Instant) -> Option<Decision> {
        let mut slots = self.slots();
        let Slot {
            limited, routes, ..
        } = slots.get_mut(token)?;
        match (routes.get_mut(&route), limited.as_mut()) {
            (None, None) => None,
            (Some(only), None) | (None, Some(only)) => Some(only.take(now)),
            (Some(of_route), Some(of_token)) => {
                if !of_route.has_token(now) {
                    return Some(of_route.settle(false));
                }
                if !of_token.has_token(now) {
                    return Some(of_token.settle(false));
                }
                of_token.settle(true);
                Some(of_route.settle(true))
            }
        }
    }

    /// The counters of the token-wide limit (`route` `None`) or of the limit of one route of
    /// `token`, if it is set.
    pub(crate) fn stats(&self, token: &str, route: Option<Route>) -> Option<RateLimitStats> {
        let slots = self.slots();
        let slot = slots.get(token)?;
        match route {
            None => slot.limited.as_ref(),
            Some(route) => slot.routes.get(&route),
        }
        .map(Limited::stats)
    }

    /// Every limit, the token previewed: first the token-wide limits, in the order of the
    /// configuration's tokens, then the route limits, by token in the same order, then by route.
    pub(crate) fn list(&self) -> Vec<LimitedToken> {
        let slots = self.slots();
        let mut ordered: Vec<(&String, &Slot)> = slots.iter().collect();
        ordered.sort_by_key(|(_, slot)| slot.position);
        let token_wide = ordered
            .iter()
            .filter_map(|(token, slot)| Some((*token, None, slot.limited.as_ref()?)));
        let per_route = ordered.iter().flat_map(|(token, slot)| {
            slot.routes
                .iter()
                .map(move |(route, limited)| (*token, Some(*route), limited))
        });
        token_wide
            .chain(per_route)
            .map(|(token, route, limited)| LimitedToken {
                token: preview(token),
                route,
                limit: limited.limit.clone(),
                allowed: limited.allowed,
                limited: limited.refused,
            })
            .collect()
    }
}

/// Enough of a token to tell it from the others, never the whole of it: its first 4 characters
/// and `…` (fewer for tokens shorter than 8 characters, at most half of them).
pub(crate) fn preview(token: &str) -> String {
    let shown = (token.chars().count() / 2).min(4);
    let mut out: String = token.chars().take(shown).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests;
