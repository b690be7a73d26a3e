//! Router tests of the simulator, through `tower::ServiceExt::oneshot`, and one real loopback
//! server driven by the traffic generator.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::connect_info::MockConnectInfo;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::*;

const TOKEN: &str = "test-management-token";
const SCOPED: &str = "scoped-management-token";
const SEND_1: &str = "send-token-account-1-0123456789";
const SEND_2: &str = "send-token-account-2-0123456789";
const SEND_3: &str = "send-token-account-3-0123456789";
const SEND_4: &str = "send-token-account-4-0123456789";
const LOOPBACK: [u8; 4] = [127, 0, 0, 1];

fn token(id: i32, secret: &str, allow_nets: &[&str]) -> TokenSeed {
    TokenSeed {
        id,
        label: format!("token {id}"),
        token: secret.to_owned(),
        allow_nets: allow_nets.iter().map(|s| (*s).to_owned()).collect(),
    }
}

/// 1: 10 plan messages and 20 extras left; 2: token allow-listed to 192.0.2.0/24; 3: disabled;
/// 4: account allow-listed to 198.51.100.0/24.
fn config() -> SimConfig {
    SimConfig {
        management_tokens: vec![
            ManagementToken {
                token: TOKEN.to_owned(),
                accounts: None,
            },
            ManagementToken {
                token: SCOPED.to_owned(),
                accounts: Some(vec![2]),
            },
        ],
        accounts: vec![
            AccountSeed {
                id: 1,
                username: "one".into(),
                plan: "business".into(),
                plan_messages_limit: 100,
                plan_messages_used: 90,
                extra_messages_total: 50,
                remaining_extra_messages_bought: 20,
                messages_sent: 500,
                domains: vec!["shop.example".into(), "news.example".into()],
                send_tokens: vec![token(11, SEND_1, &[])],
                ..AccountSeed::default()
            },
            AccountSeed {
                id: 2,
                username: "two".into(),
                domains: vec!["two.example".into()],
                send_tokens: vec![token(21, SEND_2, &["192.0.2.0/24"])],
                ..AccountSeed::default()
            },
            AccountSeed {
                id: 3,
                username: "three".into(),
                enabled: false,
                domains: vec!["three.example".into()],
                send_tokens: vec![token(31, SEND_3, &[])],
                ..AccountSeed::default()
            },
            AccountSeed {
                id: 4,
                username: "four".into(),
                domains: vec!["four.example".into()],
                allow_nets: vec!["198.51.100.0/24".into()],
                send_tokens: vec![token(41, SEND_4, &[])],
                ..AccountSeed::default()
            },
        ],
        seed: 7,
    }
}

fn sim() -> Simulator {
    Simulator::new(config())
}

fn app_from(sim: &Simulator, ip: impl Into<std::net::IpAddr>) -> Router {
    sim.router()
        .layer(MockConnectInfo(SocketAddr::new(ip.into(), 40_000)))
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    bytes: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.bytes)
            )
        })
    }

    /// Asserts the error shape every failure must have.
    fn error(&self, status: StatusCode) -> String {
        assert_eq!(
            self.status,
            status,
            "{}",
            String::from_utf8_lossy(&self.bytes)
        );
        let body = self.json();
        body["message"]
            .as_str()
            .unwrap_or_else(|| panic!("no message in {body}"))
            .to_owned()
    }

    fn record(&self) -> Value {
        assert_eq!(
            self.status,
            StatusCode::OK,
            "{}",
            String::from_utf8_lossy(&self.bytes)
        );
        self.json()["resources"][0].clone()
    }
}

async fn call(app: &Router, request: Request<Body>) -> Answer {
    let response = app.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body")
        .to_vec();
    Answer {
        status,
        headers,
        bytes,
    }
}

fn request(
    method: Method,
    path: &str,
    auth: Option<(&str, String)>,
    body: Option<&str>,
) -> Request<Body> {
    let mut builder = Request::builder().method(method).uri(path);
    if let Some((name, value)) = auth {
        builder = builder.header(name, value);
    }
    if body.is_some() {
        builder = builder.header(header::CONTENT_TYPE, "application/json");
    }
    builder
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_owned())))
        .expect("request")
}

fn mgmt(method: Method, path: &str, token: &str, body: Option<Value>) -> Request<Body> {
    let body = body.map(|b| b.to_string());
    request(
        method,
        path,
        Some((MANAGEMENT_TOKEN_HEADER, token.to_owned())),
        body.as_deref(),
    )
}

fn get_account(id: &str) -> Request<Body> {
    mgmt(
        Method::GET,
        &format!("/api/delivery/accounts/{id}"),
        TOKEN,
        None,
    )
}

fn send_req(path: &str, token: &str, body: Value) -> Request<Body> {
    request(
        Method::POST,
        path,
        Some(("authorization", format!("Bearer {token}"))),
        Some(&body.to_string()),
    )
}

