//! Mail tracing: the dashboard and the daily statistics, their checks, scopes and time zones.

use crate::helpers::*;

#[tokio::test]
async fn dashboard_sums_equal_the_day_totals() {
    let sim = frozen_sim("2026-11-22T12:00:00Z");
    sample_outcomes(&sim);
    let app = loopback_app(&sim);
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
    let app = loopback_app(&sim);
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
    let app = loopback_app(&sim);
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
    let app = loopback_app(&sim);
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
    let app = loopback_app(&sim);
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
    let app = loopback_app(&sim);
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
    let app = loopback_app(&sim);
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
    let app = loopback_app(&sim);
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
    let app = loopback_app(&sim);
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

/// Complaints per thousand messages of today's item, as an alert would compute it.
fn complaints_per_mille(item: &Value) -> f64 {
    let counts = outcomes_of(item);
    counts["complaint"] as f64 * 1000.0 / item["total"].as_f64().expect("total")
}

#[tokio::test]
async fn complaints_past_three_per_mille_show_in_the_daily_statistics_until_diluted_or_the_next_day()
 {
    let sim = frozen_sim("2026-11-22T12:00:00Z");
    let app = loopback_app(&sim);
    sim.record_outcomes(
        2,
        "two.example",
        ts("2026-11-22T09:00:00Z"),
        &[("delivered", 996), ("complaint", 4)],
    );
    let body = call(&app, daily("2", "")).await.json();
    let today = &body["resources"][0];
    assert_eq!(today["date"], "2026-11-22");
    assert_eq!(today["complaint"], 4);
    assert_eq!(today["total"], 1000);
    assert!(complaints_per_mille(today) > 3.0, "{today}");
    assert_eq!(outcomes_of(today), sim.day_totals(2, date(2026, 11, 22)));

    // More clean traffic the same day brings the rate back under 0.3 %.
    sim.record_outcomes(
        2,
        "two.example",
        ts("2026-11-22T11:00:00Z"),
        &[("delivered", 500)],
    );
    let body = call(&app, daily("2", "")).await.json();
    assert_eq!(body["resources"][0]["total"], 1500);
    assert!(complaints_per_mille(&body["resources"][0]) < 3.0);

    // The next local day starts with no complaints; yesterday's item keeps them.
    sim.clock().advance(Duration::from_secs(24 * 3600));
    let body = call(&app, daily("2", "")).await.json();
    assert_eq!(body["resources"][0]["date"], "2026-11-23");
    assert_eq!(body["resources"][0]["complaint"], 0);
    assert_eq!(body["resources"][1]["date"], "2026-11-22");
    assert_eq!(body["resources"][1]["complaint"], 4);
}
