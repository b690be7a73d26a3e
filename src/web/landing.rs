//! The landing page: version, the provider polled, links, and the state of the collectors (with
//! the restarts of a loop that panicked) and targets, failing ones first, at most [`MAX_COLLECTOR_ROWS`] collectors (one per tenant and
//! collector), [`MAX_TARGET_ROWS`] targets per collector and [`MAX_PAGE_TARGET_ROWS`] in all.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::response::Response;
use jiff::Timestamp;

use super::{AppState, html};
use crate::engine::snapshot::{CollectorState, TargetState};
use crate::metrics::labels::BuildLabels;
use crate::metrics::self_metrics::PaceView;

/// Target rows shown per collector; the rest are counted, and are all on `/metrics`. A fleet
/// of thousands must not make a page of megabytes, nor take long to build under the lock-free
/// snapshot it reads.
pub const MAX_TARGET_ROWS: usize = 200;

/// Collectors shown at most: with ten thousand tenants there are tens of thousands of them.
pub const MAX_COLLECTOR_ROWS: usize = 100;

/// Target rows of the whole page at most.
pub const MAX_PAGE_TARGET_ROWS: usize = 2000;

/// Tenants whose pace is shown at most (the limited ones; the others are counted).
pub const MAX_PACE_ROWS: usize = 100;

/// What the landing page says about the provider polled: its address, redacted (no userinfo,
/// query or fragment), whether it is the built-in simulator of demo mode, and which shard of
/// the configured targets this process polls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    pub url: String,
    pub demo: bool,
    pub shard: crate::shard::Shard,
}

/// Shared with the landing page through the router, swapped on a reload that changes it.
pub type SharedUpstream = Arc<arc_swap::ArcSwap<Upstream>>;

pub async fn page(
    State(state): State<AppState>,
    upstream: Option<Extension<SharedUpstream>>,
) -> Response {
    let prepared = state.store.prepared();
    let build = BuildLabels::current();
    let now = Timestamp::now();
    let path = esc(&state.telemetry_path);
    let mut collectors: Vec<_> = prepared.snapshot.collectors.values().collect();
    in_page_order(&mut collectors);
    let rows = collector_rows(&collectors, now, &path);
    let paces = paces(&state.telemetry.paces(None, usize::MAX));
    let upstream = upstream_line(upstream);
    let storage = storage_line(state.telemetry.storage());
    html(format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>mailhost_exporter</title>\
         <style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left}}tr.collector{{background:#f4f4f4}}tr.failed{{background:#fdecea}}</style></head>\
         <body><h1>mailhost_exporter</h1><p>Version {} (revision {}, {})</p>{upstream}{storage}\
         <ul><li><a href=\"{path}\">Metrics</a></li><li><a href=\"/-/healthy\">Health</a></li><li><a href=\"/-/ready\">Readiness</a></li><li><a href=\"/sd\">Service discovery</a> of the accounts for <code>/probe?tenant=NAME&amp;target=ID</code></li></ul>\
         {paces}<h2>Collectors and targets</h2><p>Failing ones first; at most {MAX_COLLECTOR_ROWS} collectors, {MAX_TARGET_ROWS} targets per collector and {MAX_PAGE_TARGET_ROWS} in all.</p>\
         <table><tr><th>Collector / target</th><th>Interval</th><th>Last run</th><th>Last success</th><th>Age</th><th>Last failure</th></tr>{rows}</table>\
         </body></html>\n",
        esc(build.version),
        esc(build.revision),
        esc(build.rustc_version),
    ))
}

/// Failing collectors and those whose loop panicked first, then those not run yet; stable, so
/// in collector and tenant order within each group.
fn in_page_order(collectors: &mut [&Arc<CollectorState>]) {
    collectors.sort_by_key(|c| match c.last_run {
        _ if c.restarts > 0 => 0,
        Some(r) if !r.success => 0,
        None => 1,
        Some(_) => 2,
    });
}

