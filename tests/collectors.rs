//! The mail-tracing, migration and mailbox collectors against the living simulator: midnight
//! rollover (UTC, Europe/Rome, a daylight-saving day), the domain cap, migrations that move,
//! mailboxes that fill, and sums that agree with what the simulator counted.

use std::time::Duration;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use mailhost_sim::{Account, AccountSeed, Mailbox, MailboxSeed, MigrationSeed, SimConfig};

use crate::helpers::{Sim, TOKEN, exporter_on_sim_clock, must, spawn_sim_on, value};

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// One account in `zone` with a frozen clock at `at`, and no traffic of its own.
async fn frozen_sim(zone: &str, at: Timestamp, domains: Vec<String>) -> Sim {
    let config = SimConfig {
        management_tokens: vec![mailhost_sim::ManagementToken {
            token: TOKEN.to_owned(),
            accounts: None,
        }],
        accounts: vec![AccountSeed::from(Account {
            id: 2001,
            username: "rollover".to_owned(),
            timezone: zone.to_owned(),
            domains,
            ..Account::default()
        })],
        ..SimConfig::default()
    };
    spawn_sim_on(config, mailhost_sim::SimClock::frozen(at)).await
}

fn daily(status: &str, day: &str) -> String {
    format!("mailhost_delivery_{day}_day_messages{{account_id=\"2001\",status=\"{status}\"}}")
}

fn dashboard(status: &str, day: &str) -> String {
    format!("mailhost_tracemail_{day}_day_messages{{status=\"{status}\"}}")
}

/// Yesterday's final numbers become `previous_day` once local midnight passes.
async fn rollover(zone: &str, before_midnight: &str, earlier_today: &str) {
    let t = ts(before_midnight);
    let sim = frozen_sim(zone, t, vec!["roll.example".to_owned()]).await;
    sim.sim.record_outcomes(
        2001,
        "roll.example",
        ts(earlier_today),
        &[("delivered", 7), ("bounced", 2)],
    );
    sim.sim
        .record_outcomes(2001, "roll.example", t, &[("delivered", 1)]);
    let collectors = format!(
        "  tracemail_daily:\n    interval: 1s\n    timezone: {zone}\n    accounts: [2001]\n  tracemail_dashboard:\n    interval: 1s\n    timezone: {zone}\n"
    );
    let exporter = exporter_on_sim_clock(&sim.sim, &collectors, &sim.url).await;
    let body = exporter
        .scrape_until("today's numbers", |b| {
            value(b, &daily("delivered", "current")) == Some(8.0)
                && value(b, &dashboard("delivered", "current")) == Some(8.0)
        })
        .await;
    assert_eq!(must(&body, &daily("bounced", "current")), 2.0);
    let start_of_today = t
        .to_zoned(TimeZone::get(zone).unwrap())
        .start_of_day()
        .unwrap()
        .timestamp()
        .as_second() as f64;
    assert_eq!(
        must(&body, "mailhost_tracemail_day_start_timestamp_seconds"),
        start_of_today
    );

    // Two minutes later it is tomorrow, locally.
    sim.sim
        .clock()
        .set(t + jiff::SignedDuration::from_secs(120));
    let body = exporter
        .scrape_until("the rollover", |b| {
            value(b, &daily("delivered", "previous")) == Some(8.0)
                && value(b, &dashboard("delivered", "previous")) == Some(8.0)
        })
        .await;
    assert_eq!(must(&body, &daily("bounced", "previous")), 2.0);
    assert_eq!(must(&body, &daily("delivered", "current")), 0.0);
    assert_eq!(must(&body, &dashboard("delivered", "current")), 0.0);
    assert!(must(&body, "mailhost_tracemail_day_start_timestamp_seconds") > start_of_today);
}

#[tokio::test]
async fn rollover_at_utc_midnight_moves_yesterdays_final_numbers_to_previous_day() {
    rollover("UTC", "2026-11-22T23:59:00Z", "2026-11-22T00:30:00Z").await;
}

#[tokio::test]
async fn rollover_at_rome_midnight_moves_yesterdays_final_numbers_to_previous_day() {
    // 23:59 in Rome is 22:59 UTC in winter; 00:30 local on the 22nd is 23:30 UTC on the 21st.
    rollover(
        "Europe/Rome",
        "2026-11-22T22:59:00Z",
        "2026-11-21T23:30:00Z",
    )
    .await;
}

