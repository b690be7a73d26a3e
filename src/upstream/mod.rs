//! The upstream Management API: the only module that builds URLs, sets headers or reads
//! HTTP status codes. Every call returns a typed [`model`], decoded in bounded memory (see
//! [`decode`]) and read leniently, with its parse problems and failures counted here; or an
//! [`UpstreamError`] with a reason from the fixed set of [`error`].

pub mod breaker;
pub mod cooldown;
pub mod decode;
pub mod endpoint;
pub mod error;
pub mod first_turn;
pub mod model;
pub mod observe;
pub mod pacer;
pub mod tls;
pub mod trail;
pub mod transport;

pub use cooldown::instant_after;
pub use decode::{Fields, first_resource, resources};

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::HeaderValue;
use secrecy::ExposeSecret;

use crate::settings::ApiConfig;
use crate::tenant::TenantName;
use breaker::CircuitKey;
use endpoint::Endpoint;
pub use endpoint::Route;
use error::{FailureReason, UpstreamError};
use first_turn::FirstTurn;
use model::Model;
use observe::Observer;
use pacer::Pacer;
use pacer::headers::{self, QuotaInfo};
use tokio::time::Instant;
use trail::{Recorder, Step};
use transport::Transport;

#[derive(Debug, thiserror::Error)]
#[error("cannot build the HTTP client: {0}")]
pub struct BuildError(String);

/// The Management API client of one token: the token's pacer (bounded concurrency, the
/// provider's pace), per-request timeout, over the transport all tenants share.
#[derive(Clone)]
pub struct Client {
    /// The pool and the cap on calls in flight, shared by every tenant.
    /// The connection pool for the tenant's proxy and TLS settings.
    pool: reqwest::Client,
    transport: Transport,
    /// The settings this client was built with.
    api: Arc<ApiConfig>,
    /// The token as the header carries it, marked sensitive so that no debug output shows it;
    /// built once, here, from the configured secret.
    token: HeaderValue,
    /// Every call of this token waits for its turn here.
    pacer: Pacer,
    /// Whether this client's calls go before the others of the token (a target's first fetch,
    /// which a probe may be waiting for).
    urgent: bool,
    /// When the target of this client's calls was last fetched: the token's waiting calls go
    /// oldest data first.
    rank: pacer::Rank,
    observer: Arc<dyn Observer>,
    /// When set, no call of this client goes past it (the collector run's deadline).
    deadline: Option<Instant>,
    /// How long the values of this client's targets live: a target refused on its own never
    /// backs off longer.
    hold: Duration,
    /// Whose token this is: the `tenant` label of the failures it counts.
    tenant: TenantName,
    /// Where this client's calls write their steps: the trail of one target's poll.
    trail: Option<Recorder>,
    /// Its target task's place among its run's tasks waiting for a first turn.
    first_turn: Option<FirstTurn>,
}

impl Client {
    /// A client for `api`. The pacer is passed in because it outlives a client: a reload that
    /// keeps the token and address keeps what it learned, and what it keeps of each target
    /// (its circuit, its 429s).
    pub fn new(
        api: &Arc<ApiConfig>,
        tenant: TenantName,
        observer: Arc<dyn Observer>,
        pacer: Pacer,
        transport: Transport,
    ) -> Result<Self, BuildError> {
        // The config refuses control characters, so this only fails on a config built by hand;
        // the message never quotes the token.
        let mut token = HeaderValue::from_str(api.token.expose_secret())
            .map_err(|_| BuildError("the API token is not a valid header value".to_owned()))?;
        token.set_sensitive(true);
        Ok(Client {
            pool: transport.pool_for(&api.http)?,
            transport,
            api: api.clone(),
            token,
            pacer,
            urgent: false,
            rank: None,
            observer,
            deadline: None,
            hold: pacer::shape::MAX_TARGET_BACKOFF,
            tenant,
            trail: None,
            first_turn: None,
        })
    }

    /// Requests this client has in flight at most (`api.concurrency`).
    pub fn concurrency(&self) -> usize {
        self.api.concurrency
    }

