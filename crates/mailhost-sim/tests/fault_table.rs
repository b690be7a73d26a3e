//! The faults a table-driven exporter test injects: broken and slow bodies, 429 variants, error
//! statuses, body shapes and `only_ids`, through the router and, for what only a socket shows,
//! through a real loopback server.

use crate::helpers::*;

/// The routes that answer a record.
const RECORD_ROUTES: [Route; 5] = [
    Route::DeliveryAccountGet,
    Route::TracemailDashboard,
    Route::TracemailDaily,
    Route::MigrationStats,
    Route::EmailAccountGet,
];

/// A request of `route` (one of [`RECORD_ROUTES`]) for a target of the hosting fleet.
fn record_request(route: Route) -> Request<Body> {
    match route {
        Route::DeliveryAccountGet => get_account("1"),
        Route::TracemailDashboard => dashboard(TOKEN, json!({})),
        Route::TracemailDaily => daily("1", ""),
        Route::MigrationStats => get("/api/migrations/MG00000007/stats", TOKEN),
        Route::EmailAccountGet => get(MAILBOX, TOKEN),
        other => panic!("{other} answers no record"),
    }
}

fn fault(change: impl FnOnce(&mut FaultSpec)) -> FaultSpec {
    let mut spec = FaultSpec::default();
    change(&mut spec);
    spec
}

fn account_url(addr: SocketAddr, id: i32) -> String {
    format!("http://{addr}/api/delivery/accounts/{id}")
}

/// The records of a body: the `resources` of an envelope, or the whole body.
fn records(body: &Value) -> &Value {
    body.get("resources").unwrap_or(body)
}

