//! Hostile input: arbitrary JSON, shaped like the upstream records, goes through every lenient
//! reader and the real snapshot -> metrics -> exposition path; the readers must not panic and
//! what is rendered must be valid exposition in both formats, finite, bounded and without
//! duplicate series. Bodies are written to bytes and go through the client's bounded decoder,
//! as a real answer does. The fuzz target in `fuzz/` does the same from raw bytes.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use mailhost_exporter::collector::tracemail_daily::DailyData;
use mailhost_exporter::collector::tracemail_dashboard::DashboardData;
use mailhost_exporter::collector::{Collector, CollectorSpec, Target, TargetData};
use mailhost_exporter::config::Config;
use mailhost_exporter::metrics::labels::MAX_LABEL_VALUE_LEN;
use mailhost_exporter::metrics::{self, EOF, Format};
use mailhost_exporter::snapshot::Snapshot;
use mailhost_exporter::telemetry::Telemetry;
use mailhost_exporter::tenant::TenantName;
use mailhost_exporter::upstream::decode::aggregate;
use mailhost_exporter::upstream::error::UpstreamError;
use mailhost_exporter::upstream::error::{Endpoint, FailureReason};
use mailhost_exporter::upstream::model::{
    DASHBOARD_FIELDS, DeliveryAccount, Mailbox, Migration, read_daily, read_dashboard,
    read_domains_rank,
};
use mailhost_exporter::upstream::{Fields, first_resource, resources};
use proptest::prelude::*;
use proptest::strategy::ValueTree as _;
use proptest::test_runner::TestRunner;
use serde_json::{Map, Number, Value, json};

use crate::helpers::{promtool, promtool_check_metrics};

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

// ---------------------------------------------------------------------------------------------
// Arbitrary JSON, biased towards the names and shapes the readers look for.

/// Field names of every record type (and of the shapes nested in them), so that generated
/// objects make the readers take their branches rather than ignore everything.
const FIELDS: &[&str] = &[
    // Delivery account.
    "remaining_messages",
    "plan_messages_limit",
    "plan_messages_used",
    "messages_sent",
    "extra_messages_total",
    "remaining_extra_messages_bought",
    "status",
    "domains_count",
    "domains",
    "ignore_suppression_list",
    "plan_expiration_date",
    "next_renewal_date",
    "last_renewal_date",
    "username",
    "plan",
    "type",
    "status_detail",
    // Dashboard and daily statistics.
    "daily_activity",
    "overview",
    "status_groups",
    "top_accounts_by_delivery_account",
    "top5_by_delivery_account",
    "date",
    "day",
    "start_date",
    "end_date",
    "statuses",
    "counts",
    "by_status",
    "stats",
    "outcomes",
    "group",
    "name",
    "key",
    "label",
    "count",
    "total",
    "value",
    "messages",
    "n",
    "account_id",
    "delivery_account_id",
    "account",
    "id",
    "delivered",
    "bounced",
    "deferred",
    "failed",
    "Delivered",
    "domain",
    "domain_name",
    // Migration aggregate.
    "state",
    "accounts",
    "migrated",
    "messages_total",
    "messages_migrated",
    "total_messages",
    "migrated_messages",
    "bytes",
    "size",
    "bytes_total",
    "bytes_migrated",
    "total_bytes",
    "migrated_bytes",
    "errors",
    "error_count",
    "started_at",
    "updated_at",
    "last_update",
    "finished_at",
    "completed",
    "pending",
    "throughput",
    // Mailbox.
    "quota",
    "quota_human",
    "max_email_quota",
    "vault_quota",
    "vault_quota_human",
    "vault_messages",
    "outbound_limit",
    "outbound_limit_status",
    "reset_outbound_limit_time",
    "lastauth",
    "lastauth_datetime",
    "archive",
    "archive_status",
    "password_expired",
    "email_address",
    // Envelope.
    "resources",
    "pagination",
    "aggregate",
];

/// Keys that are not field names but still mean something to a reader: dates keyed days,
/// account ids keyed top lists, names that collide once sanitised.
const ODD_KEYS: &[&str] = &[
    "",
    " ",
    "Odd Key",
    "odd_key",
    "a.b",
    "!!!",
    "???",
    "2026-11-22",
    "2026-11-21",
    "22/11/2026",
    "1001",
    "01001",
    "1001.0",
    "2147483648",
    "-5",
    "Ünïcødé",
    "🦀",
    "\"",
    "\\",
    "\n",
];

