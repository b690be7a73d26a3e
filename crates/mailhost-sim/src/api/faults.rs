//! Fault injection: per-route latency, errors, rate limiting, requests never answered, broken,
//! slow and oddly shaped bodies and numbers sent as strings, so the exporter can be tested against
//! an upstream that misbehaves.
//!
//! A request never answered is held inside its own request future, never in a spawned task: a
//! client that gives up closes its connection, hyper drops the future, and the hold is gone. So
//! there are never more holds than open connections, each ends after [`NO_ANSWER_HOLD`] at the
//! latest, and every one ends at once when the server shuts down, which therefore never waits
//! for them.

mod shapes;
mod stream;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use jiff::{SignedDuration, Timestamp};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::error::ApiError;
use crate::route::Route;
use crate::world::MAX_RETRY_AFTER_SECS;
use crate::world::clock::{SimClock, shift};

/// Size an [`BodyFault::Oversized`] body exceeds when `oversized_bytes` is not given: 8 MiB.
pub const DEFAULT_OVERSIZED_BYTES: u64 = 8 * 1024 * 1024;

/// Largest accepted `oversized_bytes`: the padding is held in memory.
const MAX_OVERSIZED_BYTES: u64 = 256 * 1024 * 1024;

/// Longest accepted `starts_after_ms` and `lasts_ms`: a week, more than any test or benchmark
/// runs, and far from any overflow of an instant.
pub const MAX_FAULT_WINDOW: Duration = Duration::from_secs(7 * 24 * 3600);

/// How long a request of [`FaultSpec::no_answer_rate`] is held at most before its connection is
/// closed, still without an answer: longer than any sensible client timeout, short enough that a
/// forgotten client does not pin a connection for good.
pub const NO_ANSWER_HOLD: Duration = Duration::from_secs(10 * 60);

/// How a successful (200) answer's body is replaced. Written in snake_case in JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BodyFault {
    /// An HTML error page (`Content-Type: text/html`), still with status 200.
    NotJson,
    /// The real JSON cut in half, still labelled JSON; the same as `malformed_rate: 1.0`.
    TruncatedJson,
    /// Valid JSON of another shape: `{"data": {"items": "nope"}}`.
    WrongShape,
    /// The envelope with no records (`"resources": []`); `{"aggregate": {}}` for bodies without an
    /// envelope (the migration statistics).
    EmptyResources,
    /// The real body, valid, with a top-level `"padding"` string of `oversized_bytes` characters.
    Oversized,
    /// The real body with every number of its records replaced, in turn, by `-5`, `1e300` and
    /// `123456789012345678901234567890` (beyond i64).
    OutOfRange,
    /// The real body with every number of its records replaced, in turn, by the strings `"NaN"`,
    /// `"Infinity"`, `"-Infinity"` and `"1e999"`.
    HugeValues,
    /// The real answer, still valid, carrying about `bytes` bytes of tiny objects `{"a":1}` (one
    /// per 8 bytes: 500 000 for the default 4 000 000, under the exporter's default 4 MiB limit):
    /// appended as extra records to the `resources` of an envelope, else as a top-level member
    /// `"tiny"` (the migration statistics). Written `{"tiny_objects": {"bytes": 4000000}}`;
    /// `bytes` is optional and at most 256 MiB.
    TinyObjects {
        #[serde(default = "default_tiny_bytes")]
        bytes: u64,
    },
    /// The real answer with `count` members added to every object of its records (the records
    /// included) under fresh random keys on every request (`key_` and up to 10 digits), each
    /// with the unreadable value `"unreadable"`. Written `{"changing_keys": {"count": 8}}`;
    /// `count` is optional and at most 10 000.
    ChangingKeys {
        #[serde(default = "default_changing_keys")]
        count: u32,
    },
}

/// Default size of the tiny objects of [`BodyFault::TinyObjects`].
pub const DEFAULT_TINY_BYTES: u64 = 4_000_000;
/// Default number of fresh keys per object of [`BodyFault::ChangingKeys`].
pub const DEFAULT_CHANGING_KEYS: u32 = 8;
/// Largest accepted `count` of [`BodyFault::ChangingKeys`].
const MAX_CHANGING_KEYS: u32 = 10_000;

