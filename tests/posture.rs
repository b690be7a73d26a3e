//! Security posture and lifecycle against the living simulator: each signal moves when the
//! provider's state changes, and comes back when it is put back. The allow-list is set and
//! cleared through the provider's own `PUT`, as an operator (or an attacker with a leaked
//! management token) would.

use jiff::Timestamp;
use mailhost_exporter::config::Config;
use mailhost_sim::{
    DEMO_TEAM_MEMBER_API_BLOCKED, DEMO_TEAM_MEMBER_NO_OTP, DEMO_TEAM_MEMBER_SECURED, SimConfig,
};

use crate::helpers::{TOKEN, spawn_exporter, spawn_sim, value};

const ACCOUNT: i32 = 1001;

fn config(url: &str, mailbox: &(String, String)) -> Config {
    let (domain, code) = mailbox;
    let yaml = format!(
        "api:
  base_url: {url}
collectors:
  delivery_account: {{interval: 1s, accounts: [{ACCOUNT}]}}
  mailbox: {{interval: 1s, mailboxes: [{{domain: {domain}, mailbox: {code}}}]}}
  team_member:
    interval: 1s
    team_members: [{DEMO_TEAM_MEMBER_SECURED}, {DEMO_TEAM_MEMBER_NO_OTP}, {DEMO_TEAM_MEMBER_API_BLOCKED}]
"
    );
    Config::parse(&yaml, Some(TOKEN.to_owned())).unwrap()
}

fn account(name: &str) -> String {
    format!("{name}{{account_id=\"{ACCOUNT}\"}}")
}

fn member(name: &str, code: &str) -> String {
    format!("{name}{{team_member=\"{code}\"}}")
}

async fn put_allow_nets(url: &str, nets: &[&str]) {
    let r = reqwest::Client::new()
        .put(format!("{url}/api/delivery/accounts/{ACCOUNT}"))
        .header("X-Api-Token", TOKEN)
        .json(&serde_json::json!({ "allow_nets": nets }))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
}