    /// Whether this client calls the provider exactly as one built for `api` would, so that a
    /// reload can keep it (and its connection pool).
    pub fn calls_as(&self, api: &ApiConfig) -> bool {
        let a = &self.api;
        a.base_url == api.base_url
            && a.token.expose_secret() == api.token.expose_secret()
            && a.timeout == api.timeout
            && a.concurrency == api.concurrency
            && a.max_response_bytes == api.max_response_bytes
            && a.retry == api.retry
            && a.rate_limit == api.rate_limit
            && a.http == api.http
    }

    /// The token's pacer.
    pub fn pacer(&self) -> &Pacer {
        &self.pacer
    }

    /// This client, with its calls going before the token's other waiting calls.
    pub fn urgent(&self) -> Client {
        Client {
            urgent: true,
            ..self.clone()
        }
    }

    /// This client, for one target task of a collector run: its calls go among the token's
    /// waiting calls by when the target was last fetched (`rank`, `None`: never; the oldest
    /// data goes first), write their steps to `trail`, and the turn of the first of them, given
    /// or refused, gives up the task's place among the run's tasks waiting for a first turn.
    pub fn for_task(&self, rank: pacer::Rank, trail: Recorder, first_turn: FirstTurn) -> Client {
        Client {
            rank,
            trail: Some(trail),
            first_turn: Some(first_turn),
            ..self.clone()
        }
    }

    /// Writes a step of the poll this client serves, if it is traced.
    fn step(&self, step: impl FnOnce() -> Step) {
        if let Some(trail) = &self.trail {
            trail.step(step());
        }
    }

    /// This client, with every call cut at `deadline`: waiting for a slot included.
    pub fn until(&self, deadline: Instant) -> Client {
        Client {
            deadline: Some(deadline),
            ..self.clone()
        }
    }

    /// This client, for targets whose values live `max_age`: none backs off longer on its own.
    pub fn holding(&self, max_age: Duration) -> Client {
        Client {
            hold: max_age,
            ..self.clone()
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.api.base_url)
    }

    /// One call of `route`, read as `M` with `params`. `endpoint` names the operation and
    /// `target` its circuit (the account id, view, migration or mailbox code). The route's path
    /// holds only values the config validated, so it is safe in a URL.
    pub async fn fetch<M: Model>(
        &self,
        endpoint: Endpoint,
        target: String,
        route: Route,
        params: &M::Params,
    ) -> Result<M, UpstreamError> {
        let pool = &self.pool;
        let url = self.url(&route.path);
        let mut request = match route.body {
            Some(body) => pool.post(url).json(&body),
            None => pool.get(url),
        };
        if !route.query.is_empty() {
            request = request.query(&route.query);
        }
        self.get(endpoint, target, request, params).await
    }

    /// A call read as `M`: the body decoded within the bounds of [`decode`] and freed, then
    /// read leniently. Every parse problem is counted and logged here, and an answer that cannot
    /// be read at all is a failed call with reason `decode`: callers only see `M` or an error.
    async fn get<M: Model>(
        &self,
        endpoint: Endpoint,
        target: String,
        request: reqwest::RequestBuilder,
        params: &M::Params,
    ) -> Result<M, UpstreamError> {
        let body = self.call(endpoint, target, request).await?;
        let decoded = M::decode(&body);
        drop(body);
        let unreadable = |reason, detail: &str| {
            self.step(|| Step::Unreadable {
                route: endpoint.route(),
                detail: trail::bounded(detail),
            });
            self.observer
                .observe_failure(&self.tenant, endpoint, reason);
        };
        let decoded = decoded.inspect_err(|e| unreadable(e.reason, &e.detail))?;
        let problem = |p: &model::ParseProblem| {
            self.step(|| Step::Field {
                route: endpoint.route(),
                path: trail::bounded(&p.path),
                found: trail::bounded(&p.found),
            });
            self.observer.parse_problem(endpoint, &p.path, &p.found);
        };
        match M::read(&decoded, params) {
            Ok((model, problems)) => {
                problems.iter().for_each(problem);
                Ok(model)
            }
            Err(e) => {
                e.problem.iter().for_each(problem);
                unreadable(FailureReason::Decode, &e.detail);
                Err(UpstreamError::new(FailureReason::Decode, e.detail))
            }
        }
    }

