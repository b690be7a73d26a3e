//! An unwell provider rather than a rate-limited one: requests never answered, held until the
//! client gives up, and outages limited in time, on one route or on every route at once. Through
//! the router on paused time for windows and bounds, and through a real loopback server for what
//! only a socket shows (a client timing out, a connection closed unanswered, a graceful shutdown
//! that does not wait).

use tokio::time::advance;

use crate::helpers::*;

/// Longest wait for a condition a test waits for; checked every [`POLL`].
const PATIENCE: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(10);

/// Waits until `condition` holds, at most [`PATIENCE`] (real time); false if it never did.
async fn eventually(mut condition: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + PATIENCE;
    while std::time::Instant::now() < deadline {
        if condition() {
            return true;
        }
        tokio::time::sleep(POLL).await;
    }
    condition()
}

fn no_answer(rate: f64) -> FaultSpec {
    FaultSpec {
        no_answer_rate: rate,
        ..FaultSpec::default()
    }
}

/// An error and each of its sources, as text.
fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn account_url(addr: SocketAddr, id: i32) -> String {
    format!("http://{addr}/api/delivery/accounts/{id}")
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_request_is_held_until_its_client_goes_away() {
    let sim = sim();
    let app = loopback_app(&sim);
    sim.set_fault(Route::DeliveryAccountGet, no_answer(1.0));
    // A client that gives up a second before the bound: its request is dropped, and with it the
    // hold.
    let gave_up = tokio::time::timeout(
        NO_ANSWER_HOLD - Duration::from_secs(1),
        app.clone().oneshot(get_account("1")),
    )
    .await;
    assert!(gave_up.is_err(), "answered: {gave_up:?}");
    assert_eq!(sim.held_requests(), 0);
    assert_eq!(sim.hits("/api/delivery/accounts/1"), 1);
    // Other routes answer as ever.
    assert_eq!(call(&app, daily("1", "")).await.status, StatusCode::OK);
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_request_is_closed_after_ten_minutes_without_an_answer() {
    let sim = sim();
    let app = loopback_app(&sim);
    sim.set_fault(Route::DeliveryAccountGet, no_answer(1.0));
    let started = tokio::time::Instant::now();
    let response = app.oneshot(get_account("1")).await.expect("infallible");
    assert_eq!(started.elapsed(), NO_ANSWER_HOLD);
    assert_eq!(NO_ANSWER_HOLD, Duration::from_secs(600));
    // Through the router the never-sent head reads 504; its body fails before a byte.
    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
    assert!(to_bytes(response.into_body(), usize::MAX).await.is_err());
    assert_eq!(sim.held_requests(), 0);
}

#[tokio::test(start_paused = true)]
async fn no_answer_rolls_before_429s_and_errors_and_follows_only_ids() {
    let sim = sim();
    let app = loopback_app(&sim);
    sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            no_answer_rate: 1.0,
            rate_limit_rate: 1.0,
            error_rate: 1.0,
            only_ids: Some(vec!["2".to_owned()]),
            ..FaultSpec::default()
        },
    );
    let held = tokio::time::timeout(
        Duration::from_secs(30),
        app.clone().oneshot(get_account("2")),
    )
    .await;
    assert!(held.is_err(), "answered: {held:?}");
    assert_eq!(call(&app, get_account("1")).await.record()["id"], 1);
    // A rate of 0 holds nothing: the 429 roll comes next.
    sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            rate_limit_rate: 1.0,
            ..no_answer(0.0)
        },
    );
    call(&app, get_account("1"))
        .await
        .error(StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn a_client_timeout_ends_the_hold_of_its_request_on_the_server() {
    let sim = sim();
    sim.set_fault(Route::DeliveryAccountGet, no_answer(1.0));
    let Served { addr, shutdown, .. } = serve(&sim).await;
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(500))
        .build()
        .expect("client");
    let request = tokio::spawn(
        impatient
            .get(account_url(addr, 1))
            .header(MANAGEMENT_TOKEN_HEADER, TOKEN)
            .send(),
    );
    assert!(eventually(|| sim.held_requests() == 1).await, "never held");
    let error = request
        .await
        .expect("client task")
        .expect_err("no answer ever comes");
    assert!(error.is_timeout(), "{error:?}");
    // The client closed its connection: the server drops the request and its hold.
    assert!(
        eventually(|| sim.held_requests() == 0).await,
        "still held: {}",
        sim.held_requests()
    );
    // The connection's neighbours are answered meanwhile.
    let answer = reqwest::Client::new()
        .get(format!("http://{addr}/api/delivery/tracemail/daily/1"))
        .header(MANAGEMENT_TOKEN_HEADER, TOKEN)
        .send()
        .await
        .expect("answer");
    assert_eq!(answer.status(), reqwest::StatusCode::OK);
    shutdown.cancel();
}

