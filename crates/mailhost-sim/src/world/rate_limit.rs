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
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    impl Bucket {
        fn try_take(&mut self, now: Instant) -> bool {
            let allowed = self.has_token(now);
            if allowed {
                self.take_one();
            }
            allowed
        }
    }

    fn limit(rate: f64, burst: Option<f64>) -> RateLimit {
        RateLimit {
            burst,
            ..RateLimit::per_second(rate)
        }
    }

    #[test]
    fn a_new_bucket_is_full_and_refills_at_its_rate_up_to_its_burst() {
        let t0 = Instant::now();
        let mut bucket = Bucket::full(2.0, 3.0, t0);
        for _ in 0..3 {
            assert!(bucket.try_take(t0));
        }
        assert!(!bucket.try_take(t0), "three tokens, three requests");
        // Two tokens a second: one more after half a second, not before.
        assert!(!bucket.try_take(t0 + Duration::from_millis(499)));
        assert!(bucket.try_take(t0 + Duration::from_millis(500)));
        assert!(!bucket.try_take(t0 + Duration::from_millis(500)));
        // A long idle time fills the bucket to its burst, no further.
        let later = t0 + Duration::from_secs(3600);
        for _ in 0..3 {
            assert!(bucket.try_take(later));
        }
        assert!(!bucket.try_take(later));
    }

    #[test]
    fn a_client_that_waits_exactly_as_told_is_let_through() {
        let t0 = Instant::now();
        let mut limited = Limited::new(limit(1.0, Some(1.0)), t0);
        assert!(limited.take(t0).allowed);
        // Ten refills of a tenth of a token add up to a hair under one in floating point.
        for tenth in 1..10 {
            let refused = limited.take(t0 + Duration::from_millis(100 * tenth));
            assert!(!refused.allowed);
            assert_eq!(refused.retry_after_secs, 1);
        }
        assert!(limited.take(t0 + Duration::from_secs(1)).allowed);
    }

    #[test]
    fn a_refused_request_is_told_when_one_token_will_be_available() {
        let t0 = Instant::now();
        let mut limited = Limited::new(limit(0.25, Some(2.0)), t0);
        let first = limited.take(t0);
        assert_eq!(
            (
                first.allowed,
                first.limit,
                first.remaining,
                first.reset_secs
            ),
            (true, 2, 1, 4)
        );
        assert_eq!(first.window_secs, 8);
        limited.take(t0);
        let refused = limited.take(t0 + Duration::from_secs(1));
        // A quarter token earned: three quarters at 0.25/s are 3 s away.
        assert!(!refused.allowed);
        assert_eq!(refused.remaining, 0);
        assert_eq!(refused.retry_after_secs, 3);
        assert_eq!(refused.reset_secs, 7);
        let fixed = RateLimit {
            retry_after_secs: Some(30),
            ..limit(0.25, Some(2.0))
        };
        let mut limited = Limited::new(fixed, t0);
        limited.take(t0);
        limited.take(t0);
        assert_eq!(limited.take(t0).retry_after_secs, 30);
    }

    #[test]
    fn retry_after_is_at_least_one_second_even_at_high_rates() {
        let t0 = Instant::now();
        let mut limited = Limited::new(limit(1000.0, Some(1.0)), t0);
        limited.take(t0);
        let refused = limited.take(t0);
        assert_eq!((refused.allowed, refused.retry_after_secs), (false, 1));
        assert_eq!(refused.window_secs, 1);
    }

    #[test]
    fn a_changed_limit_keeps_the_tokens_left_clamped_to_the_new_burst() {
        let t0 = Instant::now();
        let mut bucket = Bucket::full(1.0, 10.0, t0);
        for _ in 0..4 {
            bucket.try_take(t0);
        }
        bucket.reconfigure(1.0, 4.0, t0);
        assert_eq!(bucket.tokens(), 4.0, "six left, clamped to four");
        bucket.reconfigure(1.0, 100.0, t0);
        assert_eq!(bucket.tokens(), 4.0, "a larger burst does not add tokens");
        // Tokens earned at the old rate are kept; the new rate applies from the change on.
        bucket.reconfigure(0.5, 100.0, t0 + Duration::from_secs(2));
        assert_eq!(bucket.tokens(), 6.0);
        bucket.refill(t0 + Duration::from_secs(4));
        assert_eq!(bucket.tokens(), 7.0);
    }

    #[test]
    fn the_default_burst_is_the_rate_but_at_least_one() {
        assert_eq!(limit(0.5, None).effective_burst(), 1.0);
        assert_eq!(limit(20.0, None).effective_burst(), 20.0);
        assert_eq!(limit(20.0, Some(3.0)).effective_burst(), 3.0);
    }

    #[test]
    fn out_of_range_limits_are_refused_with_a_message_naming_the_member() {
        let cases = [
            (
                limit(0.0, None),
                "`rate` must be a number of requests per second from 0.01",
            ),
            (limit(f64::NAN, None), "got NaN"),
            (limit(f64::INFINITY, None), "`rate`"),
            (limit(100_001.0, None), "to 100000, got 100001"),
            (
                limit(1.0, Some(0.5)),
                "`burst` must be a number of requests from 1",
            ),
            (limit(1.0, Some(f64::INFINITY)), "`burst`"),
            (limit(1.0, Some(10_000_001.0)), "got 10000001; omit it"),
            (
                RateLimit {
                    retry_after_secs: Some(86_401),
                    ..limit(1.0, None)
                },
                "`retry_after_secs` must be at most 86400",
            ),
            (
                RateLimit {
                    retry_after_secs: Some(5),
                    retry_after: RetryAfterStyle::None,
                    ..limit(1.0, None)
                },
                "set `retry_after` to \"seconds\" or \"http_date\", or drop `retry_after_secs`",
            ),
            (
                RateLimit {
                    status: 500,
                    ..limit(1.0, None)
                },
                "`status` must be one of 429, 503, 502, 504, 403, got 500",
            ),
            (
                RateLimit {
                    status: 200,
                    ..limit(1.0, None)
                },
                "`status` must be one of 429, 503, 502, 504, 403, got 200",
            ),
        ];
        for (bad, expected) in cases {
            let message = bad.validate().expect_err("refused");
            assert!(message.contains(expected), "{message:?} lacks {expected:?}");
        }
        for good in [
            limit(0.01, None),
            limit(100_000.0, Some(10_000_000.0)),
            limit(1.0, Some(1.0)),
            RateLimit {
                retry_after_secs: Some(86_400),
                retry_after: RetryAfterStyle::HttpDate,
                ..limit(1.0, None)
            },
            RateLimit {
                status: 503,
                ..limit(1.0, None)
            },
            RateLimit {
                status: 403,
                ..limit(1.0, None)
            },
        ] {
            assert_eq!(good.validate(), Ok(()), "{good:?}");
        }
    }

    #[test]
    fn limits_are_written_in_snake_case_and_unknown_members_are_refused() {
        let read: RateLimit = serde_json::from_value(json!({
            "rate": 5, "retry_after": "http_date", "headers": "x_ratelimit"
        }))
        .expect("limit");
        assert_eq!(
            read,
            RateLimit {
                retry_after: RetryAfterStyle::HttpDate,
                headers: RateLimitHeaders::XRateLimit,
                ..RateLimit::per_second(5.0)
            }
        );
        assert_eq!(
            serde_json::to_value(&read).expect("json"),
            json!({"rate": 5.0, "burst": null, "retry_after": "http_date",
                   "retry_after_secs": null, "headers": "x_ratelimit", "status": 429})
        );
        let slow_down: RateLimit =
            serde_json::from_value(json!({"rate": 1, "status": 503})).expect("limit");
        assert_eq!(slow_down.status, 503);
        assert!(serde_json::from_value::<RateLimit>(json!({"rate": 1, "status": "503"})).is_err());
        for (name, style) in [
            ("none", RateLimitHeaders::None),
            ("both", RateLimitHeaders::Both),
        ] {
            let read: RateLimit =
                serde_json::from_value(json!({"rate": 1, "headers": name})).expect("limit");
            assert_eq!(read.headers, style);
        }
        assert!(serde_json::from_value::<RateLimit>(json!({"rate": 1, "brust": 2})).is_err());
        assert!(serde_json::from_value::<RateLimit>(json!({"burst": 2})).is_err());
    }

    #[test]
    fn only_known_management_tokens_can_be_limited() {
        let t0 = Instant::now();
        let limiter = RateLimiter::new(["alpha-token", "", "beta-token"]);
        let message = limiter
            .set(Some("made-up"), None, Some(limit(1.0, None)), t0)
            .expect_err("unknown token");
        assert!(
            message.contains("SimConfig::management_tokens"),
            "{message}"
        );
        assert!(
            !message.contains("made-up"),
            "never echo a token: {message}"
        );
        assert!(
            limiter
                .set(Some(""), None, Some(limit(1.0, None)), t0)
                .is_err(),
            "an empty token authenticates nobody"
        );
        assert_eq!(limiter.take("made-up", Route::DeliveryAccountGet, t0), None);
        assert_eq!(
            limiter.take("alpha-token", Route::DeliveryAccountGet, t0),
            None,
            "known but not limited"
        );
        limiter
            .set(Some("beta-token"), None, Some(limit(1.0, None)), t0)
            .expect("known token");
        assert!(
            limiter
                .take("beta-token", Route::DeliveryAccountGet, t0)
                .is_some_and(|d| d.allowed)
        );
        assert_eq!(limiter.slots().len(), 2);
    }

    #[test]
    fn every_token_gets_its_own_bucket_and_lifting_forgets_it() {
        let t0 = Instant::now();
        let limiter = RateLimiter::new(["alpha-token", "beta-token"]);
        limiter
            .set(None, None, Some(limit(1.0, None)), t0)
            .expect("valid");
        assert!(
            limiter
                .take("alpha-token", Route::DeliveryAccountGet, t0)
                .is_some_and(|d| d.allowed)
        );
        assert!(
            limiter
                .take("alpha-token", Route::DeliveryAccountGet, t0)
                .is_some_and(|d| !d.allowed)
        );
        assert!(
            limiter
                .take("beta-token", Route::DeliveryAccountGet, t0)
                .is_some_and(|d| d.allowed)
        );
        let listed = limiter.list();
        assert_eq!(
            listed.iter().map(|l| l.token.as_str()).collect::<Vec<_>>(),
            ["alph…", "beta…"]
        );
        assert_eq!((listed[0].allowed, listed[0].limited), (1, 1));
        limiter
            .set(Some("alpha-token"), None, None, t0)
            .expect("lift");
        assert_eq!(
            limiter.take("alpha-token", Route::DeliveryAccountGet, t0),
            None
        );
        assert_eq!(limiter.stats("alpha-token", None), None);
        assert_eq!(limiter.list().len(), 1);
    }

    #[test]
    fn a_request_is_let_through_only_when_its_route_and_its_token_both_have_a_token() {
        let t0 = Instant::now();
        let limiter = RateLimiter::new(["alpha-token", "beta-token"]);
        let daily = Route::TracemailDaily;
        let account = Route::DeliveryAccountGet;
        limiter
            .set(Some("alpha-token"), None, Some(limit(1.0, Some(3.0))), t0)
            .expect("valid");
        limiter
            .set(
                Some("alpha-token"),
                Some(daily),
                Some(limit(1.0, Some(1.0))),
                t0,
            )
            .expect("valid");
        let verdicts = |route| {
            (0..4)
                .map(|_| limiter.take("alpha-token", route, t0).map(|d| d.allowed))
                .collect::<Vec<_>>()
        };
        // The route's one token, then its refusals: they take nothing from the token's three.
        let first = limiter.take("alpha-token", daily, t0).expect("limited");
        assert_eq!((first.allowed, first.limit, first.remaining), (true, 1, 0));
        assert_eq!(verdicts(daily), [Some(false); 4]);
        // The route's answer, its own numbers; the token's other routes only meet its bucket.
        assert_eq!(
            verdicts(account),
            [Some(true), Some(true), Some(false), Some(false)]
        );
        let stats = |route| {
            let s = limiter.stats("alpha-token", route).expect("limited");
            (s.allowed, s.limited)
        };
        assert_eq!(stats(Some(daily)), (1, 4));
        assert_eq!(
            stats(None),
            (3, 2),
            "the route's refusals are not the token's"
        );
        // A second later both buckets hold one token, but the token-wide one goes first on the
        // account route; the daily route then finds its own but not the token's, and keeps its.
        let t1 = t0 + Duration::from_secs(1);
        assert!(
            limiter
                .take("alpha-token", account, t1)
                .is_some_and(|d| d.allowed)
        );
        let refused = limiter.take("alpha-token", daily, t1).expect("limited");
        assert_eq!(
            (refused.allowed, refused.limit),
            (false, 3),
            "the token's refusal"
        );
        assert_eq!(stats(Some(daily)), (1, 4), "not counted by the route");
        let t2 = t0 + Duration::from_secs(2);
        let both = limiter.take("alpha-token", daily, t2).expect("limited");
        assert_eq!((both.allowed, both.limit), (true, 1), "the route's numbers");
        assert_eq!(stats(None), (5, 3));
        // The other token is free, even on the limited route.
        assert_eq!(limiter.take("beta-token", daily, t0), None);
    }

    #[test]
    fn route_limits_are_bounded_listed_after_the_token_wide_ones_and_lifted_one_by_one() {
        let t0 = Instant::now();
        let limiter = RateLimiter::new(["alpha-token", "beta-token"]);
        let message = limiter
            .set(None, Some(Route::Send), Some(limit(1.0, None)), t0)
            .expect_err("the Send API");
        assert!(
            message.contains("is not a Management API route"),
            "{message}"
        );
        for _ in 0..2 {
            for route in Route::management() {
                limiter
                    .set(None, Some(route), Some(limit(1.0, None)), t0)
                    .expect("valid");
            }
        }
        let routes = Route::management().count();
        assert_eq!(
            limiter.list().len(),
            2 * routes,
            "one bucket per (token, route)"
        );
        limiter
            .set(Some("beta-token"), None, Some(limit(2.0, None)), t0)
            .expect("valid");
        let listed = limiter.list();
        assert_eq!((listed[0].token.as_str(), listed[0].route), ("beta…", None));
        assert_eq!(
            (listed[1].token.as_str(), listed[1].route),
            ("alph…", Some(Route::DeliveryAccountGet))
        );
        assert_eq!(listed[routes + 1].token, "beta…");
        // Lifting the token-wide limit leaves the route limits; lifting one route, the others.
        limiter.set(None, None, None, t0).expect("lift");
        assert_eq!(limiter.list().len(), 2 * routes);
        limiter
            .set(Some("alpha-token"), Some(Route::TracemailDaily), None, t0)
            .expect("lift");
        assert_eq!(limiter.list().len(), 2 * routes - 1);
        assert_eq!(
            limiter.stats("alpha-token", Some(Route::TracemailDaily)),
            None
        );
        assert!(
            limiter
                .stats("beta-token", Some(Route::TracemailDaily))
                .is_some()
        );
        assert!(format!("{limiter:?}").contains("route_limits: Some(21)"));
    }

    #[test]
    fn only_the_most_recent_requests_are_remembered() {
        let t0 = Instant::now();
        let mut limited = Limited::new(limit(1.0, Some(2.0)), t0);
        for _ in 0..RECENT_REQUESTS + 5 {
            limited.take(t0);
        }
        let stats = limited.stats();
        assert_eq!(
            (stats.allowed, stats.limited),
            (2, RECENT_REQUESTS as u64 + 3)
        );
        assert_eq!(stats.recent.len(), RECENT_REQUESTS);
        assert!(
            stats.recent.iter().all(|(_, allowed)| !allowed),
            "the two allowed were first"
        );
        assert!(stats.recent.windows(2).all(|w| w[0].0 <= w[1].0));
    }

    #[test]
    fn previews_never_show_a_whole_token() {
        assert_eq!(preview("test-management-token"), "test…");
        assert_eq!(preview("abcdefgh"), "abcd…");
        assert_eq!(preview("abcd"), "ab…");
        assert_eq!(preview("a"), "…");
        assert_eq!(preview("ééééééééé"), "éééé…");
        let limiter = RateLimiter::new(["very-secret-management"]);
        limiter
            .set(None, None, Some(limit(1.0, None)), Instant::now())
            .expect("valid");
        assert!(!format!("{limiter:?}").contains("secret"));
    }
}