    /// Makes a read call behind the target's circuit breaker: attempts admitted by the token's
    /// pacer, each within the timeout and the deadline. A 429 is the pacer's to judge: it slows
    /// the token's or the endpoint's pace, or, when the target is refused on its own, that
    /// target backs off alone; either way the call waits for its next turn, again and again
    /// while the deadline allows, and it never counts towards the circuit. The reasons of
    /// [`FailureReason::TRANSIENT`] are retried with exponential back-off and jitter, up to
    /// `api.max_retries`; no other answer is retried. All our calls are reads (GETs and the
    /// dashboard POST, which changes nothing), so retrying them is safe. `target` names the
    /// circuit: the account id, view, migration or mailbox code. A call the pacer never let
    /// out before the deadline fails `deferred`: nothing was asked of the provider.
    async fn call(
        &self,
        endpoint: Endpoint,
        target: String,
        request: reqwest::RequestBuilder,
    ) -> Result<Body, UpstreamError> {
        let key: CircuitKey = (endpoint, target);
        let standing = self.standing(&key);
        if self.pacer.admit_circuit(&key, Instant::now()).is_err() {
            return Err(self.circuit_open(endpoint));
        }
        // If this future is dropped before the outcome is recorded, the circuit is told.
        let mut admitted = Admitted {
            pacer: &self.pacer,
            key: &key,
            done: false,
        };
        let result = self.attempts(&key, request, standing).await;
        admitted.done = true;
        self.settle(&key, result.as_ref().map(|_| ()));
        result
    }

    /// A call refused by its target's open circuit: the trail and the failure counts say so.
    fn circuit_open(&self, endpoint: Endpoint) -> UpstreamError {
        self.step(|| Step::CircuitOpen {
            route: endpoint.route(),
        });
        self.observer
            .observe_failure(&self.tenant, endpoint, FailureReason::CircuitOpen);
        UpstreamError::new(
            FailureReason::CircuitOpen,
            "not called: this target failed repeatedly; one probe goes out after the circuit breaker's cool-down",
        )
    }

    /// The attempts of one admitted call, until one succeeds or the call fails: a 429 waits
    /// for the next turn (bounded by the deadline, or else by `api.max_retries`), a transient
    /// failure is retried after its back-off, anything else fails the call.
    async fn attempts(
        &self,
        key: &CircuitKey,
        request: reqwest::RequestBuilder,
        standing: pacer::Standing,
    ) -> Result<Body, UpstreamError> {
        let endpoint = key.0;
        let mut retries = 0;
        let mut throttled = 0u32;
        // The last answer 429, once there was one.
        let mut last_429: Option<UpstreamError> = None;
        // The failure a retry is on its way after.
        let mut last_failure: Option<UpstreamError> = None;
        // The call's place in the token's queue: kept when it comes back after a 429.
        let mut place = None;
        loop {
            let Some(attempt) = request.try_clone() else {
                break Err(UpstreamError::new(
                    FailureReason::ClientError,
                    "request cannot be repeated",
                ));
            };
            let number = retries + throttled + 1;
            let e = match self
                .attempt(key, attempt, &mut place, number, standing, retries > 0)
                .await
            {
                Ok(v) => break Ok(v),
                Err(Attempt::NotSent(e)) => {
                    break Err(unsent(e, last_429.take(), last_failure.take()));
                }
                Err(Attempt::Failed(e)) => e,
            };
            if e.reason == FailureReason::RateLimited {
                throttled += 1;
                // Without a deadline nothing bounds the turns: the retry budget does.
                if self.deadline.is_none() && throttled > self.api.retry.max_retries {
                    break Err(e);
                }
                self.observer
                    .observe_retry(&self.tenant, endpoint, e.reason);
                last_429 = Some(e);
                continue;
            }
            let wait = match self.retry_wait(endpoint, &e, retries) {
                Ok(wait) => wait,
                Err(failed) => break Err(failed),
            };
            self.back_off(endpoint, &e, wait).await;
            last_failure = Some(e);
            retries += 1;
        }
    }

