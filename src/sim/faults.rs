//! Fault injection: per-route latency, errors, rate limiting, malformed bodies and numbers sent as
//! strings, so the exporter can be tested against an upstream that misbehaves.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::ApiError;
use super::routes::Route;

/// What goes wrong on one route. The default is a healthy route.
///
/// Serialized with `latency_ms` (integer milliseconds) for `latency`; every member is optional in
/// JSON and unknown members are refused, so a typo in a test does not silently do nothing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FaultSpec {
    /// Added before answering.
    #[serde(
        rename = "latency_ms",
        with = "latency_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub latency: Option<Duration>,
    /// Probability of an error answer with a JSON message.
    pub error_rate: f64,
    /// Status of those errors; 500 when unset or not a 4xx/5xx status.
    pub error_status: Option<u16>,
    /// Probability of a 429 carrying `Retry-After: <retry_after_secs>`.
    pub rate_limit_rate: f64,
    pub retry_after_secs: u64,
    /// Probability of a 200 whose body is truncated and therefore not valid JSON.
    pub malformed_rate: f64,
    /// Every number in the returned records is sent as a JSON string.
    pub numbers_as_strings: bool,
}

impl FaultSpec {
    /// Checks what [`super::Simulator::set_fault`] would otherwise quietly clamp.
    pub fn validate(&self) -> Result<(), String> {
        for (name, rate) in [
            ("error_rate", self.error_rate),
            ("rate_limit_rate", self.rate_limit_rate),
            ("malformed_rate", self.malformed_rate),
        ] {
            if !(0.0..=1.0).contains(&rate) {
                return Err(format!("`{name}` must be between 0.0 and 1.0, got {rate}"));
            }
        }
        if let Some(status) = self.error_status
            && !(400..=599).contains(&status)
        {
            return Err(format!(
                "`error_status` must be an HTTP error status (400-599), got {status}"
            ));
        }
        Ok(())
    }

    fn error_status(&self) -> StatusCode {
        self.error_status
            .filter(|status| (400..=599).contains(status))
            .and_then(|status| StatusCode::from_u16(status).ok())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn is_healthy(&self) -> bool {
        *self == Self::default()
    }
}

mod latency_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(d) => s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}

/// The faults of every route and the seeded random source that decides each roll.
#[derive(Debug)]
pub(crate) struct Faults {
    table: Mutex<BTreeMap<Route, FaultSpec>>,
    rng: Mutex<StdRng>,
}

impl Faults {
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            table: Mutex::new(BTreeMap::new()),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
        }
    }

    pub(crate) fn set(&self, route: Route, spec: FaultSpec) {
        let mut table = self.table.lock().expect("fault table mutex poisoned");
        if spec.is_healthy() {
            table.remove(&route);
        } else {
            table.insert(route, spec);
        }
    }

    pub(crate) fn clear(&self) {
        self.table
            .lock()
            .expect("fault table mutex poisoned")
            .clear();
    }

    pub(crate) fn get(&self, route: Route) -> Option<FaultSpec> {
        self.table
            .lock()
            .expect("fault table mutex poisoned")
            .get(&route)
            .cloned()
    }

    pub(crate) fn all(&self) -> BTreeMap<Route, FaultSpec> {
        self.table
            .lock()
            .expect("fault table mutex poisoned")
            .clone()
    }

    /// True with probability `rate`. 0.0 (or less, or NaN) and 1.0 (or more) never consult the
    /// random source, so tests using them are deterministic.
    fn roll(&self, rate: f64) -> bool {
        if rate.is_nan() || rate <= 0.0 {
            return false;
        }
        if rate >= 1.0 {
            return true;
        }
        self.rng
            .lock()
            .expect("fault rng mutex poisoned")
            .random::<f64>()
            < rate
    }
}

/// State of the fault layer of one route.
#[derive(Clone)]
pub(crate) struct FaultLayerState {
    pub faults: Arc<Faults>,
    pub route: Route,
}

