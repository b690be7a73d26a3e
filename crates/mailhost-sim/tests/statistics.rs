//! Sending statistics: one outcome per recipient, local days cut at query time, retention.

use crate::helpers::*;

#[tokio::test]
async fn sends_feed_the_statistics_with_one_outcome_per_recipient() {
    let sim = frozen_sim("2026-11-22T12:00:00Z");
    let app = loopback_app(&sim);
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
