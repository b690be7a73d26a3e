//! Security posture and lifecycle against the living simulator: each signal moves when the
//! provider's state changes, and comes back when it is put back. The allow-list is set and
//! cleared through the provider's own `PUT`, as an operator (or an attacker with a leaked
//! management token) would.

use jiff::Timestamp;
use mailhost_exporter::config::Config;
use mailhost_sim::{
    DEMO_TEAM_MEMBER_API_BLOCKED, DEMO_TEAM_MEMBER_NO_OTP, DEMO_TEAM_MEMBER_SECURED, SimConfig,
};

use crate::helpers::{TOKEN, alert_becomes, alert_firing, spawn_exporter, spawn_sim, value};

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

/// The demo mailbox with API access and no second factor: (domain code, mailbox code).
fn api_mailbox() -> (String, String) {
    SimConfig::demo(TOKEN)
        .demo_targets()
        .mailboxes
        .into_iter()
        .find(|(_, m)| m == mailhost_sim::DEMO_OUTBOUND_AT_LIMIT)
        .unwrap()
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
    let mailbox = api_mailbox();
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

/// The posture, lifecycle and complaint alerts of the shipped mixin (their `for:` and
/// `keep_firing_for` set to 0 and the allow-list window to 4 s, so that a test can watch them) fire on a real Prometheus when
/// the simulator's state changes, and resolve when it is put back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
async fn posture_alerts_fire_on_a_real_prometheus_and_resolve_when_the_state_is_put_back() {
    let Some(prometheus) = crate::helpers::tool("prometheus", "apt-get install prometheus") else {
        return;
    };
    let Some(jsonnet) = crate::mixin::jsonnet() else {
        return;
    };
    let watched = [
        "MailhostMailboxApiWithoutSecondFactor",
        "MailhostTeamMemberApiWithoutSecondFactor",
        "MailhostDeliveryAccountOpenToAnyAddress",
        "MailhostDeliveryAllowListChanged",
        "MailhostDeliveryAccountScheduledForDeletion",
        "MailhostDeliveryComplaintRatioCritical",
    ];
    let now_for: Vec<String> = watched.iter().map(|a| format!("{a}: '0s'")).collect();
    let (rules, _) = crate::mixin::render_rules(
        jsonnet,
        &format!(
            "{{ alertFor+: {{ {} }}, allowListChangeWindow: '4s', keepFiringFor: '' }}",
            now_for.join(", ")
        ),
    );

    let sim = spawn_sim().await;
    let mailbox = api_mailbox();
    let (domain, code) = &mailbox;
    let zone = sim.sim.account(ACCOUNT).unwrap().timezone.clone();
    let yaml = format!(
        "api:
  base_url: {url}
collectors:
  delivery_account: {{interval: 1s, accounts: [{ACCOUNT}]}}
  tracemail_daily: {{interval: 1s, timezone: {zone}, accounts: [{ACCOUNT}]}}
  mailbox: {{interval: 1s, mailboxes: [{{domain: {domain}, mailbox: {code}}}]}}
  team_member: {{interval: 1s, team_members: [{DEMO_TEAM_MEMBER_SECURED}]}}
",
        url = sim.url
    );
    let exporter = spawn_exporter(Config::parse(&yaml, Some(TOKEN.to_owned())).unwrap()).await;
    let prom = crate::helpers::spawn_prometheus(
        prometheus,
        &format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\n  - {}\nscrape_configs:\n  - job_name: mailhost\n    static_configs:\n      - targets: [\"{}\"]\n",
            rules.path().join("prometheus/rules.yml").display(),
            rules.path().join("prometheus/alerts.yml").display(),
            exporter.addr
        ),
    );
    let url = prom.url.clone();

    // The account sends all along (its sent count grows), so the alerts about an account that
    // sends can fire.
    let sender = {
        let sim = sim.sim.clone();
        tokio::spawn(async move {
            loop {
                sim.update_account(ACCOUNT, |a| a.messages_sent += 10);
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
        })
    };

    // The demo mailbox with API access and no second factor, until it gets one.
    let mb = format!("mailbox=\"{code}\"");
    alert_becomes(&url, "MailhostMailboxApiWithoutSecondFactor", &mb, true).await;
    sim.sim.update_mailbox(code, |m| m.otp = true);
    alert_becomes(&url, "MailhostMailboxApiWithoutSecondFactor", &mb, false).await;

    // A team member's second factor switched off, then on again.
    let tm = format!("team_member=\"{DEMO_TEAM_MEMBER_SECURED}\"");
    assert_eq!(
        alert_firing(&url, "MailhostTeamMemberApiWithoutSecondFactor", &tm).await,
        Some(false)
    );
    sim.sim
        .update_team_member(DEMO_TEAM_MEMBER_SECURED, |m| m.otp = false);
    alert_becomes(&url, "MailhostTeamMemberApiWithoutSecondFactor", &tm, true).await;
    sim.sim
        .update_team_member(DEMO_TEAM_MEMBER_SECURED, |m| m.otp = true);
    alert_becomes(&url, "MailhostTeamMemberApiWithoutSecondFactor", &tm, false).await;

    // The allow-list cleared while the account sends, then set again.
    let acc = format!("account_id=\"{ACCOUNT}\"");
    assert_eq!(
        alert_firing(&url, "MailhostDeliveryAccountOpenToAnyAddress", &acc).await,
        Some(false)
    );
    put_allow_nets(&sim.url, &[]).await;
    alert_becomes(&url, "MailhostDeliveryAllowListChanged", &acc, true).await;
    alert_becomes(&url, "MailhostDeliveryAccountOpenToAnyAddress", &acc, true).await;
    put_allow_nets(&sim.url, &["127.0.0.0/8", "::1"]).await;
    alert_becomes(&url, "MailhostDeliveryAccountOpenToAnyAddress", &acc, false).await;
    alert_becomes(&url, "MailhostDeliveryAllowListChanged", &acc, false).await;

    // A deletion scheduled for the sending account, then taken back.
    sim.sim.update_account(ACCOUNT, |a| {
        a.delete_on = Some(Timestamp::now() + jiff::SignedDuration::from_hours(72));
    });
    alert_becomes(
        &url,
        "MailhostDeliveryAccountScheduledForDeletion",
        &acc,
        true,
    )
    .await;
    sim.sim.update_account(ACCOUNT, |a| a.delete_on = None);
    alert_becomes(
        &url,
        "MailhostDeliveryAccountScheduledForDeletion",
        &acc,
        false,
    )
    .await;

    // Complaints raised past 0.3 % of the last 24 hours' messages, then diluted below 0.2 % by
    // more delivered mail. The ratio is of the counters, which count what today's figures grew
    // by since the exporter first fetched them; today's totals bound that growth from above,
    // so each step overshoots by a factor of two or more, whatever the seeded history holds.
    let send_domain = sim.sim.account(ACCOUNT).unwrap().domains[0].clone();
    let today = Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::get(&zone).unwrap())
        .date();
    let totals = || {
        let t = sim.sim.day_totals(ACCOUNT, today);
        (t["complaint"], t.values().sum::<i64>())
    };
    let record = |outcomes: &[(&str, i64)]| {
        sim.sim
            .record_outcomes(ACCOUNT, &send_domain, Timestamp::now(), outcomes)
    };
    // At most 0.1 %: a thousand delivered for each complaint counted so far, and more.
    let (c, _) = totals();
    record(&[("delivered", c * 1000 + 1000)]);
    alert_becomes(&url, "MailhostDeliveryComplaintRatioCritical", &acc, false).await;
    // At least 0.49 %: complaints of half a percent of every message of the day.
    let (_, t) = totals();
    record(&[("complaint", t * 5 / 1000 + 1)]);
    alert_becomes(&url, "MailhostDeliveryComplaintRatioCritical", &acc, true).await;
    // At most 0.1 % again.
    let (c, _) = totals();
    record(&[("delivered", c * 1000)]);
    alert_becomes(&url, "MailhostDeliveryComplaintRatioCritical", &acc, false).await;

    sender.abort();
}
