//! `/probe?tenant=NAME&target=ID`: one Delivery account as its own Prometheus target, with its
//! own `up`, as blackbox_exporter does for a probed address. A probe never fetches: the first one
//! registers the account in the poll set of its tenant's account collectors and waits for their
//! first fetch (within the scrape timeout Prometheus sends); later ones serve the latest poll.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::engine::poll_set::{PollSet, Registration};
use crate::engine::snapshot::Snapshot;
use crate::engine::spec::{CollectorName, Target};
use crate::metrics::{self, EOF, Format};
use crate::redact::quote;
use crate::tenant::TenantName;
use crate::upstream::error::FailureReason;
use crate::web::{AppState, debug, negotiate};

/// How long a first probe waits for its fetch when Prometheus sends no scrape timeout.
const DEFAULT_WAIT: Duration = Duration::from_secs(10);
/// The longest wait, whatever the header says.
const MAX_WAIT: Duration = Duration::from_secs(120);
/// Answered this long before the scrape timeout, so the answer arrives in time.
const MARGIN: Duration = Duration::from_millis(500);

/// Tenants named in the message of an unknown one, at most.
const NAMED_TENANTS: usize = 10;

/// A probe's answer; `Err` for a refusal, to return early with `?`.
pub(super) async fn probe(
    State(state): State<AppState>,
    Query(pairs): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Result<Response, Response> {
    let sets = &state.poll_sets;
    if debug::requested(&pairs).map_err(bad_request)? {
        return Ok(debug_answer(&state, &pairs));
    }
    let (tenant, id) =
        parse(&pairs, &|t| sets.get(t).is_some(), &|| sets.tenants()).map_err(bad_request)?;
    let probes = sets
        .get(&tenant)
        .ok_or_else(|| bad_request("the tenant is no longer configured\n".to_owned()))?;
    if !probes.takes_accounts() {
        let collectors: Vec<&str> = CollectorName::ALL
            .iter()
            .filter(|c| c.polls_accounts())
            .map(|c| c.as_str())
            .collect();
        return Err(bad_request(format!(
            "neither {} is enabled: /probe serves Delivery accounts; enable one of them\n",
            collectors.join(" nor ")
        )));
    }
    if let Some((reason, response)) = refusal(probes.register(id, Instant::now()), id) {
        state.telemetry.observe_probe_refused(&tenant, reason);
        return Err(response);
    }
    // The account collectors that poll this account: the probe waits for them and no other.
    let polled_by = probes.polled_by(id);
    let format = negotiate::format(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    // Answered at once when its account is there already; a probe that must wait for a first
    // fetch takes one of a few places, so waiting probes never hold every scrape slot.
    let _waiting = {
        let prepared = state.store.prepared();
        let (view, complete) = one_account(&prepared.snapshot, &tenant, id, &polled_by);
        if complete {
            return Ok(answer(&view, format));
        }
        state.probe_waits.clone().try_acquire_owned().map_err(|_| {
            let text = format!("too many probes are waiting for first fetches; account {id} is polled, and a later scrape will have it\n");
            (StatusCode::SERVICE_UNAVAILABLE, text).into_response()
        })?
    };
    let first = FirstFetch {
        tenant: &tenant,
        id,
        polled_by: &polled_by,
        format,
    };
    Ok(first.wait(&state, &probes, wait(&headers)).await)
}

fn bad_request(problem: String) -> Response {
    (StatusCode::BAD_REQUEST, problem).into_response()
}

/// The debug view of a target (`debug=true`): reads the snapshot, registers nothing.
fn debug_answer(state: &AppState, pairs: &[(String, String)]) -> Response {
    let sets = &state.poll_sets;
    let asked = tenant(
        pairs,
        &|t| sets.get(t).is_some(),
        &|| sets.tenants(),
        "ID&debug=true",
    )
    .and_then(|t| debug::asked(pairs, t));
    match asked {
        Ok(asked) => debug::answer(
            &state.store.prepared().snapshot,
            &asked,
            &state.telemetry.paces(Some(&asked.tenant), 1),
        ),
        Err(problem) => bad_request(problem),
    }
}

/// The refusal of a probe of account `id` that registered as `registration`: the `reason` it
/// is counted under and its answer (with when to try again, if it may); `None` when it is
/// polled.
fn refusal(registration: Registration, id: i32) -> Option<(&'static str, Response)> {
    let (reason, status, retry, text) = match registration {
        Registration::NotAllowed => (
            "not_allowed",
            StatusCode::FORBIDDEN,
            None,
            format!("account {id} is not in the tenant's probe.allow list\n"),
        ),
        Registration::Full => (
            "max_targets",
            StatusCode::FORBIDDEN,
            None,
            format!(
                "the tenant has probe.max_targets probed accounts already; account {id} is not polled (raise probe.max_targets, or let idle ones expire)\n"
            ),
        ),
        Registration::Refused(reason) => (
            "provider_refused",
            refusal_status(reason),
            None,
            refusal_text(id, reason),
        ),
        Registration::TooManyNew(wait) => (
            "new_accounts",
            StatusCode::TOO_MANY_REQUESTS,
            Some(wait),
            format!(
                "the tenant took probe.new_per_interval new accounts this interval already; account {id} is not polled (try again in {}s, or raise probe.new_per_interval)\n",
                wait.as_secs().max(1)
            ),
        ),
        Registration::TooManyFirstFetches => (
            "first_fetches",
            StatusCode::TOO_MANY_REQUESTS,
            Some(Duration::from_secs(1)),
            format!(
                "the tenant has probe.first_fetches first fetches in flight already; account {id} is not polled yet (try again in a moment)\n"
            ),
        ),
        Registration::Configured | Registration::Known | Registration::Added => return None,
    };
    let retry_after = retry.map(|wait| [(header::RETRY_AFTER, wait.as_secs().max(1).to_string())]);
    Some((reason, (status, retry_after, text).into_response()))
}

/// A probe waiting for the first fetch of its account.
struct FirstFetch<'a> {
    tenant: &'a TenantName,
    id: i32,
    polled_by: &'a [CollectorName],
    format: Format,
}

impl FirstFetch<'_> {
    /// The answer once every collector that polls the account has tried it, or what there is
    /// after `timeout`, or why there is nothing.
    async fn wait(&self, state: &AppState, probes: &PollSet, timeout: Duration) -> Response {
        let (tenant, id) = (self.tenant, self.id);
        let deadline = Instant::now() + timeout;
        // Subscribed before the first look, so that a publication in between is not missed.
        let mut published = state.store.subscribe();
        loop {
            // Its first fetch ended in a refusal (404, 403): said at once, not at the timeout.
            if let Some(reason) = probes.refusal(id, Instant::now()) {
                state
                    .telemetry
                    .observe_probe_refused(tenant, "provider_refused");
                return (refusal_status(reason), refusal_text(id, reason)).into_response();
            }
            let prepared = state.store.prepared();
            let (view, complete) = one_account(&prepared.snapshot, tenant, id, self.polled_by);
            if complete {
                return answer(&view, self.format);
            }
            tokio::select! {
                changed = published.changed() => {
                    if changed.is_err() {
                        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response();
                    }
                }
                _ = tokio::time::sleep_until(deadline) => {
                    if view.collectors.values().any(|c| !c.targets.is_empty()) {
                        return answer(&view, self.format);
                    }
                    let text = if waits_for_rate_limit(&state.store.prepared().snapshot, tenant, id) {
                        format!("the first fetch of account {id} is waiting for the tenant's rate limit (the provider paces or has paused the token); it goes first in the next run, and a later scrape will have it\n")
                    } else {
                        format!("the first fetch of account {id} has not finished within the scrape timeout; it is polled now, and a later scrape will have it\n")
                    };
                    return (StatusCode::SERVICE_UNAVAILABLE, text).into_response();
                }
            }
        }
    }
}

