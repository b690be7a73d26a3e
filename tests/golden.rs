//! Golden files: an upstream body in, the exact exposition out. Each case is a pair
//! `tests/fixtures/golden/<collector>/<case>.json` and `.prom`; parse problems are listed after the
//! exposition as `# parse problem:` comments. `UPDATE_GOLDEN=1 cargo test golden` rewrites the
//! `.prom` files; review the diff before committing it. Bodies go through the one seam
//! ([`mailhost_exporter::engine::replay`]): read as the collector's fetch reads them (the client's
//! bounded decoder, with each call's field set), applied to a snapshot and rendered.

use std::path::{Path, PathBuf};

use jiff::Timestamp;
use mailhost_exporter::config::Config;
use mailhost_exporter::engine::replay::Replay;
use mailhost_exporter::engine::spec::CollectorSpec;

/// The fixed moment every golden run happens at: 2026-11-22T08:00:00Z.
const NOW: i64 = 1_795_334_400;

/// The spec of one collector from a config holding just it, with one target.
fn spec_from(collector_yaml: &str) -> CollectorSpec {
    let yaml = format!("api:\n  base_url: http://127.0.0.1:1\ncollectors:\n{collector_yaml}");
    let config = Config::parse(&yaml, Some("t".into())).unwrap();
    let mut spec = CollectorSpec::from_config(&config).remove(0);
    spec.targets.truncate(1);
    spec
}

/// The classic exposition of one run of `spec`'s target answered with `bodies`, then its parse
/// problems as comments; and the same run in OpenMetrics, terminated.
fn render(spec: &CollectorSpec, bodies: Vec<Vec<u8>>) -> (String, String) {
    let mut replay = Replay::default();
    let now = Timestamp::from_second(NOW).unwrap();
    replay.run(spec, vec![(spec.targets[0].clone(), bodies)], now);
    let problems: Vec<String> = replay
        .problems()
        .iter()
        .map(|p| format!("# parse problem: {} ({})\n", p.path, p.found))
        .collect();
    let exposition = replay.render();
    let mut out = exposition.classic;
    out.extend(problems);
    (out, exposition.openmetrics + "# EOF\n")
}

/// One body per answer: the file as it is.
fn one(body: &[u8]) -> Vec<Vec<u8>> {
    vec![body.to_vec()]
}

/// How one collector's cases render: a fixture's bytes in, (classic, OpenMetrics) out.
type Produce = Box<dyn Fn(&[u8]) -> (String, String)>;

/// Each collector with golden cases, and how its fixtures render.
fn collectors() -> Vec<(&'static str, Produce)> {
    let plain = |yaml: &str| -> Produce {
        let spec = spec_from(yaml);
        Box::new(move |body| render(&spec, one(body)))
    };
    let daily = spec_from("  tracemail_daily:\n    top_domains: 2\n    accounts: [1001]\n");
    vec![
        (
            "delivery_account",
            plain("  delivery_account:\n    interval: 60s\n    accounts: [1004]\n"),
        ),
        (
            "tracemail_dashboard",
            plain("  tracemail_dashboard:\n    interval: 60s\n"),
        ),
        (
            "tracemail_daily",
            Box::new(move |body| {
                // Both answers in one file: each is written back to bytes and read on its own.
                let body: serde_json::Value = serde_json::from_slice(body).unwrap();
                let bytes = |key: &str| serde_json::to_vec(&body[key]).unwrap();
                render(&daily, vec![bytes("daily"), bytes("domains_rank")])
            }),
        ),
        (
            "migration",
            plain("  migration:\n    migrations: [MG00000001]\n"),
        ),
        (
            "mailbox",
            plain("  mailbox:\n    mailboxes: [{domain: D000000201, mailbox: EA00000001}]\n"),
        ),
        (
            "team_member",
            plain("  team_member:\n    team_members: [T000000101]\n"),
        ),
    ]
}

/// The renderings of each case of `collector`: the input's path, classic, OpenMetrics.
fn renderings(collector: &str) -> Vec<(PathBuf, String, String)> {
    let produce = collectors()
        .into_iter()
        .find(|(name, _)| *name == collector)
        .map(|(_, produce)| produce)
        .unwrap_or_else(|| panic!("{collector} has no golden cases"));
    let dir = Path::new("tests/fixtures/golden").join(collector);
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    inputs.sort();
    assert!(
        inputs.len() >= 4,
        "{collector}: the simulator's shape and at least three variants"
    );
    inputs
        .into_iter()
        .map(|input| {
            let (classic, openmetrics) = produce(&std::fs::read(&input).unwrap());
            (input, classic, openmetrics)
        })
        .collect()
}

/// Renders each case of `collector` and compares the classic text with its golden file.
fn check_dir(collector: &str) {
    for (input, got, _) in renderings(collector) {
        let golden = input.with_extension("prom");
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(&golden, &got).unwrap();
        }
        let want = std::fs::read_to_string(&golden).unwrap_or_else(|_| {
            panic!(
                "{} is missing: run UPDATE_GOLDEN=1 cargo test golden",
                golden.display()
            )
        });
        assert_eq!(
            got,
            want,
            "{} differs from {}",
            input.display(),
            golden.display()
        );
    }
}

#[test]
fn delivery_account_bodies_render_exactly_as_their_golden_files() {
    check_dir("delivery_account");
}

#[test]
fn tracemail_dashboard_bodies_render_exactly_as_their_golden_files() {
    check_dir("tracemail_dashboard");
}

#[test]
fn tracemail_daily_bodies_render_exactly_as_their_golden_files() {
    check_dir("tracemail_daily");
}

#[test]
fn migration_bodies_render_exactly_as_their_golden_files() {
    check_dir("migration");
}

#[test]
fn mailbox_bodies_render_exactly_as_their_golden_files() {
    check_dir("mailbox");
}

#[test]
fn team_member_bodies_render_exactly_as_their_golden_files() {
    check_dir("team_member");
}

/// Both renderings of every golden case through the strict parsers
/// (`prometheus3::check_body`: promtool and the OpenMetrics parser).
#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn every_golden_case_passes_promtool_and_the_strict_openmetrics_parser() {
    for (collector, _) in collectors() {
        for (input, classic, openmetrics) in renderings(collector) {
            crate::prometheus3::check_golden(&input, &classic, &openmetrics);
        }
    }
}