fn default_tiny_bytes() -> u64 {
    DEFAULT_TINY_BYTES
}

fn default_changing_keys() -> u32 {
    DEFAULT_CHANGING_KEYS
}

/// What goes wrong on one route. The default is a healthy route.
///
/// Serialized with `latency_ms` and `slow_body_ms` (integer milliseconds) for `latency` and
/// `slow_body`; every member is optional in JSON and unknown members are refused, so a typo in a
/// test does not silently do nothing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FaultSpec {
    /// Added before answering.
    #[serde(
        rename = "latency_ms",
        with = "option_millis",
        skip_serializing_if = "Option::is_none"
    )]
    pub latency: Option<Duration>,
    /// Probability of an error answer with a JSON message.
    pub error_rate: f64,
    /// Status of those errors; 500 when unset or not a 4xx/5xx status.
    pub error_status: Option<u16>,
    /// Those errors carry `Retry-After: <secs>`, as a service that is down for maintenance or
    /// overloaded says when to come back (at most a day, as the rate limits' `retry_after_secs`).
    pub error_retry_after_secs: Option<u64>,
    /// Probability that a request gets no answer at all: held open, nothing sent, until the client
    /// gives up (or [`NO_ANSWER_HOLD`] passes, or the server shuts down), then the connection is
    /// closed. Rolled after `latency`, before the 429 and error rolls, which a held request never
    /// reaches.
    pub no_answer_rate: f64,
    /// Probability of a 429 carrying `Retry-After: <retry_after_secs>`.
    pub rate_limit_rate: f64,
    pub retry_after_secs: u64,
    /// The 429's `Retry-After` is an HTTP-date (simulator clock + `retry_after_secs`) instead of
    /// seconds.
    pub retry_after_http_date: bool,
    /// The 429 carries no `Retry-After` at all.
    pub retry_after_omit: bool,
    /// Probability of a 200 whose body is truncated and therefore not valid JSON.
    pub malformed_rate: f64,
    /// Every number in the returned records is sent as a JSON string.
    pub numbers_as_strings: bool,
    /// Replaces the body of a 200 answer with another shape.
    pub body: Option<BodyFault>,
    /// Size the [`BodyFault::Oversized`] body exceeds; [`DEFAULT_OVERSIZED_BYTES`] when unset.
    pub oversized_bytes: Option<u64>,
    /// A 200 answer's status and headers are sent, then the first half of its body, then the
    /// connection is broken (the declared `Content-Length` is never reached).
    pub reset_mid_body: bool,
    /// A 200 answer's status and headers are sent at once, its body trickled in small chunks over
    /// this long.
    #[serde(
        rename = "slow_body_ms",
        with = "option_millis",
        skip_serializing_if = "Option::is_none"
    )]
    pub slow_body: Option<Duration>,
    /// When set, the fault applies only to requests whose path has one of these strings as a whole
    /// segment (for the dashboard, or whose body's `account` is one of them); the other requests of
    /// the route are answered normally.
    pub only_ids: Option<Vec<String>>,
    /// The fault applies only from this long after it was set (an outage that begins later);
    /// before, the route answers normally.
    #[serde(
        rename = "starts_after_ms",
        with = "option_millis",
        skip_serializing_if = "Option::is_none"
    )]
    pub starts_after: Option<Duration>,
    /// The fault applies only for this long from its start (an outage that ends); after, the
    /// route answers normally. Unset: until the fault is changed or cleared.
    #[serde(
        rename = "lasts_ms",
        with = "option_millis",
        skip_serializing_if = "Option::is_none"
    )]
    pub lasts: Option<Duration>,
}