fn answer(view: &Snapshot, format: Format) -> Response {
    let text = metrics::render_probe(&Arc::new(view.clone()));
    let mut body = text.text(format).to_owned();
    if format == Format::OpenMetrics {
        body.push_str(EOF);
    }
    ([(header::CONTENT_TYPE, format.content_type())], body).into_response()
}

/// How a probe answers for an account the provider refused.
fn refusal_status(reason: FailureReason) -> StatusCode {
    match reason {
        FailureReason::Forbidden => StatusCode::FORBIDDEN,
        _ => StatusCode::NOT_FOUND,
    }
}

fn refusal_text(id: i32, reason: FailureReason) -> String {
    match reason {
        FailureReason::Forbidden => format!(
            "the provider refused account {id} to the tenant's token (HTTP 403): it is not polled, and probes of it are answered from this refusal for an interval\n"
        ),
        _ => format!(
            "the provider does not know account {id} (HTTP 404): it is not polled, and probes of it are answered from this refusal for an interval\n"
        ),
    }
}

/// The account's state in each account collector of the tenant that polls it (`polled_by`),
/// as a snapshot of its own, and whether every one of them has attempted it.
fn one_account(
    snapshot: &Snapshot,
    tenant: &TenantName,
    id: i32,
    polled_by: &[CollectorName],
) -> (Snapshot, bool) {
    let mut view = Snapshot::default();
    let mut complete = true;
    for &collector in polled_by {
        let Some(c) = snapshot.collectors.get(&(collector, tenant.clone())) else {
            continue;
        };
        let state = Target::of_account(collector, id)
            .and_then(|t| c.target(&t))
            .filter(|t| t.last_attempt.is_some());
        match state {
            Some(t) => {
                view.collectors.insert(
                    (collector, tenant.clone()),
                    Arc::new(c.with_targets(vec![t.clone()])),
                );
            }
            None => complete = false,
        }
    }
    (view, complete)
}

