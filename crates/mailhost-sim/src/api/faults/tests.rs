//! The fault injection's tests: each fault as a client meets it.

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
fn http_dates_are_imf_fixdates_in_gmt() {
    let at: Timestamp = "2026-11-22T11:00:05+01:00".parse().expect("timestamp");
    assert_eq!(http_date(at), "Sun, 22 Nov 2026 10:00:05 GMT");
    let early: Timestamp = "2027-03-01T09:08:07Z".parse().expect("timestamp");
    assert_eq!(http_date(early), "Mon, 01 Mar 2027 09:08:07 GMT");
}

#[test]
fn new_members_default_to_off_and_contradictions_are_refused() {
    let spec: FaultSpec = serde_json::from_value(json!({})).expect("spec");
    assert_eq!(spec, FaultSpec::default());
    assert!(!spec.reset_mid_body && spec.slow_body.is_none() && spec.body.is_none());
    assert_eq!(spec.oversized_bytes(), DEFAULT_OVERSIZED_BYTES);
    let spec: FaultSpec =
        serde_json::from_value(json!({"slow_body_ms": 40, "body": "huge_values"})).expect("spec");
    assert_eq!(spec.slow_body, Some(Duration::from_millis(40)));
    assert_eq!(spec.body, Some(BodyFault::HugeValues));
    let both = FaultSpec {
        retry_after_http_date: true,
        retry_after_omit: true,
        ..FaultSpec::default()
    };
    assert!(both.validate().is_err());
}

#[test]
fn an_error_retry_after_is_bounded_and_needs_errors_to_carry_it() {
    let spec: FaultSpec =
        serde_json::from_value(json!({"error_rate": 1.0, "error_retry_after_secs": 10}))
            .expect("spec");
    assert_eq!(spec.error_retry_after_secs, Some(10));
    assert_eq!(spec.validate(), Ok(()));
    let day = FaultSpec {
        error_retry_after_secs: Some(MAX_RETRY_AFTER_SECS),
        ..spec.clone()
    };
    assert_eq!(day.validate(), Ok(()));
    let too_long = FaultSpec {
        error_retry_after_secs: Some(MAX_RETRY_AFTER_SECS + 1),
        ..spec.clone()
    };
    assert_eq!(
        too_long.validate(),
        Err("`error_retry_after_secs` must be at most 86400 (a day), got 86401".to_owned())
    );
    let without_errors = FaultSpec {
        error_rate: 0.0,
        ..spec
    };
    let message = without_errors.validate().expect_err("nothing to carry it");
    assert!(message.contains("set `error_rate` above 0"), "{message}");
    assert!(serde_json::from_value::<FaultSpec>(json!({"error_retry_after_secs": -1})).is_err());
}

#[test]
fn a_window_opens_after_its_start_and_closes_after_its_length() {
    let secs = Duration::from_secs;
    let spec = FaultSpec {
        error_rate: 1.0,
        starts_after: Some(secs(10)),
        lasts: Some(secs(60)),
        ..FaultSpec::default()
    };
    assert_eq!(spec.validate(), Ok(()));
    let open: Vec<bool> = [0, 9, 10, 69, 70, 10_000]
        .into_iter()
        .map(|s| spec.in_force(secs(s)))
        .collect();
    assert_eq!(open, [false, false, true, true, false, false]);
    let from_ten = FaultSpec {
        lasts: None,
        ..spec.clone()
    };
    assert!(!from_ten.in_force(secs(9)) && from_ten.in_force(secs(1_000_000)));
    let for_a_minute = FaultSpec {
        starts_after: None,
        ..spec.clone()
    };
    assert!(for_a_minute.in_force(Duration::ZERO) && !for_a_minute.in_force(secs(60)));
    assert!(FaultSpec::default().in_force(Duration::MAX));
    let read: FaultSpec = serde_json::from_value(
        json!({"error_rate": 1.0, "starts_after_ms": 10_000, "lasts_ms": 60_000}),
    )
    .expect("spec");
    assert_eq!(read, spec);
    let written = serde_json::to_value(&spec).expect("json");
    assert_eq!(
        (&written["starts_after_ms"], &written["lasts_ms"]),
        (&json!(10_000), &json!(60_000))
    );
}

