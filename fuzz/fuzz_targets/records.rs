//! Fuzz target: any bytes that are JSON go through the client's bounded decoder and every
//! lenient reader of upstream records (as an envelope and as a bare record) and the real
//! snapshot -> metrics -> exposition path; nothing may panic and both formats must be
//! well-formed, finite and free of duplicates.

#![no_main]

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use mailhost_exporter::collector::tracemail_daily::DailyData;
use mailhost_exporter::collector::tracemail_dashboard::DashboardData;
use mailhost_exporter::collector::{Collector, CollectorSpec, TargetData};
use mailhost_exporter::config::Config;
use mailhost_exporter::metrics::labels::MAX_LABEL_VALUE_LEN;
use mailhost_exporter::metrics::{self, EOF, Format};
use mailhost_exporter::snapshot::Snapshot;
use mailhost_exporter::upstream::decode::aggregate;
use mailhost_exporter::upstream::model::{
    DASHBOARD_FIELDS, DeliveryAccount, Mailbox, Migration, read_daily, read_dashboard,
    read_domains_rank,
};
use mailhost_exporter::upstream::{Fields, first_resource, resources};
use serde_json::Value;

/// One target per reading of the body: the record from the envelope, the body as a record
/// (and, for the daily statistics, the golden files' two envelopes).
const CONFIG: &str = "api:
  base_url: http://127.0.0.1:1
collectors:
  delivery_account:
    accounts: [1001, 1002]
  tracemail_dashboard:
    limit: 5
    views: [{account: 1001}]
  tracemail_daily:
    top_domains: 5
    accounts: [1001, 1002, 1003, 1004]
  migration:
    migrations: [MG00000001, MG00000002]
  mailbox:
    mailboxes: [{domain: D000000001, mailbox: EA00000001}, {domain: D000000002, mailbox: EA00000002}]
";

fn specs() -> &'static [CollectorSpec] {
    static SPECS: std::sync::OnceLock<Vec<CollectorSpec>> = std::sync::OnceLock::new();
    SPECS.get_or_init(|| {
        let config = Config::parse(CONFIG, Some("t".into())).expect("the fuzz config is valid");
        CollectorSpec::from_config(&config)
    })
}

/// The body as the client decodes it, and the body itself.
fn both(bytes: &[u8], body: &Value, fields: Fields) -> [Option<Value>; 2] {
    [first_resource(bytes, fields).ok(), Some(body.clone())]
}

/// The items of a list endpoint: from the envelope, or the body when it is a list itself.
fn items(bytes: &[u8], body: &Value) -> Vec<Vec<Value>> {
    let mut out = vec![resources(bytes, Fields::All).unwrap_or_default()];
    if let Value::Array(list) = body {
        out.push(list.clone());
    }
    // The golden files of the daily collector hold both envelopes in one object.
    for key in ["daily", "domains_rank"] {
        if let Some(v) = body.get(key) {
            let inner = serde_json::to_vec(v).unwrap_or_default();
            out.push(resources(&inner, Fields::All).unwrap_or_default());
        }
    }
    out
}

fn data(spec: &CollectorSpec, bytes: &[u8], body: &Value) -> Vec<TargetData> {
    let today = jiff::civil::Date::constant(2026, 11, 22);
    let mut out = Vec::new();
    match &spec.collector {
        Collector::TracemailDashboard(cfg) => {
            for r in both(bytes, body, DASHBOARD_FIELDS).into_iter().flatten() {
                if let Ok((dashboard, _)) =
                    read_dashboard(&r, &cfg.date_format, today, cfg.limit as usize)
                {
                    out.push(TargetData::Dashboard(DashboardData {
                        dashboard,
                        day_start: 1_795_305_600.0,
                    }));
                }
            }
        }
        Collector::TracemailDaily(cfg) => {
            for list in items(bytes, body) {
                let (stats, _) = read_daily(&list, &cfg.date_format, today);
                let (domains, _) = read_domains_rank(&list, cfg.top_domains);
                out.push(TargetData::Daily(DailyData { stats, domains }));
            }
        }
        Collector::DeliveryAccount(_) => {
            for r in both(bytes, body, DeliveryAccount::FIELDS)
                .into_iter()
                .flatten()
            {
                if let Ok((a, _)) = DeliveryAccount::from_record(&r) {
                    out.push(TargetData::DeliveryAccount(a));
                }
            }
        }
        Collector::Migration(_) => {
            let decoded = aggregate(bytes).ok().flatten();
            for a in [decoded.as_ref(), Some(body)].into_iter().flatten() {
                if let Ok((m, _)) = Migration::from_aggregate(a) {
                    out.push(TargetData::Migration(m));
                }
            }
        }
        Collector::Mailbox(_) => {
            for r in both(bytes, body, Mailbox::FIELDS).into_iter().flatten() {
                if let Ok((m, _)) = Mailbox::from_record(&r) {
                    out.push(TargetData::Mailbox(m));
                }
            }
        }
    }
    out
}

