//! Delivery account records and their updates: settings, status, API tokens, suppression entries.

use crate::helpers::*;

#[tokio::test]
async fn the_account_record_has_every_documented_field() {
    let sim = sim();
    let app = loopback_app(&sim);
    let answer = call(&app, get_account("1")).await;
    let body = answer.json();
    assert_eq!(
        body["pagination"],
        json!({"page": 1, "per_page": 1, "total": 1})
    );
    let record = answer.record();
    let members = record.as_object().expect("object");
    for field in ACCOUNT_RECORD_FIELDS {
        assert!(members.contains_key(field), "missing {field}");
    }
    assert_eq!(members.len(), ACCOUNT_RECORD_FIELDS.len());
    assert_eq!(record["id"], 1);
    assert_eq!(record["status"], 1);
    assert_eq!(record["status_detail"], "ok");
    assert_eq!(record["type"], "transactional");
    assert_eq!(record["plan"], "business");
    assert_eq!(record["password"], "********");
    assert_eq!(record["remaining_messages"], 30);
    assert_eq!(record["num_messages"], 100);
    assert_eq!(record["plan_num_messages"], 100);
    assert_eq!(record["messages_sent"], 500);
    assert_eq!(record["domains_count"], 2);
    assert_eq!(
        record["domains"],
        json!([
            {"code": "D000000101", "name": "shop.example"},
            {"code": "D000000102", "name": "news.example"}
        ])
    );
    assert_eq!(record["allow_nets"], json!([]));
    assert_eq!(record["delete_on"], Value::Null);
    for date in [
        "created_at",
        "updated_at",
        "start_date",
        "next_renewal_date",
        "last_renewal_date",
        "plan_expiration_date",
        "extra_messages_expires_at",
    ] {
        let text = record[date].as_str().unwrap_or_default();
        let parsed = jiff::civil::DateTime::strptime("%Y-%m-%d %H:%M:%S", text);
        assert!(parsed.is_ok(), "{date}: {text:?}");
    }
    assert_eq!(sim.account_record(1), Some(record));
}

#[tokio::test]
async fn seeded_dates_follow_the_simulator_clock() {
    let start: jiff::Timestamp = "2025-01-10T08:00:00Z".parse().expect("ts");
    let sim = Simulator::try_with_clock(config(), SimClock::frozen(start)).expect("config");
    let record = sim.account_record(1).expect("record");
    assert_eq!(record["plan_expiration_date"], "2025-02-09 08:00:00");
    assert_eq!(record["next_renewal_date"], "2025-02-09 08:00:00");
    assert_eq!(record["last_renewal_date"], "2025-01-10 08:00:00");
    sim.clock().advance(Duration::from_secs(3600));
    let app = loopback_app(&sim);
    let record = call(
        &app,
        mgmt(
            Method::PUT,
            "/api/delivery/accounts/1/status",
            TOKEN,
            Some(json!({"status": "enabled"})),
        ),
    )
    .await
    .record();
    assert_eq!(record["updated_at"], "2025-01-10 09:00:00");
}

