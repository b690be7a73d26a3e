//! Exact daily counters: `mailhost_delivery_messages_total`, derived from the daily figures
//! that drop to zero at midnight, loses nothing at the rollover. On both daylight-saving switch
//! days of America/New_York (23 and 25 hours long), a real Prometheus scraping the exporter
//! while the simulator's clock walks through the day finds `increase(...[1d])` equal to what the
//! simulator counted for that day, outcome by outcome, the last minutes before midnight included.

use std::collections::BTreeMap;

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan as _};
use mailhost_sim::{Account, AccountSeed, SimClock, SimConfig};

use crate::helpers::{
    TOKEN, exporter_on_sim_clock, spawn_prometheus, spawn_sim_on, tool, value, wait_for,
};

const ZONE: &str = "America/New_York";
const ACCOUNT: i32 = 2001;
const DOMAIN: &str = "count.example";

fn at(day: Date, time: &str) -> Timestamp {
    let tz = TimeZone::get(ZONE).unwrap();
    day.to_datetime(time.parse().unwrap())
        .to_zoned(tz)
        .unwrap()
        .timestamp()
}

fn series(status: &str) -> String {
    format!("mailhost_delivery_messages_total{{account_id=\"{ACCOUNT}\",status=\"{status}\"}}")
}

/// The value of an instant query (one series) on Prometheus at `url`, with its sample time.
async fn query(url: &str, expr: &str, time: Option<f64>) -> Option<(f64, f64)> {
    let sample = crate::helpers::instant_query(url, expr, time)
        .await?
        .into_iter()
        .next()?;
    Some((sample.time, sample.value))
}

async fn day(day: Date) {
    let Some(prometheus) = tool("prometheus", "apt-get install prometheus") else {
        return;
    };
    // Two minutes before the day starts, locally.
    let start = at(day.yesterday().unwrap(), "23:58");
    let config = SimConfig {
        management_tokens: vec![mailhost_sim::ManagementToken {
            token: TOKEN.to_owned(),
            accounts: None,
        }],
        accounts: vec![AccountSeed::from(Account {
            id: ACCOUNT,
            timezone: ZONE.to_owned(),
            domains: vec![DOMAIN.to_owned()],
            ..Account::default()
        })],
        ..SimConfig::default()
    };
    let sim = spawn_sim_on(config, SimClock::frozen(start)).await;
    // Sent the evening before: yesterday's figure, the counters' baseline, never counted.
    sim.sim
        .record_outcomes(ACCOUNT, DOMAIN, start - 30.minutes(), &[("delivered", 40)]);
    let collectors = format!(
        "  tracemail_daily:\n    interval: 1s\n    deadline: 900ms\n    max_age: 1h\n    timezone: {ZONE}\n    accounts: [{ACCOUNT}]\n"
    );
    let exporter = exporter_on_sim_clock(&sim.sim, &collectors, &sim.url).await;

    let prometheus = spawn_prometheus(
        prometheus,
        &format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: mailhost\n    static_configs:\n      - targets: [\"{}\"]\n",
            exporter.addr
        ),
    );
    let prom = prometheus.url.clone();

    // Prometheus holds every counter at zero before anything of the day is sent.
    wait_for("the counters at zero in Prometheus", || async {
        let (_, v) = query(
            &prom,
            &format!(
                "sum({})",
                series("delivered").replace("status=\"delivered\"", "status=~\".+\"")
            ),
            None,
        )
        .await?;
        (v == 0.0).then_some(())
    })
    .await;
    // Walks the clock to `to`, records `outcomes` just before it, and waits until Prometheus has
    // scraped the counter of `status` at `expected`.
    let step = |to: Timestamp,
                sent_at: Option<(Timestamp, Vec<(&'static str, i64)>)>,
                status: &'static str,
                expected: f64| {
        let sim = &sim;
        let exporter = &exporter;
        let prom = prom.clone();
        async move {
            sim.sim.clock().set(to);
            if let Some((when, outcomes)) = sent_at {
                sim.sim.record_outcomes(ACCOUNT, DOMAIN, when, &outcomes);
            }
            exporter
                .scrape_until("the exporter's counter", |b| {
                    value(b, &series(status)) == Some(expected)
                })
                .await;
            wait_for("Prometheus has the counter", || async {
                let (_, v) = query(&prom, &series(status), None).await?;
                (v == expected).then_some(())
            })
            .await;
        }
    };
    step(
        at(day, "00:45"),
        Some((at(day, "00:30"), vec![("delivered", 3), ("bounced", 1)])),
        "delivered",
        3.0,
    )
    .await;
    // Across the switch (2 am local is skipped in March and repeated in November).
    step(
        at(day, "01:59"),
        Some((at(day, "01:50"), vec![("delivered", 2)])),
        "delivered",
        5.0,
    )
    .await;
    step(
        at(day, "03:30"),
        Some((at(day, "03:10"), vec![("delivered", 4), ("deferred", 1)])),
        "delivered",
        9.0,
    )
    .await;
    step(at(day, "23:59:40"), None, "delivered", 9.0).await;
    // The last minute: sent after the exporter's last look at the day, and the day ends at once.
    // The exporter only ever sees these in yesterday's final figure.
    sim.sim.record_outcomes(
        ACCOUNT,
        DOMAIN,
        at(day, "23:59:50"),
        &[("delivered", 5), ("rejected", 2)],
    );
    let next = day.tomorrow().unwrap();
    step(at(next, "00:00:30"), None, "delivered", 14.0).await;
    step(at(next, "00:00:40"), None, "rejected", 2.0).await;

    let tz = TimeZone::get(ZONE).unwrap();
    let truth: BTreeMap<String, i64> = sim.sim.day_totals_in(Some(ACCOUNT), None, &tz, day);
    assert_eq!(truth["delivered"], 14, "{truth:?}");
    // At the time of the last sample, so that nothing is extrapolated past it.
    let (_, last) = query(&prom, &format!("timestamp({})", series("delivered")), None)
        .await
        .unwrap();
    for (status, expected) in &truth {
        let (_, increase) = query(
            &prom,
            &format!("increase({}[1d])", series(status)),
            Some(last),
        )
        .await
        .unwrap_or_else(|| panic!("no increase for {status}"));
        assert!(
            (increase - *expected as f64).abs() < 1e-9,
            "{day} {status}: increase {increase}, the simulator counted {expected}"
        );
    }
}

#[tokio::test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
async fn the_day_of_the_spring_switch_counts_exactly_in_prometheus() {
    day("2026-03-08".parse().unwrap()).await;
}

#[tokio::test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
async fn the_day_of_the_autumn_switch_counts_exactly_in_prometheus() {
    day("2026-11-01".parse().unwrap()).await;
}