/// Strings that readers might take for numbers, dates, sizes, booleans or label values.
const STRINGS: &[&str] = &[
    "",
    " ",
    "0",
    "-0",
    "1",
    " 42 ",
    "1001",
    "2147483647",
    "1e999",
    "-1e999",
    "1e308",
    "-1e308",
    "1.7976931348623157e308",
    "5e-324",
    "NaN",
    "nan",
    "inf",
    "-inf",
    "+Inf",
    "Infinity",
    "0x10",
    "1,5",
    "1.20 GB",
    "812 MB",
    "512K",
    "100 B",
    "3.1 GB",
    "0 B",
    "1,5 GiB",
    "99999999999999999999999999999999999 TB",
    "2026-11-22",
    "2026-11-21",
    "22/11/2026",
    "2026-11-22T00:00:00+01:00",
    "2026-11-22 08:00:00",
    "2026-11-22T08:00:00Z",
    "9999-12-31T23:59:59Z",
    "-009999-01-01",
    "1795334400",
    "1795334400000",
    "true",
    "false",
    "yes",
    "no",
    "\"",
    "\\",
    "\n",
    "a\"b\\c\nd",
    "\\n",
    "é ü 漢字 🦀",
    "\u{0}",
    "\u{7f}",
    "\r\n",
    "\t",
    "\u{2028}",
    "…",
    "delivered",
    "bounced",
    "Delivered",
    "soft-bounce (4xx)",
    "other",
    "active",
    "activating",
    "deactivating",
    "disabled",
    "running",
    "shop.example",
    "SHOP.Example",
    "-",
    "..",
];

/// Numbers at the edges: zero of both signs, the largest and smallest, epochs in seconds and
/// milliseconds, int32 limits, and the first integers an f64 cannot hold exactly.
const NUMBERS: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    -0.25,
    1e15,
    1e16,
    9_007_199_254_740_993.0,
    1e300,
    1e303,
    1e308,
    f64::MAX,
    f64::MIN,
    f64::MIN_POSITIVE,
    5e-324,
    1_795_334_400.0,
    1_795_334_400_000.0,
    1001.0,
    2_147_483_647.0,
    2_147_483_648.0,
    -2_147_483_648.0,
];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::sample::select(FIELDS).prop_map(str::to_owned),
        2 => prop::sample::select(ODD_KEYS).prop_map(str::to_owned),
        1 => "[a-zA-Z_ .-]{1,12}",
        1 => ".{0,8}",
    ]
}

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => (0u64..3000).prop_map(Value::from),
        3 => prop::sample::select(NUMBERS).prop_map(float),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        1 => any::<f64>().prop_map(float),
    ]
}

/// A JSON number from an f64; NaN and infinities cannot be JSON, they become null.
fn float(x: f64) -> Value {
    Number::from_f64(x).map_or(Value::Null, Value::Number)
}

fn string() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(STRINGS).prop_map(str::to_owned),
        2 => ".{0,16}",
        1 => "[0-9.,eE+ -]{1,12}",
        1 => "[0-9]{1,3}(\\.[0-9]{1,2})? ?[kKmMgGtTbB]?(i?[bB])?",
        // Longer than the label value bound, with characters the writer must escape.
        1 => "[a-z\"\\\\\n\r\té漢🦀…]{100,300}",
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        4 => number(),
        4 => string().prop_map(Value::String),
    ]
}

fn object(pairs: Vec<(String, Value)>) -> Value {
    Value::Object(pairs.into_iter().collect::<Map<String, Value>>())
}

/// Any JSON value, with objects keyed mostly by real field names and, among the containers,
/// the item shapes the readers know: a day, a `{status, count}` record, a top-list entry, a
/// domain's counts.
fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 64, 6, |inner| {
        let inner = inner.boxed();
        prop_oneof![
            2 => prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            4 => prop::collection::vec((key(), inner.clone()), 0..6).prop_map(object),
            4 => shaped(inner),
        ]
    })
}

/// The item shapes the readers know, holding `inner` values: a day, a `{status, count}`
/// record, a top-list entry, a domain's counts. Ids and domains come from small pools so that
/// repeats (and what they collide into) happen.
fn shaped(inner: BoxedStrategy<Value>) -> impl Strategy<Value = Value> {
    let day = prop::sample::select(&["2026-11-22", "2026-11-21", "22/11/2026", "2026-11-20"]);
    let name_key = prop::sample::select(&["status", "group", "name", "key", "type", "label"]);
    let count_key = prop::sample::select(&["count", "total", "value", "messages", "n"]);
    let id_key = prop::sample::select(&["account_id", "delivery_account_id", "account", "id"]);
    let domain_key = prop::sample::select(&["domain", "domain_name", "name"]);
    let ids = vec![json!(1001), json!("1001"), json!(1001.0), json!(" 1002 ")];
    let domains = &[
        "shop.example",
        "SHOP.example",
        " shop.example",
        "mail.example",
    ];
    let pairs = || prop::collection::vec((key(), inner.clone()), 0..6);
    prop_oneof![
        (day, pairs()).prop_map(|(d, mut p)| {
            p.push(("date".to_owned(), json!(d)));
            object(p)
        }),
        (name_key, string(), count_key.clone(), inner.clone())
            .prop_map(|(nk, n, ck, c)| object(vec![(nk.to_owned(), json!(n)), (ck.to_owned(), c)])),
        (
            id_key,
            prop_oneof![prop::sample::select(ids), inner.clone()],
            count_key,
            inner.clone(),
        )
            .prop_map(|(ik, id, ck, c)| object(vec![(ik.to_owned(), id), (ck.to_owned(), c)])),
        (
            domain_key,
            prop_oneof![
                prop::sample::select(domains).prop_map(str::to_owned),
                string()
            ],
            pairs(),
        )
            .prop_map(|(dk, d, mut p)| {
                p.push((dk.to_owned(), json!(d)));
                object(p)
            }),
    ]
}