/// The table's rows: each collector (failing first, at most [`MAX_COLLECTOR_ROWS`]) with its
/// targets, and a line for those left out.
fn collector_rows(collectors: &[&Arc<CollectorState>], now: Timestamp, path: &str) -> String {
    let mut rows = String::new();
    let mut budget = MAX_PAGE_TARGET_ROWS;
    for c in collectors.iter().take(MAX_COLLECTOR_ROWS) {
        let name = if c.tenant.is_default() {
            c.name.as_str().to_owned()
        } else {
            format!("{} {}", c.tenant, c.name)
        };
        let mut run = match c.last_run {
            None => "not run yet".to_owned(),
            Some(r) if r.success => format!("ok in {:.3}s", r.duration.as_secs_f64()),
            Some(r) => format!("failed in {:.3}s", r.duration.as_secs_f64()),
        };
        if c.restarts > 0 {
            let _ = write!(
                run,
                "; its loop panicked and was started again {} (last {}; mailhost_collector_restarts_total, the log has the panic)",
                times(c.restarts),
                when(c.last_restart),
            );
        }
        let restored = if c.restored { c.still_restored() } else { 0 };
        if restored > 0 {
            let _ = write!(
                run,
                "; {restored} targets restored from the storage directory, not fetched again yet"
            );
        }
        let _ = write!(
            rows,
            "<tr class=\"collector\"><td>{}</td><td>every {}</td><td>{}</td><td>{}</td><td>{}</td><td></td></tr>",
            esc(&name),
            humantime::format_duration(c.schedule.interval),
            esc(&run),
            when(c.last_success),
            age(c.last_success, now),
        );
        target_rows(&mut rows, &name, c, &mut budget, now, path);
    }
    let hidden = collectors.len().saturating_sub(MAX_COLLECTOR_ROWS);
    if hidden > 0 {
        let _ = write!(
            rows,
            "<tr class=\"more\"><td colspan=\"6\">\u{2026} and {hidden} more collectors; failing ones are listed first (see <a href=\"{path}\">{path}</a>)</td></tr>",
        );
    }
    rows
}

/// The rows of one collector's targets (failing first, at most [`MAX_TARGET_ROWS`] and what is
/// left of the page's `budget`), and a line for those left out.
fn target_rows(
    rows: &mut String,
    name: &str,
    c: &CollectorState,
    budget: &mut usize,
    now: Timestamp,
    path: &str,
) {
    // Failing targets first, then those not tried yet, then healthy ones; the sort is
    // stable, so the configured order holds within each group.
    let mut targets: Vec<_> = c.targets.iter().collect();
    targets.sort_by_key(|t| match t.last_ok {
        Some(false) => 0,
        None => 1,
        Some(true) => 2,
    });
    let shown = targets.len().min(MAX_TARGET_ROWS).min(*budget);
    *budget -= shown;
    for t in targets.iter().take(shown) {
        let status = match t.last_ok {
            None => "pending",
            Some(true) => "ok",
            Some(false) => "failed",
        };
        // An error is cleared by the next success, so while one is on record the latest
        // attempt is the failure it describes.
        let failure = t
            .last_error
            .as_ref()
            .map(|e| format!("{}: {} (at {})", e.reason, e.detail, when(t.last_attempt)))
            .unwrap_or_default();
        let debug = debug_link(c, t);
        let _ = write!(
            rows,
            "<tr class=\"{status}\"><td>&nbsp;&nbsp;{} {}</td><td></td><td>{}</td><td>{}</td><td>{}</td><td>{}{debug}</td></tr>",
            esc(name),
            esc(&t.target.to_string()),
            status,
            when(t.last_success),
            age(t.last_success, now),
            esc(&failure),
        );
    }
    let hidden = targets.len() - shown;
    if hidden > 0 {
        let _ = write!(
            rows,
            "<tr class=\"more\"><td colspan=\"6\">&nbsp;&nbsp;\u{2026} and {hidden} more (see <a href=\"{path}\">{path}</a>)</td></tr>",
        );
    }
}

/// What the storage directory (`--storage.path`) did: nothing when it is off.
fn storage_line(figures: Option<crate::metrics::self_metrics::StorageFigures>) -> String {
    let Some(f) = figures else {
        return String::new();
    };
    let last = match (f.last_success, f.checkpoint_bytes) {
        (Some(at), Some(bytes)) => format!("last checkpoint {} ({bytes} bytes)", unix_time(at)),
        _ => "no checkpoint written yet".to_owned(),
    };
    let failed: u64 = f.failures.iter().sum();
    let refused: u64 = f.refused.iter().sum();
    let mut line = format!("<p>Storage (--storage.path): {last}");
    if failed > 0 {
        let _ = write!(
            line,
            "; {failed} checkpoints failed (mailhost_storage_checkpoint_failures_total)"
        );
    }
    if refused > 0 {
        line.push_str(
            "; the state file was refused at start and that start was cold (see the log)",
        );
    }
    line.push_str("</p>");
    line
}

