//! Hostile input: arbitrary JSON, shaped like the upstream records, goes through every lenient
//! reader and the real snapshot -> metrics -> exposition path; the readers must not panic and what
//! is rendered must be valid exposition in both formats, finite, bounded and without duplicate
//! series. Bodies are written to bytes and go through the one seam
//! (`mailhost_exporter::engine::replay`): read as the collector's fetch reads them, with the
//! client's bounded decoder, as a real answer is. The fuzz target in `fuzz/` does the same from raw
//! bytes. One file per collector, then every collector at once and the self-metrics.

// Every collector at once, and the envelope.
mod all_collectors;
// The Delivery account record.
mod delivery_account;
// The parser of what we write, and its own test.
mod exposition;
// Arbitrary JSON and bodies.
mod json;
// Email accounts.
mod mailbox;
// Migration stats.
mod migration;
// Team members.
mod team_member;
// The exporter's own series.
mod self_metrics;
// Daily statistics and domains rank.
mod tracemail_daily;
// The dashboard.
mod tracemail_dashboard;

use jiff::Timestamp;
use mailhost_exporter::config::Config;
use mailhost_exporter::engine::replay::Replay;
use mailhost_exporter::engine::spec::CollectorSpec;
use mailhost_exporter::metrics::EOF;
use proptest::prelude::*;
use serde_json::Value;

pub use exposition::check;

/// The moment every run happens at (2026-11-22T08:00:00Z), as in the golden files.
const NOW: i64 = 1_795_334_400;

/// Cases per property: enough to reach every reader branch, small enough for a slow machine.
fn config() -> ProptestConfig {
    ProptestConfig {
        // Never write a regressions file next to the tests: failures are reported, not kept.
        failure_persistence: None,
        max_shrink_iters: 4096,
        ..ProptestConfig::with_cases(256)
    }
}

fn spec_from(collector_yaml: &str) -> CollectorSpec {
    let yaml = format!("api:\n  base_url: http://127.0.0.1:1\ncollectors:\n{collector_yaml}");
    let config = Config::parse(&yaml, Some("t".into())).unwrap();
    CollectorSpec::from_config(&config).remove(0)
}

fn ids(n: usize) -> String {
    (1..=n)
        .map(|i| (1000 + i).to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn codes(prefix: &str, n: usize) -> String {
    (1..=n)
        .map(|i| format!("{prefix}{i:08}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The collectors, each with `n` targets (the dashboard: all, an account, a domain).
struct Specs {
    delivery: CollectorSpec,
    dashboard: CollectorSpec,
    daily: CollectorSpec,
    migration: CollectorSpec,
    mailbox: CollectorSpec,
    team_member: CollectorSpec,
}

impl Specs {
    fn new(n: usize) -> Self {
        let mailboxes = (1..=n)
            .map(|i| format!("{{domain: D{i:09}, mailbox: EA{i:08}}}"))
            .collect::<Vec<_>>()
            .join(", ");
        Specs {
            delivery: spec_from(&format!(
                "  delivery_account:\n    accounts: [{}]\n",
                ids(n)
            )),
            dashboard: spec_from(
                "  tracemail_dashboard:\n    limit: 5\n    views: [{account: 1001}, {domain: shop.example}]\n",
            ),
            daily: spec_from(&format!(
                "  tracemail_daily:\n    top_domains: 5\n    accounts: [{}]\n",
                ids(n)
            )),
            migration: spec_from(&format!(
                "  migration:\n    migrations: [{}]\n",
                codes("MG", n)
            )),
            mailbox: spec_from(&format!("  mailbox:\n    mailboxes: [{mailboxes}]\n")),
            team_member: spec_from(&format!(
                "  team_member:\n    identity_labels: true\n    team_members: [{}]\n",
                (1..=n)
                    .map(|i| format!("T{i:09}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

/// The body as the upstream sends it.
fn bytes(body: &Value) -> Vec<u8> {
    serde_json::to_vec(body).unwrap()
}

/// One answer per target: a one-endpoint collector's run.
fn one_each(bodies: Vec<Value>) -> Vec<Vec<Value>> {
    bodies.into_iter().map(|b| vec![b]).collect()
}

/// Applies one run per collector (each target answered with its bodies, one per endpoint, in
/// target order) through the one seam and renders both formats; the OpenMetrics text gets its
/// `# EOF` as the web layer adds it.
fn render(runs: &[(&CollectorSpec, Vec<Vec<Value>>)]) -> (String, String) {
    let mut replay = Replay::default();
    let now = Timestamp::from_second(NOW).unwrap();
    for (spec, answers) in runs {
        let answers = spec
            .targets
            .iter()
            .cloned()
            .zip(
                answers
                    .iter()
                    .map(|bodies| bodies.iter().map(bytes).collect()),
            )
            .collect();
        replay.run(spec, answers, now);
    }
    let exposition = replay.render();
    let mut openmetrics = exposition.openmetrics;
    openmetrics.push_str(EOF);
    (exposition.classic, openmetrics)
}

/// The rendered samples of one collector run, checked.
fn rendered(spec: &CollectorSpec, answers: Vec<Vec<Value>>) -> Result<(), String> {
    let (classic, openmetrics) = render(&[(spec, answers)]);
    check(&classic, &openmetrics).map_err(|e| e.to_string())
}