#[tokio::test]
async fn rollover_after_a_25_hour_daylight_saving_day_in_rome_counts_the_whole_day() {
    // 2026-10-25 has 25 hours in Rome: it starts at 22:00 UTC on the 24th (CEST) and ends at
    // 23:00 UTC on the 25th (CET). Traffic in its first hour, before the clocks go back, belongs
    // to that day, and so does traffic at 23:59 CET.
    rollover(
        "Europe/Rome",
        "2026-10-25T22:59:00Z",
        "2026-10-24T22:30:00Z",
    )
    .await;
}

#[tokio::test]
async fn only_the_top_domains_of_an_account_are_kept() {
    let domains: Vec<String> = (0..30).map(|i| format!("d{i:02}.example")).collect();
    let at = ts("2026-11-22T12:00:00Z");
    let sim = frozen_sim("UTC", at, domains.clone()).await;
    for (i, d) in domains.iter().enumerate() {
        sim.sim
            .record_outcomes(2001, d, at, &[("delivered", 10 + i as i64)]);
    }
    let exporter = exporter_on_sim_clock(
        &sim.sim,
        "  tracemail_daily:\n    interval: 1s\n    top_domains: 5\n    accounts: [2001]\n",
        &sim.url,
    )
    .await;
    let body = exporter
        .scrape_until("domains", |b| {
            b.contains("mailhost_delivery_domain_current_day_messages{")
        })
        .await;
    let kept: Vec<&str> = body
        .lines()
        .filter(|l| {
            l.starts_with("mailhost_delivery_domain_current_day_messages{")
                && l.contains("status=\"delivered\"")
        })
        .collect();
    assert_eq!(kept.len(), 5, "{kept:?}");
    for i in 25..30 {
        let series = format!(
            "mailhost_delivery_domain_current_day_messages{{account_id=\"2001\",domain=\"d{i:02}.example\",status=\"delivered\"}}"
        );
        assert_eq!(must(&body, &series), (10 + i) as f64);
    }
}

#[tokio::test]
async fn a_migration_progresses_across_refreshes_until_it_completes() {
    let at = ts("2026-11-22T12:00:00Z");
    let config = SimConfig {
        management_tokens: vec![mailhost_sim::ManagementToken {
            token: TOKEN.to_owned(),
            accounts: None,
        }],
        migrations: vec![MigrationSeed {
            code: "MG00000042".to_owned(),
            ..MigrationSeed::default()
        }],
        ..SimConfig::default()
    };
    let sim = spawn_sim_on(config, mailhost_sim::SimClock::frozen(at)).await;
    let exporter = exporter_on_sim_clock(
        &sim.sim,
        "  migration:\n    interval: 1s\n    migrations: [MG00000042]\n",
        &sim.url,
    )
    .await;
    let migrated = "mailhost_migration_messages_migrated{migration=\"MG00000042\"}";
    let first = exporter
        .scrape_until("a migration", |b| value(b, migrated).is_some())
        .await;
    let before = must(&first, migrated);
    sim.sim.clock().advance(Duration::from_secs(600));
    let body = exporter
        .scrape_until("progress", |b| {
            value(b, migrated).is_some_and(|v| v > before)
        })
        .await;
    assert!(
        must(&body, migrated)
            <= must(
                &body,
                "mailhost_migration_messages{migration=\"MG00000042\"}"
            )
    );
    // Long enough later, it has completed, and says so.
    sim.sim.clock().advance(Duration::from_secs(30 * 24 * 3600));
    let body = exporter
        .scrape_until("completion", |b| {
            value(
                b,
                "mailhost_migration_status{migration=\"MG00000042\",status=\"completed\"}",
            ) == Some(1.0)
        })
        .await;
    assert_eq!(
        must(&body, migrated),
        must(
            &body,
            "mailhost_migration_messages{migration=\"MG00000042\"}"
        )
    );
}

