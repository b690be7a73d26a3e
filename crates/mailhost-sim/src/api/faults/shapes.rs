//! Body shape faults: a 200 answer whose body is replaced by something a client must refuse or
//! treat with care (HTML, another shape, no records, too large, absurd numbers, hundreds of
//! thousands of tiny objects, keys that change on every answer).

use axum::body::{Body, to_bytes};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::BodyFault;

/// What a proxy in front of the service might answer, with status 200.
pub(super) const HTML_ERROR_PAGE: &str = "<!DOCTYPE html>\n<html><head><title>Service \
    Unavailable</title></head><body><h1>Service Unavailable</h1><p>The server is temporarily \
    unable to service your request. Please try again later.</p></body></html>\n";

/// The numbers [`BodyFault::OutOfRange`] writes, in turn: a negative count, a float no field can
/// mean, an integer beyond i64.
pub(super) const OUT_OF_RANGE: [&str; 3] = ["-5", "1e300", "123456789012345678901234567890"];

/// The strings [`BodyFault::HugeValues`] writes, in turn, where numbers were.
pub(super) const HUGE_VALUES: [&str; 4] = ["NaN", "Infinity", "-Infinity", "1e999"];

/// Replaces the body of `response` (a 200) as `fault` says. [`BodyFault::TruncatedJson`] is the
/// malformed rewrite of the parent module; here it leaves the answer as it is.
pub(super) async fn rewrite(
    fault: BodyFault,
    response: Response,
    oversized_bytes: u64,
) -> Response {
    let (mut parts, body) = response.into_parts();
    let bytes = to_bytes(body, usize::MAX).await.unwrap_or_default();
    parts.headers.remove(header::CONTENT_LENGTH);
    let record = || serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null);
    let rewritten = match fault {
        BodyFault::TruncatedJson => bytes.to_vec(),
        BodyFault::NotJson => {
            parts.headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            );
            HTML_ERROR_PAGE.as_bytes().to_vec()
        }
        BodyFault::WrongShape => json!({"data": {"items": "nope"}}).to_string().into_bytes(),
        BodyFault::EmptyResources => empty_resources(&record()).to_string().into_bytes(),
        BodyFault::Oversized => padded(record(), oversized_bytes).to_string().into_bytes(),
        BodyFault::OutOfRange => {
            let mut out = String::with_capacity(bytes.len() + 256);
            let mut next = OUT_OF_RANGE.iter().cycle();
            write_records(&record(), &mut out, &mut || {
                next.next().copied().unwrap_or("-5")
            });
            out.into_bytes()
        }
        BodyFault::HugeValues => {
            let mut value = record();
            let mut next = HUGE_VALUES.iter().cycle();
            let records = match value.get_mut("resources") {
                Some(resources) => resources,
                None => &mut value,
            };
            replace_numbers(records, &mut || {
                Value::from(next.next().copied().unwrap_or("NaN"))
            });
            value.to_string().into_bytes()
        }
        BodyFault::TinyObjects { bytes: size } => tiny_objects(record(), size).into_bytes(),
        BodyFault::ChangingKeys { count } => {
            let mut value = record();
            match value.get_mut("resources") {
                Some(resources) => add_fresh_keys(resources, count),
                None => add_fresh_keys(&mut value, count),
            }
            value.to_string().into_bytes()
        }
    };
    Response::from_parts(parts, Body::from(rewritten))
}

/// The same kind of body with nothing in it: an envelope without records, or an empty aggregate.
fn empty_resources(value: &Value) -> Value {
    if value.get("aggregate").is_some() {
        json!({"aggregate": {}})
    } else {
        json!({"resources": [], "pagination": {"page": 1, "per_page": 0, "total": 0}})
    }
}