impl FaultSpec {
    /// Checks what [`crate::Simulator::set_fault`] would otherwise quietly clamp or ignore.
    pub fn validate(&self) -> Result<(), String> {
        for (name, rate) in [
            ("error_rate", self.error_rate),
            ("no_answer_rate", self.no_answer_rate),
            ("rate_limit_rate", self.rate_limit_rate),
            ("malformed_rate", self.malformed_rate),
        ] {
            if !(0.0..=1.0).contains(&rate) {
                return Err(format!("`{name}` must be between 0.0 and 1.0, got {rate}"));
            }
        }
        if let Some(status) = self.error_status
            && !(400..=599).contains(&status)
        {
            return Err(format!(
                "`error_status` must be an HTTP error status (400-599), got {status}"
            ));
        }
        if let Some(secs) = self.error_retry_after_secs {
            if secs > MAX_RETRY_AFTER_SECS {
                return Err(format!(
                    "`error_retry_after_secs` must be at most {MAX_RETRY_AFTER_SECS} (a day), got \
                     {secs}"
                ));
            }
            if self.error_rate <= 0.0 {
                return Err(
                    "`error_retry_after_secs` is the Retry-After of the errors of `error_rate`, \
                     which is 0: set `error_rate` above 0, or drop `error_retry_after_secs`"
                        .to_owned(),
                );
            }
        }
        if self.retry_after_http_date && self.retry_after_omit {
            return Err(
                "`retry_after_http_date` and `retry_after_omit` exclude each other: set one"
                    .to_owned(),
            );
        }
        if self.body.is_some() && self.numbers_as_strings {
            return Err(
                "`body` and `numbers_as_strings` exclude each other: the body fault would hide it"
                    .to_owned(),
            );
        }
        if let Some(bytes) = self.oversized_bytes
            && bytes > MAX_OVERSIZED_BYTES
        {
            return Err(format!(
                "`oversized_bytes` must be at most {MAX_OVERSIZED_BYTES}, got {bytes}"
            ));
        }
        match self.body {
            Some(BodyFault::TinyObjects { bytes }) if bytes > MAX_OVERSIZED_BYTES => {
                return Err(format!(
                    "`tiny_objects.bytes` must be at most {MAX_OVERSIZED_BYTES}, got {bytes}"
                ));
            }
            Some(BodyFault::ChangingKeys { count }) if count > MAX_CHANGING_KEYS => {
                return Err(format!(
                    "`changing_keys.count` must be at most {MAX_CHANGING_KEYS}, got {count}"
                ));
            }
            _ => {}
        }
        if let Some(ids) = &self.only_ids
            && (ids.is_empty() || ids.iter().any(String::is_empty))
        {
            return Err(
                "`only_ids` must list non-empty ids; omit it to fault every request".to_owned(),
            );
        }
        self.validate_window()
    }

    /// The window: each bound at most [`MAX_FAULT_WINDOW`], a length of at least a millisecond,
    /// and a fault for it to limit.
    fn validate_window(&self) -> Result<(), String> {
        let week = MAX_FAULT_WINDOW.as_millis();
        for (name, value) in [
            ("starts_after_ms", self.starts_after),
            ("lasts_ms", self.lasts),
        ] {
            if let Some(value) = value
                && value > MAX_FAULT_WINDOW
            {
                return Err(format!(
                    "`{name}` must be at most {week} (a week), got {}",
                    value.as_millis()
                ));
            }
        }
        if self.lasts.is_some_and(|lasts| lasts.is_zero()) {
            return Err(
                "`lasts_ms` must be at least 1: omit it for a fault that lasts until changed"
                    .to_owned(),
            );
        }
        let unlimited = Self {
            only_ids: None,
            starts_after: None,
            lasts: None,
            ..self.clone()
        };
        if (self.starts_after.is_some() || self.lasts.is_some()) && unlimited.is_healthy() {
            return Err(
                "`starts_after_ms` and `lasts_ms` limit a fault in time, but this spec has no \
                 fault: add one (e.g. `error_rate`, `no_answer_rate`)"
                    .to_owned(),
            );
        }
        Ok(())
    }

    /// Whether the fault is in force `elapsed` after it was set: from `starts_after` (at once
    /// when unset) for `lasts` (for good when unset).
    pub(crate) fn in_force(&self, elapsed: Duration) -> bool {
        let start = self.starts_after.unwrap_or(Duration::ZERO);
        if elapsed < start {
            return false;
        }
        match self.lasts {
            None => true,
            // Both bounded by a week: the sum cannot overflow, but saturate anyway.
            Some(lasts) => elapsed < start.saturating_add(lasts),
        }
    }

    fn error_status(&self) -> StatusCode {
        self.error_status
            .filter(|status| (400..=599).contains(status))
            .and_then(|status| StatusCode::from_u16(status).ok())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn oversized_bytes(&self) -> u64 {
        self.oversized_bytes.unwrap_or(DEFAULT_OVERSIZED_BYTES)
    }

    fn is_healthy(&self) -> bool {
        *self == Self::default()
    }
}

mod option_millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(d) => s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}