/// The fault layer. It sits outside the handler, like a proxy or rate limiter in front of the
/// real service: latency, then a 429 roll, then an error roll answer before authentication; the
/// malformed-body roll and numbers-as-strings then rewrite a successful answer.
pub(crate) async fn inject(
    State(layer): State<FaultLayerState>,
    request: Request,
    next: Next,
) -> Response {
    let Some(spec) = layer.faults.get(layer.route) else {
        return next.run(request).await;
    };
    if let Some(latency) = spec.latency {
        tokio::time::sleep(latency).await;
    }
    if layer.faults.roll(spec.rate_limit_rate) {
        return ApiError::RateLimited {
            retry_after_secs: spec.retry_after_secs,
        }
        .into_response();
    }
    if layer.faults.roll(spec.error_rate) {
        return ApiError::Injected(spec.error_status()).into_response();
    }
    let response = next.run(request).await;
    if !response.status().is_success() {
        return response;
    }
    if layer.faults.roll(spec.malformed_rate) {
        return malformed(response).await;
    }
    if spec.numbers_as_strings {
        return numbers_as_strings(response).await;
    }
    response
}

/// What a broken proxy might send when the real body is empty or too short to truncate.
const GARBAGE_BODY: &[u8] = b"<html><body><h1>502 Bad Gateway</h1>";

/// A 200 carrying the first half of the real body: it keeps the JSON content type but does not
/// parse.
async fn malformed(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    let bytes = to_bytes(body, usize::MAX).await.unwrap_or_default();
    let half = &bytes[..bytes.len() / 2];
    let truncated = if serde_json::from_slice::<Value>(half).is_err() && !half.is_empty() {
        half.to_vec()
    } else {
        GARBAGE_BODY.to_vec()
    };
    parts.status = StatusCode::OK;
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(truncated))
}

/// Re-sends the body with every number of its records (the `resources` of an envelope, or the
/// whole body otherwise) written as a string.
async fn numbers_as_strings(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    let bytes = to_bytes(body, usize::MAX).await.unwrap_or_default();
    let Ok(mut value) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    match value.get_mut("resources") {
        Some(resources) => stringify_numbers(resources),
        None => stringify_numbers(&mut value),
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    match serde_json::to_vec(&value) {
        Ok(rewritten) => Response::from_parts(parts, Body::from(rewritten)),
        Err(_) => Response::from_parts(parts, Body::from(bytes)),
    }
}

pub(crate) fn stringify_numbers(value: &mut Value) {
    match value {
        Value::Number(n) => *value = Value::String(n.to_string()),
        Value::Array(items) => items.iter_mut().for_each(stringify_numbers),
        Value::Object(members) => members.values_mut().for_each(stringify_numbers),
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn latency_is_read_and_written_as_milliseconds() {
        let spec: FaultSpec =
            serde_json::from_value(json!({"latency_ms": 250, "error_rate": 0.5})).expect("spec");
        assert_eq!(spec.latency, Some(Duration::from_millis(250)));
        assert_eq!(spec.error_rate, 0.5);
        assert_eq!(
            serde_json::to_value(&spec).expect("json")["latency_ms"],
            250
        );
        assert!(serde_json::from_value::<FaultSpec>(json!({"latency": 1})).is_err());
    }

    #[test]
    fn out_of_range_rates_and_statuses_are_refused() {
        let bad_rate = FaultSpec {
            error_rate: 1.5,
            ..FaultSpec::default()
        };
        assert!(bad_rate.validate().is_err());
        let bad_status = FaultSpec {
            error_status: Some(200),
            ..FaultSpec::default()
        };
        assert!(bad_status.validate().is_err());
        assert!(FaultSpec::default().validate().is_ok());
    }

    #[test]
    fn rates_of_zero_and_one_are_deterministic() {
        let faults = Faults::new(1);
        assert!((0..1000).all(|_| faults.roll(1.0)));
        assert!((0..1000).all(|_| !faults.roll(0.0)));
        assert!(!faults.roll(f64::NAN));
    }

    #[test]
    fn numbers_become_strings_at_every_depth() {
        let mut value = json!({"a": 1, "b": [2.5, {"c": -3}], "d": "x", "e": null});
        stringify_numbers(&mut value);
        assert_eq!(
            value,
            json!({"a": "1", "b": ["2.5", {"c": "-3"}], "d": "x", "e": null})
        );
    }

    #[tokio::test]
    async fn malformed_bodies_never_parse() {
        for body in [
            &b""[..],
            b"{}",
            b"{\"resources\":[{\"id\":1}],\"pagination\":{}}",
        ] {
            let response = malformed(Response::new(Body::from(body.to_vec()))).await;
            let bytes = to_bytes(response.into_body(), usize::MAX)
                .await
                .expect("body");
            assert!(
                serde_json::from_slice::<Value>(&bytes).is_err(),
                "{bytes:?}"
            );
        }
    }
}