#[tokio::test]
async fn a_graceful_shutdown_closes_held_requests_unanswered_and_does_not_wait_for_them() {
    let sim = sim();
    sim.set_fault(Route::DeliveryAccountGet, no_answer(1.0));
    let Served {
        addr,
        shutdown,
        server,
    } = serve(&sim).await;
    let patient = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .expect("client");
    let requests: Vec<_> = (0..3)
        .map(|_| {
            tokio::spawn(
                patient
                    .get(account_url(addr, 1))
                    .header(MANAGEMENT_TOKEN_HEADER, TOKEN)
                    .send(),
            )
        })
        .collect();
    assert!(
        eventually(|| sim.held_requests() == 3).await,
        "held: {}",
        sim.held_requests()
    );
    shutdown.cancel();
    tokio::time::timeout(PATIENCE, server)
        .await
        .expect("the server stops without waiting for the held requests")
        .expect("server task")
        .expect("serve");
    for request in requests {
        let error = tokio::time::timeout(PATIENCE, request)
            .await
            .expect("the client learns at once")
            .expect("client task")
            .expect_err("closed without an answer");
        // No status ever came: the connection closed before one.
        assert!(error.is_request() && !error.is_timeout(), "{error:?}");
        assert!(
            causes(&error).contains("connection closed before message completed"),
            "{error:?}"
        );
    }
    assert_eq!(sim.held_requests(), 0);
}

#[tokio::test]
async fn the_control_plane_sets_no_answer_and_shows_the_held_requests() {
    let sim = sim();
    let app = loopback_app(&sim);
    let set = call(
        &app,
        mgmt(
            Method::PUT,
            "/_sim/faults/tracemail_daily",
            TOKEN,
            Some(json!({"no_answer_rate": 0.25})),
        ),
    )
    .await;
    assert_eq!(set.status, StatusCode::OK, "{:?}", set.json());
    assert_eq!(set.json()["fault"]["no_answer_rate"], 0.25);
    let state = call(&app, get("/_sim/state", TOKEN)).await.json();
    assert_eq!(state["held_requests"], 0);
    assert_eq!(state["faults"]["tracemail_daily"]["no_answer_rate"], 0.25);
    for (bad, expected) in [
        (
            json!({"no_answer_rate": 1.5}),
            "`no_answer_rate` must be between 0.0 and 1.0, got 1.5",
        ),
        (
            json!({"no_answer_rate": -0.1}),
            "`no_answer_rate` must be between 0.0 and 1.0, got -0.1",
        ),
        (json!({"no_answer": true}), "unknown field `no_answer`"),
        (json!({"no_answer_rate": true}), "invalid type: boolean"),
    ] {
        let message = call(
            &app,
            mgmt(Method::PUT, "/_sim/faults/send", TOKEN, Some(bad.clone())),
        )
        .await
        .error(StatusCode::BAD_REQUEST);
        assert!(message.contains(expected), "{bad}: {message:?}");
    }
    assert!(sim.fault(Route::Send).is_none());
}

/// A request of every route, in the order of [`Route::ALL`].
fn every_route() -> Vec<(Route, Request<Body>)> {
    let put = |path: &str, body: Value| mgmt(Method::PUT, path, TOKEN, Some(body));
    vec![
        (Route::DeliveryAccountGet, get_account("1")),
        (
            Route::DeliveryAccountPut,
            put("/api/delivery/accounts/1", json!({"plan": "business"})),
        ),
        (
            Route::DeliveryAccountStatus,
            put(
                "/api/delivery/accounts/1/status",
                json!({"status": "enabled"}),
            ),
        ),
        (
            Route::DeliveryApiTokenPut,
            put(
                "/api/delivery/accounts/1/api_tokens/11",
                json!({"allow_nets": []}),
            ),
        ),
        (
            Route::SuppressionListPost,
            mgmt(
                Method::POST,
                "/api/delivery/suppression_lists",
                TOKEN,
                Some(json!({"email": "x@example.net", "reason": "bounce"})),
            ),
        ),
        (
            Route::Send,
            send_req(
                "/v1/send",
                SEND_1,
                mail("a@shop.example", &["y@example.net"]),
            ),
        ),
        (
            Route::SendBulk,
            send_req(
                "/v1/send/bulk",
                SEND_1,
                mail("a@shop.example", &["y@example.net"]),
            ),
        ),
        (Route::TracemailDashboard, dashboard(TOKEN, json!({}))),
        (Route::TracemailDaily, daily("1", "")),
        (
            Route::MigrationStats,
            get("/api/migrations/MG00000007/stats", TOKEN),
        ),
        (Route::EmailAccountGet, get(MAILBOX, TOKEN)),
        (
            Route::TeamMemberGet,
            get("/api/team_members/T000000001", TOKEN),
        ),
        (
            Route::TeamMemberPut,
            put("/api/team_members/T000000001", json!({"otp": true})),
        ),
    ]
}