#[tokio::test]
async fn a_mailbox_crossing_90_percent_of_its_quota_shows_it() {
    let at = ts("2026-11-22T12:00:00Z");
    let config = SimConfig {
        management_tokens: vec![mailhost_sim::ManagementToken {
            token: TOKEN.to_owned(),
            accounts: None,
        }],
        mailboxes: vec![MailboxSeed::from(Mailbox {
            domain_code: "D000000201".to_owned(),
            domain_name: "corp.example".to_owned(),
            code: "EA00000007".to_owned(),
            local_part: "info".to_owned(),
            quota_used_mib: 890,
            quota_limit_mib: 1000,
            fill_mib_per_hour: 60,
            ..Mailbox::default()
        })],
        ..SimConfig::default()
    };
    let sim = spawn_sim_on(config, mailhost_sim::SimClock::frozen(at)).await;
    let exporter = exporter_on_sim_clock(
        &sim.sim,
        "  mailbox:\n    interval: 1s\n    mailboxes: [{domain: D000000201, mailbox: EA00000007}]\n",
        &sim.url,
    )
    .await;
    let used = "mailhost_mailbox_quota_used_bytes{mailbox=\"EA00000007\"}";
    let limit = "mailhost_mailbox_quota_limit_bytes{mailbox=\"EA00000007\"}";
    let body = exporter
        .scrape_until("the mailbox", |b| value(b, used).is_some())
        .await;
    assert!(must(&body, used) / must(&body, limit) < 0.9);
    assert_eq!(must(&body, limit), 1000.0 * 1024.0 * 1024.0);
    sim.sim.clock().advance(Duration::from_secs(3600));
    let body = exporter
        .scrape_until("90%", |b| {
            value(b, used)
                .zip(value(b, limit))
                .is_some_and(|(u, l)| u / l > 0.9)
        })
        .await;
    assert!(body.contains("mailhost_mailbox_info{mailbox=\"EA00000007\",address=\"info@corp.example\",domain=\"corp.example\""));
}

#[tokio::test]
async fn todays_statuses_add_up_to_what_the_simulator_counted() {
    let sim = crate::helpers::spawn_sim().await;
    let zone = "Europe/Rome";
    let tz = TimeZone::get(zone).unwrap();
    let targets = SimConfig::demo(TOKEN).demo_targets();
    let accounts: Vec<String> = targets.accounts.iter().map(|a| a.to_string()).collect();
    let collectors = format!(
        "  tracemail_daily:\n    interval: 1s\n    timezone: {zone}\n    accounts: [{}]\n  tracemail_dashboard:\n    interval: 1s\n    timezone: {zone}\n    views:\n      - account: {}\n",
        accounts.join(", "),
        targets.accounts[0]
    );
    let exporter = exporter_on_sim_clock(&sim.sim, &collectors, &sim.url).await;
    let sum = |body: &str, prefix: &str| -> f64 {
        body.lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let body = exporter
        .scrape_until("every account", |b| {
            targets.accounts.iter().all(|a| {
                b.contains(&format!(
                    "mailhost_delivery_current_day_messages{{account_id=\"{a}\""
                ))
            }) && b.contains("mailhost_tracemail_current_day_messages{status=")
        })
        .await;
    let today = sim.sim.clock().now().to_zoned(tz.clone()).date();
    for a in &targets.accounts {
        let counted: i64 = sim.sim.day_totals(*a, today).values().sum();
        let shown = sum(
            &body,
            &format!("mailhost_delivery_current_day_messages{{account_id=\"{a}\","),
        );
        assert_eq!(shown, counted as f64, "account {a}");
        let yesterday: i64 = sim
            .sim
            .day_totals(*a, today.yesterday().unwrap())
            .values()
            .sum();
        let shown = sum(
            &body,
            &format!("mailhost_delivery_previous_day_messages{{account_id=\"{a}\","),
        );
        assert_eq!(shown, yesterday as f64, "account {a}, yesterday");
    }
    let all: i64 = sim.sim.day_totals_in(None, None, &tz, today).values().sum();
    assert!(all > 0, "the demo fleet has history");
    assert_eq!(
        sum(&body, "mailhost_tracemail_current_day_messages{status="),
        all as f64
    );
    let first = targets.accounts[0];
    let one: i64 = sim
        .sim
        .day_totals_in(Some(first), None, &tz, today)
        .values()
        .sum();
    assert_eq!(
        sum(
            &body,
            &format!("mailhost_tracemail_current_day_messages{{account=\"{first}\",")
        ),
        one as f64
    );
    assert!(
        value(
            &body,
            &format!(
                "mailhost_target_success{{collector=\"tracemail_dashboard\",target=\"account:{first}\"}}"
            )
        ) == Some(1.0)
    );
}