/// The fields each record type is read from, so that its generated records hit them often.
const DELIVERY: &[&str] = &[
    "remaining_messages",
    "plan_messages_limit",
    "plan_messages_used",
    "messages_sent",
    "extra_messages_total",
    "remaining_extra_messages_bought",
    "status",
    "domains_count",
    "domains",
    "ignore_suppression_list",
    "plan_expiration_date",
    "next_renewal_date",
    "last_renewal_date",
    "username",
    "plan",
    "type",
    "status_detail",
];
const DASHBOARD: &[&str] = &[
    "daily_activity",
    "overview",
    "status_groups",
    "top_accounts_by_delivery_account",
    "top5_by_delivery_account",
];
const DAY: &[&str] = &[
    "date",
    "day",
    "start_date",
    "statuses",
    "counts",
    "delivered",
    "bounced",
    "Delivered",
    "domain",
    "domain_name",
    "name",
    "total",
];
const MIGRATION: &[&str] = &[
    "status",
    "state",
    "accounts",
    "messages",
    "messages_total",
    "messages_migrated",
    "bytes",
    "size",
    "bytes_total",
    "bytes_migrated",
    "errors",
    "error_count",
    "started_at",
    "updated_at",
    "Odd Key",
    "odd_key",
];
const MAILBOX: &[&str] = &[
    "quota",
    "quota_human",
    "max_email_quota",
    "vault_quota",
    "vault_quota_human",
    "messages",
    "vault_messages",
    "outbound_limit",
    "outbound_limit_status",
    "reset_outbound_limit_time",
    "lastauth",
    "lastauth_datetime",
    "archive",
    "archive_status",
    "password_expired",
    "email_address",
    "domain_name",
    "status",
];

/// A record: mostly an object keyed by `fields` (and any other key), sometimes anything.
fn record(fields: &'static [&'static str]) -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        3 => prop::sample::select(fields).prop_map(str::to_owned),
        1 => key(),
    ];
    prop_oneof![
        6 => prop::collection::vec((key, value()), 0..10).prop_map(object),
        2 => shaped(value().boxed()),
        1 => value(),
    ]
}

/// What the client receives: mostly the `{resources, pagination}` envelope around records,
/// sometimes a body of the wrong shape.
fn envelope(fields: &'static [&'static str]) -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => prop::collection::vec(record(fields), 0..4)
            .prop_map(|items| json!({"resources": items, "pagination": {}})),
        1 => value().prop_map(|v| json!({"resources": v})),
        1 => value(),
    ]
}

/// A migration stats body: mostly `{aggregate: {...}}`.
fn stats_body() -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => record(MIGRATION).prop_map(|a| json!({"aggregate": a})),
        1 => value(),
    ]
}

// ---------------------------------------------------------------------------------------------
// From a body to exposition, as the collectors and the scraper do it.

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

/// The five collectors, each with `n` targets (the dashboard: all, an account, a domain).
struct Specs {
    delivery: CollectorSpec,
    dashboard: CollectorSpec,
    daily: CollectorSpec,
    migration: CollectorSpec,
    mailbox: CollectorSpec,
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
        }
    }
}

fn today() -> jiff::civil::Date {
    jiff::civil::Date::constant(2026, 11, 22)
}

type Outcome = Result<TargetData, UpstreamError>;

fn decode(what: &str) -> UpstreamError {
    UpstreamError::new(
        FailureReason::Decode,
        format!("{what} is not a JSON object"),
    )
}

/// The body as the upstream sends it.
fn bytes(body: &Value) -> Vec<u8> {
    serde_json::to_vec(body).unwrap()
}

fn delivery_account(body: Value) -> Outcome {
    let record = first_resource(&bytes(&body), DeliveryAccount::FIELDS)?;
    let (account, _) = DeliveryAccount::from_record(&record).map_err(|_| decode("account"))?;
    Ok(TargetData::DeliveryAccount(account))
}

fn dashboard(spec: &CollectorSpec, body: Value) -> Outcome {
    let Collector::TracemailDashboard(cfg) = &spec.collector else {
        panic!("a dashboard spec")
    };
    let record = first_resource(&bytes(&body), DASHBOARD_FIELDS)?;
    let (dashboard, _) = read_dashboard(&record, &cfg.date_format, today(), cfg.limit as usize)
        .map_err(|_| decode("dashboard"))?;
    Ok(TargetData::Dashboard(DashboardData {
        dashboard,
        day_start: 1_795_305_600.0,
    }))
}

fn daily(spec: &CollectorSpec, days: Value, ranks: Value) -> Outcome {
    let Collector::TracemailDaily(cfg) = &spec.collector else {
        panic!("a daily spec")
    };
    let days = resources(&bytes(&days), Fields::All)?;
    let ranks = resources(&bytes(&ranks), Fields::All)?;
    let (stats, _) = read_daily(&days, &cfg.date_format, today());
    let (domains, _) = read_domains_rank(&ranks, cfg.top_domains);
    Ok(TargetData::Daily(DailyData {
        stats,
        domains,
        today: today(),
        counters: None,
    }))
}