#[test]
fn bad_windows_are_refused_naming_the_member() {
    let ms = Duration::from_millis;
    let fault = |starts_after, lasts| FaultSpec {
        error_rate: 1.0,
        starts_after,
        lasts,
        ..FaultSpec::default()
    };
    let week = MAX_FAULT_WINDOW;
    assert_eq!(fault(Some(week), Some(week)).validate(), Ok(()));
    assert_eq!(fault(Some(Duration::ZERO), Some(ms(1))).validate(), Ok(()));
    let cases = [
        (
            fault(Some(week + ms(1)), None),
            "`starts_after_ms` must be at most 604800000 (a week), got 604800001",
        ),
        (
            fault(None, Some(week + ms(1))),
            "`lasts_ms` must be at most 604800000 (a week), got 604800001",
        ),
        (
            fault(None, Some(Duration::ZERO)),
            "`lasts_ms` must be at least 1",
        ),
        (
            FaultSpec {
                starts_after: Some(ms(5)),
                only_ids: Some(vec!["1".to_owned()]),
                ..FaultSpec::default()
            },
            "but this spec has no fault",
        ),
    ];
    for (spec, expected) in cases {
        let message = spec.validate().expect_err("refused");
        assert!(message.contains(expected), "{message:?} lacks {expected:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn faults_outside_their_window_are_not_in_force_and_let_the_next_apply() {
    let faults = Faults::new(1);
    let t0 = Instant::now();
    let status = |status| FaultSpec {
        error_rate: 1.0,
        error_status: Some(status),
        ..FaultSpec::default()
    };
    faults.add(
        Route::Send,
        FaultSpec {
            lasts: Some(Duration::from_secs(1)),
            ..status(503)
        },
    );
    faults.add(Route::Send, status(502));
    let first = |now| faults.in_force(Route::Send, now).first()?.error_status;
    assert_eq!(first(t0), Some(503));
    assert_eq!(first(t0 + Duration::from_secs(1)), Some(502));
    // Listed whether in force or not: it is still set.
    assert_eq!(
        faults.get(Route::Send).and_then(|s| s.error_status),
        Some(503)
    );
    faults.set(Route::ALL, status(500));
    assert!(
        Route::ALL
            .into_iter()
            .all(|route| faults.in_force(route, t0).len() == 1)
    );
    faults.set(Route::ALL, FaultSpec::default());
    assert!(faults.all().is_empty());
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

#[test]
fn tiny_objects_and_changing_keys_are_written_with_their_size_and_bounded() {
    let spec: FaultSpec =
        serde_json::from_value(json!({"body": {"tiny_objects": {}}})).expect("spec");
    assert_eq!(
        spec.body,
        Some(BodyFault::TinyObjects {
            bytes: DEFAULT_TINY_BYTES
        })
    );
    let spec: FaultSpec =
        serde_json::from_value(json!({"body": {"changing_keys": {"count": 3}}})).expect("spec");
    assert_eq!(spec.body, Some(BodyFault::ChangingKeys { count: 3 }));
    assert_eq!(
        serde_json::to_value(&spec).expect("json")["body"],
        json!({"changing_keys": {"count": 3}})
    );
    let plain: FaultSpec =
        serde_json::from_value(json!({"body": "not_json"})).expect("unit variants stay names");
    assert_eq!(plain.body, Some(BodyFault::NotJson));
    for body in [
        BodyFault::TinyObjects {
            bytes: MAX_OVERSIZED_BYTES + 1,
        },
        BodyFault::ChangingKeys {
            count: MAX_CHANGING_KEYS + 1,
        },
    ] {
        let spec = FaultSpec {
            body: Some(body),
            ..FaultSpec::default()
        };
        assert!(spec.validate().is_err(), "{body:?}");
    }
}