    /// Waits `wait` before retrying after `e`; the retry is counted, traced and logged first.
    async fn back_off(&self, endpoint: Endpoint, e: &UpstreamError, wait: Duration) {
        self.observer
            .observe_retry(&self.tenant, endpoint, e.reason);
        self.step(|| Step::Backoff { wait });
        tracing::debug!(
            endpoint = endpoint.as_str(),
            reason = e.reason.as_str(),
            wait_ms = wait.as_millis() as u64,
            "retrying upstream call"
        );
        tokio::time::sleep(wait).await;
    }

    /// What this target's failure would say of the endpoint (see `pacer::outage`): its last
    /// call failed, it was fetched before, or it never was.
    fn standing(&self, key: &CircuitKey) -> pacer::Standing {
        if self.pacer.circuit(key).consecutive > 0 {
            pacer::Standing::Bad
        } else if self.rank.is_some() {
            pacer::Standing::Good
        } else {
            pacer::Standing::Unknown
        }
    }

    /// How long to wait before retrying a call that failed with `e` after `retries` retries,
    /// or the error it fails with: not a transient reason, no retries left, no time left before
    /// the deadline, or the endpoint's retry budget spent.
    fn retry_wait(
        &self,
        endpoint: Endpoint,
        e: &UpstreamError,
        retries: u32,
    ) -> Result<Duration, UpstreamError> {
        if !e.reason.is_transient() || retries >= self.api.retry.max_retries {
            return Err(e.clone());
        }
        let retry = &self.api.retry;
        let wait = backoff(retry.backoff, retry.max_backoff, retries);
        let resume = Instant::now().checked_add(wait);
        if resume.is_none_or(|resume| self.deadline.is_some_and(|d| resume >= d)) {
            return Err(UpstreamError {
                detail: format!("{}; no time left to retry", e.detail),
                ..e.clone()
            });
        }
        if !self.pacer.may_retry(endpoint) {
            self.observer.observe_retry_refused(&self.tenant, endpoint);
            self.step(|| Step::RetryRefused {
                route: endpoint.route(),
            });
            return Err(UpstreamError {
                detail: format!(
                    "{}; not retried: the endpoint's retry budget is spent (retries are at most a tenth of first attempts over 10 s)",
                    e.detail
                ),
                ..e.clone()
            });
        }
        Ok(wait)
    }

    /// Tells the target's circuit how a call ended, and the trail where the circuit stands.
    fn settle(&self, key: &CircuitKey, result: Result<(), &UpstreamError>) {
        let endpoint = key.0;
        match result {
            // Neither a sign of a broken target nor of a healthy one: the circuit is left as it
            // was (a probe in flight is given up, so the next call may probe again).
            Err(e)
                if e.reason == FailureReason::RateLimited
                    || e.reason == FailureReason::Outage
                    || e.deferred =>
            {
                self.pacer.abandon_circuit(key);
            }
            _ => {
                let open =
                    self.pacer
                        .record_circuit(key, result.map_err(|e| e.reason), Instant::now());
                self.step(|| {
                    let circuit = self.pacer.circuit(key);
                    Step::Circuit {
                        route: endpoint.route(),
                        consecutive_failures: circuit.consecutive,
                        open: circuit.open,
                        off: circuit.off,
                    }
                });
                self.observer
                    .set_open_circuits(&self.tenant, endpoint, open);
            }
        }
    }

