//! `/probe?tenant=NAME&target=ID&debug=true`: why a target fails, in plain text, as
//! blackbox_exporter's `debug=true` gives a probe's log. For each collector that polls the
//! target: its state, the failure's reason and detail, the trail of its last failed poll (route
//! templates, attempts, statuses, waits, the field a decode stumbled on, the circuit), and the
//! series a probe would return. `collector=NAME` names one collector, which lets any configured
//! target be asked for (a migration, a mailbox), not only a Delivery account.
//!
//! A debug request reads the snapshot and nothing else: it never registers an account and
//! never calls the provider. Everything it prints was redacted where it was recorded (details
//! and trails hold no URL, token or header value); the details pass the token filter again here.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;

use crate::engine::snapshot::{CollectorState, Snapshot, TargetState};
use crate::engine::spec::{CollectorName, Target};
use crate::metrics;
use crate::metrics::self_metrics::PaceView;
use crate::redact::{quote, redact, shorten};
use crate::tenant::TenantName;
use crate::web::landing::unix_time;

/// Longest `target` or `collector` value read.
const MAX_VALUE_CHARS: usize = 200;

/// Whether the query asks for the debug view: `debug=true` (or `1`), once.
pub(super) fn requested(pairs: &[(String, String)]) -> Result<bool, String> {
    match super::query_values(pairs, "debug").as_slice() {
        [] => Ok(false),
        ["true" | "1"] => Ok(true),
        ["false" | "0"] => Ok(false),
        [other] => Err(format!(
            "debug {} is not a boolean: give debug=true or leave it out\n",
            quote(other)
        )),
        _ => Err("debug is given more than once\n".to_owned()),
    }
}

/// What a debug request asks for: the collectors to look in and the target's label value.
#[derive(Debug)]
pub(super) struct Asked {
    pub tenant: TenantName,
    pub target: String,
    pub collector: Option<CollectorName>,
}

/// Reads `collector` and `target` beside an already checked tenant. Without `collector`, the
/// target must be a Delivery account id, as for a probe.
pub(super) fn asked(pairs: &[(String, String)], tenant: TenantName) -> Result<Asked, String> {
    let one = |key: &str| -> Result<Option<&str>, String> {
        match super::query_values(pairs, key).as_slice() {
            [] => Ok(None),
            [v] if v.chars().count() <= MAX_VALUE_CHARS => Ok(Some(*v)),
            [_] => Err(format!(
                "{key} is longer than {MAX_VALUE_CHARS} characters\n"
            )),
            _ => Err(format!("{key} is given more than once\n")),
        }
    };
    let target = one("target")?
        .ok_or("target is missing: ask /probe?tenant=NAME&target=ID&debug=true\n")?
        .to_owned();
    let collector = match one("collector")? {
        None => {
            if !target.parse::<i32>().is_ok_and(|id| id > 0) {
                return Err(format!(
                    "target {} is not a Delivery account id; for another kind of target add collector=NAME ({})\n",
                    quote(&target),
                    names()
                ));
            }
            None
        }
        Some(name) => Some(
            CollectorName::from_key(name)
                .ok_or_else(|| format!("collector {} is not one of {}\n", quote(name), names()))?,
        ),
    };
    Ok(Asked {
        tenant,
        target,
        collector,
    })
}

fn names() -> String {
    CollectorName::ALL
        .iter()
        .map(|c| c.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The debug answer for `asked` from `snapshot`, with the pace of its tenant's token.
pub(super) fn answer(snapshot: &Snapshot, asked: &Asked, paces: &[PaceView]) -> Response {
    let now = Timestamp::now();
    let mut out = String::new();
    let tenant = if asked.tenant.is_default() {
        String::new()
    } else {
        format!("tenant {}, ", quote(asked.tenant.as_str()))
    };
    let _ = writeln!(
        out,
        "Debug of {tenant}target {} at {}\n\
         What the exporter kept of its latest poll by each collector; a poll's trail is kept while the target fails.\n\
         This request called nothing: it reads what the collectors' runs left.",
        quote(&asked.target),
        when(Some(now)),
    );
    pace(&mut out, paces);
    let mut view = Snapshot::default();
    for (collector, state) in targets(snapshot, asked) {
        describe(&mut out, collector, state);
        view.collectors.insert(
            (collector.name, asked.tenant.clone()),
            Arc::new(collector.with_targets(vec![state.clone()])),
        );
    }
    // One entry per collector that has the target: none when no collector has it.
    if view.collectors.is_empty() {
        let _ = writeln!(
            out,
            "\nNo collector of this tenant polls this target (it is not configured, probed or discovered, or its collector has not run yet)."
        );
        return text(StatusCode::NOT_FOUND, out);
    }
    let _ = writeln!(out, "\nSeries of this target on /metrics:");
    out.push_str(metrics::render_probe(&Arc::new(view)).text(metrics::Format::Classic));
    text(StatusCode::OK, out)
}

/// The states of the asked target in each collector of its tenant that has it.
fn targets<'a>(
    snapshot: &'a Snapshot,
    asked: &'a Asked,
) -> impl Iterator<Item = (&'a CollectorState, &'a Arc<TargetState>)> + 'a {
    CollectorName::ALL
        .iter()
        .copied()
        .filter(move |c| match asked.collector {
            Some(one) => *c == one,
            None => c.polls_accounts(),
        })
        .filter_map(move |c| snapshot.collectors.get(&(c, asked.tenant.clone())))
        .filter_map(move |c| {
            let state = match asked
                .target
                .parse::<i32>()
                .ok()
                .and_then(|id| Target::of_account(c.name, id))
            {
                Some(t) => c.target(&t),
                // Any other kind of target: found by its label value (a debug request is
                // rare; the scan is bounded by the collector's targets).
                None => c
                    .targets
                    .iter()
                    .find(|t| t.target.to_string() == asked.target),
            };
            state.map(|s| (c.as_ref(), s))
        })
}

