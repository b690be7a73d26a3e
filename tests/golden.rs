//! Golden files: an upstream body in, the exact exposition out. Each case is a pair
//! `tests/fixtures/golden/<collector>/<case>.json` and `.prom`; parse problems are listed after
//! the exposition as `# parse problem:` comments. `UPDATE_GOLDEN=1 cargo test golden` rewrites
//! the `.prom` files; review the diff before committing it. Bodies go through the client's
//! bounded decoder (from their bytes, with each call's field set), as a real answer does.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use mailhost_exporter::collector::tracemail_daily::DailyData;
use mailhost_exporter::collector::tracemail_dashboard::DashboardData;
use mailhost_exporter::collector::{Collector, CollectorSpec, TargetData};
use mailhost_exporter::config::{Config, DeliveryAccountConfig, Schedule};
use mailhost_exporter::metrics;
use mailhost_exporter::snapshot::Snapshot;
use mailhost_exporter::tenant::TenantName;
use mailhost_exporter::upstream::decode::aggregate;
use mailhost_exporter::upstream::model::{
    DASHBOARD_FIELDS, DeliveryAccount, Mailbox, Migration, ParseProblem, read_daily,
    read_dashboard, read_domains_rank,
};
use mailhost_exporter::upstream::{Fields, first_resource, resources};

/// The fixed moment every golden run happens at: 2026-11-22T08:00:00Z.
const NOW: i64 = 1_795_334_400;

fn schedule() -> Schedule {
    Schedule {
        interval: Duration::from_secs(60),
        deadline: Duration::from_secs(48),
        max_age: Duration::from_secs(180),
    }
}

fn render(spec: &CollectorSpec, data: TargetData, problems: &[ParseProblem]) -> String {
    let mut snapshot = Snapshot::default();
    let target = spec.targets[0].clone();
    let now = Timestamp::from_second(NOW).unwrap();
    snapshot.apply_run(
        spec,
        vec![(target, Ok(data))],
        Duration::from_millis(125),
        now,
    );
    let mut out = metrics::render(&Arc::new(snapshot)).classic;
    for p in problems {
        out.push_str(&format!("# parse problem: {} ({})\n", p.path, p.found));
    }
    out
}

fn check_dir(collector: &str, produce: impl Fn(&[u8]) -> String) {
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
        let got = produce(&std::fs::read(input).unwrap());
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
    let spec = CollectorSpec::new(
        TenantName::default(),
        Collector::DeliveryAccount(Arc::new(DeliveryAccountConfig {
            schedule: schedule(),
            accounts: vec![1004],
        })),
    );
    check_dir("delivery_account", |body| {
        let record = first_resource(body, DeliveryAccount::FIELDS).unwrap();
        let (account, problems) = DeliveryAccount::from_record(&record).unwrap();
        render(&spec, TargetData::DeliveryAccount(account), &problems)
    });
}

/// The spec of one collector from a config holding just it, with one target.
fn spec_from(collector_yaml: &str) -> CollectorSpec {
    let yaml = format!("api:\n  base_url: http://127.0.0.1:1\ncollectors:\n{collector_yaml}");
    let config = Config::parse(&yaml, Some("t".into())).unwrap();
    let mut spec = CollectorSpec::from_config(&config).remove(0);
    spec.targets.truncate(1);
    spec
}

fn today() -> jiff::civil::Date {
    jiff::civil::Date::constant(2026, 11, 22)
}

#[test]
fn tracemail_dashboard_bodies_render_exactly_as_their_golden_files() {
    let spec = spec_from("  tracemail_dashboard:\n    interval: 60s\n");
    let Collector::TracemailDashboard(cfg) = spec.collector.clone() else {
        panic!("the config holds a dashboard collector")
    };
    check_dir("tracemail_dashboard", |body| {
        let record = first_resource(body, DASHBOARD_FIELDS).unwrap();
        let (dashboard, problems) =
            read_dashboard(&record, &cfg.date_format, today(), cfg.limit as usize).unwrap();
        let data = DashboardData {
            dashboard,
            day_start: 1_795_305_600.0,
        };
        render(&spec, TargetData::Dashboard(data), &problems)
    });
}

#[test]
fn tracemail_daily_bodies_render_exactly_as_their_golden_files() {
    let spec = spec_from("  tracemail_daily:\n    top_domains: 2\n    accounts: [1001]\n");
    let Collector::TracemailDaily(cfg) = spec.collector.clone() else {
        panic!("the config holds a daily collector")
    };
    check_dir("tracemail_daily", |body| {
        // Both answers in one file: each is written back to bytes and decoded on its own.
        let body: serde_json::Value = serde_json::from_slice(body).unwrap();
        let bytes = |key: &str| serde_json::to_vec(&body[key]).unwrap();
        let days = resources(&bytes("daily"), Fields::All).unwrap();
        let ranks = resources(&bytes("domains_rank"), Fields::All).unwrap();
        let (stats, mut problems) = read_daily(&days, &cfg.date_format, today());
        let (domains, more) = read_domains_rank(&ranks, cfg.top_domains);
        problems.extend(more);
        render(
            &spec,
            TargetData::Daily(DailyData {
                stats,
                domains,
                today: today(),
                counters: None,
            }),
            &problems,
        )
    });
}

#[test]
fn migration_bodies_render_exactly_as_their_golden_files() {
    let spec = spec_from("  migration:\n    migrations: [MG00000001]\n");
    check_dir("migration", |body| {
        let aggregate = aggregate(body).unwrap().unwrap();
        let (m, problems) = Migration::from_aggregate(&aggregate).unwrap();
        render(&spec, TargetData::Migration(m), &problems)
    });
}

#[test]
fn mailbox_bodies_render_exactly_as_their_golden_files() {
    let spec =
        spec_from("  mailbox:\n    mailboxes: [{domain: D000000201, mailbox: EA00000001}]\n");
    check_dir("mailbox", |body| {
        let record = first_resource(body, Mailbox::FIELDS).unwrap();
        let (m, problems) = Mailbox::from_record(&record).unwrap();
        render(&spec, TargetData::Mailbox(m), &problems)
    });
}