    /// One attempt: waits for its turn at the pacer, sends the request with the token, reads
    /// the answer within the timeout and the deadline, tells the pacer how it went; records the
    /// request, its failure and its latency.
    async fn attempt(
        &self,
        key: &CircuitKey,
        request: reqwest::RequestBuilder,
        place: &mut Option<u64>,
        number: u32,
        standing: pacer::Standing,
        retry: bool,
    ) -> Result<Body, Attempt> {
        let endpoint = key.0;
        let queued = Instant::now();
        let turn = self.turn(key, place, number, standing, retry, queued).await;
        if let Some(first) = &self.first_turn {
            first.had();
        }
        let permit = turn?;
        // A turn among the calls in flight of every tenant (the descriptor plan's cap): waiting
        // for one is waiting for a slot, as at the pacer.
        let Ok(connection) = self.transport.connection(self.deadline).await else {
            drop(permit);
            self.not_sent(endpoint, number, queued, FailureReason::Timeout);
            self.observer
                .observe_failure(&self.tenant, endpoint, FailureReason::Timeout);
            return Err(Attempt::NotSent(deadline_error()));
        };
        let started = Instant::now();
        let waited = started.saturating_duration_since(queued);
        let (code, quota, result, cut) = self.send(request, started).await;
        let charged = self
            .pacer
            .observe(&permit, key, outcome(&result, cut), &quota, self.hold);
        drop(permit);
        let result = match (result, charged) {
            (Err(e), pacer::Charged::Target(_)) => Err(UpstreamError {
                own: true,
                detail: format!(
                    "{}; refused again while its neighbours on the same endpoint succeed: this target's own limit, it backs off alone",
                    e.detail
                ),
                ..e
            }),
            (result, _) => result,
        };
        drop(connection);
        self.observer
            .observe_request(endpoint, code, started.elapsed());
        self.step(|| Step::Attempt {
            route: endpoint.route(),
            number,
            waited,
            status: code,
            took: started.elapsed(),
            failure: result.as_ref().err().map(|e| e.reason.as_str()),
            retry_after: result.as_ref().err().and_then(|e| e.retry_after),
        });
        if let Err(e) = &result {
            self.observer
                .observe_failure(&self.tenant, endpoint, e.reason);
            tracing::debug!(endpoint = endpoint.as_str(), reason = e.reason.as_str(), detail = %e.detail, "upstream call failed");
        }
        result.map_err(Attempt::Failed)
    }

    /// The call's turn at the pacer, or why it has none: an outage, its target's own back-off,
    /// the pace, or no connection slot before the deadline, each failing the attempt unsent.
    async fn turn(
        &self,
        key: &CircuitKey,
        place: &mut Option<u64>,
        number: u32,
        standing: pacer::Standing,
        retry: bool,
        queued: Instant,
    ) -> Result<pacer::Permit, Attempt> {
        let permit = self
            .pacer
            .admit(pacer::Call {
                target: key,
                urgent: self.urgent,
                rank: self.rank,
                place: *place,
                deadline: self.deadline,
                standing,
                // A retry after a failure, or a target whose last call failed: behind the
                // calls of targets that are not failing.
                behind: retry || standing == pacer::Standing::Bad,
                first: number == 1,
            })
            .await
            .map_err(|denied| Attempt::NotSent(self.no_turn(key.0, number, queued, denied)))?;
        *place = Some(permit.place());
        Ok(permit)
    }

    /// The error of a call the pacer gave no turn, by why: an outage, its target's own
    /// back-off, the pace, or no connection slot before the deadline. The trail and the
    /// failure counts are told as each case asks.
    fn no_turn(
        &self,
        endpoint: Endpoint,
        number: u32,
        queued: Instant,
        denied: pacer::Denied,
    ) -> UpstreamError {
        if let Some(down) = denied.outage {
            self.not_sent(endpoint, number, queued, FailureReason::Outage);
            self.observer
                .observe_failure(&self.tenant, endpoint, FailureReason::Outage);
            outage_error(down.since.elapsed(), down.cooldown)
        } else if denied.backing_off {
            self.step(|| Step::BackingOff {
                route: endpoint.route(),
                number,
                left: denied.left,
                retry_after: denied.told,
                own: denied.own,
            });
            backing_off_error(denied.own)
        } else if denied.paced {
            self.not_sent(endpoint, number, queued, FailureReason::RateLimited);
            // Nothing was asked of the provider: not a failure of the target's own.
            UpstreamError {
                deferred: true,
                ..UpstreamError::new(
                    FailureReason::RateLimited,
                    "not called: the token's rate limit left no turn before the collector deadline; it goes first next run",
                )
            }
        } else {
            self.not_sent(endpoint, number, queued, FailureReason::Timeout);
            // Waiting for a connection slot until the deadline is a failed call: count it.
            self.observer
                .observe_failure(&self.tenant, endpoint, FailureReason::Timeout);
            deadline_error()
        }
    }