/// The pace of the token and of each endpoint it called, and how many targets of each back off
/// on their own.
fn pace(out: &mut String, paces: &[PaceView]) {
    let Some(p) = paces.first() else {
        return;
    };
    let rate = |allowed: Option<f64>, paused: bool| {
        let r = allowed.map_or("not limited".to_owned(), |r| format!("{r:.2} requests/s"));
        if paused { format!("{r}, paused") } else { r }
    };
    let _ = writeln!(out, "\nPace of the token: {}", rate(p.allowed, p.paused));
    for e in &p.endpoints {
        let _ = writeln!(
            out,
            "  Endpoint {}: {}; {} target(s) refused on their own, each backing off alone",
            e.endpoint,
            rate(e.allowed, e.paused),
            e.backing_off
        );
        if let Some(o) = e.outage {
            let next = if o.probing {
                "a probe is on its way".to_owned()
            } else {
                format!("next probe at {}", unix_time(o.next_probe))
            };
            let _ = writeln!(
                out,
                "    In an outage since {}: every call fails; its calls wait for one probe, {next}",
                unix_time(o.since)
            );
        }
        if e.retries_refused > 0 {
            let _ = writeln!(
                out,
                "    {} failed call(s) not retried: its retry budget (a tenth of first attempts over 10 s, plus 5) was spent",
                e.retries_refused
            );
        }
        if let Some(w) = e.window {
            let _ = writeln!(
                out,
                "    Slow start: at most {} call(s) in flight, one more per success up to api.concurrency, until its pace is learned",
                w.floor()
            );
        }
    }
}

fn describe(out: &mut String, collector: &CollectorState, t: &TargetState) {
    let status = match (t.last_ok, t.deferred) {
        (_, true) => "waiting for the token's rate limit (deferred: the last run gave it no turn)",
        (None, _) => "not tried yet",
        (Some(true), _) => "ok",
        (Some(false), _) => "failing",
    };
    let _ = writeln!(
        out,
        "\nCollector {}, target {}\n  State: {status}\n  Last attempt: {}\n  Last success: {}\n  Last failure: {}",
        collector.name,
        t.target,
        when(t.last_attempt),
        when(t.last_success),
        when(t.last_failure),
    );
    if t.restored {
        let _ = writeln!(
            out,
            "  Restored: yes, from the storage directory at start (--storage.path); this process has not attempted it yet, and its values are as an earlier process fetched them ({})",
            when(t.data.as_ref().map(|(_, at)| *at)),
        );
    }
    let Some(e) = t.last_error.as_ref() else {
        return;
    };
    let _ = writeln!(
        out,
        "  Reason: {} (mailhost_target_failure_info{{reason=\"{}\"}})\n  Detail: {}",
        e.reason,
        e.reason,
        shorten(&redact(&e.detail), 500),
    );
    match &e.trail {
        Some(trail) => {
            let _ = write!(out, "  Trail of the last poll:\n    {trail}");
        }
        None => {
            let _ = writeln!(
                out,
                "  Trail of the last poll: none kept (the target was marked failed without a poll: its values expired)"
            );
        }
    }
}

fn when(ts: Option<Timestamp>) -> String {
    ts.map(|t| t.strftime("%Y-%m-%d %H:%M:%S%.3f UTC").to_string())
        .unwrap_or_else(|| "never".to_owned())
}

fn text(status: StatusCode, body: String) -> Response {
    let content_type = [(header::CONTENT_TYPE, "text/plain; charset=utf-8")];
    (status, content_type, body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::query_pairs as pairs;

    #[test]
    fn debug_is_a_boolean_given_at_most_once() {
        assert_eq!(requested(&pairs(&[])), Ok(false));
        assert_eq!(requested(&pairs(&[("debug", "true")])), Ok(true));
        assert_eq!(requested(&pairs(&[("debug", "0")])), Ok(false));
        for (query, problem) in [
            (vec![("debug", "yes")], "not a boolean"),
            (vec![("debug", "true"), ("debug", "true")], "more than once"),
        ] {
            let e = requested(&pairs(&query)).unwrap_err();
            assert!(e.contains(problem), "{query:?}: {e}");
        }
    }

    #[test]
    fn without_a_collector_the_target_must_be_an_account_and_a_collector_must_exist() {
        let t = TenantName::default();
        assert!(asked(&pairs(&[("target", "7")]), t.clone()).is_ok());
        let e = asked(&pairs(&[("target", "MG00000001")]), t.clone()).unwrap_err();
        assert!(e.contains("add collector=NAME"), "{e}");
        let a = asked(
            &pairs(&[("target", "MG00000001"), ("collector", "migration")]),
            t.clone(),
        )
        .unwrap();
        assert_eq!(a.collector, Some(CollectorName::Migration));
        let e = asked(&pairs(&[("target", "1"), ("collector", "nope")]), t.clone()).unwrap_err();
        assert!(e.contains("is not one of delivery_account"), "{e}");
        let long = "9".repeat(MAX_VALUE_CHARS + 1);
        assert!(
            asked(&pairs(&[("target", &long)]), t)
                .unwrap_err()
                .contains("longer than")
        );
    }
}