/// As the client does: the `aggregate` member, which must be an object.
fn migration(body: Value) -> Outcome {
    let aggregate = aggregate(&bytes(&body))?.ok_or_else(|| decode("aggregate"))?;
    let (m, _) = Migration::from_aggregate(&aggregate).map_err(|_| decode("aggregate"))?;
    Ok(TargetData::Migration(m))
}

fn mailbox(body: Value) -> Outcome {
    let record = first_resource(&bytes(&body), Mailbox::FIELDS)?;
    let (m, _) = Mailbox::from_record(&record).map_err(|_| decode("email account"))?;
    Ok(TargetData::Mailbox(m))
}

/// Applies one run per collector (outcomes in target order) and renders both formats; the
/// OpenMetrics text gets its `# EOF` as the web layer adds it.
fn render(runs: &[(&CollectorSpec, Vec<Outcome>)]) -> (String, String) {
    let mut snapshot = Snapshot::default();
    let now = Timestamp::from_second(NOW).unwrap();
    for (spec, outcomes) in runs {
        let results: Vec<(Target, Outcome)> =
            spec.targets.iter().cloned().zip(outcomes.clone()).collect();
        snapshot.apply_run(spec, results, Duration::from_millis(125), now);
    }
    let exposition = metrics::render(&Arc::new(snapshot));
    let mut openmetrics = exposition.openmetrics;
    openmetrics.push_str(EOF);
    (exposition.classic, openmetrics)
}

// ---------------------------------------------------------------------------------------------
// A validating parser of what we write: both formats' line grammar, plus our own promises.

#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    /// Unescaped label values, in written order.
    labels: Vec<(String, String)>,
    value: f64,
}

fn is_metric_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with("__")
}

fn parse_value(s: &str) -> Result<f64, String> {
    match s {
        "NaN" => return Ok(f64::NAN),
        "+Inf" => return Ok(f64::INFINITY),
        "-Inf" => return Ok(f64::NEG_INFINITY),
        _ => {}
    }
    // Digits, one optional sign, point and exponent: what Go's ParseFloat and Rust agree on.
    let ok = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
        && s.chars().any(|c| c.is_ascii_digit());
    if !ok {
        return Err(format!("value {s:?} is not a float"));
    }
    s.parse::<f64>()
        .map_err(|e| format!("value {s:?} is not a float: {e}"))
}

/// Unescapes HELP text; `quote` says whether `\"` is an escape (OpenMetrics) or not (classic).
fn check_help(text: &str, quote: bool) -> Result<(), String> {
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('\\' | 'n') => {}
                Some('"') if quote => {}
                other => return Err(format!("bad escape \\{other:?} in HELP {text:?}")),
            }
        }
    }
    Ok(())
}

/// Parses `name{l="v",...} value` and returns the sample.
fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(['{', ' '])
        .ok_or_else(|| format!("no value on {line:?}"))?;
    let name = &line[..name_end];
    if !is_metric_name(name) {
        return Err(format!("bad metric name {name:?}"));
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        rest = after;
        loop {
            if let Some(after) = rest.strip_prefix('}') {
                rest = after;
                break;
            }
            if !labels.is_empty() {
                rest = rest
                    .strip_prefix(',')
                    .ok_or_else(|| format!("labels not separated by ',' on {line:?}"))?;
            }
            let eq = rest
                .find('=')
                .ok_or_else(|| format!("label without '=' on {line:?}"))?;
            let label = &rest[..eq];
            if !is_label_name(label) {
                return Err(format!("bad label name {label:?} on {line:?}"));
            }
            rest = rest[eq + 1..]
                .strip_prefix('"')
                .ok_or_else(|| format!("label value not quoted on {line:?}"))?;
            let mut value = String::new();
            let mut chars = rest.char_indices();
            let end = loop {
                let (i, c) = chars
                    .next()
                    .ok_or_else(|| format!("unterminated label value on {line:?}"))?;
                match c {
                    '"' => break i,
                    '\\' => match chars.next() {
                        Some((_, '\\')) => value.push('\\'),
                        Some((_, '"')) => value.push('"'),
                        Some((_, 'n')) => value.push('\n'),
                        other => {
                            return Err(format!("bad escape {other:?} in label value on {line:?}"));
                        }
                    },
                    c if c.is_control() => {
                        return Err(format!("raw control character {c:?} on {line:?}"));
                    }
                    c => value.push(c),
                }
            };
            rest = &rest[end + 1..];
            if labels.iter().any(|(l, _): &(String, String)| l == label) {
                return Err(format!("label {label} twice on {line:?}"));
            }
            labels.push((label.to_owned(), value));
        }
    }
    let value = rest
        .strip_prefix(' ')
        .ok_or_else(|| format!("no single space before the value on {line:?}"))?;
    if value.contains(' ') {
        return Err(format!("more than a value after the labels on {line:?}"));
    }
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value: parse_value(value)?,
    })
}

