//! Injected faults on the wire: error rates, rate limiting, malformed and stringified bodies,
//! latency, on every route that answers a record.

use crate::helpers::*;

#[tokio::test]
async fn an_error_rate_of_one_answers_500_json_every_time() {
    let sim = sim();
    let app = loopback_app(&sim);
    sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            error_rate: 1.0,
            ..FaultSpec::default()
        },
    );
    for _ in 0..20 {
        let answer = call(&app, get_account("1")).await;
        answer.error(StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(answer.json()["code"], "injected_fault");
    }
    // Other routes are untouched.
    let answer = call(
        &app,
        mgmt(
            Method::PUT,
            "/api/delivery/accounts/1/status",
            TOKEN,
            Some(json!({"status": "enabled"})),
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK);

    sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            error_rate: 1.0,
            error_status: Some(503),
            ..FaultSpec::default()
        },
    );
    call(&app, get_account("1"))
        .await
        .error(StatusCode::SERVICE_UNAVAILABLE);
    sim.clear_faults();
    assert_eq!(call(&app, get_account("1")).await.status, StatusCode::OK);
}

#[tokio::test]
async fn rate_limiting_answers_429_with_retry_after() {
    let sim = sim();
    let app = loopback_app(&sim);
    sim.set_fault(
        Route::Send,
        FaultSpec {
            rate_limit_rate: 1.0,
            retry_after_secs: 17,
            ..FaultSpec::default()
        },
    );
    let answer = call(
        &app,
        send_req(
            "/v1/send",
            SEND_1,
            mail("a@shop.example", &["x@example.net"]),
        ),
    )
    .await;
    answer.error(StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(answer.headers[header::RETRY_AFTER], "17");
    assert_eq!(sim.account(1).expect("account").messages_sent, 500);
}

#[tokio::test]
async fn a_malformed_answer_is_a_200_that_is_not_json() {
    let sim = sim();
    let app = loopback_app(&sim);
    sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            malformed_rate: 1.0,
            ..FaultSpec::default()
        },
    );
    let answer = call(&app, get_account("1")).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert!(!answer.bytes.is_empty());
    assert!(serde_json::from_slice::<Value>(&answer.bytes).is_err());
    // Errors are not disguised: an auth failure still answers 401.
    let answer = call(
        &app,
        request(Method::GET, "/api/delivery/accounts/1", None, None),
    )
    .await;
    answer.error(StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn numbers_as_strings_turns_every_number_of_the_record_into_a_string() {
    let sim = sim();
    let app = loopback_app(&sim);
    sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            numbers_as_strings: true,
            ..FaultSpec::default()
        },
    );
    let record = call(&app, get_account("1")).await.record();
    assert_eq!(record["id"], "1");
    assert_eq!(record["status"], "1");
    assert_eq!(record["remaining_messages"], "30");
    assert_eq!(record["plan_messages_limit"], "100");
    assert_eq!(record["domains_count"], "2");
    assert_eq!(record["bounce_notification_to_sender"], false);
    let numbers = record
        .as_object()
        .expect("object")
        .values()
        .filter(|v| v.is_number())
        .count();
    assert_eq!(numbers, 0);
}

#[tokio::test]
async fn latency_delays_the_answer() {
    let sim = sim();
    let app = loopback_app(&sim);
    sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            latency: Some(Duration::from_millis(150)),
            ..FaultSpec::default()
        },
    );
    let started = std::time::Instant::now();
    assert_eq!(call(&app, get_account("1")).await.status, StatusCode::OK);
    assert!(started.elapsed() >= Duration::from_millis(150));
}

