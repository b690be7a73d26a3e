//! Body shape faults: a 200 answer whose body is replaced by something a client must refuse or
//! treat with care (HTML, another shape, no records, too large, absurd numbers).

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
}