/// The line naming the upstream the exporter polls (its demo mode and shard, if any).
fn upstream_line(upstream: Option<Extension<SharedUpstream>>) -> String {
    let Some(Extension(u)) = upstream else {
        return String::new();
    };
    let u = u.load();
    let mode = if u.demo {
        " (demo mode: the built-in simulator with a demo fleet; no real account is called)"
    } else {
        ""
    };
    let shard = if u.shard.count() > 1 {
        format!(
            "; shard {} (<code>--shard</code>): only the configured targets whose hash falls in it",
            u.shard
        )
    } else {
        String::new()
    };
    format!("<p>Polling <code>{}</code>{mode}{shard}</p>", esc(&u.url))
}

/// The pace section: each tenant whose token or endpoints the provider limits, or with targets
/// backing off on their own, at most [`MAX_PACE_ROWS`]; the unlimited ones are counted.
fn paces(all: &[PaceView]) -> String {
    let limited: Vec<&PaceView> = all
        .iter()
        .filter(|p| {
            p.allowed.is_some()
                || p.paused
                || p.endpoints.iter().any(|e| {
                    e.allowed.is_some()
                        || e.paused
                        || e.backing_off > 0
                        || e.outage.is_some()
                        || e.retries_refused > 0
                })
        })
        .collect();
    let mut out = String::from(
        "<h2>Pace at the provider</h2><p>What each token's pacer learned of the provider's rate limit, or was given (<code>rate_limit</code>, <code>endpoint_rate_limits</code>), per token and per endpoint, the targets refused on their own (each backs off alone; see their failure below), and the endpoints in an outage (every call failing: paused, one probe after a cool-down).</p>",
    );
    if limited.is_empty() {
        let _ = write!(out, "<p>{}</p>", unlimited_tokens(all.len(), 0, 0));
        return out;
    }
    out.push_str("<table><tr><th>Tenant</th><th>Token</th><th>Endpoint</th><th>Endpoint pace</th><th>Targets backing off on their own</th><th>Retries refused by the budget</th></tr>");
    for p in limited.iter().take(MAX_PACE_ROWS) {
        let tenant = if p.tenant.is_default() {
            "(the token)".to_owned()
        } else {
            p.tenant.as_str().to_owned()
        };
        let token = pace(p.allowed, p.paused);
        if p.endpoints.is_empty() {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{token}</td><td></td><td></td><td></td><td></td></tr>",
                esc(&tenant)
            );
        }
        for e in &p.endpoints {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{token}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&tenant),
                e.endpoint,
                endpoint_pace(e),
                e.backing_off,
                e.retries_refused,
            );
        }
    }
    let more = limited.len().saturating_sub(MAX_PACE_ROWS);
    out.push_str("</table>");
    let said = unlimited_tokens(all.len(), limited.len(), more);
    if !said.is_empty() {
        let _ = write!(out, "<p>{said}</p>");
    }
    out
}

/// What the page says under the pace table of `all` tokens, `limited` of them listed or not
/// (`more` of those not): the tokens not listed, as a person would count them.
fn unlimited_tokens(all: usize, limited: usize, more: usize) -> String {
    let unlimited = all.saturating_sub(limited);
    let mut said = match (limited, unlimited) {
        (0, 0) => "No token is configured.".to_owned(),
        (0, 1) => "The token is not rate-limited now.".to_owned(),
        (0, n) => format!("None of the {n} tokens is rate-limited now."),
        (_, 0) => String::new(),
        (_, 1) => "The other token is not rate-limited now.".to_owned(),
        (_, n) => format!("The other {n} tokens are not rate-limited now."),
    };
    if more > 0 {
        if !said.is_empty() {
            said.push(' ');
        }
        said.push_str(&match more {
            1 => "One more rate-limited token is not listed.".to_owned(),
            n => format!("{n} more rate-limited tokens are not listed."),
        });
    }
    said
}

/// An endpoint's pace as the page says it, its outage included.
fn endpoint_pace(e: &crate::upstream::observe::EndpointPace) -> String {
    let rate = pace(e.allowed, e.paused);
    match e.outage {
        Some(o) => format!(
            "{rate}; outage since {}, next probe {}",
            esc(&unix_time(o.since)),
            if o.probing {
                "on its way".to_owned()
            } else {
                esc(&unix_time(o.next_probe))
            }
        ),
        None => rate,
    }
}