/// `value` with a top-level `padding` string of `bytes` characters, so the whole is larger.
fn padded(value: Value, bytes: u64) -> Value {
    let padding = Value::String("x".repeat(usize::try_from(bytes).unwrap_or(usize::MAX)));
    match value {
        Value::Object(mut members) => {
            members.insert("padding".to_owned(), padding);
            Value::Object(members)
        }
        other => json!({"data": other, "padding": padding}),
    }
}

/// One tiny object, with the comma before it: 8 bytes.
const TINY: &str = ",{\"a\":1}";

/// `value` carrying `size / 8` tiny objects: after the records of an envelope, else in a
/// top-level member `"tiny"`. Written as text: a `Value` of them would take ~20 times the size.
fn tiny_objects(value: Value, size: u64) -> String {
    let count = usize::try_from(size / TINY.len() as u64).unwrap_or(usize::MAX);
    let mut members = match value {
        Value::Object(members) => members,
        other => Map::from_iter([("data".to_owned(), other)]),
    };
    let (key, records): (&str, Vec<String>) = match members.remove("resources") {
        Some(Value::Array(records)) => {
            ("resources", records.iter().map(Value::to_string).collect())
        }
        Some(other) => {
            members.insert("resources".to_owned(), other);
            ("tiny", Vec::new())
        }
        None => ("tiny", Vec::new()),
    };
    let rest = Value::Object(members).to_string();
    let mut out = String::with_capacity(rest.len() + count * TINY.len() + 64);
    out.push_str(&format!("{{\"{key}\":["));
    out.push_str(&records.join(","));
    for i in 0..count {
        // No comma before the first item of an empty list.
        let tiny = if i == 0 && records.is_empty() {
            &TINY[1..]
        } else {
            TINY
        };
        out.push_str(tiny);
    }
    out.push(']');
    match rest.strip_prefix('{') {
        Some("}") | None => out.push('}'),
        Some(members) => {
            out.push(',');
            out.push_str(members);
        }
    }
    out
}

/// Adds `count` members under fresh random keys, each unreadable, to every object in `value`.
fn add_fresh_keys(value: &mut Value, count: u32) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(|v| add_fresh_keys(v, count)),
        Value::Object(members) => {
            members.values_mut().for_each(|v| add_fresh_keys(v, count));
            for _ in 0..count {
                let key = format!("key_{}", rand::random::<u32>());
                members.insert(key, Value::from("unreadable"));
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

fn replace_numbers(value: &mut Value, with: &mut impl FnMut() -> Value) {
    match value {
        Value::Number(_) => *value = with(),
        Value::Array(items) => items.iter_mut().for_each(|v| replace_numbers(v, with)),
        Value::Object(members) => members.values_mut().for_each(|v| replace_numbers(v, with)),
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
}

/// Writes `value` as JSON with every number of its records (the `resources` of an envelope, or the
/// whole body otherwise) written as the raw literal `with` gives: `serde_json::Value` cannot hold
/// an integer beyond 64 bits, so the text is written by hand.
fn write_records(value: &Value, out: &mut String, with: &mut impl FnMut() -> &'static str) {
    match value {
        Value::Object(members) if members.contains_key("resources") => {
            write_object(members, out, &mut |key, member, out| {
                if key == "resources" {
                    write_value(member, out, &mut Some(&mut *with));
                } else {
                    write_value(member, out, &mut None::<&mut fn() -> &'static str>);
                }
            });
        }
        other => write_value(other, out, &mut Some(with)),
    }
}

fn write_value<F: FnMut() -> &'static str>(
    value: &Value,
    out: &mut String,
    with: &mut Option<&mut F>,
) {
    match value {
        Value::Number(n) => match with {
            Some(with) => out.push_str(with()),
            None => out.push_str(&n.to_string()),
        },
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, out, with);
            }
            out.push(']');
        }
        Value::Object(members) => {
            write_object(members, out, &mut |_, member, out| {
                write_value(member, out, with);
            });
        }
        Value::Null | Value::Bool(_) | Value::String(_) => out.push_str(&value.to_string()),
    }
}