/// What each route of [`every_route`] answers now.
async fn statuses_of_every_route(app: &Router) -> Vec<(Route, StatusCode)> {
    let mut out = Vec::new();
    for (route, request) in every_route() {
        out.push((route, call(app, request).await.status));
    }
    out
}

fn outage(status: u16) -> FaultSpec {
    FaultSpec {
        error_rate: 1.0,
        error_status: Some(status),
        ..FaultSpec::default()
    }
}

#[tokio::test(start_paused = true)]
async fn an_outage_window_opens_after_its_start_and_closes_after_its_length() {
    let sim = sim();
    let app = loopback_app(&sim);
    sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            error_retry_after_secs: Some(10),
            starts_after: Some(Duration::from_secs(1)),
            lasts: Some(Duration::from_secs(2)),
            ..outage(503)
        },
    );
    let status = |app: Router| async move { call(&app, get_account("1")).await.status.as_u16() };
    assert_eq!(status(app.clone()).await, 200);
    advance(Duration::from_millis(999)).await;
    assert_eq!(status(app.clone()).await, 200);
    advance(Duration::from_millis(1)).await;
    let down = call(&app, get_account("1")).await;
    down.error(StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(down.headers[header::RETRY_AFTER], "10");
    advance(Duration::from_millis(1999)).await;
    assert_eq!(status(app.clone()).await, 503);
    advance(Duration::from_millis(1)).await;
    assert_eq!(status(app.clone()).await, 200);
    advance(Duration::from_secs(3600)).await;
    assert_eq!(status(app.clone()).await, 200);
    // The fault is still set, its window closed; setting it again opens a new one from now.
    assert!(sim.fault(Route::DeliveryAccountGet).is_some());
    sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            lasts: Some(Duration::from_secs(2)),
            ..outage(502)
        },
    );
    assert_eq!(status(app.clone()).await, 502);
    advance(Duration::from_secs(2)).await;
    assert_eq!(status(app.clone()).await, 200);
}

#[tokio::test(start_paused = true)]
async fn an_outage_without_an_end_lasts_until_the_fault_is_cleared() {
    let sim = sim();
    let app = loopback_app(&sim);
    sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            starts_after: Some(Duration::from_secs(10)),
            ..outage(503)
        },
    );
    assert_eq!(call(&app, get_account("1")).await.status, StatusCode::OK);
    advance(Duration::from_secs(10)).await;
    for _ in 0..3 {
        call(&app, get_account("1"))
            .await
            .error(StatusCode::SERVICE_UNAVAILABLE);
        advance(Duration::from_secs(24 * 3600)).await;
    }
    sim.clear_faults();
    assert_eq!(call(&app, get_account("1")).await.status, StatusCode::OK);
}