/// Distinct request paths counted at most by [`Faults::hit`]; a test's fleet fits well within.
const MAX_COUNTED_PATHS: usize = 100_000;

/// One fault of a route and when it was set, the origin of its window.
#[derive(Clone, Debug)]
struct Entry {
    spec: FaultSpec,
    set_at: Instant,
}

impl Entry {
    fn new(spec: FaultSpec, set_at: Instant) -> Self {
        Self { spec, set_at }
    }

    fn in_force(&self, now: Instant) -> bool {
        self.spec
            .in_force(now.saturating_duration_since(self.set_at))
    }
}

/// The faults of every route (several per route when each names its own `only_ids`), the
/// seeded random source that decides each roll, how many requests each path received, and how
/// many are held unanswered now.
///
/// Window time is `tokio::time::Instant`, as the rate limits' buckets, so tests can pause and
/// advance it.
#[derive(Debug)]
pub(crate) struct Faults {
    table: Mutex<BTreeMap<Route, Vec<Entry>>>,
    rng: Mutex<StdRng>,
    hits: Mutex<HashMap<String, u64>>,
    held: Arc<AtomicUsize>,
}

impl Faults {
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            table: Mutex::new(BTreeMap::new()),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            hits: Mutex::new(HashMap::new()),
            held: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Requests held unanswered now (see [`FaultSpec::no_answer_rate`]).
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// Replaces the faults of each of `routes` with `spec`, all set at one instant (so one window
    /// for all); a healthy spec heals them.
    pub(crate) fn set(&self, routes: impl IntoIterator<Item = Route>, spec: FaultSpec) {
        let set_at = Instant::now();
        let mut table = self.table.lock().expect("fault table mutex poisoned");
        for route in routes {
            if spec.is_healthy() {
                table.remove(&route);
            } else {
                table.insert(route, vec![Entry::new(spec.clone(), set_at)]);
            }
        }
    }

    /// Adds a fault to `route` next to those in force; the first whose window is open and whose
    /// `only_ids` names a request applies to it.
    pub(crate) fn add(&self, route: Route, spec: FaultSpec) {
        if !spec.is_healthy() {
            self.table
                .lock()
                .expect("fault table mutex poisoned")
                .entry(route)
                .or_default()
                .push(Entry::new(spec, Instant::now()));
        }
    }