    /// Sends the request with the token, from `started`, within the timeout and the deadline:
    /// the status, what the headers said of the quota, the answer, and whether the deadline
    /// cut it (no sign of the provider either way).
    async fn send(
        &self,
        request: reqwest::RequestBuilder,
        started: Instant,
    ) -> (Option<u16>, QuotaInfo, Result<Body, UpstreamError>, bool) {
        let own_limit = instant_after(started, self.api.timeout);
        let limit = self.deadline.map_or(own_limit, |d| d.min(own_limit));
        let result = tokio::time::timeout_at(
            limit,
            // Boxed: a call waiting above for its turns does not carry the room of the
            // exchange's futures (the HTTP client's) while it waits.
            Box::pin(self.exchange(request.header("X-Api-Token", self.token.clone()))),
        )
        .await;
        match result {
            Ok((code, quota, result)) => (code, quota, result, false),
            Err(_) if limit < own_limit => {
                (None, QuotaInfo::default(), Err(deadline_error()), true)
            }
            Err(_) => (
                None,
                QuotaInfo::default(),
                Err(UpstreamError::new(
                    FailureReason::Timeout,
                    format!(
                        "no complete answer within {}",
                        humantime::format_duration(self.api.timeout)
                    ),
                )),
                false,
            ),
        }
    }

    /// The trail's step of an attempt that was never sent.
    fn not_sent(&self, endpoint: Endpoint, number: u32, queued: Instant, reason: FailureReason) {
        self.step(|| Step::NotSent {
            route: endpoint.route(),
            number,
            waited: queued.elapsed(),
            reason: reason.as_str(),
        })
    }

    /// Sends the request and reads a successful answer's body into one buffer, refused as soon
    /// as it passes `api.max_response_bytes`; decoding happens after, in [`decode`].
    async fn exchange(
        &self,
        request: reqwest::RequestBuilder,
    ) -> (Option<u16>, QuotaInfo, Result<Body, UpstreamError>) {
        let mut response = match request.send().await {
            Ok(r) => r,
            Err(e) => return (None, QuotaInfo::default(), Err(transport_error(e))),
        };
        let status = response.status().as_u16();
        let now_unix = u64::try_from(jiff::Timestamp::now().as_second()).unwrap_or(0);
        let quota = headers::read(response.headers(), now_unix);
        let (code, result) = self.read_answer(status, &mut response).await;
        (code, quota, result)
    }

    /// The body of a successful answer, or the error its status means.
    async fn read_answer(
        &self,
        status: u16,
        response: &mut reqwest::Response,
    ) -> (Option<u16>, Result<Body, UpstreamError>) {
        if !response.status().is_success() {
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| retry_wait(v, jiff::Timestamp::now()));
            return (
                Some(status),
                Err(UpstreamError::from_answer(status, retry_after)),
            );
        }
        let max_body = self.api.max_response_bytes;
        let limit = usize::try_from(max_body).unwrap_or(usize::MAX);
        let announced = response.content_length();
        if announced.is_some_and(|n| n > max_body) {
            return (Some(status), Err(too_large(max_body)));
        }
        // The announced length is only a hint (the body may stop short), and never more than
        // the limit: one allocation for an honest answer.
        let hint = announced.map_or(0, |n| usize::try_from(n).unwrap_or(limit).min(limit));
        let mut body = Vec::with_capacity(hint);
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len().saturating_add(chunk.len()) > limit {
                        return (Some(status), Err(too_large(max_body)));
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => return (Some(status), Err(transport_error(e))),
            }
        }
        (Some(status), Ok(body))
    }
}

/// A successful answer's body, read whole (at most `api.max_response_bytes`), not yet decoded.
pub type Body = Vec<u8>;

/// How an attempt failed: refused before it went out, or failed on the way or in its answer.
enum Attempt {
    NotSent(UpstreamError),
    Failed(UpstreamError),
}

/// The longest `Retry-After` kept: any deadline or back-off cap is far shorter, and a longer
/// one (up to `u64::MAX` seconds) would overflow the `Instant` it is added to.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// How far `now` is from an hour before the end of the clock's range (the platform's), as far
/// as `checked_add` goes: for tests of what saturates there.
#[cfg(test)]
pub(crate) fn to_an_hour_before_the_end_of_time(now: Instant) -> Duration {
    let (mut fits, mut overflows) = (0u64, u64::MAX);
    while overflows - fits > 1 {
        let mid = fits + (overflows - fits) / 2;
        if now.checked_add(Duration::from_secs(mid)).is_some() {
            fits = mid;
        } else {
            overflows = mid;
        }
    }
    Duration::from_secs(fits - 3_600)
}