/// Whether a run of the tenant deferred account `id`: the token's rate limit gave it no turn.
fn waits_for_rate_limit(snapshot: &Snapshot, tenant: &TenantName, id: i32) -> bool {
    CollectorName::ALL
        .iter()
        .copied()
        .filter(|c| c.polls_accounts())
        .any(|collector| {
            snapshot
                .collectors
                .get(&(collector, tenant.clone()))
                .zip(Target::of_account(collector, id))
                .and_then(|(c, t)| c.target(&t))
                .is_some_and(|t| t.deferred)
        })
}

/// How long to wait for a first fetch: the scrape timeout Prometheus sends, less a margin.
fn wait(headers: &HeaderMap) -> Duration {
    headers
        .get("x-prometheus-scrape-timeout-seconds")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(|s| Duration::from_secs_f64(s.min(MAX_WAIT.as_secs_f64())))
        .map_or(DEFAULT_WAIT, |d| d.saturating_sub(MARGIN))
}

/// The tenant and account a probe asks for. `tenant` may be left out only when the config has
/// no `tenants:` (its one tenant has the empty name). `configured` answers for one name at a
/// time; the list of every tenant is asked for only to write the message of a refusal.
fn parse(
    pairs: &[(String, String)],
    configured: &dyn Fn(&TenantName) -> bool,
    list: &dyn Fn() -> Vec<TenantName>,
) -> Result<(TenantName, i32), String> {
    let targets = super::query_values(pairs, "target");
    let target = match targets.as_slice() {
        [one] => *one,
        [] => return Err("target is missing: ask /probe?tenant=NAME&target=ACCOUNT_ID\n".into()),
        _ => return Err("target is given more than once; give one account id\n".into()),
    };
    let id = target
        .parse::<i32>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| {
            format!(
                "target {} is not a Delivery account id: an int32 from 1 to 2147483647\n",
                quote(target)
            )
        })?;
    Ok((tenant(pairs, configured, list, &id.to_string())?, id))
}

