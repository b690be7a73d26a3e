//! The demo fleet: its targets, its living numbers, and demo traffic through a real loopback
//! server.

use crate::helpers::*;

#[tokio::test]
async fn the_demo_fleet_served_on_loopback_moves_under_demo_traffic() {
    let config = SimConfig::demo(TOKEN);
    let identities = config.send_identities();
    let sim = Simulator::new(config);
    let before = sim.account(DEMO_BUSY).expect("1001").messages_sent;
    let Served {
        addr,
        shutdown,
        server,
    } = serve(&sim).await;

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
fn the_demo_targets_come_from_the_demo_configuration() {
    let config = SimConfig::demo(TOKEN);
    let targets = config.demo_targets();
    assert_eq!(targets.accounts, [1001, 1002, 1003, 1004]);
    assert_eq!(
        targets.migrations,
        ["MG00000001", "MG00000002", "MG00000003"]
    );
    assert_eq!(targets.mailboxes.len(), 4);
    assert_eq!(
        targets.team_members,
        [
            DEMO_TEAM_MEMBER_SECURED,
            DEMO_TEAM_MEMBER_NO_OTP,
            DEMO_TEAM_MEMBER_API_BLOCKED
        ]
    );
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

#[tokio::test]
async fn the_demo_shows_one_team_member_and_one_mailbox_with_api_access_and_no_second_factor() {
    let config = SimConfig::demo(TOKEN);
    let targets = config.demo_targets();
    let sim = Simulator::new(config);
    let app = loopback_app(&sim);
    let mut exposed = Vec::new();
    for code in &targets.team_members {
        let record = call(&app, get(&format!("/api/team_members/{code}"), TOKEN))
            .await
            .record();
        if record["otp"] == false && record["api_access_blocked"] == false {
            exposed.push(code.clone());
        }
    }
    assert_eq!(exposed, [DEMO_TEAM_MEMBER_NO_OTP]);
    let secured = sim
        .team_member_record(DEMO_TEAM_MEMBER_SECURED)
        .expect("member");
    assert_eq!(secured["otp"], true);
    assert_eq!(secured["api_access_blocked"], false);
    assert!(
        secured["allow_nets"]
            .as_array()
            .is_some_and(|nets| !nets.is_empty())
    );
    let blocked = sim
        .team_member_record(DEMO_TEAM_MEMBER_API_BLOCKED)
        .expect("member");
    assert_eq!(blocked["api_access_blocked"], true);

    let exposed: Vec<&str> = targets
        .mailboxes
        .iter()
        .filter_map(|(domain, code)| {
            let record = sim.mailbox_record(domain, code)?;
            (record["api_enabled"] == true && record["otp"] == false).then_some(code.as_str())
        })
        .collect();
    assert_eq!(exposed, [DEMO_OUTBOUND_AT_LIMIT]);
}
