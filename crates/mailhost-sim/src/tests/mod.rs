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
        ..SimConfig::default()
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
            .replace("{token_id}", "11")
            .replace("{account}", "1")
            .replace("{migration_code}", "MG00000001")
            .replace("{domain_code}", "D000000901")
            .replace("{email_account_code}", "EA00000001");
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
async fn the_control_plane_adds_per_target_faults_and_counts_requests_per_path() {
    let sim = sim();
    let app = app_from(&sim, LOOPBACK);
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

// --- Sending statistics and mail tracing ------------------------------------------------------

use jiff::Timestamp;
use jiff::civil::{Date, date};
use jiff::tz::TimeZone;

const DASHBOARD: &str = "/api/delivery/tracemail/dashboard";

fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

fn rome() -> TimeZone {
    TimeZone::get("Europe/Rome").expect("bundled tz database")
}

/// The test fleet on a clock frozen at `at`; account 1 lives in Europe/Rome, the others in UTC.
fn frozen_sim(at: &str) -> Simulator {
    let mut config = config();
    config.accounts[0].timezone = "Europe/Rome".into();
    Simulator::try_with_clock(config, SimClock::frozen(ts(at))).expect("valid config")
}

fn dashboard(token: &str, body: Value) -> Request<Body> {
    mgmt(Method::POST, DASHBOARD, token, Some(body))
}

fn daily(account: &str, query: &str) -> Request<Body> {
    mgmt(
        Method::GET,
        &format!("/api/delivery/tracemail/daily/{account}{query}"),
        TOKEN,
        None,
    )
}

/// The five outcomes and `total` of a statistics object, checking that `total` adds up.
fn outcomes_of(value: &Value) -> std::collections::BTreeMap<String, i64> {
    let counts: std::collections::BTreeMap<String, i64> = OUTCOMES
        .iter()
        .map(|o| {
            let n = value[*o]
                .as_i64()
                .unwrap_or_else(|| panic!("{o} missing in {value}"));
            ((*o).to_owned(), n)
        })
        .collect();
    assert_eq!(value["total"], counts.values().sum::<i64>(), "{value}");
    counts
}

fn sample_outcomes(sim: &Simulator) {
    sim.record_outcomes(
        1,
        "shop.example",
        ts("2026-11-22T09:00:00Z"),
        &[("delivered", 90), ("bounced", 4), ("complaint", 1)],
    );
    sim.record_outcomes(
        1,
        "news.example",
        ts("2026-11-22T10:30:00Z"),
        &[("delivered", 30), ("deferred", 3), ("rejected", 2)],
    );
    sim.record_outcomes(
        2,
        "two.example",
        ts("2026-11-22T11:00:00Z"),
        &[("delivered", 200), ("bounced", 7)],
    );
    sim.record_outcomes(
        4,
        "four.example",
        ts("2026-11-21T11:00:00Z"),
        &[("delivered", 11)],
    );
}

#[tokio::test]
async fn sends_feed_the_statistics_with_one_outcome_per_recipient() {
    let sim = frozen_sim("2026-11-22T12:00:00Z");
    let app = app_from(&sim, LOOPBACK);
    sim.suppress("gone@example.net", SuppressionReason::Bounce, None);
    let to: Vec<String> = (0..20).map(|i| format!("u{i}@example.net")).collect();
    let mut recipients: Vec<&str> = to.iter().map(String::as_str).collect();
    recipients.extend(["gone@example.net", "x@bounces.invalid"]);
    let answer = call(
        &app,
        send_req(
            "/v1/send",
            SEND_1,
            mail("noreply@SHOP.example", &recipients),
        ),
    )
    .await;
    assert_eq!(answer.json()["accepted"], 21);
    let today = sim.day_totals(1, date(2026, 11, 22));
    assert_eq!(today.values().sum::<i64>(), 22);
    assert_eq!(today["rejected"], 1, "the suppressed recipient");
    assert!(today["bounced"] >= 1, "the bounce domain always bounces");
    assert_eq!(today.len(), 5);
    let shop = sim.day_totals_in(
        Some(1),
        Some("shop.example"),
        &TimeZone::UTC,
        date(2026, 11, 22),
    );
    assert_eq!(
        shop, today,
        "kept under the account's spelling of the domain"
    );
    // The refused recipient consumed no quota.
    assert_eq!(sim.account(1).expect("account").messages_sent, 521);
}

#[tokio::test]
async fn dashboard_sums_equal_the_day_totals() {
    let sim = frozen_sim("2026-11-22T12:00:00Z");
    sample_outcomes(&sim);
    let app = app_from(&sim, LOOPBACK);
    let record = call(
        &app,
        dashboard(
            TOKEN,
            json!({
                "timezone": "Europe/Rome",
                "daily_activity": {"start_date": "20/11/2026", "end_date": "2026-11-22",
                                   "audience": "all", "traffic": "transactional"},
            }),
        ),
    )
    .await
    .record();
    assert_eq!(record["timezone"], "Europe/Rome");
    let days = record["daily_activity"].as_array().expect("daily_activity");
    assert_eq!(days.len(), 3);
    for (entry, day) in
        days.iter()
            .zip([date(2026, 11, 20), date(2026, 11, 21), date(2026, 11, 22)])
    {
        assert_eq!(entry["date"], day.to_string());
        assert_eq!(
            outcomes_of(entry),
            sim.day_totals_in(None, None, &rome(), day)
        );
    }
    let today = sim.day_totals_in(None, None, &rome(), date(2026, 11, 22));
    assert_eq!(outcomes_of(&record["overview"]), today);
    assert_eq!(record["overview"]["total"], 337);
    assert_eq!(
        record["status_groups"],
        json!([
            {"group": "delivered", "statuses": ["delivered"], "count": 320},
            {"group": "pending", "statuses": ["deferred"], "count": 3},
            {"group": "failed", "statuses": ["bounced", "rejected"], "count": 13},
            {"group": "complaint", "statuses": ["complaint"], "count": 1},
        ])
    );
    let top = record["top_accounts_by_delivery_account"]
        .as_array()
        .expect("top");
    assert_eq!(top.len(), 2, "accounts with nothing today are left out");
    assert_eq!(top[0]["account_id"], 2);
    assert_eq!(top[0]["username"], "two");
    assert_eq!(outcomes_of(&top[1]), sim.day_totals(1, date(2026, 11, 22)));
    assert_eq!(
        record["top5_by_delivery_account"],
        json!([
            {"account_id": 2, "username": "two", "total": 207},
            {"account_id": 1, "username": "one", "total": 130},
        ])
    );
}

#[tokio::test]
async fn dashboard_filters_and_limits_apply_to_every_section() {
    let sim = frozen_sim("2026-11-22T12:00:00Z");
    sample_outcomes(&sim);
    let app = app_from(&sim, LOOPBACK);
    let record = call(
        &app,
        dashboard(TOKEN, json!({"account": "1", "domain": "NEWS.example"})),
    )
    .await
    .record();
    assert_eq!(record["timezone"], "UTC");
    assert_eq!(record["overview"]["total"], 35);
    assert_eq!(record["daily_activity"][0]["total"], 35);
    assert_eq!(record["top5_by_delivery_account"][0]["total"], 35);
    assert_eq!(
        record["top5_by_delivery_account"].as_array().map(Vec::len),
        Some(1)
    );

    let record = call(
        &app,
        dashboard(
            TOKEN,
            json!({"top_accounts": {"limit": 1}, "top5": {"limit": 50, "start_date": "2026-11-21"},
                   "overview": {"start_date": "2026-11-21", "end_date": "2026-11-21"}}),
        ),
    )
    .await
    .record();
    assert_eq!(record["overview"]["total"], 11);
    assert_eq!(
        record["top_accounts_by_delivery_account"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    assert_eq!(
        record["top5_by_delivery_account"].as_array().map(Vec::len),
        Some(3)
    );
    assert_eq!(record["top5_by_delivery_account"][2]["account_id"], 4);

    // An empty body is every default.
    let answer = call(
        &app,
        request(
            Method::POST,
            DASHBOARD,
            Some((MANAGEMENT_TOKEN_HEADER, TOKEN.to_owned())),
            None,
        ),
    )
    .await;
    assert_eq!(answer.record()["overview"]["total"], 337);
}

#[tokio::test]
async fn dashboard_bodies_are_validated() {
    let sim = frozen_sim("2026-11-22T12:00:00Z");
    let app = app_from(&sim, LOOPBACK);
    for body in [
        json!({"timezone": "Mars/Olympus"}),
        json!({"account": 1}),
        json!({"account": "one"}),
        json!({"overview": {"start_date": "2026-13-01"}}),
        json!({"overview": {"start_date": "11/22/2026"}}),
        json!({"overview": {"start_date": "2026-11-22", "end_date": "2026-11-21"}}),
        json!({"daily_activity": {"start_date": "2026-10-01", "end_date": "2026-11-01"}}),
        json!({"daily_activity": {"audience": "everyone"}}),
        json!({"daily_activity": {"traffic": "bulk"}}),
        json!({"top_accounts": {"limit": 0}}),
        json!({"top5": {"limit": 1001}}),
        json!({"top5": {"limit": "5"}}),
        json!({"overview": "today"}),
        json!([]),
    ] {
        call(&app, dashboard(TOKEN, body.clone()))
            .await
            .error(StatusCode::BAD_REQUEST);
    }
    // 31 days is the most accepted.
    let record = call(
        &app,
        dashboard(
            TOKEN,
            json!({"daily_activity": {"start_date": "2026-10-01", "end_date": "2026-10-31"}}),
        ),
    )
    .await
    .record();
    assert_eq!(record["daily_activity"].as_array().map(Vec::len), Some(31));
    call(&app, dashboard(TOKEN, json!({"account": "999"})))
        .await
        .error(StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_scoped_token_sees_only_the_statistics_of_its_accounts() {
    let sim = frozen_sim("2026-11-22T12:00:00Z");
    sample_outcomes(&sim);
    let app = app_from(&sim, LOOPBACK);
    let record = call(&app, dashboard(SCOPED, json!({}))).await.record();
    assert_eq!(record["overview"]["total"], 207);
    assert_eq!(
        record["top_accounts_by_delivery_account"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    call(&app, dashboard(SCOPED, json!({"account": "1"})))
        .await
        .error(StatusCode::FORBIDDEN);
    call(&app, dashboard(SCOPED, json!({"account": "999"})))
        .await
        .error(StatusCode::FORBIDDEN);
    call(
        &app,
        mgmt(Method::GET, "/api/delivery/tracemail/daily/1", SCOPED, None),
    )
    .await
    .error(StatusCode::FORBIDDEN);
    let own = call(
        &app,
        mgmt(Method::GET, "/api/delivery/tracemail/daily/2", SCOPED, None),
    )
    .await;
    assert_eq!(own.status, StatusCode::OK);
}

#[tokio::test]
async fn daily_statistics_list_the_last_seven_local_days_newest_first() {
    let sim = frozen_sim("2026-11-22T12:00:00Z");
    sample_outcomes(&sim);
    let app = app_from(&sim, LOOPBACK);
    let body = call(&app, daily("1", "")).await.json();
    assert_eq!(
        body["pagination"],
        json!({"page": 1, "per_page": 7, "total": 7})
    );
    let items = body["resources"].as_array().expect("resources");
    assert_eq!(items.len(), 7);
    assert_eq!(items[0]["date"], "2026-11-22");
    assert_eq!(items[6]["date"], "2026-11-16");
    assert_eq!(
        outcomes_of(&items[0]),
        sim.day_totals(1, date(2026, 11, 22))
    );
    assert_eq!(items[0]["total"], 130);
    assert_eq!(items[1]["total"], 0, "zero days are listed too");

    let items = call(&app, daily("1", "?type=account&sort_field=date&sort=asc"))
        .await
        .json()["resources"]
        .clone();
    assert_eq!(items[0]["date"], "2026-11-16");
    let items = call(&app, daily("1", "?sort_field=total&sort=desc"))
        .await
        .json()["resources"]
        .clone();
    assert_eq!(items[0]["total"], 130);

    let items = call(&app, daily("1", "?type=single-domain&domain=news.example"))
        .await
        .json()["resources"]
        .clone();
    assert_eq!(items.as_array().map(Vec::len), Some(7));
    assert_eq!(items[0]["total"], 35);
    assert_eq!(
        outcomes_of(&items[0]),
        sim.day_totals_in(Some(1), Some("news.example"), &rome(), date(2026, 11, 22))
    );
}

#[tokio::test]
async fn domains_rank_lists_every_domain_of_the_account_by_total() {
    let mut config = config();
    config.accounts[0].domains = (1..=30).map(|i| format!("d{i:02}.example")).collect();
    let sim = Simulator::try_with_clock(config, SimClock::frozen(ts("2026-11-22T12:00:00Z")))
        .expect("valid config");
    for (i, n) in [(3, 50), (7, 80), (12, 10), (30, 80)] {
        sim.record_outcomes(
            1,
            &format!("d{i:02}.example"),
            ts("2026-11-22T08:00:00Z"),
            &[("delivered", n)],
        );
    }
    // Yesterday does not count in today's ranking.
    sim.record_outcomes(
        1,
        "d01.example",
        ts("2026-11-21T08:00:00Z"),
        &[("delivered", 999)],
    );
    let app = app_from(&sim, LOOPBACK);
    let body = call(&app, daily("1", "?type=domains-rank")).await.json();
    let items = body["resources"].as_array().expect("resources");
    assert_eq!(items.len(), 30);
    assert_eq!(body["pagination"]["total"], 30);
    let ranked: Vec<(&str, i64)> = items
        .iter()
        .map(|i| {
            (
                i["domain"].as_str().expect("domain"),
                i["total"].as_i64().expect("total"),
            )
        })
        .collect();
    assert_eq!(
        &ranked[..4],
        &[
            ("d07.example", 80),
            ("d30.example", 80),
            ("d03.example", 50),
            ("d12.example", 10)
        ]
    );
    assert!(ranked.windows(2).all(|w| w[0].1 >= w[1].1));
    for item in items {
        outcomes_of(item);
    }
    let ascending = call(&app, daily("1", "?type=domains-rank&sort=asc"))
        .await
        .json();
    assert_eq!(ascending["resources"][29]["total"], 80);
    // Thirty domains, thirty distinct codes of the documented shape.
    let record = sim.account_record(1).expect("record");
    let mut codes: Vec<&str> = record["domains"]
        .as_array()
        .expect("domains")
        .iter()
        .map(|d| d["code"].as_str().expect("code"))
        .collect();
    assert!(codes.iter().all(|c| c.len() == 10 && c.starts_with('D')));
    codes.sort_unstable();
    codes.dedup();
    assert_eq!(codes.len(), 30);
}

#[tokio::test]
async fn daily_requests_are_validated() {
    let sim = frozen_sim("2026-11-22T12:00:00Z");
    let app = app_from(&sim, LOOPBACK);
    for account in ["abc", "2147483648", "1.5"] {
        let message = call(&app, daily(account, ""))
            .await
            .error(StatusCode::BAD_REQUEST);
        assert!(message.contains("`account`"), "{message}");
    }
    for query in [
        "?type=everything",
        "?type=single-domain",
        "?sort_field=name",
        "?sort=up",
    ] {
        call(&app, daily("1", query))
            .await
            .error(StatusCode::BAD_REQUEST);
    }
    call(&app, daily("999", ""))
        .await
        .error(StatusCode::NOT_FOUND);
    call(&app, daily("1", "?type=single-domain&domain=two.example"))
        .await
        .error(StatusCode::NOT_FOUND);
}

#[test]
fn a_dst_day_in_rome_has_25_hours_of_statistics() {
    let sim = frozen_sim("2026-10-27T12:00:00Z");
    // 01:30 local on 2026-10-25 (still CEST), and 23:30 local on the same day (CET).
    sim.record_outcomes(
        1,
        "shop.example",
        ts("2026-10-24T23:30:00Z"),
        &[("delivered", 5)],
    );
    sim.record_outcomes(
        1,
        "shop.example",
        ts("2026-10-25T22:30:00Z"),
        &[("bounced", 2)],
    );
    sim.record_outcomes(
        1,
        "shop.example",
        ts("2026-10-25T23:00:00Z"),
        &[("deferred", 1)],
    );
    sim.record_outcomes(
        1,
        "shop.example",
        ts("2026-10-24T21:59:00Z"),
        &[("complaint", 1)],
    );
    let day = sim.day_totals(1, date(2026, 10, 25));
    assert_eq!(
        (
            day["delivered"],
            day["bounced"],
            day["deferred"],
            day["complaint"]
        ),
        (5, 2, 0, 0)
    );
    assert_eq!(sim.day_totals(1, date(2026, 10, 26))["deferred"], 1);
    assert_eq!(sim.day_totals(1, date(2026, 10, 24))["complaint"], 1);
    // The same instants cut in UTC.
    let utc = |d: Date| sim.day_totals_in(Some(1), None, &TimeZone::UTC, d);
    assert_eq!(utc(date(2026, 10, 24))["delivered"], 5);
    assert_eq!(utc(date(2026, 10, 25))["bounced"], 2);
    assert_eq!(utc(date(2026, 10, 25))["deferred"], 1);
}

#[tokio::test]
async fn the_dashboard_cuts_dst_days_in_the_requested_zone() {
    let sim = frozen_sim("2026-10-27T12:00:00Z");
    sim.record_outcomes(
        2,
        "two.example",
        ts("2026-10-24T23:30:00Z"),
        &[("delivered", 5)],
    );
    sim.record_outcomes(
        2,
        "two.example",
        ts("2026-10-25T22:30:00Z"),
        &[("bounced", 2)],
    );
    let app = app_from(&sim, LOOPBACK);
    let body = json!({"daily_activity": {"start_date": "2026-10-24", "end_date": "2026-10-26"}});
    let mut in_rome = body.clone();
    in_rome["timezone"] = json!("Europe/Rome");
    let totals = |record: &Value| -> Vec<i64> {
        record["daily_activity"]
            .as_array()
            .expect("days")
            .iter()
            .map(|d| d["total"].as_i64().expect("total"))
            .collect()
    };
    assert_eq!(
        totals(&call(&app, dashboard(TOKEN, in_rome)).await.record()),
        [0, 7, 0]
    );
    assert_eq!(
        totals(&call(&app, dashboard(TOKEN, body)).await.record()),
        [5, 2, 0]
    );
}

#[tokio::test]
async fn at_local_midnight_today_becomes_yesterday_in_utc_and_in_rome() {
    // 23:59 in Rome, 22:59 UTC.
    let sim = frozen_sim("2026-11-22T22:59:00Z");
    let app = app_from(&sim, LOOPBACK);
    for id in [1, 2] {
        let domain = if id == 1 {
            "shop.example"
        } else {
            "two.example"
        };
        sim.record_outcomes(id, domain, ts("2026-11-22T22:58:00Z"), &[("delivered", 10)]);
    }
    let first_two = |body: Value| -> Vec<(String, i64)> {
        body["resources"]
            .as_array()
            .expect("items")
            .iter()
            .take(2)
            .map(|i| {
                (
                    i["date"].as_str().expect("date").to_owned(),
                    i["total"].as_i64().expect("total"),
                )
            })
            .collect()
    };
    let rome_days = first_two(call(&app, daily("1", "")).await.json());
    assert_eq!(
        rome_days,
        [("2026-11-22".to_owned(), 10), ("2026-11-21".to_owned(), 0)]
    );

    sim.clock().set(ts("2026-11-22T23:01:00Z"));
    let rome_days = first_two(call(&app, daily("1", "")).await.json());
    assert_eq!(
        rome_days,
        [("2026-11-23".to_owned(), 0), ("2026-11-22".to_owned(), 10)]
    );
    let utc_days = first_two(call(&app, daily("2", "")).await.json());
    assert_eq!(
        utc_days,
        [("2026-11-22".to_owned(), 10), ("2026-11-21".to_owned(), 0)]
    );
    let rome_dashboard = call(&app, dashboard(TOKEN, json!({"timezone": "Europe/Rome"})))
        .await
        .record();
    assert_eq!(rome_dashboard["overview"]["total"], 0);

    sim.clock().set(ts("2026-11-23T00:01:00Z"));
    let utc_days = first_two(call(&app, daily("2", "")).await.json());
    assert_eq!(
        utc_days,
        [("2026-11-23".to_owned(), 0), ("2026-11-22".to_owned(), 10)]
    );
    let utc_dashboard = call(&app, dashboard(TOKEN, json!({}))).await.record();
    assert_eq!(utc_dashboard["overview"]["total"], 0);
    assert_eq!(utc_dashboard["daily_activity"][0]["date"], "2026-11-23");
}

#[test]
fn statistics_older_than_eight_days_are_dropped_and_removed_accounts_forgotten() {
    let sim = frozen_sim("2026-11-22T12:00:00Z");
    sim.record_outcomes(
        2,
        "two.example",
        ts("2026-11-10T12:00:00Z"),
        &[("delivered", 3)],
    );
    sim.record_outcomes(
        2,
        "two.example",
        ts("2026-11-14T00:00:00Z"),
        &[("delivered", 4)],
    );
    assert_eq!(sim.day_totals(2, date(2026, 11, 10))["delivered"], 0);
    assert_eq!(sim.day_totals(2, date(2026, 11, 14))["delivered"], 4);
    assert!(sim.remove_account(2));
    assert_eq!(
        sim.day_totals_in(None, None, &TimeZone::UTC, date(2026, 11, 14))["delivered"],
        0
    );
}

#[test]
fn an_unknown_time_zone_is_a_configuration_error() {
    let mut bad = config();
    bad.accounts[1].timezone = "Europe/Atlantis".into();
    let error = Simulator::try_new(bad).err().map(|e| e.to_string());
    assert!(error.is_some_and(|e| e.contains("Europe/Atlantis")));
    assert_eq!(AccountSeed::default().timezone, "UTC");
}

// --- Migrations and mailboxes -------------------------------------------------------------------

fn hosting_config() -> SimConfig {
    SimConfig {
        migrations: vec![MigrationSeed {
            code: "MG00000007".into(),
            start_in: Duration::from_secs(60),
            accounts: 3,
            messages: 3000,
            bytes: 3_000_000,
            rate: 100,
            parallel: 3,
            failed_accounts: 1,
            ..MigrationSeed::default()
        }],
        mailboxes: vec![
            MailboxSeed {
                domain_code: "D000000901".into(),
                domain_name: "acme.example".into(),
                code: "EA00000011".into(),
                local_part: "info".into(),
                quota_used_mib: 1000,
                quota_limit_mib: 2048,
                fill_mib_per_hour: 120,
                messages: 50,
                ..MailboxSeed::default()
            },
            MailboxSeed {
                domain_code: "D000000901".into(),
                domain_name: "acme.example".into(),
                code: "P000000012".into(),
                local_part: "postmaster".into(),
                ..MailboxSeed::default()
            },
        ],
        ..config()
    }
}

fn hosting_sim() -> Simulator {
    Simulator::try_with_clock(
        hosting_config(),
        SimClock::frozen(ts("2026-11-22T07:00:00Z")),
    )
    .expect("valid config")
}

fn get(path: &str, token: &str) -> Request<Body> {
    mgmt(Method::GET, path, token, None)
}

#[tokio::test]
async fn a_migration_progresses_with_the_clock_and_completes() {
    let sim = hosting_sim();
    let app = app_from(&sim, LOOPBACK);
    let path = "/api/migrations/MG00000007/stats";
    let aggregate = |body: Value| body["aggregate"].clone();
    let pending = aggregate(call(&app, get(path, TOKEN)).await.json());
    assert_eq!(pending["status"], "pending");
    assert_eq!(pending["messages"]["migrated"], 0);
    assert_eq!(pending["finished_at"], Value::Null);

    sim.clock().advance(Duration::from_secs(11 * 60));
    let running = aggregate(call(&app, get(path, TOKEN)).await.json());
    assert_eq!(running["status"], "running");
    assert_eq!(running["started_at"], "2026-11-22 07:01:00");
    assert_eq!(running["updated_at"], "2026-11-22 07:11:00");
    assert_eq!(
        running["accounts"],
        json!({"total": 3, "pending": 0, "running": 3, "completed": 0, "failed": 0})
    );
    let migrated = running["messages"]["migrated"].as_i64().expect("migrated");
    // Three lanes of 33.3 messages a minute, each rounded down.
    assert_eq!(migrated, 999);
    assert_eq!(running["bytes"]["migrated"], 999_000);
    assert_eq!(running["throughput"]["messages_per_minute"], 100);

    sim.clock().advance(Duration::from_secs(6 * 60));
    let later = aggregate(call(&app, get(path, TOKEN)).await.json());
    assert_eq!(later["accounts"]["failed"], 1);
    assert!(later["errors"].as_i64().expect("errors") >= 1);
    assert!(later["messages"]["migrated"].as_i64() > Some(migrated));

    sim.clock().advance(Duration::from_secs(3600));
    let done = aggregate(call(&app, get(path, TOKEN)).await.json());
    assert_eq!(done["status"], "completed");
    assert_eq!(done["accounts"]["completed"], 2);
    assert_eq!(done["messages"]["migrated"], 2500);
    assert_eq!(done["finished_at"], "2026-11-22 07:31:00");
    assert_eq!(
        Some(done.clone()),
        sim.migration_stats("MG00000007").map(aggregate)
    );
    assert!(sim.migration_stats("MG99999999").is_none());
}

#[tokio::test]
async fn migration_codes_are_checked_and_unknown_ones_answer_404() {
    let app = app_from(&hosting_sim(), LOOPBACK);
    for code in ["MG1", "mg00000007", "XX00000007", "MG000000070"] {
        let message = call(&app, get(&format!("/api/migrations/{code}/stats"), TOKEN))
            .await
            .error(StatusCode::BAD_REQUEST);
        assert!(message.contains("`migration_code`"), "{message}");
    }
    call(&app, get("/api/migrations/MG00000008/stats", TOKEN))
        .await
        .error(StatusCode::NOT_FOUND);
    call(
        &app,
        request(Method::GET, "/api/migrations/MG00000007/stats", None, None),
    )
    .await
    .error(StatusCode::UNAUTHORIZED);
    // Migrations are not Delivery accounts: a scoped token reads them too.
    let answer = call(&app, get("/api/migrations/MG00000007/stats", SCOPED)).await;
    assert_eq!(answer.status, StatusCode::OK);
}

const MAILBOX: &str = "/api/domains/D000000901/email_accounts/EA00000011";

#[tokio::test]
async fn the_mailbox_record_has_every_documented_field() {
    let sim = hosting_sim();
    let app = app_from(&sim, LOOPBACK);
    let answer = call(&app, get(MAILBOX, TOKEN)).await;
    assert_eq!(
        answer.json()["pagination"],
        json!({"page": 1, "per_page": 1, "total": 1})
    );
    let record = answer.record();
    let members = record.as_object().expect("object");
    for field in MAILBOX_RECORD_FIELDS {
        assert!(members.contains_key(field), "missing {field}");
    }
    assert_eq!(members.len(), MAILBOX_RECORD_FIELDS.len());
    assert_eq!(record["type"], "EmailAccount");
    assert_eq!(record["email_address"], "info@acme.example");
    assert_eq!(record["domain_code"], "D000000901");
    assert_eq!(record["quota"], 1000);
    assert_eq!(record["quota_human"], "1000 MB");
    assert_eq!(record["max_email_quota"], 2048);
    assert_eq!(record["outbound_limit_period"], 24);
    assert_eq!(record["password_expiration"], -1);
    assert_eq!(record["status"], "enabled");
    assert_eq!(record["status_detail"], "ok");
    assert!(record["lastauth"].is_i64());
    assert!(record["archive"].is_boolean());
    let delegates = record["delegates"].as_array().expect("delegates");
    assert_eq!(record["delegates_no"], delegates.len());
    assert!(!delegates.is_empty(), "EA...11 has one delegate");
    for delegate in delegates {
        let members = delegate.as_object().expect("delegate");
        for field in DELEGATE_RECORD_FIELDS {
            assert!(members.contains_key(field), "delegate misses {field}");
        }
    }
    assert_eq!(Some(record), sim.mailbox_record("D000000901", "EA00000011"));

    let postmaster = call(
        &app,
        get("/api/domains/D000000901/email_accounts/P000000012", TOKEN),
    )
    .await
    .record();
    assert_eq!(postmaster["type"], "Postmaster");
    assert_eq!(postmaster["email_address"], "postmaster@acme.example");
}

#[tokio::test]
async fn mailbox_quota_grows_with_the_clock_and_tests_can_change_it() {
    let sim = hosting_sim();
    let app = app_from(&sim, LOOPBACK);
    sim.clock().advance(Duration::from_secs(30 * 60));
    let record = call(&app, get(MAILBOX, TOKEN)).await.record();
    assert_eq!(record["quota"], 1060);
    assert_eq!(record["quota_human"], "1.04 GB");
    assert!(record["messages"].as_i64() > Some(50));

    assert!(sim.update_mailbox("EA00000011", |m| {
        m.quota_used_mib = 2040;
        m.archive = true;
        m.archive_status = "activating".into();
        m.password_expired = true;
        m.outbound_limit = 10;
        m.outbound_sent = 10;
    }));
    assert!(!sim.update_mailbox("EA99999999", |_| {}));
    let record = call(&app, get(MAILBOX, TOKEN)).await.record();
    assert_eq!(record["quota"], 2040);
    assert_eq!(record["archive_status"], "activating");
    assert_eq!(record["archive_import_status"], "running");
    assert_eq!(record["password_expired"], true);
    assert_eq!(record["outbound_limit_status"], 10);
    sim.clock().advance(Duration::from_secs(3600));
    let record = call(&app, get(MAILBOX, TOKEN)).await.record();
    assert_eq!(record["quota"], 2048, "growth stops at the limit");
    assert_eq!(
        sim.mailbox("EA00000011").map(|m| m.quota_used_mib),
        Some(2048)
    );
}

#[tokio::test]
async fn mailbox_paths_are_checked_and_unknown_pairs_answer_404() {
    let app = app_from(&hosting_sim(), LOOPBACK);
    for (path, parameter) in [
        (
            "/api/domains/D901/email_accounts/EA00000011",
            "`domain_code`",
        ),
        (
            "/api/domains/D000000901/email_accounts/EA11",
            "`email_account_code`",
        ),
        (
            "/api/domains/D000000901/email_accounts/P00000012",
            "`email_account_code`",
        ),
        (
            "/api/domains/D000000901/email_accounts/T000000012",
            "`email_account_code`",
        ),
    ] {
        let message = call(&app, get(path, TOKEN))
            .await
            .error(StatusCode::BAD_REQUEST);
        assert!(message.contains(parameter), "{path}: {message}");
    }
    for path in [
        "/api/domains/D000000902/email_accounts/EA00000011",
        "/api/domains/D000000901/email_accounts/EA00000099",
    ] {
        call(&app, get(path, TOKEN))
            .await
            .error(StatusCode::NOT_FOUND);
    }
}

#[test]
fn bad_hosting_seeds_are_refused() {
    let mut duplicate = hosting_config();
    duplicate.mailboxes.push(duplicate.mailboxes[0].clone());
    assert!(Simulator::try_new(duplicate).is_err());
    let mut clash = hosting_config();
    clash.mailboxes[1].domain_name = "other.example".into();
    assert!(Simulator::try_new(clash).is_err(), "one code, two names");
    let mut sending = hosting_config();
    sending.mailboxes[0].domain_name = "shop.example".into();
    sending.mailboxes[1].domain_name = "shop.example".into();
    assert!(
        Simulator::try_new(sending).is_err(),
        "shop.example is D000000101"
    );
    let mut migration = hosting_config();
    migration.migrations.push(migration.migrations[0].clone());
    assert!(Simulator::try_new(migration).is_err());
}

// --- Faults on the new routes -----------------------------------------------------------------

#[tokio::test]
async fn faults_apply_to_the_statistics_migration_and_mailbox_routes() {
    let sim = hosting_sim();
    sample_outcomes(&sim);
    let app = app_from(&sim, LOOPBACK);
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

fn collect_numbers(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(items) => items.iter().for_each(|v| collect_numbers(v, out)),
        Value::Object(members) => members.values().for_each(|v| collect_numbers(v, out)),
        _ => {}
    }
}

// --- The demo fleet ---------------------------------------------------------------------------

#[test]
fn the_demo_targets_come_from_the_demo_configuration() {
    let config = SimConfig::demo(TOKEN);
    let targets = config.demo_targets();
    assert_eq!(targets.accounts, [1001, 1002, 1003, 1004]);
    assert_eq!(
        targets.migrations,
        ["MG00000001", "MG00000002", "MG00000003"]
    );
    assert_eq!(targets.mailboxes.len(), 4);
    assert!(
        targets
            .mailboxes
            .iter()
            .any(|(_, code)| code.starts_with('P'))
    );
    assert_eq!(
        targets.domains,
        [
            "shop.example",
            "news.example",
            "starter.example",
            "legacy.example",
            "trial.example",
            "promo.example"
        ]
    );
    assert!(config.history);
    assert!(config.accounts.iter().all(|a| a.timezone == "Europe/Rome"));
}

#[test]
fn the_demo_fleet_shows_living_numbers_at_once() {
    let start = ts("2026-11-22T14:00:00Z");
    let config = SimConfig::demo(TOKEN);
    let targets = config.demo_targets();
    let sim = Simulator::try_with_clock(config.clone(), SimClock::frozen(start)).expect("demo");
    let today = start.to_zoned(rome()).date();
    let yesterday = today.yesterday().expect("date");
    for id in [DEMO_BUSY, DEMO_NEARLY_EXHAUSTED, DEMO_EXPIRING] {
        let whole_day: i64 = sim.day_totals(id, yesterday).values().sum();
        assert!((300..=3001).contains(&whole_day), "{id}: {whole_day}");
        assert!(sim.day_totals(id, today).values().sum::<i64>() > 0, "{id}");
    }
    assert_eq!(
        sim.day_totals(DEMO_DISABLED, yesterday)
            .values()
            .sum::<i64>(),
        0
    );
    // Deterministic from the seed.
    let again = Simulator::try_with_clock(config, SimClock::frozen(start)).expect("demo");
    assert_eq!(
        again.day_totals(DEMO_BUSY, yesterday),
        sim.day_totals(DEMO_BUSY, yesterday)
    );

    let status = |code: &str| sim.migration_stats(code).expect("migration")["aggregate"].clone();
    assert_eq!(status(DEMO_MIGRATION_RUNNING)["status"], "running");
    assert_eq!(status(DEMO_MIGRATION_COMPLETED)["status"], "completed");
    let failing = status(DEMO_MIGRATION_WITH_FAILURES);
    assert_eq!(failing["status"], "running");
    assert_eq!(failing["accounts"]["failed"], 1);
    assert!(failing["errors"].as_i64() > Some(0));
    let before = status(DEMO_MIGRATION_RUNNING)["messages"]["migrated"].as_i64();
    sim.clock().advance(Duration::from_secs(60));
    assert!(status(DEMO_MIGRATION_RUNNING)["messages"]["migrated"].as_i64() > before);
    sim.clock().advance(Duration::from_secs(2 * 3600));
    assert_eq!(status(DEMO_MIGRATION_RUNNING)["status"], "completed");

    let sim =
        Simulator::try_with_clock(SimConfig::demo(TOKEN), SimClock::frozen(start)).expect("demo");
    let used = |sim: &Simulator| {
        let record = sim
            .mailbox_record("D000000901", DEMO_FILLING)
            .expect("mailbox");
        record["quota"].as_f64().expect("quota") / record["max_email_quota"].as_f64().expect("max")
    };
    assert!(used(&sim) < 0.9);
    sim.clock().advance(Duration::from_secs(5 * 60));
    assert!(used(&sim) > 0.9, "crosses 90% within five minutes");
    for (domain, code) in &targets.mailboxes {
        assert!(sim.mailbox_record(domain, code).is_some(), "{code}");
    }
    let at_limit = targets
        .mailboxes
        .iter()
        .find(|(_, code)| code == DEMO_OUTBOUND_AT_LIMIT)
        .and_then(|(domain, code)| sim.mailbox_record(domain, code))
        .expect("mailbox");
    assert_eq!(
        at_limit["outbound_limit_status"],
        at_limit["outbound_limit"]
    );
    let archive = sim.mailbox(DEMO_ARCHIVE_ACTIVATING).expect("mailbox");
    assert_eq!(archive.archive_status, "activating");
}

// --- The fault table: broken, slow and odd bodies, 429 variants, only_ids ------------------------

mod fault_table;