    /// The faults of `route` whose window is open at `now`, in the order they were set.
    fn in_force(&self, route: Route, now: Instant) -> Vec<FaultSpec> {
        self.table
            .lock()
            .expect("fault table mutex poisoned")
            .get(&route)
            .map(|entries| {
                entries
                    .iter()
                    .filter(|entry| entry.in_force(now))
                    .map(|entry| entry.spec.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(crate) fn hit(&self, path: &str) {
        let mut hits = self.hits.lock().expect("hits mutex poisoned");
        if let Some(n) = hits.get_mut(path) {
            *n += 1;
        } else if hits.len() < MAX_COUNTED_PATHS {
            hits.insert(path.to_owned(), 1);
        }
    }

    pub(crate) fn all_hits(&self) -> BTreeMap<String, u64> {
        let hits = self.hits.lock().expect("hits mutex poisoned");
        hits.iter().map(|(p, n)| (p.clone(), *n)).collect()
    }

    /// Requests received for exactly this path, faulted or not.
    pub(crate) fn hits(&self, path: &str) -> u64 {
        self.hits
            .lock()
            .expect("hits mutex poisoned")
            .get(path)
            .copied()
            .unwrap_or(0)
    }

    pub(crate) fn clear(&self) {
        self.table
            .lock()
            .expect("fault table mutex poisoned")
            .clear();
    }

    /// The first fault set on `route`, its window open or not.
    pub(crate) fn get(&self, route: Route) -> Option<FaultSpec> {
        self.table
            .lock()
            .expect("fault table mutex poisoned")
            .get(&route)
            .and_then(|entries| entries.first())
            .map(|entry| entry.spec.clone())
    }

    pub(crate) fn all(&self) -> BTreeMap<Route, FaultSpec> {
        self.table
            .lock()
            .expect("fault table mutex poisoned")
            .iter()
            .filter_map(|(r, entries)| Some((*r, entries.first()?.spec.clone())))
            .collect()
    }

    /// True with probability `rate`. 0.0 (or less, or NaN) and 1.0 (or more) never consult the
    /// random source, so tests using them are deterministic.
    fn roll(&self, rate: f64) -> bool {
        if rate.is_nan() || rate <= 0.0 {
            return false;
        }
        if rate >= 1.0 {
            return true;
        }
        self.rng
            .lock()
            .expect("fault rng mutex poisoned")
            .random::<f64>()
            < rate
    }
}

/// State of the fault layer of one route.
#[derive(Clone)]
pub(crate) struct FaultLayerState {
    pub faults: Arc<Faults>,
    pub route: Route,
    /// Dates the HTTP-date `Retry-After`.
    pub clock: SimClock,
    /// The server's shutdown: it ends every held request at once, so a graceful shutdown never
    /// waits for them. Never cancelled for a router served by someone else.
    pub shutdown: CancellationToken,
}

/// Largest dashboard body read to find its `account` for `only_ids`; beyond it the request is
/// refused, as the handler would (its limit is 2 MiB).
const TARGET_BODY_LIMIT: usize = 2 * 1024 * 1024;

/// Counts the request in [`Faults::hits`]. It is the outermost layer of every route, so each
/// request is counted once whatever answers it: the rate limiter, a fault or the handler.
pub(crate) async fn count(
    State(faults): State<Arc<Faults>>,
    request: Request,
    next: Next,
) -> Response {
    faults.hit(request.uri().path());
    next.run(request).await
}

/// The fault layer. It sits outside the handler, like a proxy or rate limiter in front of the
/// real service. The first fault of the route whose window is open and that names the request
/// (or names none) applies: latency, then a no-answer roll, a 429 roll and an error roll answer (or not)
/// before authentication; the
/// malformed-body roll, the body fault and numbers-as-strings then rewrite a successful answer,
/// and the slow and broken bodies deliver it.
pub(crate) async fn inject(
    State(layer): State<FaultLayerState>,
    request: Request,
    next: Next,
) -> Response {
    let mut request = request;
    let mut chosen = None;
    for spec in layer.faults.in_force(layer.route, Instant::now()) {
        match targeted(&spec, layer.route, request).await {
            Ok((r, applies)) => {
                request = r;
                if applies {
                    chosen = Some(spec);
                    break;
                }
            }
            Err(error) => return error.into_response(),
        }
    }
    let Some(spec) = chosen else {
        return next.run(request).await;
    };
    if let Some(latency) = spec.latency {
        tokio::time::sleep(latency).await;
    }
    if layer.faults.roll(spec.no_answer_rate) {
        return hold(&layer.faults, &layer.shutdown).await;
    }
    if layer.faults.roll(spec.rate_limit_rate) {
        return rate_limited(&spec, layer.clock.now());
    }
    if layer.faults.roll(spec.error_rate) {
        return injected_error(&spec);
    }
    let response = next.run(request).await;
    if !response.status().is_success() {
        return response;
    }
    let response = if layer.faults.roll(spec.malformed_rate) {
        malformed(response).await
    } else if let Some(fault) = spec.body.filter(|_| response.status() == StatusCode::OK) {
        match fault {
            BodyFault::TruncatedJson => malformed(response).await,
            other => shapes::rewrite(other, response, spec.oversized_bytes()).await,
        }
    } else if spec.numbers_as_strings {
        numbers_as_strings(response).await
    } else {
        response
    };
    if response.status() == StatusCode::OK && (spec.reset_mid_body || spec.slow_body.is_some()) {
        return stream::deliver(response, spec.slow_body, spec.reset_mid_body).await;
    }
    response
}

/// Counts one held request in [`Faults::held`] for as long as it lives: dropped with the request
/// future when the client goes away, or when the hold ends.
struct Held(Arc<AtomicUsize>);

impl Held {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(Arc::clone(count))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Holds the request without answering until [`NO_ANSWER_HOLD`] passes or the server shuts down
/// (a client that gives up first drops this future), then closes the connection unanswered.
async fn hold(faults: &Faults, shutdown: &CancellationToken) -> Response {
    let _held = Held::new(&faults.held);
    tokio::select! {
        () = tokio::time::sleep(NO_ANSWER_HOLD) => {}
        () = shutdown.cancelled() => {}
    }
    stream::unanswered()
}

/// Whether `spec` applies to this request (always, without `only_ids`). The dashboard names its
/// account in the body, so for it the body is read and put back.
async fn targeted(
    spec: &FaultSpec,
    route: Route,
    request: Request,
) -> Result<(Request, bool), ApiError> {
    let Some(ids) = &spec.only_ids else {
        return Ok((request, true));
    };
    let named = |candidate: &str| ids.iter().any(|id| id == candidate);
    if request.uri().path().split('/').any(named) {
        return Ok((request, true));
    }
    if route != Route::TracemailDashboard {
        return Ok((request, false));
    }
    let (parts, body) = request.into_parts();
    let bytes = to_bytes(body, TARGET_BODY_LIMIT).await.map_err(|_| {
        ApiError::PayloadTooLarge(format!(
            "request body larger than {TARGET_BODY_LIMIT} bytes"
        ))
    })?;
    let account = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|body| match body.get("account") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        });
    let applies = account.as_deref().is_some_and(named);
    Ok((Request::from_parts(parts, Body::from(bytes)), applies))
}

/// The error answer of an `error_rate` roll, with its `Retry-After` when the spec gives one.
fn injected_error(spec: &FaultSpec) -> Response {
    let mut response = ApiError::Injected(spec.error_status()).into_response();
    if let Some(secs) = spec.error_retry_after_secs {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}

/// A 429 whose `Retry-After` is seconds, an HTTP-date, or absent, as the spec asks.
fn rate_limited(spec: &FaultSpec, now: Timestamp) -> Response {
    let mut response = ApiError::RateLimited {
        status: StatusCode::TOO_MANY_REQUESTS,
        retry_after_secs: spec.retry_after_secs,
    }
    .into_response();
    if spec.retry_after_omit {
        response.headers_mut().remove(header::RETRY_AFTER);
    } else if spec.retry_after_http_date {
        let secs = i64::try_from(spec.retry_after_secs).unwrap_or(i64::MAX);
        let at = shift(now, SignedDuration::from_secs(secs));
        if let Ok(value) = HeaderValue::from_str(&http_date(at)) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
    }
    response
}

/// The IMF-fixdate form of RFC 9110: `Sun, 22 Nov 2026 10:00:05 GMT`.
pub(crate) fn http_date(at: Timestamp) -> String {
    at.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

/// What a broken proxy might send when the real body is empty or too short to truncate.
const GARBAGE_BODY: &[u8] = b"<html><body><h1>502 Bad Gateway</h1>";

/// A 200 carrying the first half of the real body: it keeps the JSON content type but does not
/// parse.
async fn malformed(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    let bytes = to_bytes(body, usize::MAX).await.unwrap_or_default();
    let half = &bytes[..bytes.len() / 2];
    let truncated = if serde_json::from_slice::<Value>(half).is_err() && !half.is_empty() {
        half.to_vec()
    } else {
        GARBAGE_BODY.to_vec()
    };
    parts.status = StatusCode::OK;
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(truncated))
}

/// Re-sends the body with every number of its records (the `resources` of an envelope, or the
/// whole body otherwise) written as a string.
async fn numbers_as_strings(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    let bytes = to_bytes(body, usize::MAX).await.unwrap_or_default();
    let Ok(mut value) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    match value.get_mut("resources") {
        Some(resources) => stringify_numbers(resources),
        None => stringify_numbers(&mut value),
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    match serde_json::to_vec(&value) {
        Ok(rewritten) => Response::from_parts(parts, Body::from(rewritten)),
        Err(_) => Response::from_parts(parts, Body::from(bytes)),
    }
}

pub(crate) fn stringify_numbers(value: &mut Value) {
    match value {
        Value::Number(n) => *value = Value::String(n.to_string()),
        Value::Array(items) => items.iter_mut().for_each(stringify_numbers),
        Value::Object(members) => members.values_mut().for_each(stringify_numbers),
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
}

#[cfg(test)]
mod tests;
