//! The landing page: version, links, and the state of every collector and target.

use std::fmt::Write as _;

use axum::extract::State;
use axum::response::Response;
use jiff::Timestamp;

use super::{AppState, html};
use crate::telemetry::BuildInfo;

pub async fn page(State(state): State<AppState>) -> Response {
    let prepared = state.store.prepared();
    let build = BuildInfo::current();
    let now = Timestamp::now();
    let mut rows = String::new();
    for c in prepared.snapshot.collectors.values() {
        let run = match c.last_run {
            None => "not run yet".to_owned(),
            Some(r) if r.success => format!("ok in {:.3}s", r.duration.as_secs_f64()),
            Some(r) => format!("failed in {:.3}s", r.duration.as_secs_f64()),
        };
        let _ = write!(
            rows,
            "<tr class=\"collector\"><td>{}</td><td>every {}</td><td>{}</td><td>{}</td><td>{}</td><td></td></tr>",
            esc(c.name.as_str()),
            humantime::format_duration(c.schedule.interval),
            esc(&run),
            when(c.last_success),
            age(c.last_success, now),
        );
        for t in &c.targets {
            let status = match t.last_ok {
                None => "pending",
                Some(true) => "ok",
                Some(false) => "failed",
            };
            let failure = t
                .last_error
                .as_ref()
                .map(|e| format!("{}: {}", e.reason, e.detail))
                .unwrap_or_default();
            let _ = write!(
                rows,
                "<tr><td>&nbsp;&nbsp;{} {}</td><td></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(c.name.as_str()),
                esc(&t.target.to_string()),
                status,
                when(t.last_success),
                age(t.last_success, now),
                esc(&failure),
            );
        }
    }
    let path = esc(&state.telemetry_path);
    html(format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>mailhost_exporter</title>\
         <style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left}}tr.collector{{background:#f4f4f4}}</style></head>\
         <body><h1>mailhost_exporter</h1><p>Version {} (revision {}, {})</p>\
         <ul><li><a href=\"{path}\">Metrics</a></li><li><a href=\"/-/healthy\">Health</a></li><li><a href=\"/-/ready\">Readiness</a></li></ul>\
         <h2>Collectors and targets</h2><table><tr><th>Collector / target</th><th>Interval</th><th>Last run</th><th>Last success</th><th>Age</th><th>Last failure</th></tr>{rows}</table>\
         </body></html>\n",
        esc(build.version),
        esc(build.revision),
        esc(build.rustc_version),
    ))
}

fn when(ts: Option<Timestamp>) -> String {
    ts.map(|t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| "never".to_owned())
}

fn age(ts: Option<Timestamp>, now: Timestamp) -> String {
    ts.map(|t| format!("{}s", now.duration_since(t).as_secs().max(0)))
        .unwrap_or_else(|| "-".to_owned())
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