/// [`retry_after`], capped at [`MAX_RETRY_AFTER`].
fn retry_wait(value: &str, now: jiff::Timestamp) -> Option<Duration> {
    retry_after(value, now).map(|wait| wait.min(MAX_RETRY_AFTER))
}

/// An admitted call, until its outcome is recorded; dropped early, it gives up its place.
struct Admitted<'a> {
    pacer: &'a Pacer,
    key: &'a CircuitKey,
    done: bool,
}

/// What a call fails with when an attempt was never sent (`e`): after a 429 whose retry the pace
/// gave no turn, rate limited as that 429; after a failure whose retry had no turn before the
/// deadline, what that failure was, not the deadline; otherwise `e`.
fn unsent(
    e: UpstreamError,
    last_429: Option<UpstreamError>,
    last_failure: Option<UpstreamError>,
) -> UpstreamError {
    match (e.reason, last_429) {
        (FailureReason::RateLimited, Some(throttled)) if e.deferred => UpstreamError {
            detail: format!(
                "{}; the token's pace left no turn to try again before the collector deadline",
                throttled.detail
            ),
            deferred: false,
            ..throttled
        },
        (FailureReason::Timeout | FailureReason::RateLimited, None)
            if e.deferred || e.detail == DEADLINE_REACHED =>
        {
            match last_failure {
                Some(f) => UpstreamError {
                    detail: format!(
                        "{}; no turn to try again before the collector deadline",
                        f.detail
                    ),
                    ..f
                },
                None => e,
            }
        }
        (_, _) => e,
    }
}

/// The error of a call the collector's deadline cut, or left without a turn.
/// A call not sent during an outage of its endpoint, which has lasted `since`.
fn outage_error(since: Duration, cooldown: Duration) -> UpstreamError {
    UpstreamError::new(
        FailureReason::Outage,
        format!(
            "not called: every call of this endpoint has failed for {} (5xx, timeouts or refused connections); one call asks every {} until the provider answers again",
            humantime::format_duration(Duration::from_secs(since.as_secs())),
            humantime::format_duration(cooldown)
        ),
    )
}

/// A call not sent because its target backs off past the deadline. Its own 429s: a failure of
/// its own. The Retry-After of a lone 429, not known as its own: the shared pace's doing,
/// deferred as a call the pace gave no turn.
fn backing_off_error(own: bool) -> UpstreamError {
    let detail = if own {
        "not called: this target's own HTTP 429s (its neighbours on the same endpoint succeed) keep it backing off; it alone waits, no other target is slowed, and it is tried again at the first run after its back-off"
    } else {
        "not called: the Retry-After of this target's last HTTP 429 outlasts the collector deadline; it goes first next run"
    };
    UpstreamError {
        own,
        deferred: !own,
        ..UpstreamError::new(FailureReason::RateLimited, detail)
    }
}

fn deadline_error() -> UpstreamError {
    UpstreamError::new(FailureReason::Timeout, DEADLINE_REACHED)
}

/// What an attempt's answer tells the pacer: `cut` by the deadline says nothing of the provider.
fn outcome(result: &Result<Body, UpstreamError>, cut: bool) -> pacer::Outcome {
    match result {
        Ok(_) => pacer::Outcome::Success,
        Err(e) if e.reason == FailureReason::RateLimited => {
            pacer::Outcome::Throttled(e.retry_after)
        }
        Err(_) if cut => pacer::Outcome::Cut,
        Err(e) if e.reason.is_transient() => pacer::Outcome::Unanswered,
        Err(_) => pacer::Outcome::Answered,
    }
}

/// The detail of a call the collector's deadline cut.
const DEADLINE_REACHED: &str = "collector deadline reached";

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.pacer.abandon_circuit(self.key);
        }
    }
}