fn strings_in(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings_in(v, out)),
        Value::Object(members) => members.values().for_each(|v| strings_in(v, out)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

#[tokio::test]
async fn a_reset_mid_body_sends_200_and_half_a_body_then_breaks_the_connection() {
    let sim = sim();
    let whole = call(&loopback_app(&sim), get_account("1")).await.bytes;
    sim.set_fault(
        Route::DeliveryAccountGet,
        fault(|f| f.reset_mid_body = true),
    );
    // Through the router: the body stream ends in an error.
    let response = loopback_app(&sim)
        .oneshot(get_account("1"))
        .await
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    assert!(to_bytes(response.into_body(), usize::MAX).await.is_err());

    // Over a socket: headers arrive, reading the body fails.
    let Served { addr, shutdown, .. } = serve(&sim).await;
    let response = reqwest::Client::new()
        .get(account_url(addr, 1))
        .header(MANAGEMENT_TOKEN_HEADER, TOKEN)
        .send()
        .await
        .expect("status and headers arrive");
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    // The whole body is announced, half of it is sent.
    assert_eq!(response.content_length(), Some(whole.len() as u64));
    let mut response = response;
    let mut received = Vec::new();
    let error = loop {
        match response.chunk().await {
            Ok(Some(chunk)) => received.extend_from_slice(&chunk),
            Ok(None) => panic!("a clean end after {} bytes", received.len()),
            Err(error) => break error,
        }
    };
    assert!(error.is_body() || error.is_decode(), "{error:?}");
    assert_eq!(
        received,
        whole[..whole.len() / 2],
        "the first half of the real body"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn a_slow_body_times_out_a_short_client_only_while_reading_the_body() {
    let sim = sim();
    sim.set_fault(
        Route::DeliveryAccountGet,
        fault(|f| f.slow_body = Some(Duration::from_millis(2400))),
    );
    let Served { addr, shutdown, .. } = serve(&sim).await;

    // The headers come at once and the client's whole-request timeout runs out in the body; its
    // margin is wide so that a slow machine still gets the headers in time.
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(1200))
        .build()
        .expect("client");
    let response = impatient
        .get(account_url(addr, 1))
        .header(MANAGEMENT_TOKEN_HEADER, TOKEN)
        .send()
        .await
        .expect("headers arrive within the timeout");
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    let error = response.bytes().await.expect_err("the body is too slow");
    assert!(error.is_timeout(), "{error:?}");

    let started = std::time::Instant::now();
    let body: Value = reqwest::Client::new()
        .get(account_url(addr, 1))
        .header(MANAGEMENT_TOKEN_HEADER, TOKEN)
        .send()
        .await
        .expect("headers")
        .json()
        .await
        .expect("a patient client gets the whole body");
    assert!(started.elapsed() >= Duration::from_millis(2300));
    assert_eq!(Some(body["resources"][0].clone()), sim.account_record(1));
    shutdown.cancel();
}

#[tokio::test]
async fn a_slow_and_broken_body_trickles_half_then_breaks() {
    let sim = sim();
    sim.set_fault(
        Route::DeliveryAccountGet,
        fault(|f| {
            f.slow_body = Some(Duration::from_millis(200));
            f.reset_mid_body = true;
        }),
    );
    let Served { addr, shutdown, .. } = serve(&sim).await;
    let started = std::time::Instant::now();
    let response = reqwest::Client::new()
        .get(account_url(addr, 1))
        .header(MANAGEMENT_TOKEN_HEADER, TOKEN)
        .send()
        .await
        .expect("headers");
    assert!(response.bytes().await.is_err());
    assert!(started.elapsed() >= Duration::from_millis(150));
    shutdown.cancel();
}

#[tokio::test]
async fn an_http_date_retry_after_is_in_the_future_of_the_simulator_clock() {
    let sim = hosting_sim();
    let app = loopback_app(&sim);
    sim.set_fault(
        Route::MigrationStats,
        fault(|f| {
            f.rate_limit_rate = 1.0;
            f.retry_after_secs = 5;
            f.retry_after_http_date = true;
        }),
    );
    let answer = call(&app, get("/api/migrations/MG00000007/stats", TOKEN)).await;
    answer.error(StatusCode::TOO_MANY_REQUESTS);
    let value = answer.headers[header::RETRY_AFTER].to_str().expect("ascii");
    assert_eq!(value, "Sun, 22 Nov 2026 07:00:05 GMT");
    let at = jiff::fmt::rfc2822::parse(value)
        .expect("an HTTP-date")
        .timestamp();
    assert!(at > sim.clock().now());
    assert_eq!(at.duration_since(sim.clock().now()).as_secs(), 5);
}

#[tokio::test]
async fn an_omitted_retry_after_leaves_a_bare_429() {
    let sim = sim();
    let app = loopback_app(&sim);
    sim.set_fault(
        Route::DeliveryAccountGet,
        fault(|f| {
            f.rate_limit_rate = 1.0;
            f.retry_after_secs = 5;
            f.retry_after_omit = true;
        }),
    );
    let answer = call(&app, get_account("1")).await;
    answer.error(StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(answer.json()["code"], "rate_limited");
    assert!(!answer.headers.contains_key(header::RETRY_AFTER));
}

#[tokio::test]
async fn chosen_accounts_answer_429_every_time_with_or_without_retry_after_beside_healthy_ones() {
    let sim = sim();
    let app = loopback_app(&sim);
    sim.set_fault(
        Route::DeliveryAccountGet,
        fault(|f| {
            f.rate_limit_rate = 1.0;
            f.retry_after_secs = 30;
            f.only_ids = Some(vec!["1".to_owned()]);
        }),
    );
    // The second through the control plane, as an exporter test would.
    let added = call(
        &app,
        mgmt(
            Method::POST,
            "/_sim/faults/delivery_account_get",
            TOKEN,
            Some(json!({"rate_limit_rate": 1.0, "retry_after_omit": true, "only_ids": ["4"]})),
        ),
    )
    .await;
    assert_eq!(added.status, StatusCode::OK, "{:?}", added.json());
    for _ in 0..10 {
        let with = call(&app, get_account("1")).await;
        with.error(StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(with.json()["code"], "rate_limited");
        assert_eq!(with.headers[header::RETRY_AFTER], "30");
        let without = call(&app, get_account("4")).await;
        without.error(StatusCode::TOO_MANY_REQUESTS);
        assert!(!without.headers.contains_key(header::RETRY_AFTER));
        for healthy in ["2", "3"] {
            assert_eq!(
                call(&app, get_account(healthy)).await.record()["id"],
                healthy.parse::<i32>().expect("id")
            );
        }
    }
    // Another route of the same accounts is untouched.
    assert_eq!(call(&app, daily("1", "")).await.status, StatusCode::OK);
}

/// The recipe for a share of accounts that always answer 5xx: one fault per group of accounts,
/// each `error_rate` 1.0 with its status (and `Retry-After`, if any) and `only_ids`, added beside
/// each other with `POST /_sim/faults/{route}`.
#[tokio::test]
async fn a_share_of_accounts_always_answers_5xx_beside_healthy_ones() {
    let sim = sim();
    let app = loopback_app(&sim);
    for spec in [
        json!({"error_rate": 1.0, "error_status": 503, "error_retry_after_secs": 10,
               "only_ids": ["1", "2"]}),
        json!({"error_rate": 1.0, "error_status": 500, "only_ids": ["4"]}),
    ] {
        let added = call(
            &app,
            mgmt(
                Method::POST,
                "/_sim/faults/delivery_account_get",
                TOKEN,
                Some(spec),
            ),
        )
        .await;
        assert_eq!(added.status, StatusCode::OK, "{:?}", added.json());
    }
    for _ in 0..20 {
        for id in ["1", "2"] {
            let answer = call(&app, get_account(id)).await;
            answer.error(StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(answer.headers[header::RETRY_AFTER], "10", "{id}");
        }
        let answer = call(&app, get_account("4")).await;
        answer.error(StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!answer.headers.contains_key(header::RETRY_AFTER));
        assert_eq!(call(&app, get_account("3")).await.record()["id"], 3);
    }
    assert_eq!(sim.hits("/api/delivery/accounts/1"), 20);
}

#[tokio::test]
async fn injected_error_statuses_answer_json_every_time() {
    let sim = hosting_sim();
    let app = loopback_app(&sim);
    for status in [401, 403, 404, 500, 502, 503] {
        for route in RECORD_ROUTES {
            sim.set_fault(
                route,
                fault(|f| {
                    f.error_rate = 1.0;
                    f.error_status = Some(status);
                }),
            );
            let expected = StatusCode::from_u16(status).expect("status");
            let answer = call(&app, record_request(route)).await;
            answer.error(expected);
            assert_eq!(answer.json()["code"], "injected_fault", "{route} {status}");
            assert!(
                answer.headers[header::CONTENT_TYPE]
                    .to_str()
                    .is_ok_and(|t| t.starts_with("application/json")),
                "{route} {status}"
            );
        }
        // Deterministic at 1.0: the same answer every time.
        for _ in 0..20 {
            call(&app, get_account("1"))
                .await
                .error(StatusCode::from_u16(status).expect("status"));
        }
        sim.clear_faults();
    }
}

#[tokio::test]
async fn every_body_fault_has_its_shape_on_every_record_route() {
    let sim = hosting_sim();
    let app = loopback_app(&sim);
    let faults = [
        BodyFault::NotJson,
        BodyFault::TruncatedJson,
        BodyFault::WrongShape,
        BodyFault::EmptyResources,
        BodyFault::Oversized,
        BodyFault::OutOfRange,
        BodyFault::HugeValues,
        BodyFault::TinyObjects { bytes: 800 },
        BodyFault::ChangingKeys { count: 2 },
    ];
    for route in RECORD_ROUTES {
        let normal_bytes = call(&app, record_request(route)).await.bytes;
        let normal: Value = serde_json::from_slice(&normal_bytes).expect("json");
        let mut normal_numbers = Vec::new();
        collect_numbers(records(&normal), &mut normal_numbers);
        assert!(!normal_numbers.is_empty(), "{route}");
        for body in faults {
            sim.set_fault(
                route,
                fault(|f| {
                    f.body = Some(body);
                    f.oversized_bytes = Some(4096);
                }),
            );
            let answer = call(&app, record_request(route)).await;
            assert_eq!(answer.status, StatusCode::OK, "{route} {body:?}");
            let text = String::from_utf8_lossy(&answer.bytes).into_owned();
            let parsed = serde_json::from_slice::<Value>(&answer.bytes);
            match body {
                BodyFault::NotJson => {
                    assert!(parsed.is_err(), "{route}");
                    assert!(text.contains("<html>"), "{route}");
                    assert!(
                        answer.headers[header::CONTENT_TYPE]
                            .to_str()
                            .is_ok_and(|t| t.starts_with("text/html")),
                        "{route}"
                    );
                }
                BodyFault::TruncatedJson => {
                    assert!(parsed.is_err(), "{route}");
                    assert!(!answer.bytes.is_empty(), "{route}");
                    assert!(normal_bytes.starts_with(&answer.bytes), "{route}");
                }
                BodyFault::WrongShape => {
                    assert_eq!(parsed.ok(), Some(json!({"data": {"items": "nope"}})));
                }
                BodyFault::EmptyResources => {
                    let value = parsed.expect("json");
                    if route == Route::MigrationStats {
                        assert_eq!(value, json!({"aggregate": {}}));
                    } else {
                        assert_eq!(value["resources"], json!([]), "{route}");
                    }
                }
                BodyFault::Oversized => {
                    assert!(answer.bytes.len() > 4096, "{route}");
                    let mut value = parsed.expect("valid json");
                    let padding = value
                        .as_object_mut()
                        .and_then(|members| members.remove("padding"));
                    assert!(padding.is_some(), "{route}");
                    assert_eq!(value, normal, "{route}: the real answer is kept");
                }
                BodyFault::OutOfRange => {
                    let value = parsed.expect("valid json");
                    let mut numbers = Vec::new();
                    collect_numbers(records(&value), &mut numbers);
                    assert_eq!(numbers.len(), normal_numbers.len(), "{route}");
                    for n in &numbers {
                        let n: f64 = n.parse().expect("number");
                        assert!(n < 0.0 || n > i64::MAX as f64, "{route}: {n}");
                    }
                    assert!(text.contains("-5"), "{route}");
                    if numbers.len() >= 3 {
                        assert!(text.contains("123456789012345678901234567890"), "{route}");
                        assert!(text.contains("1e300"), "{route}");
                    }
                }
                BodyFault::TinyObjects { .. } => {
                    let mut value = parsed.expect("valid json");
                    let tiny = json!({"a": 1});
                    match value.get_mut("resources").and_then(Value::as_array_mut) {
                        Some(items) => {
                            let real = items.len() - 100;
                            assert!(items[real..].iter().all(|v| *v == tiny), "{route}");
                            items.truncate(real);
                        }
                        None => {
                            let tiny_items = value
                                .as_object_mut()
                                .and_then(|members| members.remove("tiny"))
                                .expect("a tiny member");
                            assert_eq!(tiny_items, Value::Array(vec![tiny; 100]), "{route}");
                        }
                    }
                    assert_eq!(value, normal, "{route}: the real answer is kept");
                }
                BodyFault::ChangingKeys { .. } => {
                    let value = parsed.expect("valid json");
                    let again: Value =
                        serde_json::from_slice(&call(&app, record_request(route)).await.bytes)
                            .expect("json");
                    let fresh = |v: &Value| -> Vec<String> {
                        let record = records(v).get(0).unwrap_or(records(v));
                        record
                            .as_object()
                            .expect("object")
                            .keys()
                            .filter(|k| k.starts_with("key_"))
                            .cloned()
                            .collect()
                    };
                    let (a, b) = (fresh(&value), fresh(&again));
                    assert_eq!(a.len(), 2, "{route}: {a:?}");
                    assert!(a.iter().all(|k| !b.contains(k)), "{route}: fresh each time");
                }
                BodyFault::HugeValues => {
                    let value = parsed.expect("valid json");
                    let mut numbers = Vec::new();
                    collect_numbers(records(&value), &mut numbers);
                    assert!(numbers.is_empty(), "{route}: {numbers:?}");
                    let mut strings = Vec::new();
                    strings_in(records(&value), &mut strings);
                    assert!(strings.iter().any(|s| s == "NaN"), "{route}");
                    if normal_numbers.len() >= 4 {
                        for s in ["Infinity", "-Infinity", "1e999"] {
                            assert!(strings.iter().any(|v| v == s), "{route}: {s}");
                        }
                    }
                }
            }
        }
        sim.clear_faults();
    }
}

#[tokio::test]
async fn an_oversized_body_exceeds_eight_mebibytes_by_default() {
    let sim = hosting_sim();
    let app = loopback_app(&sim);
    sim.set_fault(
        Route::EmailAccountGet,
        fault(|f| f.body = Some(BodyFault::Oversized)),
    );
    let answer = call(&app, get(MAILBOX, TOKEN)).await;
    assert!(answer.bytes.len() as u64 > DEFAULT_OVERSIZED_BYTES);
    assert_eq!(DEFAULT_OVERSIZED_BYTES, 8 * 1024 * 1024);
    assert_eq!(answer.json()["resources"][0]["code"], "EA00000011");
}

#[tokio::test]
async fn body_faults_leave_error_answers_alone() {
    let sim = sim();
    let app = loopback_app(&sim);
    sim.set_fault(
        Route::DeliveryAccountGet,
        fault(|f| {
            f.body = Some(BodyFault::NotJson);
            f.reset_mid_body = true;
        }),
    );
    call(&app, get_account("99"))
        .await
        .error(StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn only_ids_faults_the_named_targets_and_leaves_the_others_alone() {
    let sim = hosting_sim();
    let app = loopback_app(&sim);
    let broken = |ids: &[&str]| {
        fault(|f| {
            f.error_rate = 1.0;
            f.error_status = Some(503);
            f.only_ids = Some(ids.iter().map(|s| (*s).to_owned()).collect());
        })
    };
    sim.set_fault(Route::DeliveryAccountGet, broken(&["1"]));
    call(&app, get_account("1"))
        .await
        .error(StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(call(&app, get_account("2")).await.record()["id"], 2);
    // A whole segment, not a substring.
    sim.set_fault(Route::DeliveryAccountGet, broken(&["10"]));
    assert_eq!(call(&app, get_account("1")).await.status, StatusCode::OK);

    sim.set_fault(Route::EmailAccountGet, broken(&["EA00000011"]));
    call(&app, get(MAILBOX, TOKEN))
        .await
        .error(StatusCode::SERVICE_UNAVAILABLE);
    let other = "/api/domains/D000000901/email_accounts/P000000012";
    assert_eq!(call(&app, get(other, TOKEN)).await.status, StatusCode::OK);

    sim.set_fault(Route::MigrationStats, broken(&["MG00000001"]));
    let path = "/api/migrations/MG00000007/stats";
    assert_eq!(call(&app, get(path, TOKEN)).await.status, StatusCode::OK);

    sim.set_fault(Route::TracemailDaily, broken(&["1"]));
    call(&app, daily("1", ""))
        .await
        .error(StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(call(&app, daily("2", "")).await.status, StatusCode::OK);

    // The dashboard names its account in the body.
    sim.set_fault(Route::TracemailDashboard, broken(&["1"]));
    call(&app, dashboard(TOKEN, json!({"account": "1"})))
        .await
        .error(StatusCode::SERVICE_UNAVAILABLE);
    for body in [json!({"account": "2"}), json!({})] {
        let answer = call(&app, dashboard(TOKEN, body.clone())).await;
        assert_eq!(answer.status, StatusCode::OK, "{body}");
    }
    // The body is handed on intact: the handler still sees and checks it.
    sim.set_fault(Route::TracemailDashboard, broken(&["9"]));
    let record = call(&app, dashboard(TOKEN, json!({"account": "2"})))
        .await
        .record();
    assert!(record["overview"].is_object());
    call(&app, dashboard(TOKEN, json!({"account": "x"})))
        .await
        .error(StatusCode::BAD_REQUEST);

    // Body faults follow only_ids too.
    sim.set_fault(
        Route::DeliveryAccountGet,
        fault(|f| {
            f.body = Some(BodyFault::WrongShape);
            f.only_ids = Some(vec!["2".to_owned()]);
        }),
    );
    assert_eq!(
        call(&app, get_account("2")).await.json()["data"]["items"],
        "nope"
    );
    assert_eq!(call(&app, get_account("1")).await.record()["id"], 1);
}

#[tokio::test]
async fn the_control_plane_accepts_the_new_fields_and_refuses_unknown_ones() {
    let sim = sim();
    let app = loopback_app(&sim);
    let spec = json!({
        "rate_limit_rate": 1.0,
        "retry_after_secs": 5,
        "retry_after_http_date": true,
        "body": "out_of_range",
        "oversized_bytes": 1024,
        "reset_mid_body": true,
        "slow_body_ms": 1500,
        "only_ids": ["1002", "MG00000001"]
    });
    let answer = call(
        &app,
        mgmt(
            Method::PUT,
            "/_sim/faults/delivery_account_get",
            TOKEN,
            Some(spec),
        ),
    )
    .await;
    assert_eq!(
        answer.status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&answer.bytes)
    );
    let echoed = &answer.json()["fault"];
    assert_eq!(echoed["body"], "out_of_range");
    assert_eq!(echoed["slow_body_ms"], 1500);
    assert_eq!(echoed["only_ids"], json!(["1002", "MG00000001"]));
    assert_eq!(
        sim.fault(Route::DeliveryAccountGet),
        Some(FaultSpec {
            rate_limit_rate: 1.0,
            retry_after_secs: 5,
            retry_after_http_date: true,
            body: Some(BodyFault::OutOfRange),
            oversized_bytes: Some(1024),
            reset_mid_body: true,
            slow_body: Some(Duration::from_millis(1500)),
            only_ids: Some(vec!["1002".to_owned(), "MG00000001".to_owned()]),
            ..FaultSpec::default()
        })
    );
    for body in [
        "not_json",
        "truncated_json",
        "wrong_shape",
        "empty_resources",
        "oversized",
        "out_of_range",
        "huge_values",
    ] {
        let answer = call(
            &app,
            mgmt(
                Method::PUT,
                "/_sim/faults/email_account_get",
                TOKEN,
                Some(json!({ "body": body, "retry_after_omit": true })),
            ),
        )
        .await;
        assert_eq!(answer.status, StatusCode::OK, "{body}");
        assert_eq!(answer.json()["fault"]["body"], body);
    }
    for bad in [
        json!({"slow_body": 5}),
        json!({"reset": true}),
        json!({"body": "nonsense"}),
        json!({"body": "NotJson"}),
        json!({"only_ids": "1002"}),
        json!({"only_ids": []}),
        json!({"only_ids": [""]}),
        json!({"retry_after_http_date": true, "retry_after_omit": true}),
        json!({"body": "huge_values", "numbers_as_strings": true}),
        json!({"oversized_bytes": 1_u64 << 40}),
        json!({"reset_mid_body": "yes"}),
    ] {
        let message = call(
            &app,
            mgmt(Method::PUT, "/_sim/faults/send", TOKEN, Some(bad.clone())),
        )
        .await
        .error(StatusCode::BAD_REQUEST);
        assert!(!message.is_empty(), "{bad}");
    }
    assert!(sim.fault(Route::Send).is_none());
    // A default spec written in full is still the healthy route.
    let healthy = serde_json::to_value(FaultSpec::default()).expect("json");
    assert_eq!(
        serde_json::from_value::<FaultSpec>(healthy).ok(),
        Some(FaultSpec::default())
    );
}