/// Seconds since the epoch as the page writes a time.
pub(crate) fn unix_time(secs: f64) -> String {
    Timestamp::from_millisecond((secs * 1000.0) as i64)
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|_| format!("{secs:.0}"))
}

/// A pace as the page says it.
fn pace(allowed: Option<f64>, paused: bool) -> String {
    let rate = allowed.map_or("free".to_owned(), |r| format!("{r:.2}/s"));
    if paused {
        format!("{rate}, paused")
    } else {
        rate
    }
}

/// A count of times as a person says it.
fn times(n: u64) -> String {
    match n {
        1 => "once".to_owned(),
        2 => "twice".to_owned(),
        n => format!("{n} times"),
    }
}

fn when(ts: Option<Timestamp>) -> String {
    ts.map(|t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| "never".to_owned())
}

fn age(ts: Option<Timestamp>, now: Timestamp) -> String {
    ts.map(|t| format!("{}s", now.duration_since(t).as_secs().max(0)))
        .unwrap_or_else(|| "-".to_owned())
}

/// The link of a failing target to its debug view (the reason, the detail and the trail of its
/// last poll); nothing for a target that does not fail.
fn debug_link(c: &CollectorState, t: &TargetState) -> String {
    if t.last_error.is_none() {
        return String::new();
    }
    let mut href = format!(
        "/probe?target={}&amp;collector={}&amp;debug=true",
        query_value(&t.target.to_string()),
        c.name
    );
    if !c.tenant.is_default() {
        href.push_str(&format!("&amp;tenant={}", query_value(c.tenant.as_str())));
    }
    format!(" <a href=\"{href}\">debug</a>")
}

/// `s` as a query value: every byte but the unreserved ones percent-encoded.
fn query_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::engine::snapshot::RunSummary;
    use crate::engine::spec::fixtures;
    use crate::tenant::TenantName;

    #[test]
    fn a_collector_whose_loop_panicked_is_listed_first_with_its_restarts() {
        let now: Timestamp = "2026-11-22T08:00:00Z".parse().unwrap();
        let of = |tenant: &str| {
            let mut spec = fixtures::accounts(&[1], Duration::from_secs(60));
            spec.tenant = TenantName::parse(tenant).unwrap();
            let mut c = CollectorState::new(&spec);
            c.last_run = Some(RunSummary {
                success: true,
                duration: Duration::from_millis(5),
                finished: now,
            });
            c
        };
        let healthy = Arc::new(of("healthy"));
        let mut panicked = of("panicked");
        panicked.restarts = 2;
        panicked.last_restart = Some(now);
        let panicked = Arc::new(panicked);
        let mut collectors = vec![&healthy, &panicked];
        in_page_order(&mut collectors);
        assert_eq!(collectors[0].tenant.as_str(), "panicked");
        let rows = collector_rows(&collectors, now, "/metrics");
        assert!(
            rows.contains("<td>panicked delivery_account</td><td>every 1m</td><td>ok in 0.005s; its loop panicked and was started again twice (last 2026-11-22 08:00:00 UTC; mailhost_collector_restarts_total, the log has the panic)</td>"),
            "{rows}"
        );
        assert_eq!(rows.matches("panicked and was started again").count(), 1);
        assert_eq!(times(1), "once");
        assert_eq!(times(7), "7 times");
    }

    #[test]
    fn the_tokens_not_listed_under_the_pace_table_are_counted_as_a_person_would() {
        for ((tokens, limited, unlisted), want) in [
            ((1, 0, 0), "The token is not rate-limited now."),
            ((3, 0, 0), "None of the 3 tokens is rate-limited now."),
            ((2, 2, 0), ""),
            ((2, 1, 0), "The other token is not rate-limited now."),
            ((10, 3, 0), "The other 7 tokens are not rate-limited now."),
            (
                (150, 101, 1),
                "The other 49 tokens are not rate-limited now. One more rate-limited token is not listed.",
            ),
            (
                (120, 120, 20),
                "20 more rate-limited tokens are not listed.",
            ),
        ] {
            assert_eq!(unlimited_tokens(tokens, limited, unlisted), want);
        }
        assert!(!paces(&[]).contains("0 tokens"), "{}", paces(&[]));
    }
}