#[tokio::test]
async fn faults_apply_to_the_statistics_migration_and_mailbox_routes() {
    let sim = hosting_sim();
    sample_outcomes(&sim);
    let app = loopback_app(&sim);
    let requests = || {
        [
            (Route::TracemailDashboard, dashboard(TOKEN, json!({}))),
            (Route::TracemailDaily, daily("1", "")),
            (
                Route::MigrationStats,
                get("/api/migrations/MG00000007/stats", TOKEN),
            ),
            (Route::EmailAccountGet, get(MAILBOX, TOKEN)),
        ]
    };
    for (route, request) in requests() {
        sim.set_fault(
            route,
            FaultSpec {
                error_rate: 1.0,
                error_status: Some(503),
                ..FaultSpec::default()
            },
        );
        call(&app, request)
            .await
            .error(StatusCode::SERVICE_UNAVAILABLE);
        sim.clear_faults();
    }
    for (route, request) in requests() {
        sim.set_fault(
            route,
            FaultSpec {
                rate_limit_rate: 1.0,
                retry_after_secs: 3,
                ..FaultSpec::default()
            },
        );
        let answer = call(&app, request).await;
        answer.error(StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(answer.headers[header::RETRY_AFTER], "3");
        sim.clear_faults();
    }
    for (route, request) in requests() {
        sim.set_fault(
            route,
            FaultSpec {
                malformed_rate: 1.0,
                ..FaultSpec::default()
            },
        );
        let answer = call(&app, request).await;
        assert_eq!(answer.status, StatusCode::OK, "{route}");
        assert!(
            serde_json::from_slice::<Value>(&answer.bytes).is_err(),
            "{route}"
        );
        sim.clear_faults();
    }
    for (route, request) in requests() {
        sim.set_fault(
            route,
            FaultSpec {
                numbers_as_strings: true,
                ..FaultSpec::default()
            },
        );
        let body = call(&app, request).await.json();
        let mut numbers = Vec::new();
        let inside = body.get("resources").unwrap_or(&body);
        collect_numbers(inside, &mut numbers);
        assert!(numbers.is_empty(), "{route}: {numbers:?}");
        sim.clear_faults();
    }
    let body = {
        sim.set_fault(
            Route::MigrationStats,
            FaultSpec {
                numbers_as_strings: true,
                ..FaultSpec::default()
            },
        );
        call(&app, get("/api/migrations/MG00000007/stats", TOKEN))
            .await
            .json()
    };
    assert_eq!(body["aggregate"]["messages"]["total"], "3000");
    assert_eq!(body["aggregate"]["accounts"]["total"], "3");
}

#[tokio::test]
async fn error_answers_carry_the_retry_after_they_are_given_and_none_otherwise() {
    let sim = sim();
    let app = loopback_app(&sim);
    sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            error_rate: 1.0,
            error_status: Some(503),
            error_retry_after_secs: Some(10),
            ..FaultSpec::default()
        },
    );
    for _ in 0..5 {
        let answer = call(&app, get_account("1")).await;
        answer.error(StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(answer.json()["code"], "injected_fault");
        assert_eq!(answer.headers[header::RETRY_AFTER], "10");
    }
    // Without it, as before: a bare error.
    sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            error_rate: 1.0,
            error_status: Some(503),
            ..FaultSpec::default()
        },
    );
    let answer = call(&app, get_account("1")).await;
    answer.error(StatusCode::SERVICE_UNAVAILABLE);
    assert!(!answer.headers.contains_key(header::RETRY_AFTER));
    // Over the control plane, on the Send API, with the default status.
    let set = call(
        &app,
        mgmt(
            Method::PUT,
            "/_sim/faults/send",
            TOKEN,
            Some(json!({"error_rate": 1.0, "error_retry_after_secs": 0})),
        ),
    )
    .await;
    assert_eq!(set.status, StatusCode::OK, "{:?}", set.json());
    assert_eq!(set.json()["fault"]["error_retry_after_secs"], 0);
    let answer = call(
        &app,
        send_req(
            "/v1/send",
            SEND_1,
            mail("a@shop.example", &["x@example.net"]),
        ),
    )
    .await;
    answer.error(StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(answer.headers[header::RETRY_AFTER], "0");
}

#[tokio::test]
async fn a_bad_error_retry_after_is_refused_naming_the_member() {
    let sim = sim();
    let app = loopback_app(&sim);
    let cases = [
        (
            json!({"error_rate": 1.0, "error_retry_after_secs": 86_401}),
            "`error_retry_after_secs` must be at most 86400 (a day), got 86401",
        ),
        (
            json!({"error_retry_after_secs": 5}),
            "`error_retry_after_secs` is the Retry-After of the errors of `error_rate`, which is 0",
        ),
        // serde names the type it expected, not the member.
        (
            json!({"error_rate": 1.0, "error_retry_after_secs": -1}),
            "invalid value: integer `-1`, expected u64",
        ),
        (
            json!({"error_rate": 1.0, "error_retry_after_secs": "10"}),
            "invalid type: string \"10\", expected u64",
        ),
    ];
    for (body, expected) in cases {
        let message = call(
            &app,
            mgmt(
                Method::PUT,
                "/_sim/faults/delivery_account_get",
                TOKEN,
                Some(body.clone()),
            ),
        )
        .await
        .error(StatusCode::BAD_REQUEST);
        assert!(message.contains(expected), "{body}: {message:?}");
    }
    assert!(sim.fault(Route::DeliveryAccountGet).is_none());
}
