//! The Send API: token and allow-list checks, quota consumption, suppression and size limits.

use crate::helpers::*;

#[tokio::test]
async fn sending_consumes_the_plan_first_then_the_extras() {
    let sim = sim();
    let app = loopback_app(&sim);
    let to: Vec<String> = (0..12).map(|i| format!("r{i}@example.net")).collect();
    let to: Vec<&str> = to.iter().map(String::as_str).collect();
    let answer = call(
        &app,
        send_req("/v1/send", SEND_1, mail("shop@Shop.Example", &to)),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK);
    let body = answer.json();
    assert_eq!(body["accepted"], 12);
    assert_eq!(body["rejected"], 0);
    assert_eq!(body["messages"].as_array().map(Vec::len), Some(12));
    assert_eq!(body["messages"][0]["status"], "accepted");
    assert!(body["messages"][0]["id"].is_string());

    let account = sim.account(1).expect("account");
    assert_eq!(account.plan_messages_used, 100, "plan used up first");
    assert_eq!(
        account.remaining_extra_messages_bought, 18,
        "then two extras"
    );
    assert_eq!(account.extra_messages_total, 50);
    assert_eq!(account.messages_sent, 512);
    assert_eq!(account.remaining_messages(), 18);
    let record = sim.account_record(1).expect("record");
    assert_eq!(record["remaining_messages"], 18);
}

