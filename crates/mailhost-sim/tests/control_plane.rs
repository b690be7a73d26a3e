//! The `/_sim/` control plane: per-target faults, request counts, setting and clearing faults.

use crate::helpers::*;

#[tokio::test]
async fn the_control_plane_adds_per_target_faults_and_counts_requests_per_path() {
    let sim = sim();
    let app = loopback_app(&sim);
    for (id, status) in [("1", 502), ("2", 503)] {
        let answer = call(
            &app,
            mgmt(
                Method::POST,
                "/_sim/faults/delivery_account_get",
                TOKEN,
                Some(json!({"error_rate": 1.0, "error_status": status, "only_ids": [id]})),
            ),
        )
        .await;
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.json()["added"]["error_status"], status);
    }
    call(&app, get_account("1"))
        .await
        .error(StatusCode::BAD_GATEWAY);
    call(&app, get_account("2"))
        .await
        .error(StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(call(&app, get_account("3")).await.status, StatusCode::OK);
    call(&app, get_account("1"))
        .await
        .error(StatusCode::BAD_GATEWAY);
    let hits = call(&app, mgmt(Method::GET, "/_sim/hits", TOKEN, None))
        .await
        .json();
    assert_eq!(hits["hits"]["/api/delivery/accounts/1"], 2);
    assert_eq!(hits["hits"]["/api/delivery/accounts/3"], 1);
    assert_eq!(sim.hits("/api/delivery/accounts/2"), 1);
    // A contradictory spec is refused, as with PUT.
    let bad = json!({"retry_after_http_date": true, "retry_after_omit": true});
    let answer = call(
        &app,
        mgmt(
            Method::POST,
            "/_sim/faults/delivery_account_get",
            TOKEN,
            Some(bad),
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_control_plane_sets_and_clears_faults() {
    let sim = sim();
    let app = loopback_app(&sim);
    let answer = call(
        &app,
        mgmt(
            Method::PUT,
            "/_sim/faults/delivery_account_get",
            TOKEN,
            Some(json!({"error_rate": 1.0, "error_status": 502, "latency_ms": 0})),
        ),
    )
    .await;
    assert_eq!(
        answer.status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&answer.bytes)
    );
    assert_eq!(answer.json()["route"], "delivery_account_get");
    assert_eq!(
        sim.fault(Route::DeliveryAccountGet).map(|f| f.error_status),
        Some(Some(502))
    );
    call(&app, get_account("1"))
        .await
        .error(StatusCode::BAD_GATEWAY);

    let state = call(&app, mgmt(Method::GET, "/_sim/state", TOKEN, None))
        .await
        .json();
    assert_eq!(state["accounts"].as_array().map(Vec::len), Some(4));
    assert_eq!(state["faults"]["delivery_account_get"]["error_status"], 502);
    assert!(state["now"].is_string());

    let answer = call(&app, mgmt(Method::DELETE, "/_sim/faults", TOKEN, None)).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    assert_eq!(call(&app, get_account("1")).await.status, StatusCode::OK);

    let message = call(
        &app,
        mgmt(Method::PUT, "/_sim/faults/nope", TOKEN, Some(json!({}))),
    )
    .await
    .error(StatusCode::NOT_FOUND);
    assert!(message.contains("send_bulk"), "{message}");
    for bad in [
        json!({"error_rate": 2.0}),
        json!({"latency": 5}),
        json!({"error_rate": "x"}),
    ] {
        call(
            &app,
            mgmt(Method::PUT, "/_sim/faults/send", TOKEN, Some(bad)),
        )
        .await
        .error(StatusCode::BAD_REQUEST);
    }
    call(&app, request(Method::GET, "/_sim/state", None, None))
        .await
        .error(StatusCode::UNAUTHORIZED);
    call(&app, mgmt(Method::GET, "/_sim/state", SCOPED, None))
        .await
        .error(StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn the_control_plane_clears_the_fault_of_one_route() {
    let sim = sim();
    let app = loopback_app(&sim);
    let spec = FaultSpec {
        error_rate: 1.0,
        ..FaultSpec::default()
    };
    sim.set_fault(Route::Send, spec.clone());
    sim.set_fault(Route::SendBulk, spec);
    let answer = call(&app, mgmt(Method::DELETE, "/_sim/faults/send", TOKEN, None)).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    assert!(sim.fault(Route::Send).is_none());
    assert!(sim.fault(Route::SendBulk).is_some());
}