/// A cheap well-formedness check: the line grammar, finite values, bounded label values, no
/// duplicate series, and for OpenMetrics exactly one `# EOF` at the end.
fn check(text: &str, format: Format) {
    let body = match format {
        Format::Classic => text,
        Format::OpenMetrics => text.strip_suffix(EOF).expect("OpenMetrics ends with # EOF"),
    };
    assert!(!body.contains("# EOF"), "a stray # EOF");
    assert!(body.is_empty() || body.ends_with('\n'));
    let mut series = HashSet::new();
    for line in body.lines() {
        if let Some(c) = line.strip_prefix("# ") {
            let keyword = c.split(' ').next().unwrap_or("");
            let allowed = match format {
                Format::Classic => ["HELP", "TYPE"].contains(&keyword),
                Format::OpenMetrics => ["HELP", "TYPE", "UNIT"].contains(&keyword),
            };
            assert!(allowed, "unexpected comment {line:?}");
            continue;
        }
        let name_end = line.find(['{', ' ']).expect("a sample has a value");
        let name = &line[..name_end];
        assert!(
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad name in {line:?}"
        );
        let mut rest = &line[name_end..];
        if let Some(labels) = rest.strip_prefix('{') {
            // Walk the label values: only \\, \" and \n escapes, no raw control characters.
            let mut chars = labels.char_indices();
            let mut in_value = false;
            let mut len = 0;
            let end = loop {
                let (i, c) = chars.next().expect("labels are closed");
                match (in_value, c) {
                    (false, '}') => break i,
                    (false, '"') => {
                        in_value = true;
                        len = 0;
                    }
                    (false, c) => assert!(
                        c.is_ascii_alphanumeric() || c == '_' || c == '=' || c == ',',
                        "bad label name in {line:?}"
                    ),
                    (true, '"') => {
                        in_value = false;
                        assert!(len <= MAX_LABEL_VALUE_LEN + 1, "long label in {line:?}");
                    }
                    (true, '\\') => {
                        let (_, e) = chars.next().expect("an escape is complete");
                        assert!(matches!(e, '\\' | '"' | 'n'), "bad escape in {line:?}");
                        len += 1;
                    }
                    (true, c) => {
                        assert!(!c.is_control(), "control character in {line:?}");
                        len += 1;
                    }
                }
            };
            rest = &labels[end + 1..];
        }
        let value = rest.strip_prefix(' ').expect("one space before the value");
        let v: f64 = value.parse().expect("the value is a float");
        assert!(v.is_finite(), "non-finite value in {line:?}");
        assert!(
            series.insert(&line[..line.len() - value.len()]),
            "duplicate series {line:?}"
        );
    }
}

fuzz_target!(|bytes: &[u8]| {
    let Ok(body) = serde_json::from_slice::<Value>(bytes) else {
        return;
    };
    let mut snapshot = Snapshot::default();
    let now = jiff::Timestamp::from_second(1_795_334_400).unwrap();
    for spec in specs() {
        let results: Vec<_> = spec
            .targets
            .iter()
            .cloned()
            .zip(data(spec, bytes, &body).into_iter().map(Ok))
            .collect();
        snapshot.apply_run(spec, results, Duration::from_millis(125), now);
    }
    let exposition = metrics::render(&Arc::new(snapshot));
    check(&exposition.classic, Format::Classic);
    let mut openmetrics = exposition.openmetrics;
    openmetrics.push_str(EOF);
    check(&openmetrics, Format::OpenMetrics);
});
