//! What every area's tests share: the test fleet, a router or a loopback server over it, and
//! request builders and answer readers, so each test states only what it checks.

// Re-exported so each area file needs one `use crate::helpers::*`.
pub use std::net::SocketAddr;
pub use std::time::Duration;

pub use axum::Router;
pub use axum::body::{Body, to_bytes};
pub use axum::http::{HeaderMap, Method, Request, StatusCode, header};
pub use jiff::Timestamp;
pub use jiff::civil::{Date, date};
pub use jiff::tz::TimeZone;
pub use mailhost_sim::*;
pub use serde_json::{Value, json};
pub use tokio_util::sync::CancellationToken;
pub use tower::ServiceExt;

use std::collections::BTreeMap;

use axum::extract::connect_info::MockConnectInfo;

pub const TOKEN: &str = "test-management-token";
pub const SCOPED: &str = "scoped-management-token";
pub const SEND_1: &str = "send-token-account-1-0123456789";
pub const SEND_2: &str = "send-token-account-2-0123456789";
pub const SEND_3: &str = "send-token-account-3-0123456789";
pub const SEND_4: &str = "send-token-account-4-0123456789";
pub const LOOPBACK: [u8; 4] = [127, 0, 0, 1];

pub fn token(id: i32, secret: &str, allow_nets: &[&str]) -> TokenSeed {
    TokenSeed {
        id,
        label: format!("token {id}"),
        token: secret.to_owned(),
        allow_nets: allow_nets.iter().map(|s| (*s).to_owned()).collect(),
    }
}

/// 1: 10 plan messages and 20 extras left; 2: token allow-listed to 192.0.2.0/24; 3: disabled;
/// 4: account allow-listed to 198.51.100.0/24.
pub fn config() -> SimConfig {
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
                account: Account {
                    id: 1,
                    username: "one".into(),
                    plan: "business".into(),
                    plan_messages_limit: 100,
                    plan_messages_used: 90,
                    extra_messages_total: 50,
                    remaining_extra_messages_bought: 20,
                    messages_sent: 500,
                    domains: vec!["shop.example".into(), "news.example".into()],
                    ..Account::default()
                },
                send_tokens: vec![token(11, SEND_1, &[])],
                ..AccountSeed::default()
            },
            AccountSeed {
                account: Account {
                    id: 2,
                    username: "two".into(),
                    domains: vec!["two.example".into()],
                    ..Account::default()
                },
                send_tokens: vec![token(21, SEND_2, &["192.0.2.0/24"])],
                ..AccountSeed::default()
            },
            AccountSeed {
                account: Account {
                    id: 3,
                    username: "three".into(),
                    enabled: false,
                    domains: vec!["three.example".into()],
                    ..Account::default()
                },
                send_tokens: vec![token(31, SEND_3, &[])],
                ..AccountSeed::default()
            },
            AccountSeed {
                account: Account {
                    id: 4,
                    username: "four".into(),
                    domains: vec!["four.example".into()],
                    ..Account::default()
                },
                allow_nets: vec!["198.51.100.0/24".into()],
                send_tokens: vec![token(41, SEND_4, &[])],
                ..AccountSeed::default()
            },
        ],
        seed: 7,
        ..SimConfig::default()
    }
}

pub fn sim() -> Simulator {
    Simulator::new(config())
}

pub fn app_from(sim: &Simulator, ip: impl Into<std::net::IpAddr>) -> Router {
    sim.router()
        .layer(MockConnectInfo(SocketAddr::new(ip.into(), 40_000)))
}

/// The router of `sim` as seen by a client on the loopback address: what most tests call.
pub fn loopback_app(sim: &Simulator) -> Router {
    app_from(sim, LOOPBACK)
}

pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub bytes: Vec<u8>,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.bytes)
            )
        })
    }

    /// Asserts the error shape every failure must have.
    pub fn error(&self, status: StatusCode) -> String {
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

    pub fn record(&self) -> Value {
        assert_eq!(
            self.status,
            StatusCode::OK,
            "{}",
            String::from_utf8_lossy(&self.bytes)
        );
        self.json()["resources"][0].clone()
    }
}

