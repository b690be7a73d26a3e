//! Arbitrary JSON, biased towards the names and shapes the readers look for, and the bodies the
//! client receives: records in the `{resources, pagination}` envelope, or bodies of the wrong
//! shape.

use proptest::prelude::*;
use serde_json::{Map, Number, Value, json};

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
pub fn value() -> impl Strategy<Value = Value> {
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

/// A record: mostly an object keyed by `fields` (and any other key), sometimes anything.
pub fn record(fields: &'static [&'static str]) -> impl Strategy<Value = Value> {
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
pub fn envelope(fields: &'static [&'static str]) -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => prop::collection::vec(record(fields), 0..4)
            .prop_map(|items| json!({"resources": items, "pagination": {}})),
        1 => value().prop_map(|v| json!({"resources": v})),
        1 => value(),
    ]
}