/// The sample names a family declared as `declared` with `kind` may have.
fn belongs(sample: &str, declared: &str, kind: &str, format: Format) -> bool {
    match (kind, format) {
        ("counter", Format::OpenMetrics) => {
            sample == format!("{declared}_total") || sample == format!("{declared}_created")
        }
        ("histogram", _) => ["_bucket", "_sum", "_count"]
            .iter()
            .any(|s| sample == format!("{declared}{s}")),
        _ => sample == declared,
    }
}

/// Checks the whole text and returns its samples.
fn parse_exposition(text: &str, format: Format) -> Result<Vec<Sample>, String> {
    let body = match format {
        Format::Classic => {
            if text.contains("# EOF") {
                return Err("classic text has an # EOF".into());
            }
            text
        }
        Format::OpenMetrics => {
            let body = text
                .strip_suffix(EOF)
                .ok_or("OpenMetrics text does not end with # EOF")?;
            if body.contains("# EOF") {
                return Err("more than one # EOF".into());
            }
            body
        }
    };
    if !body.is_empty() && !body.ends_with('\n') {
        return Err("the text does not end with a newline".into());
    }
    let types: &[&str] = match format {
        Format::Classic => &["counter", "gauge", "histogram", "summary", "untyped"],
        Format::OpenMetrics => &[
            "counter",
            "gauge",
            "histogram",
            "gaugehistogram",
            "stateset",
            "info",
            "summary",
            "unknown",
        ],
    };
    let mut declared: HashSet<String> = HashSet::new();
    // The family being written: name, whether HELP was seen, its type once TYPE was seen.
    let mut family: Option<(String, Option<String>)> = None;
    let mut series: HashSet<(String, Vec<(String, String)>)> = HashSet::new();
    let mut samples = Vec::new();
    for line in body.lines() {
        if let Some(comment) = line.strip_prefix("# ") {
            let (keyword, rest) = comment
                .split_once(' ')
                .ok_or(format!("bad comment {line:?}"))?;
            let (name, text) = rest
                .split_once(' ')
                .ok_or(format!("bad comment {line:?}"))?;
            if !is_metric_name(name) {
                return Err(format!("bad metric name in {line:?}"));
            }
            match keyword {
                "HELP" => {
                    if !declared.insert(name.to_owned()) {
                        return Err(format!("family {name} declared twice"));
                    }
                    check_help(text, format == Format::OpenMetrics)?;
                    family = Some((name.to_owned(), None));
                }
                "TYPE" => {
                    let Some((current, kind @ None)) = &mut family else {
                        return Err(format!("TYPE without its HELP, or twice: {line:?}"));
                    };
                    if current != name || !types.contains(&text) {
                        return Err(format!("bad TYPE {line:?}"));
                    }
                    *kind = Some(text.to_owned());
                }
                "UNIT" if format == Format::OpenMetrics => {
                    let ok = matches!(&family, Some((current, Some(_))) if current == name)
                        && !text.is_empty()
                        && name.ends_with(&format!("_{text}"));
                    if !ok {
                        return Err(format!("bad UNIT {line:?}"));
                    }
                }
                _ => return Err(format!("unexpected comment {line:?}")),
            }
            continue;
        }
        let sample = parse_sample(line)?;
        let Some((current, Some(kind))) = &family else {
            return Err(format!("sample before its HELP and TYPE: {line:?}"));
        };
        if !belongs(&sample.name, current, kind, format) {
            return Err(format!("sample {line:?} outside its family {current}"));
        }
        let mut key = sample.labels.clone();
        key.sort();
        if !series.insert((sample.name.clone(), key)) {
            return Err(format!("duplicate series {line:?}"));
        }
        samples.push(sample);
    }
    Ok(samples)
}