#[tokio::test]
async fn posture_and_lifecycle_signals_follow_the_providers_state_and_come_back() {
    let sim = spawn_sim().await;
    let targets = SimConfig::demo(TOKEN).demo_targets();
    // The demo mailbox with API access and no second factor.
    let mailbox = targets
        .mailboxes
        .iter()
        .find(|(_, m)| m == "EA00000003")
        .cloned()
        .unwrap();
    let exporter = spawn_exporter(config(&sim.url, &mailbox)).await;
    let mb = |name: &str| format!("{name}{{mailbox=\"{}\"}}", mailbox.1);

    let before = exporter
        .scrape_until("every collector's first values", |b| {
            value(b, &account("mailhost_delivery_allow_nets")).is_some()
                && value(
                    b,
                    &member("mailhost_team_member_otp_enabled", DEMO_TEAM_MEMBER_SECURED),
                )
                .is_some()
                && value(b, &mb("mailhost_mailbox_api_enabled")).is_some()
        })
        .await;
    // The demo's team members: one secured, one with API access and no second factor, one
    // whose API access is blocked.
    assert_eq!(
        value(
            &before,
            &member("mailhost_team_member_otp_enabled", DEMO_TEAM_MEMBER_SECURED)
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &before,
            &member("mailhost_team_member_otp_enabled", DEMO_TEAM_MEMBER_NO_OTP)
        ),
        Some(0.0)
    );
    assert_eq!(
        value(
            &before,
            &member(
                "mailhost_team_member_api_access_blocked",
                DEMO_TEAM_MEMBER_API_BLOCKED
            )
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &before,
            &member("mailhost_team_member_allow_nets", DEMO_TEAM_MEMBER_SECURED)
        ),
        Some(2.0)
    );
    assert_eq!(
        value(&before, &mb("mailhost_mailbox_api_enabled")),
        Some(1.0)
    );
    assert_eq!(
        value(&before, &mb("mailhost_mailbox_otp_enabled")),
        Some(0.0)
    );
    assert!(
        value(
            &before,
            &account("mailhost_delivery_delete_timestamp_seconds")
        )
        .is_none()
    );
    let open = value(&before, &account("mailhost_delivery_allow_nets")).unwrap();
    let print = value(
        &before,
        &account("mailhost_delivery_allow_nets_fingerprint"),
    )
    .unwrap();
    // No address reaches a label.
    assert!(
        !before.contains("203.0.113."),
        "an allowed network in the exposition"
    );

    // The allow-list set: counted, and its fingerprint changes.
    let three = ["198.51.100.0/24", "192.0.2.7", "2001:db8:1::/48"];
    put_allow_nets(&sim.url, &three).await;
    let set = exporter
        .scrape_until("the allow-list set", |b| {
            value(b, &account("mailhost_delivery_allow_nets")) == Some(3.0)
        })
        .await;
    let print_set = value(&set, &account("mailhost_delivery_allow_nets_fingerprint")).unwrap();
    assert_ne!(print_set, print);
    assert!(!set.contains("198.51.100."));
    // Cleared: any address may send.
    put_allow_nets(&sim.url, &[]).await;
    let cleared = exporter
        .scrape_until("the allow-list cleared", |b| {
            value(b, &account("mailhost_delivery_allow_nets")) == Some(0.0)
        })
        .await;
    let print_cleared = value(
        &cleared,
        &account("mailhost_delivery_allow_nets_fingerprint"),
    )
    .unwrap();
    assert_ne!(print_cleared, print_set);
    // Back to the demo's own list, written in another order: the fingerprint it started with.
    put_allow_nets(&sim.url, &["::1", "127.0.0.0/8"]).await;
    let back = exporter
        .scrape_until("the demo's allow-list back", |b| {
            value(b, &account("mailhost_delivery_allow_nets")) == Some(open)
        })
        .await;
    assert_eq!(
        value(&back, &account("mailhost_delivery_allow_nets_fingerprint")),
        Some(print)
    );

    // Lifecycle: a deletion scheduled, a pending order; then taken back.
    let delete_on: Timestamp = "2026-12-31T00:00:00Z".parse().unwrap();
    sim.sim.update_account(ACCOUNT, |a| {
        a.delete_on = Some(delete_on);
        a.has_pending_order = true;
    });
    // The second factor of the secured member switched off; the mailbox's switched on.
    sim.sim
        .update_team_member(DEMO_TEAM_MEMBER_SECURED, |m| m.otp = false);
    sim.sim.update_mailbox(&mailbox.1, |m| m.otp = true);
    let changed = exporter
        .scrape_until("deletion, order and second factors", |b| {
            value(b, &account("mailhost_delivery_delete_timestamp_seconds"))
                == Some(delete_on.as_second() as f64)
                && value(b, &account("mailhost_delivery_pending_order")) == Some(1.0)
                && value(
                    b,
                    &member("mailhost_team_member_otp_enabled", DEMO_TEAM_MEMBER_SECURED),
                ) == Some(0.0)
                && value(b, &mb("mailhost_mailbox_otp_enabled")) == Some(1.0)
        })
        .await;
    assert!(!changed.contains(TOKEN));
    sim.sim.update_account(ACCOUNT, |a| {
        a.delete_on = None;
        a.has_pending_order = false;
    });
    sim.sim
        .update_team_member(DEMO_TEAM_MEMBER_SECURED, |m| m.otp = true);
    exporter
        .scrape_until("all put back", |b| {
            value(b, &account("mailhost_delivery_delete_timestamp_seconds")).is_none()
                && value(b, &account("mailhost_delivery_pending_order")) == Some(0.0)
                && value(
                    b,
                    &member("mailhost_team_member_otp_enabled", DEMO_TEAM_MEMBER_SECURED),
                ) == Some(1.0)
        })
        .await;
}