/// Reads `Retry-After` in both of its forms: delay seconds, or an HTTP date (RFC 9110), as the
/// wait from `now` (zero for a date in the past).
pub fn retry_after(value: &str, now: jiff::Timestamp) -> Option<Duration> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = jiff::fmt::strtime::parse("%a, %d %b %Y %H:%M:%S GMT", v)
        .ok()?
        .to_datetime()
        .ok()?
        .to_zoned(jiff::tz::TimeZone::UTC)
        .ok()?
        .timestamp();
    Some(at.duration_since(now).try_into().unwrap_or(Duration::ZERO))
}

/// Exponential back-off with jitter: a random wait between half and all of
/// `first * 2^attempt`, capped at `max`. A failed call's retries wait so (`api.retry`), and so
/// does a collector's loop started again after a panic (the engine's `restart`).
pub fn backoff(first: Duration, max: Duration, attempt: u32) -> Duration {
    let ceiling = first.saturating_mul(2u32.saturating_pow(attempt)).min(max);
    // At least half the ceiling, so retries never come back to back.
    let half = ceiling / 2;
    half + ceiling.saturating_sub(half).mul_f64(rand::random::<f64>())
}

fn too_large(limit: u64) -> UpstreamError {
    UpstreamError::new(
        FailureReason::Decode,
        format!("body larger than api.max_response_bytes ({limit} bytes)"),
    )
}

/// Classifies a transport error; the detail is built from the error chain without the URL.
fn transport_error(e: reqwest::Error) -> UpstreamError {
    let reason = if e.is_timeout() {
        FailureReason::Timeout
    } else {
        FailureReason::Connect
    };
    let e = e.without_url();
    let mut detail = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        detail.push_str(": ");
        detail.push_str(&s.to_string());
        source = s.source();
    }
    detail.truncate(240);
    UpstreamError::new(reason, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_read_as_seconds_or_as_an_http_date() {
        let now: jiff::Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
        assert_eq!(retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(
            retry_after("Sun, 22 Nov 2026 10:00:05 GMT", now),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            retry_after("Sun, 22 Nov 2026 09:00:00 GMT", now),
            Some(Duration::ZERO),
            "a past date means now"
        );
        assert_eq!(retry_after("soon", now), None);
    }

    #[test]
    fn back_off_doubles_with_jitter_and_is_capped() {
        let (first, max) = (Duration::from_millis(100), Duration::from_millis(350));
        // Retries 0 and 1 within half and all of 100 and 200 ms; retry 10 capped at 350 ms.
        for (attempt, low, high) in [(0, 50, 100), (1, 100, 200), (10, 0, 350)] {
            for _ in 0..100 {
                let wait = backoff(first, max, attempt);
                let within = Duration::from_millis(low)..=Duration::from_millis(high);
                assert!(within.contains(&wait), "{attempt}: {wait:?}");
            }
        }
    }

    #[test]
    fn an_instant_after_a_huge_span_saturates_and_never_panics() {
        let now = Instant::now();
        let late = now + to_an_hour_before_the_end_of_time(now);
        let (five, minute) = (Duration::from_secs(5), Duration::from_secs(60));
        for (from, span, after) in [
            (now, five, now + five),
            (now, Duration::MAX, now + Duration::from_secs(86_400)),
            // An hour before the end of time a day does not fit either: the eager fallback,
            // `now.checked_add(d).unwrap_or(now + a_day)`, panicked here.
            (late, Duration::MAX, late),
            (late, minute, late + minute),
        ] {
            assert_eq!(instant_after(from, span), after, "{span:?}");
        }
    }

    #[test]
    fn a_retry_after_of_any_size_is_capped_so_adding_it_to_now_cannot_overflow() {
        let now: jiff::Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
        for huge in [
            u64::MAX.to_string(),
            jiff::Timestamp::MAX
                .strftime("%a, %d %b %Y %H:%M:%S GMT")
                .to_string(),
        ] {
            let wait = retry_wait(&huge, now).unwrap();
            assert_eq!(wait, MAX_RETRY_AFTER, "{huge}");
            assert!(Instant::now().checked_add(wait).is_some());
        }
        assert_eq!(retry_wait("7", now), Some(Duration::from_secs(7)));
    }
}