pub async fn call(app: &Router, request: Request<Body>) -> Answer {
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

pub fn request(
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

pub fn mgmt(method: Method, path: &str, token: &str, body: Option<Value>) -> Request<Body> {
    let body = body.map(|b| b.to_string());
    request(
        method,
        path,
        Some((MANAGEMENT_TOKEN_HEADER, token.to_owned())),
        body.as_deref(),
    )
}

pub fn get_account(id: &str) -> Request<Body> {
    mgmt(
        Method::GET,
        &format!("/api/delivery/accounts/{id}"),
        TOKEN,
        None,
    )
}

pub fn send_req(path: &str, token: &str, body: Value) -> Request<Body> {
    request(
        Method::POST,
        path,
        Some(("authorization", format!("Bearer {token}"))),
        Some(&body.to_string()),
    )
}

pub fn mail(from: &str, to: &[&str]) -> Value {
    json!({"messages": [{"from": from, "to": to, "subject": "s", "text_body": "b"}]})
}

pub const DASHBOARD: &str = "/api/delivery/tracemail/dashboard";

pub fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

pub fn rome() -> TimeZone {
    TimeZone::get("Europe/Rome").expect("bundled tz database")
}

/// The test fleet on a clock frozen at `at`; account 1 lives in Europe/Rome, the others in UTC.
pub fn frozen_sim(at: &str) -> Simulator {
    let mut config = config();
    config.accounts[0].timezone = "Europe/Rome".into();
    Simulator::try_with_clock(config, SimClock::frozen(ts(at))).expect("valid config")
}

pub fn dashboard(token: &str, body: Value) -> Request<Body> {
    mgmt(Method::POST, DASHBOARD, token, Some(body))
}

pub fn daily(account: &str, query: &str) -> Request<Body> {
    mgmt(
        Method::GET,
        &format!("/api/delivery/tracemail/daily/{account}{query}"),
        TOKEN,
        None,
    )
}

/// The five outcomes and `total` of a statistics object, checking that `total` adds up.
pub fn outcomes_of(value: &Value) -> BTreeMap<String, i64> {
    let counts: BTreeMap<String, i64> = OUTCOMES
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

pub fn sample_outcomes(sim: &Simulator) {
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

pub fn hosting_config() -> SimConfig {
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
            MailboxSeed::from(Mailbox {
                domain_code: "D000000901".into(),
                domain_name: "acme.example".into(),
                code: "EA00000011".into(),
                local_part: "info".into(),
                quota_used_mib: 1000,
                quota_limit_mib: 2048,
                fill_mib_per_hour: 120,
                messages: 50,
                ..Mailbox::default()
            }),
            MailboxSeed::from(Mailbox {
                domain_code: "D000000901".into(),
                domain_name: "acme.example".into(),
                code: "P000000012".into(),
                local_part: "postmaster".into(),
                ..Mailbox::default()
            }),
        ],
        ..config()
    }
}

pub fn hosting_sim() -> Simulator {
    Simulator::try_with_clock(
        hosting_config(),
        SimClock::frozen(ts("2026-11-22T07:00:00Z")),
    )
    .expect("valid config")
}

pub fn get(path: &str, token: &str) -> Request<Body> {
    mgmt(Method::GET, path, token, None)
}

pub const MAILBOX: &str = "/api/domains/D000000901/email_accounts/EA00000011";

/// Every number in `value`, as its JSON text, in document order.
pub fn collect_numbers(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(items) => items.iter().for_each(|v| collect_numbers(v, out)),
        Value::Object(members) => members.values().for_each(|v| collect_numbers(v, out)),
        _ => {}
    }
}

/// A simulator served on 127.0.0.1:0 by a task of its own; cancel `shutdown` to stop it.
pub struct Served {
    pub addr: SocketAddr,
    pub shutdown: CancellationToken,
    pub server: tokio::task::JoinHandle<std::io::Result<()>>,
}

pub async fn serve(sim: &Simulator) -> Served {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("addr");
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(sim.clone().serve(listener, shutdown.clone()));
    Served {
        addr,
        shutdown,
        server,
    }
}