fn mail(from: &str, to: &[&str]) -> Value {
    json!({"messages": [{"from": from, "to": to, "subject": "s", "text_body": "b"}]})
}

// --- Management API: authentication, identifiers ---------------------------------------------

#[tokio::test]
async fn management_calls_without_a_token_answer_401_with_a_json_message() {
    let sim = sim();
    let app = app_from(&sim, LOOPBACK);
    let answer = call(
        &app,
        request(Method::GET, "/api/delivery/accounts/1", None, None),
    )
    .await;
    assert!(
        answer
            .error(StatusCode::UNAUTHORIZED)
            .contains("X-Api-Token")
    );
}

#[tokio::test]
async fn a_wrong_management_token_answers_401() {
    let app = app_from(&sim(), LOOPBACK);
    let answer = call(
        &app,
        mgmt(Method::GET, "/api/delivery/accounts/1", "nope", None),
    )
    .await;
    answer.error(StatusCode::UNAUTHORIZED);
    // A send token is not a management token.
    let answer = call(
        &app,
        mgmt(Method::GET, "/api/delivery/accounts/1", SEND_1, None),
    )
    .await;
    answer.error(StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_scoped_token_sees_its_accounts_and_gets_403_for_the_others() {
    let app = app_from(&sim(), LOOPBACK);
    let own = call(
        &app,
        mgmt(Method::GET, "/api/delivery/accounts/2", SCOPED, None),
    )
    .await;
    assert_eq!(own.record()["id"], 2);
    let other = call(
        &app,
        mgmt(Method::GET, "/api/delivery/accounts/1", SCOPED, None),
    )
    .await;
    other.error(StatusCode::FORBIDDEN);
    // Scope is checked before existence, so a scoped token cannot probe for ids.
    let missing = call(
        &app,
        mgmt(Method::GET, "/api/delivery/accounts/999", SCOPED, None),
    )
    .await;
    missing.error(StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn ids_that_are_not_int32_answer_400_naming_the_parameter() {
    let app = app_from(&sim(), LOOPBACK);
    for id in ["2147483648", "abc", "-", "1.5", "-2147483649"] {
        let message = call(&app, get_account(id))
            .await
            .error(StatusCode::BAD_REQUEST);
        assert!(message.contains("`id`"), "{id}: {message}");
    }
    let message = call(
        &app,
        mgmt(
            Method::PUT,
            "/api/delivery/accounts/1/api_tokens/99999999999",
            TOKEN,
            Some(json!({"allow_nets": []})),
        ),
    )
    .await
    .error(StatusCode::BAD_REQUEST);
    assert!(message.contains("`token_id`"), "{message}");
}

#[tokio::test]
async fn an_unknown_account_answers_404_and_extreme_int32_ids_are_valid() {
    let app = app_from(&sim(), LOOPBACK);
    for id in ["999", "2147483647", "-2147483648"] {
        call(&app, get_account(id))
            .await
            .error(StatusCode::NOT_FOUND);
    }
}

#[tokio::test]
async fn a_removed_account_answers_404_and_its_send_token_401() {
    let sim = sim();
    let app = app_from(&sim, LOOPBACK);
    assert!(sim.remove_account(1));
    assert!(!sim.remove_account(1));
    call(&app, get_account("1"))
        .await
        .error(StatusCode::NOT_FOUND);
    call(
        &app,
        send_req(
            "/v1/send",
            SEND_1,
            mail("a@shop.example", &["x@example.net"]),
        ),
    )
    .await
    .error(StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn unknown_paths_and_methods_answer_json_errors() {
    let app = app_from(&sim(), LOOPBACK);
    call(&app, request(Method::GET, "/api/nothing/here", None, None))
        .await
        .error(StatusCode::NOT_FOUND);
    call(
        &app,
        mgmt(Method::DELETE, "/api/delivery/accounts/1", TOKEN, None),
    )
    .await
    .error(StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn axum_rejections_come_out_as_json_errors() {
    let app = app_from(&sim(), LOOPBACK);
    // Not UTF-8 once percent-decoded: rejected by axum's path extractor.
    call(&app, get_account("%FF"))
        .await
        .error(StatusCode::BAD_REQUEST);
    // Over axum's default body limit.
    let huge = format!("{{\"description\":\"{}\"}}", "x".repeat(3 * 1024 * 1024));
    let answer = call(
        &app,
        request(
            Method::PUT,
            "/api/delivery/accounts/1",
            Some((MANAGEMENT_TOKEN_HEADER, TOKEN.to_owned())),
            Some(&huge),
        ),
    )
    .await;
    answer.error(StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn every_route_is_served_on_its_own_method() {
    let app = app_from(&sim(), LOOPBACK);
    for route in Route::ALL {
        let path = route
            .path()
            .replace("{id}", "1")
            .replace("{token_id}", "11");
        let answer = call(&app, request(route.method(), &path, None, None)).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{route}");
    }
}

// --- Management API: records and updates -----------------------------------------------------

#[tokio::test]
async fn the_account_record_has_every_documented_field() {
    let sim = sim();
    let app = app_from(&sim, LOOPBACK);
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
    let app = app_from(&sim, LOOPBACK);
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
    let app = app_from(&sim, LOOPBACK);
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
    let app = app_from(&sim(), LOOPBACK);
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
    let app = app_from(&sim, LOOPBACK);
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
    let app = app_from(&sim, LOOPBACK);
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
    let app = app_from(&sim, LOOPBACK);
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
    let app = app_from(&sim, LOOPBACK);
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

// --- Send API ---------------------------------------------------------------------------------

#[tokio::test]
async fn sending_consumes_the_plan_first_then_the_extras() {
    let sim = sim();
    let app = app_from(&sim, LOOPBACK);
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
    let app = app_from(&sim, LOOPBACK);
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
    let app = app_from(&sim(), LOOPBACK);
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
    let app = app_from(&sim, LOOPBACK);
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
    let app = app_from(&sim, LOOPBACK);
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
    let outside = app_from(&sim, LOOPBACK);
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
    let outside = app_from(&sim, LOOPBACK);
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
    let app = app_from(&sim, LOOPBACK);
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
    let app = app_from(&sim, LOOPBACK);
    let to = format!("b@{BOUNCE_DOMAIN}");
    let send = || send_req("/v1/send", SEND_1, mail("a@shop.example", &[to.as_str()]));
    assert_eq!(call(&app, send()).await.json()["accepted"], 1);
    assert_eq!(call(&app, send()).await.json()["rejected"], 1);
}

#[tokio::test]
async fn send_bodies_are_validated() {
    let app = app_from(&sim(), LOOPBACK);
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
    let app = app_from(&sim, LOOPBACK);
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

// --- Faults and the control plane -------------------------------------------------------------

#[tokio::test]
async fn an_error_rate_of_one_answers_500_json_every_time() {
    let sim = sim();
    let app = app_from(&sim, LOOPBACK);
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
    let app = app_from(&sim, LOOPBACK);
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
    let app = app_from(&sim, LOOPBACK);
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
    let app = app_from(&sim, LOOPBACK);
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
    let app = app_from(&sim, LOOPBACK);
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
async fn the_control_plane_sets_and_clears_faults() {
    let sim = sim();
    let app = app_from(&sim, LOOPBACK);
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
    let app = app_from(&sim, LOOPBACK);
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

// --- A real server ----------------------------------------------------------------------------

#[tokio::test]
async fn the_demo_fleet_served_on_loopback_moves_under_demo_traffic() {
    let config = SimConfig::demo(TOKEN);
    let identities = config.send_identities();
    let sim = Simulator::new(config);
    let before = sim.account(DEMO_BUSY).expect("1001").messages_sent;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("addr");
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(sim.clone().serve(listener, shutdown.clone()));

    traffic::run(
        format!("http://{addr}"),
        identities,
        Duration::from_millis(5),
        12,
        shutdown.clone(),
    )
    .await;

    let busy = sim.account(DEMO_BUSY).expect("1001");
    assert!(busy.messages_sent > before, "1001 sent nothing");
    assert!(busy.api_tokens[0].last_used_at.is_some());
    assert_eq!(
        sim.account(DEMO_DISABLED).expect("1003").messages_sent,
        9_876
    );

    let response = reqwest::Client::new()
        .get(format!(
            "http://{addr}/api/delivery/accounts/{DEMO_NEARLY_EXHAUSTED}"
        ))
        .header(MANAGEMENT_TOKEN_HEADER, TOKEN)
        .send()
        .await
        .expect("GET over loopback");
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["resources"][0]["plan_messages_limit"], 10_000);

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("server stops on cancel")
        .expect("server task")
        .expect("serve");
}

#[test]
fn invalid_configurations_are_refused_with_a_reason() {
    let mut duplicate = config();
    duplicate.accounts.push(duplicate.accounts[0].clone());
    assert!(matches!(
        Simulator::try_new(duplicate),
        Err(SimConfigError::DuplicateAccount(1))
    ));
    let mut bad_net = config();
    bad_net.accounts[0].allow_nets = vec!["10.0.0.0/99".into()];
    let error = Simulator::try_new(bad_net).err().map(|e| e.to_string());
    assert!(error.is_some_and(|e| e.contains("10.0.0.0/99")));
    let mut shared_token = config();
    shared_token.accounts[1].send_tokens[0].token = SEND_1.to_owned();
    assert!(Simulator::try_new(shared_token).is_err());
}