#[tokio::test(start_paused = true)]
async fn a_window_of_no_answer_holds_requests_only_while_it_is_open() {
    let sim = sim();
    let app = loopback_app(&sim);
    sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            no_answer_rate: 1.0,
            starts_after: Some(Duration::from_secs(5)),
            lasts: Some(Duration::from_secs(10)),
            ..FaultSpec::default()
        },
    );
    assert_eq!(call(&app, get_account("1")).await.status, StatusCode::OK);
    advance(Duration::from_secs(5)).await;
    let held = tokio::time::timeout(
        Duration::from_secs(1),
        app.clone().oneshot(get_account("1")),
    )
    .await;
    assert!(held.is_err(), "answered: {held:?}");
    // Six seconds in, nine to go.
    advance(Duration::from_secs(9)).await;
    assert_eq!(call(&app, get_account("1")).await.status, StatusCode::OK);
    assert_eq!(sim.held_requests(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_outage_of_the_whole_api_is_one_call_and_ends_on_every_route_at_once() {
    let sim = hosting_sim();
    let app = loopback_app(&sim);
    // Each route's own answer (not a fault's) before the outage, to compare with after it.
    let healthy = statuses_of_every_route(&app).await;
    assert_eq!(healthy.len(), Route::ALL.len());
    // The handlers answer (the hosting fleet has no team member: 404).
    assert_eq!(
        healthy
            .iter()
            .filter(|(_, status)| status.is_success())
            .count(),
        Route::ALL.len() - 2,
        "{healthy:?}"
    );
    assert!(
        healthy
            .iter()
            .all(|(_, status)| *status != StatusCode::SERVICE_UNAVAILABLE)
    );
    let answer = call(
        &app,
        mgmt(
            Method::PUT,
            "/_sim/faults",
            TOKEN,
            Some(
                json!({"error_rate": 1.0, "error_status": 503, "error_retry_after_secs": 30,
                        "starts_after_ms": 1000, "lasts_ms": 60000}),
            ),
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.json());
    let body = answer.json();
    let names: Vec<&str> = Route::ALL.iter().map(Route::name).collect();
    assert_eq!(body["routes"], json!(names));
    assert_eq!(body["fault"]["starts_after_ms"], 1000);
    assert_eq!(body["fault"]["lasts_ms"], 60000);
    for route in Route::ALL {
        assert_eq!(
            sim.fault(route).map(|f| f.lasts),
            Some(Some(Duration::from_secs(60))),
            "{route}"
        );
    }
    advance(Duration::from_secs(1)).await;
    for (route, request) in every_route() {
        let answer = call(&app, request).await;
        answer.error(StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(answer.headers[header::RETRY_AFTER], "30", "{route}");
    }
    // The control plane is no route of the API: it still answers.
    assert_eq!(
        call(&app, get("/_sim/hits", TOKEN)).await.status,
        StatusCode::OK
    );
    advance(Duration::from_secs(60)).await;
    assert_eq!(statuses_of_every_route(&app).await, healthy);
    // Set again without a window, then healed in one call.
    sim.set_fault_on_every_route(outage(502));
    call(&app, get_account("1"))
        .await
        .error(StatusCode::BAD_GATEWAY);
    let healed = call(&app, mgmt(Method::DELETE, "/_sim/faults", TOKEN, None)).await;
    assert_eq!(healed.status, StatusCode::NO_CONTENT);
    assert!(
        Route::ALL
            .into_iter()
            .all(|route| sim.fault(route).is_none())
    );
}

#[tokio::test]
async fn bad_windows_and_bad_outages_are_refused_naming_the_member_and_change_nothing() {
    let sim = sim();
    let app = loopback_app(&sim);
    let cases = [
        (
            json!({"error_rate": 1.0, "lasts_ms": 0}),
            "`lasts_ms` must be at least 1",
        ),
        (
            json!({"error_rate": 1.0, "lasts_ms": 604_800_001_u64}),
            "`lasts_ms` must be at most 604800000 (a week), got 604800001",
        ),
        (
            json!({"error_rate": 1.0, "starts_after_ms": 604_800_001_u64}),
            "`starts_after_ms` must be at most 604800000 (a week), got 604800001",
        ),
        (
            json!({"starts_after_ms": 10, "lasts_ms": 10}),
            "`starts_after_ms` and `lasts_ms` limit a fault in time, but this spec has no fault",
        ),
        (
            json!({"error_rate": 1.0, "starts_after": 10}),
            "unknown field `starts_after`",
        ),
        (
            json!({"error_rate": 1.0, "lasts_ms": -1}),
            "invalid value: integer `-1`",
        ),
        (
            json!({"routes": "all", "error_rate": 1.0}),
            "unknown field `routes`",
        ),
    ];
    for path in ["/_sim/faults", "/_sim/faults/delivery_account_get"] {
        for (body, expected) in &cases {
            let message = call(&app, mgmt(Method::PUT, path, TOKEN, Some(body.clone())))
                .await
                .error(StatusCode::BAD_REQUEST);
            assert!(message.contains(expected), "{path} {body}: {message:?}");
        }
    }
    assert!(
        Route::ALL
            .into_iter()
            .all(|route| sim.fault(route).is_none())
    );
    // Only an unrestricted management token may set an outage.
    let good = json!({"error_rate": 1.0});
    call(
        &app,
        mgmt(Method::PUT, "/_sim/faults", SCOPED, Some(good.clone())),
    )
    .await
    .error(StatusCode::FORBIDDEN);
    call(
        &app,
        request(Method::PUT, "/_sim/faults", None, Some(&good.to_string())),
    )
    .await
    .error(StatusCode::UNAUTHORIZED);
    assert!(
        Route::ALL
            .into_iter()
            .all(|route| sim.fault(route).is_none())
    );
}
