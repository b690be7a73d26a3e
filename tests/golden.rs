//! Golden files: an upstream body in, the exact exposition out. Each case is a pair
//! `tests/fixtures/golden/<collector>/<case>.json` and `.prom`; parse problems are listed after
//! the exposition as `# parse problem:` comments. `UPDATE_GOLDEN=1 cargo test golden` rewrites
//! the `.prom` files; review the diff before committing it. Bodies go through the one seam
//! ([`mailhost_exporter::replay`]): read as the area's fetch reads them (the client's bounded
//! decoder, with each call's field set), applied to a snapshot and rendered.

use std::path::Path;

use jiff::Timestamp;
use mailhost_exporter::collector::CollectorSpec;
use mailhost_exporter::config::Config;
use mailhost_exporter::replay::Replay;

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

/// Renders each case of `collector` with `produce`, compares the classic text with its golden
/// file, and puts both renderings through the strict parsers (`prometheus3::check_body`).
fn check_dir(collector: &str, produce: impl Fn(&[u8]) -> (String, String)) {
    let dir = Path::new("tests/fixtures/golden").join(collector);
    let mut cases = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for input in entries
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
    {
        let (got, openmetrics) = produce(&std::fs::read(input).unwrap());
        crate::prometheus3::check_golden(input, &got, &openmetrics);
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
        cases += 1;
    }
    assert!(
        cases >= 4,
        "{collector}: the simulator's shape and at least three variants"
    );
}

#[test]
fn delivery_account_bodies_render_exactly_as_their_golden_files() {
    let spec = spec_from("  delivery_account:\n    interval: 60s\n    accounts: [1004]\n");
    check_dir("delivery_account", |body| render(&spec, one(body)));
}

#[test]
fn tracemail_dashboard_bodies_render_exactly_as_their_golden_files() {
    let spec = spec_from("  tracemail_dashboard:\n    interval: 60s\n");
    check_dir("tracemail_dashboard", |body| render(&spec, one(body)));
}

#[test]
fn tracemail_daily_bodies_render_exactly_as_their_golden_files() {
    let spec = spec_from("  tracemail_daily:\n    top_domains: 2\n    accounts: [1001]\n");
    check_dir("tracemail_daily", |body| {
        // Both answers in one file: each is written back to bytes and read on its own.
        let body: serde_json::Value = serde_json::from_slice(body).unwrap();
        let bytes = |key: &str| serde_json::to_vec(&body[key]).unwrap();
        render(&spec, vec![bytes("daily"), bytes("domains_rank")])
    });
}

#[test]
fn migration_bodies_render_exactly_as_their_golden_files() {
    let spec = spec_from("  migration:\n    migrations: [MG00000001]\n");
    check_dir("migration", |body| render(&spec, one(body)));
}

#[test]
fn mailbox_bodies_render_exactly_as_their_golden_files() {
    let spec =
        spec_from("  mailbox:\n    mailboxes: [{domain: D000000201, mailbox: EA00000001}]\n");
    check_dir("mailbox", |body| render(&spec, one(body)));
}

#[test]
fn team_member_bodies_render_exactly_as_their_golden_files() {
    let spec = spec_from("  team_member:\n    team_members: [T000000101]\n");
    check_dir("team_member", |body| render(&spec, one(body)));
}