#[tokio::test]
async fn the_status_put_flips_status_and_status_detail() {
    let sim = sim();
    let app = loopback_app(&sim);
    let put = |status: &str| {
        mgmt(
            Method::PUT,
            "/api/delivery/accounts/1/status",
            TOKEN,
            Some(json!({ "status": status })),
        )
    };
    let record = call(&app, put("disabled")).await.record();
    assert_eq!(record["status"], 0);
    assert_eq!(record["status_detail"], "disabled");
    assert!(!sim.account(1).expect("account").enabled);
    let record = call(&app, put("enabled")).await.record();
    assert_eq!(record["status"], 1);
    assert_eq!(record["status_detail"], "ok");
    call(&app, put("paused"))
        .await
        .error(StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn bodies_that_are_not_json_or_miss_required_fields_answer_400_json() {
    let app = loopback_app(&sim());
    let path = "/api/delivery/accounts/1/status";
    let auth = || Some((MANAGEMENT_TOKEN_HEADER, TOKEN.to_owned()));
    for body in [
        None,
        Some("{\"status\":"),
        Some("[1]"),
        Some("{}"),
        Some("{\"status\":1}"),
    ] {
        let message = call(&app, request(Method::PUT, path, auth(), body))
            .await
            .error(StatusCode::BAD_REQUEST);
        assert!(!message.is_empty(), "{body:?}");
    }
    let message = call(&app, request(Method::PUT, path, auth(), Some("{}")))
        .await
        .error(StatusCode::BAD_REQUEST);
    assert!(message.contains("`status`"), "{message}");
}

#[tokio::test]
async fn the_settings_put_applies_every_field_and_buys_extra_messages() {
    let sim = sim();
    let app = loopback_app(&sim);
    let record = call(
        &app,
        mgmt(
            Method::PUT,
            "/api/delivery/accounts/1",
            TOKEN,
            Some(json!({
                "description": "main shop",
                "bounce_notification": "bounces@shop.example",
                "bounce_notification_to_sender": true,
                "domain_codes": ["D000000102", "D000000103"],
                "payment_method": "cardprocessor",
                "volume": 2,
                "ignore_suppression_list": true,
                "allow_nets": ["10.0.0.0/8", "192.0.2.7", "2001:db8::/32"],
            })),
        ),
    )
    .await
    .record();
    assert_eq!(record["description"], "main shop");
    assert_eq!(record["bounce_notification"], "bounces@shop.example");
    assert_eq!(record["bounce_notification_to_sender"], true);
    assert_eq!(
        record["domains"],
        json!([
            {"code": "D000000102", "name": "news.example"},
            {"code": "D000000103", "name": "two.example"}
        ])
    );
    assert_eq!(record["domains_count"], 2);
    assert_eq!(record["extra_messages_total"], 2050);
    assert_eq!(record["remaining_extra_messages_bought"], 2020);
    assert_eq!(record["remaining_messages"], 2030);
    assert_eq!(record["ignore_suppression_list"], true);
    assert_eq!(
        record["allow_nets"],
        json!(["10.0.0.0/8", "192.0.2.7", "2001:db8::/32"])
    );
}

#[tokio::test]
async fn invalid_settings_answer_400_and_change_nothing() {
    let sim = sim();
    let app = loopback_app(&sim);
    let before = sim.account_record(1);
    for (body, needle) in [
        (json!({"volume": 3}), "payment_method"),
        (
            json!({"volume": 3, "payment_method": "cash"}),
            "payment_method",
        ),
        (
            json!({"volume": "3", "payment_method": "walletprovider"}),
            "volume",
        ),
        (
            json!({"volume": 2147483648i64, "payment_method": "walletprovider"}),
            "volume",
        ),
        (
            json!({"description": "x", "allow_nets": ["10.0.0.0/8", "nope"]}),
            "allow_nets",
        ),
        (json!({"domain_codes": ["D12345"]}), "domain_codes"),
        (json!({"domain_codes": ["D999999999"]}), "domain_codes"),
        (
            json!({"ignore_suppression_list": "yes"}),
            "ignore_suppression_list",
        ),
        (
            json!({"bounce_notification": "nobody"}),
            "bounce_notification",
        ),
    ] {
        let message = call(
            &app,
            mgmt(
                Method::PUT,
                "/api/delivery/accounts/1",
                TOKEN,
                Some(body.clone()),
            ),
        )
        .await
        .error(StatusCode::BAD_REQUEST);
        assert!(message.contains(needle), "{body}: {message}");
    }
    assert_eq!(sim.account_record(1), before);
}

#[tokio::test]
async fn the_token_put_replaces_allow_nets_and_shows_only_a_masked_preview() {
    let sim = sim();
    let app = loopback_app(&sim);
    let answer = call(
        &app,
        mgmt(
            Method::PUT,
            "/api/delivery/accounts/1/api_tokens/11",
            TOKEN,
            Some(json!({"allow_nets": ["127.0.0.1", "10.1.0.0/16"]})),
        ),
    )
    .await;
    assert_eq!(answer.json()["pagination"], json!({}));
    let record = answer.record();
    let members = record.as_object().expect("object");
    for field in TOKEN_RECORD_FIELDS {
        assert!(members.contains_key(field), "missing {field}");
    }
    assert_eq!(record["id"], 11);
    assert_eq!(record["allow_nets"], json!(["127.0.0.1", "10.1.0.0/16"]));
    assert_eq!(record["last_used_at"], Value::Null);
    let preview = record["token_preview"].as_str().expect("preview");
    assert!(
        preview.contains('*') && !preview.contains(SEND_1),
        "{preview}"
    );
    assert!(!String::from_utf8_lossy(&answer.bytes).contains(SEND_1));

    // A token of another account is not found under this one.
    call(
        &app,
        mgmt(
            Method::PUT,
            "/api/delivery/accounts/1/api_tokens/21",
            TOKEN,
            Some(json!({"allow_nets": []})),
        ),
    )
    .await
    .error(StatusCode::NOT_FOUND);
    call(
        &app,
        mgmt(
            Method::PUT,
            "/api/delivery/accounts/1/api_tokens/11",
            TOKEN,
            Some(json!({})),
        ),
    )
    .await
    .error(StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn suppression_entries_are_added_with_an_empty_204() {
    let sim = sim();
    let app = loopback_app(&sim);
    let post = |token: &str, body: Value| {
        mgmt(
            Method::POST,
            "/api/delivery/suppression_lists",
            token,
            Some(body),
        )
    };
    let answer = call(
        &app,
        post(
            TOKEN,
            json!({"email": "angry@example.net", "reason": "complaint"}),
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    assert!(answer.bytes.is_empty());
    for body in [
        json!({"email": "angry@example.net", "reason": "spam"}),
        json!({"email": "not-an-address", "reason": "bounce"}),
        json!({"reason": "bounce"}),
        json!({"email": "a@example.net", "reason": "bounce", "accounts": [1]}),
    ] {
        call(&app, post(TOKEN, body))
            .await
            .error(StatusCode::BAD_REQUEST);
    }
    // A scoped token may restrict entries to its own accounts only.
    let answer = call(
        &app,
        post(
            SCOPED,
            json!({"email": "x@example.net", "reason": "bounce", "accounts": ["2"]}),
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    call(
        &app,
        post(
            SCOPED,
            json!({"email": "x@example.net", "reason": "bounce", "accounts": ["1"]}),
        ),
    )
    .await
    .error(StatusCode::FORBIDDEN);
    call(
        &app,
        post(
            SCOPED,
            json!({"email": "x@example.net", "reason": "bounce"}),
        ),
    )
    .await
    .error(StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn delete_on_and_has_pending_order_follow_update_account_and_the_seed() {
    let sim = frozen_sim("2026-11-22T12:00:00Z");
    let app = loopback_app(&sim);
    let record = call(&app, get_account("2")).await.record();
    assert_eq!(record["delete_on"], Value::Null);
    assert_eq!(record["has_pending_order"], false);

    assert!(sim.update_account(2, |a| {
        a.delete_on = Some(ts("2026-12-01T00:00:00Z"));
        a.has_pending_order = true;
    }));
    let record = call(&app, get_account("2")).await.record();
    assert_eq!(record["delete_on"], "2026-12-01 00:00:00");
    assert_eq!(record["has_pending_order"], true);
    assert!(sim.update_account(2, |a| {
        a.delete_on = None;
        a.has_pending_order = false;
    }));
    let record = call(&app, get_account("2")).await.record();
    assert_eq!(record["delete_on"], Value::Null);
    assert_eq!(record["has_pending_order"], false);

    let mut scheduled = config();
    scheduled.accounts[1].delete_in = Some(Duration::from_secs(10 * 86_400));
    scheduled.accounts[1].has_pending_order = true;
    let seeded = Simulator::try_with_clock(scheduled, SimClock::frozen(ts("2026-11-22T12:00:00Z")))
        .expect("valid config");
    let record = seeded.account_record(2).expect("record");
    assert_eq!(record["delete_on"], "2026-12-02 12:00:00");
    assert_eq!(record["has_pending_order"], true);

    let mut far = config();
    far.accounts[1].delete_in = Some(Duration::MAX);
    assert!(matches!(
        Simulator::try_new(far),
        Err(SimConfigError::DateOutOfRange(2))
    ));
}

#[tokio::test]
async fn allow_nets_and_bounce_notification_can_be_set_and_cleared() {
    let sim = sim();
    let app = loopback_app(&sim);
    let put = |body: Value| mgmt(Method::PUT, "/api/delivery/accounts/1", TOKEN, Some(body));
    let record = call(
        &app,
        put(json!({"allow_nets": ["198.51.100.0/24"], "bounce_notification": "b@shop.example"})),
    )
    .await
    .record();
    assert_eq!(record["allow_nets"], json!(["198.51.100.0/24"]));
    assert_eq!(record["bounce_notification"], "b@shop.example");

    // A `null` member counts as absent: both stay.
    let record = call(
        &app,
        put(json!({"allow_nets": null, "bounce_notification": null})),
    )
    .await
    .record();
    assert_eq!(record["allow_nets"], json!(["198.51.100.0/24"]));
    assert_eq!(record["bounce_notification"], "b@shop.example");

    // `[]` and `""` clear them.
    let record = call(
        &app,
        put(json!({"allow_nets": [], "bounce_notification": ""})),
    )
    .await
    .record();
    assert_eq!(record["allow_nets"], json!([]));
    assert_eq!(record["bounce_notification"], Value::Null);
    let account = sim.account(1).expect("account");
    assert!(account.allow_nets.is_empty());
    assert_eq!(account.bounce_notification, None);

    assert!(sim.update_account(1, |a| {
        a.allow_nets = vec!["10.0.0.0/8".parse().expect("net")];
        a.bounce_notification = Some("x@shop.example".into());
    }));
    let record = call(&app, get_account("1")).await.record();
    assert_eq!(record["allow_nets"], json!(["10.0.0.0/8"]));
    assert_eq!(record["bounce_notification"], "x@shop.example");
    assert!(sim.update_account(1, |a| {
        a.allow_nets.clear();
        a.bounce_notification = None;
    }));
    let record = call(&app, get_account("1")).await.record();
    assert_eq!(record["allow_nets"], json!([]));
    assert_eq!(record["bounce_notification"], Value::Null);
}