fn write_object(
    members: &Map<String, Value>,
    out: &mut String,
    write_member: &mut impl FnMut(&str, &Value, &mut String),
) {
    out.push('{');
    for (i, (key, member)) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::String(key.clone()).to_string());
        out.push(':');
        write_member(key, member, out);
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out_of_range(value: &Value) -> String {
        let mut out = String::new();
        let mut next = OUT_OF_RANGE.iter().cycle();
        write_records(value, &mut out, &mut || {
            next.next().copied().unwrap_or("-5")
        });
        out
    }

    #[test]
    fn out_of_range_replaces_only_the_numbers_of_the_records() {
        let body = json!({
            "resources": [{"a": 1, "b": [2, {"c": 3.5}], "d": "x\"y", "e": null, "f": true}],
            "pagination": {"page": 1, "per_page": 1, "total": 1}
        });
        assert_eq!(
            out_of_range(&body),
            r#"{"pagination":{"page":1,"per_page":1,"total":1},"resources":[{"a":-5,"b":[1e300,{"c":123456789012345678901234567890}],"d":"x\"y","e":null,"f":true}]}"#
        );
        let bare = json!({"aggregate": {"errors": 3, "status": "running"}});
        assert_eq!(
            out_of_range(&bare),
            r#"{"aggregate":{"errors":-5,"status":"running"}}"#
        );
        assert!(serde_json::from_str::<Value>(&out_of_range(&body)).is_ok());
    }

    #[test]
    fn padding_makes_the_body_larger_and_keeps_it_valid() {
        let value = padded(json!({"resources": [{"id": 1}]}), 1000);
        let text = value.to_string();
        assert!(text.len() > 1000);
        assert_eq!(value["resources"][0]["id"], 1);
    }

    #[test]
    fn tiny_objects_follow_the_records_and_keep_the_body_valid() {
        let body = json!({"resources": [{"id": 1}], "pagination": {"page": 1}});
        let text = tiny_objects(body, 80);
        let value: Value = serde_json::from_str(&text).expect("valid json");
        let resources = value["resources"].as_array().expect("records");
        assert_eq!(resources.len(), 11);
        assert_eq!(resources[0], json!({"id": 1}));
        assert!(resources[1..].iter().all(|r| *r == json!({"a": 1})));
        assert_eq!(value["pagination"], json!({"page": 1}));
        let bare: Value =
            serde_json::from_str(&tiny_objects(json!({"aggregate": {"n": 1}}), 16)).expect("json");
        assert_eq!(
            bare,
            json!({"aggregate": {"n": 1}, "tiny": [{"a": 1}, {"a": 1}]})
        );
        let empty: Value =
            serde_json::from_str(&tiny_objects(json!({"resources": []}), 8)).expect("json");
        assert_eq!(empty, json!({"resources": [{"a": 1}]}));
        let big = tiny_objects(json!({"resources": [{"id": 1}]}), 4_000_000);
        assert!(
            big.len() >= 4_000_000 && big.len() < 4_000_100,
            "{}",
            big.len()
        );
    }

    #[test]
    fn changing_keys_are_fresh_on_every_call_and_unreadable() {
        let keys = |v: &Value| -> Vec<String> {
            v["overview"]
                .as_object()
                .expect("object")
                .keys()
                .cloned()
                .collect()
        };
        let mut first = json!({"overview": {"delivered": 1}});
        let mut second = first.clone();
        add_fresh_keys(&mut first, 3);
        add_fresh_keys(&mut second, 3);
        let (a, b) = (keys(&first), keys(&second));
        assert_eq!(a.len(), 4);
        assert!(
            a.iter()
                .filter(|k| *k != "delivered")
                .all(|k| !b.contains(k))
        );
        assert_eq!(first["overview"]["delivered"], 1);
        assert_eq!(
            first.as_object().expect("object").len(),
            4,
            "the record too"
        );
    }
}