/// Valid exposition in both formats, the same samples in each, every value finite and every
/// label value within the bound.
fn check(classic: &str, openmetrics: &str) -> Result<(), TestCaseError> {
    let c = parse_exposition(classic, Format::Classic)
        .map_err(|e| TestCaseError::fail(format!("classic: {e}\n{classic}")))?;
    let o = parse_exposition(openmetrics, Format::OpenMetrics)
        .map_err(|e| TestCaseError::fail(format!("OpenMetrics: {e}\n{openmetrics}")))?;
    // A counter's `_created` sample has no classic form; every other sample is in both.
    let o: Vec<_> = o
        .into_iter()
        .filter(|s| !s.name.ends_with("_created"))
        .collect();
    prop_assert!(c == o, "the formats carry different samples");
    for s in &c {
        // Readers drop non-finite numbers, so nothing here may be NaN or infinite.
        prop_assert!(
            s.value.is_finite(),
            "non-finite value in {} {:?}: {}\n{classic}",
            s.name,
            s.labels,
            s.value
        );
        for (label, v) in &s.labels {
            let n = v.chars().count();
            prop_assert!(
                n <= MAX_LABEL_VALUE_LEN || (n == MAX_LABEL_VALUE_LEN + 1 && v.ends_with('…')),
                "label {label} of {} is {n} characters long",
                s.name
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The properties.

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_body_is_unwrapped_from_its_envelope_without_panicking(body in value()) {
        let all = resources(&bytes(&body), Fields::All);
        let first = first_resource(&bytes(&body), Fields::All);
        match (all, first) {
            (Ok(items), Ok(r)) => prop_assert_eq!(&items[0], &r),
            (Ok(items), Err(e)) => {
                prop_assert!(items.is_empty());
                prop_assert_eq!(e.reason, FailureReason::Decode);
            }
            (Err(a), Err(b)) => {
                prop_assert_eq!(a.reason, FailureReason::Decode);
                prop_assert_eq!(b.reason, FailureReason::Decode);
            }
            (Err(_), Ok(_)) => prop_assert!(false, "first_resource read what resources refused"),
        }
    }

    #[test]
    fn any_delivery_account_body_renders_as_valid_finite_exposition(
        bodies in prop::collection::vec(envelope(DELIVERY), 1..=3),
    ) {
        let specs = Specs::new(3);
        let outcomes = bodies.into_iter().map(delivery_account).collect();
        let (classic, openmetrics) = render(&[(&specs.delivery, outcomes)]);
        check(&classic, &openmetrics)?;
    }

    #[test]
    fn any_dashboard_body_renders_as_valid_finite_exposition(
        bodies in prop::collection::vec(envelope(DASHBOARD), 1..=3),
    ) {
        let specs = Specs::new(3);
        let outcomes = bodies.into_iter().map(|b| dashboard(&specs.dashboard, b)).collect();
        let (classic, openmetrics) = render(&[(&specs.dashboard, outcomes)]);
        check(&classic, &openmetrics)?;
    }

    #[test]
    fn any_daily_and_domains_rank_bodies_render_as_valid_finite_exposition(
        bodies in prop::collection::vec((envelope(DAY), envelope(DAY)), 1..=3),
    ) {
        let specs = Specs::new(3);
        let outcomes = bodies
            .into_iter()
            .map(|(days, ranks)| daily(&specs.daily, days, ranks))
            .collect();
        let (classic, openmetrics) = render(&[(&specs.daily, outcomes)]);
        check(&classic, &openmetrics)?;
    }

    #[test]
    fn any_migration_stats_body_renders_as_valid_finite_exposition(
        bodies in prop::collection::vec(stats_body(), 1..=3),
    ) {
        let specs = Specs::new(3);
        let outcomes = bodies.into_iter().map(migration).collect();
        let (classic, openmetrics) = render(&[(&specs.migration, outcomes)]);
        check(&classic, &openmetrics)?;
    }

    #[test]
    fn any_email_account_body_renders_as_valid_finite_exposition(
        bodies in prop::collection::vec(envelope(MAILBOX), 1..=3),
    ) {
        let specs = Specs::new(3);
        let outcomes = bodies.into_iter().map(mailbox).collect();
        let (classic, openmetrics) = render(&[(&specs.mailbox, outcomes)]);
        check(&classic, &openmetrics)?;
    }
}

/// Bodies for every collector's targets, for one exposition holding them all.
#[derive(Debug, Clone)]
struct Batch {
    delivery: Vec<Value>,
    dashboard: Vec<Value>,
    daily: Vec<(Value, Value)>,
    migration: Vec<Value>,
    mailbox: Vec<Value>,
}

fn batch(n: usize) -> impl Strategy<Value = Batch> {
    let vec = |s| prop::collection::vec(s, n);
    (
        vec(envelope(DELIVERY).boxed()),
        prop::collection::vec(envelope(DASHBOARD), 3),
        prop::collection::vec((envelope(DAY), envelope(DAY)), n),
        vec(stats_body().boxed()),
        vec(envelope(MAILBOX).boxed()),
    )
        .prop_map(|(delivery, dashboard, daily, migration, mailbox)| Batch {
            delivery,
            dashboard,
            daily,
            migration,
            mailbox,
        })
}

fn render_batch(specs: &Specs, b: Batch) -> (String, String) {
    render(&[
        (
            &specs.delivery,
            b.delivery.into_iter().map(delivery_account).collect(),
        ),
        (
            &specs.dashboard,
            b.dashboard
                .into_iter()
                .map(|x| dashboard(&specs.dashboard, x))
                .collect(),
        ),
        (
            &specs.daily,
            b.daily
                .into_iter()
                .map(|(d, r)| daily(&specs.daily, d, r))
                .collect(),
        ),
        (
            &specs.migration,
            b.migration.into_iter().map(migration).collect(),
        ),
        (&specs.mailbox, b.mailbox.into_iter().map(mailbox).collect()),
    ])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..config() })]

    #[test]
    fn every_collector_in_one_snapshot_renders_as_valid_finite_exposition(b in batch(4)) {
        let specs = Specs::new(4);
        let (classic, openmetrics) = render_batch(&specs, b);
        check(&classic, &openmetrics)?;
    }
}

// ---------------------------------------------------------------------------------------------
// Self-metrics: counters, a histogram and gauges, rendered from the same model in both formats.

const ENDPOINTS: [Endpoint; 6] = [
    Endpoint::DeliveryAccount,
    Endpoint::TracemailDashboard,
    Endpoint::TracemailDaily,
    Endpoint::TracemailDomainsRank,
    Endpoint::MigrationStats,
    Endpoint::EmailAccount,
];