#[tokio::test]
async fn a_send_updates_the_tokens_last_used_at() {
    let sim = sim();
    let app = loopback_app(&sim);
    let answer = call(
        &app,
        send_req(
            "/v1/send",
            SEND_1,
            mail("a@shop.example", &["x@example.net"]),
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK);
    let account = sim.account(1).expect("account");
    assert!(account.api_tokens[0].last_used_at.is_some());
}

#[tokio::test]
async fn a_send_without_or_with_an_unknown_bearer_token_answers_401() {
    let app = loopback_app(&sim());
    let body = mail("a@shop.example", &["x@example.net"]).to_string();
    call(&app, request(Method::POST, "/v1/send", None, Some(&body)))
        .await
        .error(StatusCode::UNAUTHORIZED);
    call(
        &app,
        request(
            Method::POST,
            "/v1/send",
            Some(("authorization", format!("Basic {SEND_1}"))),
            Some(&body),
        ),
    )
    .await
    .error(StatusCode::UNAUTHORIZED);
    call(
        &app,
        send_req(
            "/v1/send",
            "bogus",
            mail("a@shop.example", &["x@example.net"]),
        ),
    )
    .await
    .error(StatusCode::UNAUTHORIZED);
    call(
        &app,
        send_req(
            "/v1/send",
            TOKEN,
            mail("a@shop.example", &["x@example.net"]),
        ),
    )
    .await
    .error(StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_disabled_account_cannot_send() {
    let sim = sim();
    let app = loopback_app(&sim);
    let message = call(
        &app,
        send_req(
            "/v1/send",
            SEND_3,
            mail("a@three.example", &["x@example.net"]),
        ),
    )
    .await
    .error(StatusCode::FORBIDDEN);
    assert!(message.contains("disabled"), "{message}");
    assert_eq!(sim.account(3).expect("account").messages_sent, 0);
}

#[tokio::test]
async fn a_send_larger_than_the_remaining_quota_is_refused_whole_with_402() {
    let sim = sim();
    let app = loopback_app(&sim);
    let to: Vec<String> = (0..31).map(|i| format!("r{i}@example.net")).collect();
    let to: Vec<&str> = to.iter().map(String::as_str).collect();
    let answer = call(
        &app,
        send_req("/v1/send", SEND_1, mail("a@shop.example", &to)),
    )
    .await;
    let message = answer.error(StatusCode::PAYMENT_REQUIRED);
    assert!(message.contains("quota"), "{message}");
    assert_eq!(answer.json()["code"], "quota_exhausted");
    let account = sim.account(1).expect("account");
    assert_eq!(account.remaining_messages(), 30, "nothing consumed");
    assert_eq!(account.messages_sent, 500);

    // Exactly the remaining quota goes through and leaves zero.
    let answer = call(
        &app,
        send_req("/v1/send", SEND_1, mail("a@shop.example", &to[..30])),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(sim.account(1).expect("account").remaining_messages(), 0);
    call(
        &app,
        send_req(
            "/v1/send",
            SEND_1,
            mail("a@shop.example", &["x@example.net"]),
        ),
    )
    .await
    .error(StatusCode::PAYMENT_REQUIRED);
}

#[tokio::test]
async fn the_token_allow_list_is_enforced() {
    let sim = sim();
    let body = || mail("a@two.example", &["x@example.net"]);
    let outside = loopback_app(&sim);
    let message = call(&outside, send_req("/v1/send", SEND_2, body()))
        .await
        .error(StatusCode::FORBIDDEN);
    assert!(message.contains("token"), "{message}");
    let inside = app_from(&sim, [192, 0, 2, 55]);
    let answer = call(&inside, send_req("/v1/send", SEND_2, body())).await;
    assert_eq!(answer.status, StatusCode::OK);
}

#[tokio::test]
async fn the_account_allow_list_is_enforced_too() {
    let sim = sim();
    let body = || mail("a@four.example", &["x@example.net"]);
    let outside = loopback_app(&sim);
    let message = call(&outside, send_req("/v1/send", SEND_4, body()))
        .await
        .error(StatusCode::FORBIDDEN);
    assert!(message.contains("account"), "{message}");
    let inside = app_from(&sim, [198, 51, 100, 9]);
    assert_eq!(
        call(&inside, send_req("/v1/send", SEND_4, body()))
            .await
            .status,
        StatusCode::OK
    );

    // With both lists, the address must be in both.
    sim.update_account(4, |account| {
        account.api_tokens[0].allow_nets = vec!["198.51.100.0/25".parse().expect("net")];
    });
    assert_eq!(
        call(&inside, send_req("/v1/send", SEND_4, body()))
            .await
            .status,
        StatusCode::OK
    );
    let in_account_only = app_from(&sim, [198, 51, 100, 200]);
    call(&in_account_only, send_req("/v1/send", SEND_4, body()))
        .await
        .error(StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn ipv4_mapped_ipv6_peers_match_ipv4_allow_lists() {
    let sim = sim();
    let mapped: std::net::IpAddr = "::ffff:192.0.2.9".parse().expect("ip");
    let app = app_from(&sim, mapped);
    let answer = call(
        &app,
        send_req(
            "/v1/send",
            SEND_2,
            mail("a@two.example", &["x@example.net"]),
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK);
}

#[tokio::test]
async fn suppressed_recipients_are_rejected_unless_the_account_ignores_the_list() {
    let sim = sim();
    let app = loopback_app(&sim);
    let answer = call(
        &app,
        mgmt(
            Method::POST,
            "/api/delivery/suppression_lists",
            TOKEN,
            Some(json!({"email": "Gone@Example.net", "reason": "bounce"})),
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    sim.suppress(
        "only-for-2@example.net",
        SuppressionReason::Complaint,
        Some(vec![2]),
    );

    let to = [
        "gone@example.net",
        "ok@example.net",
        "only-for-2@example.net",
    ];
    let body = call(
        &app,
        send_req("/v1/send", SEND_1, mail("a@shop.example", &to)),
    )
    .await
    .json();
    assert_eq!(body["accepted"], 2);
    assert_eq!(body["rejected"], 1);
    assert_eq!(body["messages"][0]["status"], "rejected");
    assert_eq!(body["messages"][0]["reason"], "suppressed");
    assert_eq!(body["messages"][0]["suppression_reason"], "bounce");
    assert_eq!(body["messages"][2]["status"], "accepted");
    assert_eq!(sim.account(1).expect("account").messages_sent, 502);

    sim.update_account(1, |account| account.ignore_suppression_list = true);
    let body = call(
        &app,
        send_req("/v1/send", SEND_1, mail("a@shop.example", &to)),
    )
    .await
    .json();
    assert_eq!(body["accepted"], 3);
    assert_eq!(body["rejected"], 0);
}

#[tokio::test]
async fn recipients_on_the_bounce_domain_are_suppressed_after_their_first_message() {
    let sim = sim();
    let app = loopback_app(&sim);
    let to = format!("b@{BOUNCE_DOMAIN}");
    let send = || send_req("/v1/send", SEND_1, mail("a@shop.example", &[to.as_str()]));
    assert_eq!(call(&app, send()).await.json()["accepted"], 1);
    assert_eq!(call(&app, send()).await.json()["rejected"], 1);
}

#[tokio::test]
async fn send_bodies_are_validated() {
    let app = loopback_app(&sim());
    let message = call(
        &app,
        send_req(
            "/v1/send",
            SEND_1,
            mail("a@elsewhere.example", &["x@example.net"]),
        ),
    )
    .await
    .error(StatusCode::FORBIDDEN);
    assert!(message.contains("elsewhere.example"), "{message}");
    for body in [
        json!({}),
        json!({"messages": []}),
        json!({"messages": [{"to": ["x@example.net"]}]}),
        json!({"messages": [{"from": "a@shop.example"}]}),
        json!({"messages": [{"from": "a@shop.example", "to": []}]}),
        json!({"messages": [{"from": "a@shop.example", "to": ["nobody"]}]}),
        json!({"messages": [{"from": "a@shop.example", "to": "x@example.net"}]}),
        json!({"messages": [{"from": "shop.example", "to": ["x@example.net"]}]}),
    ] {
        call(&app, send_req("/v1/send", SEND_1, body.clone()))
            .await
            .error(StatusCode::BAD_REQUEST);
    }
}

#[tokio::test]
async fn send_takes_50_messages_and_bulk_1000() {
    let sim = sim();
    sim.update_account(1, |account| account.plan_messages_limit = 10_000);
    let app = loopback_app(&sim);
    let many = |n: usize| -> Vec<String> { (0..n).map(|i| format!("r{i}@example.net")).collect() };
    let to = many(SEND_MAX_MESSAGES + 1);
    let to: Vec<&str> = to.iter().map(String::as_str).collect();
    let message = call(
        &app,
        send_req("/v1/send", SEND_1, mail("a@shop.example", &to)),
    )
    .await
    .error(StatusCode::BAD_REQUEST);
    assert!(message.contains("/v1/send/bulk"), "{message}");
    let answer = call(
        &app,
        send_req("/v1/send/bulk", SEND_1, mail("a@shop.example", &to)),
    )
    .await;
    assert_eq!(answer.json()["accepted"], SEND_MAX_MESSAGES + 1);
    let to = many(SEND_BULK_MAX_MESSAGES + 1);
    let to: Vec<&str> = to.iter().map(String::as_str).collect();
    call(
        &app,
        send_req("/v1/send/bulk", SEND_1, mail("a@shop.example", &to)),
    )
    .await
    .error(StatusCode::BAD_REQUEST);
}