/// The tenant a request names. `tenant` may be left out only when the config has no
/// `tenants:`; `target` is what a refusal's message suggests after `target=`.
pub(super) fn tenant(
    pairs: &[(String, String)],
    configured: &dyn Fn(&TenantName) -> bool,
    list: &dyn Fn() -> Vec<TenantName>,
    target: &str,
) -> Result<TenantName, String> {
    let names = super::query_values(pairs, "tenant");
    let name = match names.as_slice() {
        [one] => *one,
        [] => "",
        _ => return Err("tenant is given more than once; give one tenant name\n".into()),
    };
    let candidate = if name.is_empty() {
        Some(TenantName::default())
    } else {
        TenantName::parse(name).ok()
    };
    if let Some(t) = candidate.filter(|t| configured(t)) {
        return Ok(t);
    }
    let tenants = list();
    let listed: Vec<&str> = tenants
        .iter()
        .take(NAMED_TENANTS)
        .map(|t| t.as_str())
        .collect();
    let more = tenants.len().saturating_sub(NAMED_TENANTS);
    let mut known = listed.join(", ");
    if more > 0 {
        known.push_str(&format!(" and {more} more"));
    }
    if name.is_empty() {
        return Err(format!(
            "tenant is missing: this exporter has tenants ({known}); ask /probe?tenant=NAME&target={target}\n"
        ));
    }
    Err(format!(
        "tenant {} is not configured; configured tenants: {known}\n",
        quote(name)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::query_pairs as pairs;
    use axum::http::HeaderValue;

    #[test]
    fn only_a_configured_tenant_and_an_int32_account_id_are_accepted() {
        let tenants = vec![
            TenantName::parse("a").unwrap(),
            TenantName::parse("b").unwrap(),
        ];
        let parse = |pairs: &[(String, String)], tenants: &Vec<TenantName>| {
            super::parse(pairs, &|t| tenants.contains(t), &|| tenants.clone())
        };
        let ok = parse(&pairs(&[("tenant", "b"), ("target", "42")]), &tenants).unwrap();
        assert_eq!((ok.0.as_str(), ok.1), ("b", 42));
        for (query, problem) in [
            (vec![("tenant", "a")], "target is missing"),
            (
                vec![("tenant", "a"), ("target", "0")],
                "target \"0\" is not a Delivery account id",
            ),
            (
                vec![("tenant", "a"), ("target", "2147483648")],
                "is not a Delivery account id",
            ),
            (
                vec![("tenant", "a"), ("target", "x")],
                "is not a Delivery account id",
            ),
            (
                vec![("tenant", "a"), ("target", "1"), ("target", "2")],
                "target is given more than once",
            ),
            (
                vec![("tenant", "c"), ("target", "1")],
                "tenant \"c\" is not configured; configured tenants: a, b",
            ),
            (vec![("target", "1")], "tenant is missing"),
            (
                vec![("tenant", "a b"), ("target", "1")],
                "tenant \"a b\" is not configured",
            ),
            (
                vec![("tenant", "a"), ("tenant", "b"), ("target", "1")],
                "tenant is given more than once",
            ),
        ] {
            let e = parse(&pairs(&query), &tenants).unwrap_err();
            assert!(e.contains(problem), "{query:?}: {e}");
        }
        // A single-token config: the tenant may be left out.
        let single = vec![TenantName::default()];
        assert_eq!(parse(&pairs(&[("target", "7")]), &single).unwrap().1, 7);
    }

    #[test]
    fn the_wait_follows_the_scrape_timeout_header_within_bounds() {
        let timeout = |seconds| {
            let mut h = HeaderMap::new();
            h.insert(
                "x-prometheus-scrape-timeout-seconds",
                HeaderValue::from_static(seconds),
            );
            wait(&h)
        };
        assert_eq!(wait(&HeaderMap::new()), DEFAULT_WAIT);
        assert_eq!(timeout("3"), Duration::from_millis(2500));
        for bad in ["-1", "NaN", "inf", "x", "0"] {
            assert_eq!(timeout(bad), DEFAULT_WAIT, "{bad}");
        }
        assert_eq!(timeout("1e30"), MAX_WAIT - MARGIN);
    }
}