/// One thing the exporter accounts for.
#[derive(Clone, Debug)]
enum Event {
    Request(Endpoint, Option<u16>, Duration),
    Failure(Endpoint, FailureReason),
    Retry(Endpoint, FailureReason),
    OpenCircuits(Endpoint, usize),
    ParseProblem(Endpoint, String),
    Reload(bool),
}

fn event() -> impl Strategy<Value = Event> {
    let endpoint = prop::sample::select(&ENDPOINTS[..]);
    let reason = prop::sample::select(&FailureReason::ALL[..]);
    prop_oneof![
        (
            endpoint.clone(),
            prop::option::of(100u16..600),
            (0u64..30_000).prop_map(Duration::from_millis)
        )
            .prop_map(|(e, c, d)| Event::Request(e, c, d)),
        (endpoint.clone(), reason.clone()).prop_map(|(e, r)| Event::Failure(e, r)),
        (endpoint.clone(), reason).prop_map(|(e, r)| Event::Retry(e, r)),
        (endpoint.clone(), 0usize..50).prop_map(|(e, n)| Event::OpenCircuits(e, n)),
        (endpoint, "[a-z_.\\[\\]0-9]{0,20}").prop_map(|(e, p)| Event::ParseProblem(e, p)),
        any::<bool>().prop_map(Event::Reload),
    ]
}

/// The self-metrics after `events`, in both formats as a scrape ends them.
fn render_self(events: &[Event]) -> (String, String) {
    let t = Telemetry::new(&ENDPOINTS[..2]);
    for e in events.iter().cloned() {
        match e {
            Event::Request(e, code, d) => t.observe_request(e, code, d),
            Event::Failure(e, r) => t.observe_failure(&TenantName::default(), e, r),
            Event::Retry(e, r) => t.observe_retry(&TenantName::default(), e, r),
            Event::OpenCircuits(e, n) => t.set_open_circuits(&TenantName::default(), e, n),
            Event::ParseProblem(e, path) => t.parse_problem(e, &path, "string"),
            Event::Reload(ok) => t.observe_reload(ok),
        }
    }
    (
        t.metrics().render(Format::Classic),
        t.metrics().render(Format::OpenMetrics),
    )
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_self_metrics_carry_the_same_samples_in_both_formats(
        events in prop::collection::vec(event(), 0..40)
    ) {
        let (classic, openmetrics) = render_self(&events);
        check(&classic, &openmetrics)?;
        let counters = classic.lines().filter(|l| l.starts_with("# TYPE ") && l.ends_with(" counter"));
        for line in counters {
            prop_assert!(line.split(' ').nth(2).is_some_and(|n| n.ends_with("_total")), "{line}");
        }
    }
}

/// Samples of a strategy from a fixed seed, so that a promtool complaint can be replayed.
fn samples<S: Strategy>(strategy: S, n: usize) -> Vec<S::Value> {
    let mut runner = TestRunner::deterministic();
    (0..n)
        .map(|_| strategy.new_tree(&mut runner).unwrap().current())
        .collect()
}

