//! An unwell provider rather than a rate-limited one: requests never answered, held until the
//! client gives up. Through the router on paused time for the bounds, and through a real loopback
//! server for what only a socket shows (a client timing out, a connection closed unanswered, a
//! graceful shutdown that does not wait).

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
