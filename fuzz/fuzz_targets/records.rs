//! Fuzz target: any bytes that are JSON go, through the one seam of the tests
//! (`mailhost_exporter::engine::replay`), into every collector's reading of its answers (the
//! client's bounded decoder and the lenient readers: the bytes as they are, wrapped in the
//! envelope, as a migration's aggregate, and the golden files' two daily answers) and the real
//! snapshot -> metrics -> exposition path; nothing may panic and both formats must be well-formed,
//! finite and free of duplicates.

#![no_main]

use std::collections::HashSet;

use libfuzzer_sys::fuzz_target;
use mailhost_exporter::engine::spec::{CollectorSpec, Target};
use mailhost_exporter::config::Config;
use mailhost_exporter::metrics::labels::MAX_LABEL_VALUE_LEN;
use mailhost_exporter::metrics::{EOF, Format};
use mailhost_exporter::engine::replay::Replay;
use serde_json::{Value, json};

/// Targets enough for every reading of the body in each collector.
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

/// The readings of one body: the bytes as they are, the body as the record of an envelope,
/// the body as a migration's aggregate.
fn readings(bytes: &[u8], body: &Value) -> [Vec<u8>; 3] {
    let wrapped = |v: Value| serde_json::to_vec(&v).unwrap_or_default();
    [
        bytes.to_vec(),
        wrapped(json!({ "resources": [body] })),
        wrapped(json!({ "aggregate": body })),
    ]
}

/// Each target of `spec` answered with one reading of the body (the next target, the next
/// reading); a target of a two-endpoint collector past the readings gets the golden files' two
/// answers when the body holds them.
fn answers(spec: &CollectorSpec, bytes: &[u8], body: &Value) -> Vec<(Target, Vec<Vec<u8>>)> {
    let readings = readings(bytes, body);
    let endpoints = spec.collector.endpoints().len();
    let split: Option<Vec<Vec<u8>>> = ["daily", "domains_rank"]
        .iter()
        .map(|k| body.get(k).and_then(|v| serde_json::to_vec(v).ok()))
        .collect();
    spec.targets
        .iter()
        .enumerate()
        .map(|(i, target)| {
            let bodies = match &split {
                Some(both) if endpoints == 2 && i >= readings.len() => both.clone(),
                _ => vec![readings[i % readings.len()].clone(); endpoints],
            };
            (target.clone(), bodies)
        })
        .collect()
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
    let mut replay = Replay::default();
    let now = jiff::Timestamp::from_second(1_795_334_400).unwrap();
    for spec in specs() {
        replay.run(spec, answers(spec, bytes, &body), now);
    }
    let exposition = replay.render();
    check(&exposition.classic, Format::Classic);
    let mut openmetrics = exposition.openmetrics;
    openmetrics.push_str(EOF);
    check(&openmetrics, Format::OpenMetrics);
});