#[test]
fn promtool_accepts_the_exposition_of_hundreds_of_generated_bodies() {
    let Some(promtool) = promtool() else { return };
    // 16 expositions of 20 targets per collector: 320 bodies per collector, 16 promtool runs.
    let per = 20;
    let specs = Specs::new(per);
    let mut failures = Vec::new();
    for (i, b) in samples(batch(per), 16).into_iter().enumerate() {
        let (classic, _) = render_batch(&specs, b);
        // promtool lints names and help too, not only syntax: any remark is a failure.
        if let Err(report) = promtool_check_metrics(promtool, &classic) {
            failures.push(format!("batch {i}: {report}"));
        }
    }
    for (i, events) in samples(prop::collection::vec(event(), 0..60), 4)
        .into_iter()
        .enumerate()
    {
        let (classic, _) = render_self(&events);
        if let Err(report) = promtool_check_metrics(promtool, &classic) {
            failures.push(format!("self-metrics {i}: {report}"));
        }
    }
    assert!(
        failures.is_empty(),
        "promtool check metrics:\n{}",
        failures.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// The parser itself must refuse what is not valid, or the properties prove nothing.

#[test]
fn the_validating_parser_refuses_broken_exposition() {
    let head = "# HELP m Help.\n# TYPE m gauge\n";
    for (bad, why) in [
        ("m 1\n", "sample before HELP"),
        ("# HELP m Help.\n# TYPE m gauge\nm 1\nm 2\n", "duplicate"),
        (
            "# HELP m Help.\n# TYPE m gauge\nm{a=\"1\",b=\"2\"} 1\nm{b=\"2\",a=\"1\"} 1\n",
            "duplicate in another label order",
        ),
        (
            "# HELP m Help.\n# TYPE m gauge\nn 1\n",
            "outside its family",
        ),
        (
            "# HELP m Help.\n# TYPE m gauge\nm{a=\"\\t\"} 1\n",
            "bad escape",
        ),
        (
            "# HELP m Help.\n# TYPE m gauge\nm{a=\"x} 1\n",
            "unterminated",
        ),
        (
            "# HELP m Help.\n# TYPE m gauge\nm{1a=\"x\"} 1\n",
            "label name",
        ),
        (
            "# HELP m Help.\n# TYPE m gauge\nm{a=\"x\",a=\"y\"} 1\n",
            "label twice",
        ),
        ("# HELP m Help.\n# TYPE m gauge\nm one\n", "value"),
        ("# HELP m Help.\n# TYPE m gauge\nm 1 2 3\n", "extra"),
        (
            "# HELP m Help.\n# TYPE m gauge\n# UNIT m seconds\nm 1\n",
            "UNIT in classic",
        ),
        (
            "# HELP m Help.\n# TYPE m gauge\nm 1\n# EOF\n",
            "EOF in classic",
        ),
        ("# HELP m Help.\n# TYPE m wobbly\nm 1\n", "type"),
        ("# HELP 1m Help.\n# TYPE 1m gauge\n1m 1\n", "metric name"),
        ("# HELP m He\\lp.\n# TYPE m gauge\nm 1\n", "HELP escape"),
        ("# HELP m Help.\n# TYPE m gauge\nm 1", "no final newline"),
        (
            "# HELP m Help.\n# TYPE m gauge\nm 1\n# HELP m Help.\n# TYPE m gauge\n",
            "twice",
        ),
    ] {
        assert!(
            parse_exposition(bad, Format::Classic).is_err(),
            "accepted ({why}): {bad:?}"
        );
    }
    assert!(parse_exposition(&format!("{head}m 1\n"), Format::OpenMetrics).is_err());
    assert!(parse_exposition(&format!("{head}m 1\n# EOF\n# EOF\n"), Format::OpenMetrics).is_err());
    let good = "# HELP c_total Count.\n# TYPE c_total counter\nc_total{a=\"x\\\"\\\\\\n\"} 1e300\n\
                # HELP m_seconds Help \\\\ \\n.\n# TYPE m_seconds gauge\nm_seconds -0.5\nm_seconds{a=\"\"} NaN\n";
    let samples = parse_exposition(good, Format::Classic).unwrap();
    assert_eq!(
        samples[0].labels,
        vec![("a".to_owned(), "x\"\\\n".to_owned())]
    );
    let om = "# HELP c Count.\n# TYPE c counter\nc_total 1\n\
              # HELP m_seconds Help \\\".\n# TYPE m_seconds gauge\n# UNIT m_seconds seconds\nm_seconds 2\n# EOF\n";
    assert_eq!(parse_exposition(om, Format::OpenMetrics).unwrap().len(), 2);
}

// ---------------------------------------------------------------------------------------------
// Findings of the properties, kept as plain tests: each asserts the correct behaviour.

/// The rendered samples of one collector run, checked.
fn rendered(spec: &CollectorSpec, outcomes: Vec<Outcome>) -> Result<(), String> {
    let (classic, openmetrics) = render(&[(spec, outcomes)]);
    check(&classic, &openmetrics).map_err(|e| e.to_string())
}

#[test]
fn a_second_record_of_the_same_domain_adds_no_duplicate_series() {
    let specs = Specs::new(1);
    let days = json!({"resources": []});
    let ranks = json!({"resources": [
        {"domain": "shop.example", "delivered": 1},
        {"domain": "SHOP.example", "delivered": 2},
    ]});
    let got = rendered(&specs.daily, vec![daily(&specs.daily, days, ranks)]);
    assert!(got.is_ok(), "{}", got.unwrap_err());
}

#[test]
fn a_top_list_naming_one_account_twice_adds_no_duplicate_series() {
    let specs = Specs::new(1);
    let body = json!({"resources": [{"top_accounts_by_delivery_account": [
        {"account_id": 1001, "total": 5},
        {"account_id": "1001", "total": 3},
    ]}]});
    let got = rendered(&specs.dashboard, vec![dashboard(&specs.dashboard, body)]);
    assert!(got.is_ok(), "{}", got.unwrap_err());
}

#[test]
fn aggregate_keys_equal_once_sanitised_add_no_duplicate_series() {
    let specs = Specs::new(1);
    let body = json!({"aggregate": {"Odd Key": 1, "odd_key": 2}});
    let got = rendered(&specs.migration, vec![migration(body)]);
    assert!(got.is_ok(), "{}", got.unwrap_err());
}

#[test]
fn a_huge_quota_in_mib_does_not_become_an_infinite_byte_count() {
    let specs = Specs::new(1);
    let body = json!({"resources": [{"quota": 1e303, "max_email_quota": 1e308}]});
    let got = rendered(&specs.mailbox, vec![mailbox(body)]);
    assert!(got.is_ok(), "{}", got.unwrap_err());
}

#[test]
fn counts_summed_under_one_name_do_not_overflow_to_infinity() {
    let specs = Specs::new(1);
    let body = json!({"resources": [{"status_groups": {"Failed": 1e308, "failed": 1e308}}]});
    let got = rendered(&specs.dashboard, vec![dashboard(&specs.dashboard, body)]);
    assert!(got.is_ok(), "{}", got.unwrap_err());
}
