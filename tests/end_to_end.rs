//! The exporter against the simulator on loopback: what `/metrics` says equals what the
//! provider holds, and every failure carries its reason without losing good values.

use std::io::Read as _;
use std::time::Duration;

use mailhost_sim::{FaultSpec, Route};

use crate::helpers::{TOKEN, config, must, spawn_exporter, spawn_sim, value, wait_for};

const FLEET: [i32; 4] = [1001, 1002, 1003, 1004];

fn series(name: &str, id: i32) -> String {
    format!("{name}{{account_id=\"{id}\"}}")
}

fn target(id: impl std::fmt::Display) -> String {
    format!("{{collector=\"delivery_account\",target=\"{id}\"}}")
}

fn failures(reason: &str) -> String {
    format!(
        "mailhost_api_request_failures_total{{endpoint=\"delivery_account\",reason=\"{reason}\"}}"
    )
}

#[tokio::test]
async fn values_on_metrics_equal_the_simulators_state() {
    let sim = spawn_sim().await;
    let exporter = spawn_exporter(config(&sim.url, TOKEN, &FLEET, "")).await;
    let body = exporter
        .scrape_until("every account", |b| {
            FLEET
                .iter()
                .all(|id| value(b, &series("mailhost_delivery_remaining_messages", *id)).is_some())
        })
        .await;
    for id in FLEET {
        let a = sim.sim.account(id).unwrap();
        let record = sim.sim.account_record(id).unwrap();
        let pairs: [(&str, f64); 9] = [
            (
                "mailhost_delivery_remaining_messages",
                a.remaining_messages() as f64,
            ),
            (
                "mailhost_delivery_plan_messages_limit",
                a.plan_messages_limit as f64,
            ),
            (
                "mailhost_delivery_plan_messages_used",
                a.plan_messages_used as f64,
            ),
            ("mailhost_delivery_messages_sent", a.messages_sent as f64),
            (
                "mailhost_delivery_extra_messages",
                a.extra_messages_total as f64,
            ),
            (
                "mailhost_delivery_remaining_extra_messages",
                a.remaining_extra_messages_bought as f64,
            ),
            ("mailhost_delivery_account_status", a.status_code() as f64),
            ("mailhost_delivery_domains", a.domains.len() as f64),
            (
                "mailhost_delivery_ignore_suppression_list",
                f64::from(u8::from(a.ignore_suppression_list)),
            ),
        ];
        for (name, want) in pairs {
            assert_eq!(must(&body, &series(name, id)), want, "{name} of {id}");
        }
        let dates = [
            (
                "mailhost_delivery_plan_expiration_timestamp_seconds",
                a.plan_expiration,
            ),
            (
                "mailhost_delivery_next_renewal_timestamp_seconds",
                a.next_renewal,
            ),
            (
                "mailhost_delivery_last_renewal_timestamp_seconds",
                a.last_renewal,
            ),
        ];
        for (name, ts) in dates {
            assert_eq!(
                must(&body, &series(name, id)),
                ts.as_second() as f64,
                "{name} of {id}"
            );
        }
        let info = format!(
            "mailhost_delivery_account_info{{account_id=\"{id}\",username=\"{}\",plan=\"{}\",account_type=\"{}\",status_detail=\"{}\"}}",
            a.username,
            a.plan,
            a.account_type,
            a.status_detail()
        );
        assert_eq!(must(&body, &info), 1.0);
        assert_eq!(record["id"].as_i64(), Some(i64::from(id)));
        assert_eq!(
            must(&body, &format!("mailhost_target_success{}", target(id))),
            1.0
        );
    }
    assert_eq!(must(&body, "mailhost_up"), 1.0);
    assert_eq!(
        must(
            &body,
            "mailhost_collector_success{collector=\"delivery_account\"}"
        ),
        1.0
    );
    assert!(
        must(
            &body,
            "mailhost_collector_last_success_timestamp_seconds{collector=\"delivery_account\"}"
        ) > 1.7e9
    );
    assert!(
        body.contains("mailhost_api_requests_total{endpoint=\"delivery_account\",code=\"200\"} ")
    );
    assert!(body.contains("mailhost_build_info{version=\""));
    assert!(body.contains("Refreshed in the background every 1s."));
}

#[tokio::test]
async fn a_removed_accounts_series_disappear_and_its_health_stays() {
    let sim = spawn_sim().await;
    let exporter = spawn_exporter(config(&sim.url, TOKEN, &[1001, 1002], "")).await;
    let remaining = series("mailhost_delivery_remaining_messages", 1002);
    exporter
        .scrape_until("account 1002", |b| value(b, &remaining).is_some())
        .await;
    assert!(sim.sim.remove_account(1002));
    let body = exporter
        .scrape_until("1002 to vanish", |b| value(b, &remaining).is_none())
        .await;
    assert!(
        !body.contains("account_id=\"1002\""),
        "every business series of 1002 is gone:\n{body}"
    );
    assert_eq!(
        must(&body, &format!("mailhost_target_success{}", target(1002))),
        0.0
    );
    assert!(
        value(
            &body,
            &format!(
                "mailhost_target_last_success_timestamp_seconds{}",
                target(1002)
            )
        )
        .is_some()
    );
    assert!(value(&body, &series("mailhost_delivery_remaining_messages", 1001)).is_some());
}

#[tokio::test]
async fn an_unknown_account_fails_only_its_own_target_with_not_found() {
    let sim = spawn_sim().await;
    let exporter = spawn_exporter(config(&sim.url, TOKEN, &[1001, 424242], "")).await;
    exporter
        .scrape_until("a failure", |b| {
            value(b, &failures("not_found")).is_some_and(|v| v > 0.0)
        })
        .await;
    let body = exporter
        .scrape_until("1001 too", |b| {
            value(b, &series("mailhost_delivery_remaining_messages", 1001)).is_some()
        })
        .await;
    assert_eq!(
        must(&body, &format!("mailhost_target_success{}", target(424242))),
        0.0
    );
    assert_eq!(
        must(&body, &format!("mailhost_target_success{}", target(1001))),
        1.0
    );
    assert_eq!(
        must(
            &body,
            "mailhost_collector_success{collector=\"delivery_account\"}"
        ),
        0.0
    );
    assert_eq!(must(&body, "mailhost_up"), 0.0);
    assert!(!body.contains("account_id=\"424242\""));
}

#[tokio::test]
async fn a_bad_token_gives_unauthorized_and_no_values() {
    let sim = spawn_sim().await;
    let exporter = spawn_exporter(config(&sim.url, "not-the-token", &[1001], "")).await;
    let body = exporter
        .scrape_until("unauthorized", |b| {
            value(b, &failures("unauthorized")).is_some_and(|v| v > 0.0)
        })
        .await;
    assert_eq!(
        must(&body, &format!("mailhost_target_success{}", target(1001))),
        0.0
    );
    assert!(value(&body, &series("mailhost_delivery_remaining_messages", 1001)).is_none());
    assert!(
        body.contains("mailhost_api_requests_total{endpoint=\"delivery_account\",code=\"401\"} ")
    );
    let landing = exporter.get("/").await.text().await.unwrap();
    assert!(
        landing.contains(
            "unauthorized: HTTP 401: the provider refused the token (check api.token_file or MAILHOST_API_TOKEN)"
        ),
        "{landing}"
    );
    assert!(!landing.contains("not-the-token"), "{landing}");
}

#[tokio::test]
async fn a_403_says_the_token_may_not_see_the_resource() {
    let sim = spawn_sim().await;
    sim.sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            error_rate: 1.0,
            error_status: Some(403),
            ..FaultSpec::default()
        },
    );
    let exporter = spawn_exporter(config(&sim.url, TOKEN, &[1001], "")).await;
    exporter
        .scrape_until("forbidden", |b| {
            value(b, &failures("forbidden")).is_some_and(|v| v > 0.0)
        })
        .await;
    let landing = exporter.get("/").await.text().await.unwrap();
    assert!(
        landing.contains("forbidden: HTTP 403: the token may not see this resource"),
        "{landing}"
    );
    assert!(!landing.contains(TOKEN), "{landing}");
}

/// One fault at a time: the failure gets its reason, the last good values stay.
async fn fault_keeps_last_good_values(fault: FaultSpec, reason: &str) {
    let sim = spawn_sim().await;
    let exporter = spawn_exporter(config(&sim.url, TOKEN, &[1001], "")).await;
    let remaining = series("mailhost_delivery_remaining_messages", 1001);
    let before = exporter
        .scrape_until("good values", |b| value(b, &remaining).is_some())
        .await;
    sim.sim.set_fault(Route::DeliveryAccountGet, fault);
    let body = exporter
        .scrape_until(reason, |b| {
            value(b, &failures(reason)).is_some_and(|v| v > 0.0)
        })
        .await;
    assert_eq!(
        value(&body, &remaining),
        value(&before, &remaining),
        "last good value kept"
    );
    let body = exporter
        .scrape_until("the target to fail", |b| {
            value(b, &format!("mailhost_target_success{}", target(1001))) == Some(0.0)
        })
        .await;
    assert_eq!(value(&body, &remaining), value(&before, &remaining));
    for other in [
        "timeout",
        "server_error",
        "decode",
        "unauthorized",
        "not_found",
    ] {
        if other != reason {
            assert_eq!(
                value(&body, &failures(other)),
                Some(0.0),
                "{other} while testing {reason}"
            );
        }
    }
    // When the fault clears, values flow again.
    sim.sim.clear_faults();
    exporter
        .scrape_until("recovery", |b| {
            value(b, &format!("mailhost_target_success{}", target(1001))) == Some(1.0)
        })
        .await;
}

#[tokio::test]
async fn a_timeout_gives_reason_timeout_and_keeps_the_last_good_values() {
    let fault = FaultSpec {
        latency: Some(Duration::from_secs(5)),
        ..FaultSpec::default()
    };
    fault_keeps_last_good_values(fault, "timeout").await;
}

#[tokio::test]
async fn a_500_gives_reason_server_error_and_keeps_the_last_good_values() {
    let fault = FaultSpec {
        error_rate: 1.0,
        ..FaultSpec::default()
    };
    fault_keeps_last_good_values(fault, "server_error").await;
}

#[tokio::test]
async fn a_malformed_body_gives_reason_decode_and_keeps_the_last_good_values() {
    let fault = FaultSpec {
        malformed_rate: 1.0,
        ..FaultSpec::default()
    };
    fault_keeps_last_good_values(fault, "decode").await;
}

#[tokio::test]
async fn a_429_gives_reason_rate_limited() {
    let fault = FaultSpec {
        rate_limit_rate: 1.0,
        retry_after_secs: 7,
        ..FaultSpec::default()
    };
    fault_keeps_last_good_values(fault, "rate_limited").await;
}

#[tokio::test]
async fn numbers_sent_as_strings_give_the_same_values() {
    let sim = spawn_sim().await;
    sim.sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            numbers_as_strings: true,
            ..FaultSpec::default()
        },
    );
    let exporter = spawn_exporter(config(&sim.url, TOKEN, &[1002], "")).await;
    let remaining = series("mailhost_delivery_remaining_messages", 1002);
    let body = exporter
        .scrape_until("values", |b| value(b, &remaining).is_some())
        .await;
    let a = sim.sim.account(1002).unwrap();
    assert_eq!(must(&body, &remaining), a.remaining_messages() as f64);
    assert_eq!(
        must(&body, &series("mailhost_delivery_plan_messages_used", 1002)),
        a.plan_messages_used as f64
    );
    assert_eq!(
        must(
            &body,
            "mailhost_parse_problems_total{endpoint=\"delivery_account\"}"
        ),
        0.0
    );
}

#[tokio::test]
async fn metrics_are_gzipped_when_asked_and_openmetrics_when_negotiated() {
    let sim = spawn_sim().await;
    let exporter = spawn_exporter(config(&sim.url, TOKEN, &[1001], "")).await;
    exporter
        .scrape_until("values", |b| {
            value(b, &series("mailhost_delivery_remaining_messages", 1001)).is_some()
        })
        .await;
    let client = reqwest::Client::new();
    let r = client
        .get(exporter.url("/metrics"))
        .header("Accept-Encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-encoding"], "gzip");
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let bytes = r.bytes().await.unwrap();
    let mut text = String::new();
    flate2::read::MultiGzDecoder::new(&bytes[..])
        .read_to_string(&mut text)
        .unwrap();
    assert!(text.contains("mailhost_delivery_remaining_messages{account_id=\"1001\"}"));

    let r = client
        .get(exporter.url("/metrics"))
        .header(
            "Accept",
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
        )
        .send()
        .await
        .unwrap();
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    let text = r.text().await.unwrap();
    assert!(text.ends_with("# EOF\n"));
    assert_eq!(text.matches("# EOF").count(), 1);
    assert!(text.contains("# TYPE mailhost_api_requests counter\n"));
}

#[tokio::test]
async fn ready_health_and_landing_page_tell_the_state() {
    let sim = spawn_sim().await;
    sim.sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            latency: Some(Duration::from_millis(1500)),
            ..FaultSpec::default()
        },
    );
    let exporter = spawn_exporter(config(&sim.url, TOKEN, &[1001], "")).await;
    // The first run cannot have finished yet: it waits on the slow answer.
    assert_eq!(exporter.get("/-/ready").await.status(), 503);
    assert_eq!(exporter.get("/-/healthy").await.status(), 200);
    crate::helpers::wait_for("ready", || async {
        (exporter.get("/-/ready").await.status() == 200).then_some(())
    })
    .await;
    let page = exporter.get("/").await.text().await.unwrap();
    assert!(page.contains("<a href=\"/metrics\">"), "{page}");
    assert!(page.contains("delivery_account 1001"), "{page}");
    assert!(page.contains(env!("CARGO_PKG_VERSION")));
}

#[tokio::test]
async fn the_landing_page_names_the_upstream_and_shows_failing_targets_first_with_their_time() {
    let sim = spawn_sim().await;
    let started = jiff::Timestamp::now();
    // Four accounts the simulator knows, and 246 it does not: 250 targets, 50 past the page's
    // bound of 200 rows.
    let mut accounts = vec![1001, 1002, 1003, 1004];
    accounts.extend(500_000..500_246);
    let ids: Vec<String> = accounts.iter().map(|a| a.to_string()).collect();
    // A deadline far above what 250 loopback calls take, so that on a slow machine every
    // unknown account fails with not_found rather than timeout.
    let yaml = format!(
        "api:\n  base_url: {}\n  timeout: 10s\n  concurrency: 32\ncollectors:\n  delivery_account:\n    interval: 30s\n    deadline: 25s\n    accounts: [{}]\n",
        sim.url,
        ids.join(", ")
    );
    let config = mailhost_exporter::config::Config::parse(&yaml, Some(TOKEN.to_owned())).unwrap();
    let exporter = spawn_exporter(config).await;
    // The run's end, not only its parts: a part handed over while it goes shows 200 failed rows
    // before every target is known.
    let page = wait_for("every target tried", || async {
        let page = exporter.get("/").await.text().await.unwrap();
        (page.matches("<tr class=\"failed\">").count() == 200
            && !page.contains("pending")
            && !page.contains("not run yet"))
        .then_some(page)
    })
    .await;
    assert!(
        page.contains(&format!("<p>Polling <code>{}</code></p>", sim.url)),
        "{page}"
    );
    assert!(!page.contains("demo mode"), "{page}");
    assert_eq!(
        page.matches("<tr class=\"more\">").count(),
        1,
        "one collector past the bound"
    );
    assert!(
        page.contains("\u{2026} and 50 more (see <a href=\"/metrics\">/metrics</a>)</td></tr>"),
        "{page}"
    );
    // Only failing rows were shown: the healthy accounts are among the 50 left out.
    assert_eq!(page.matches("<tr class=\"ok\">").count(), 0, "{page}");
    assert!(!page.contains("delivery_account 1001<"), "{page}");
    // Each failure carries the time of the attempt that failed, between the start of this test
    // and now.
    let marker = "not_found: HTTP 404 (at ";
    let at = page.find(marker).expect("a not_found failure") + marker.len();
    let when = jiff::fmt::strtime::parse("%Y-%m-%d %H:%M:%S UTC", &page[at..at + 23])
        .and_then(|t| t.to_datetime())
        .and_then(|d| d.to_zoned(jiff::tz::TimeZone::UTC))
        .map(|z| z.timestamp())
        .expect("a time in the failure");
    assert!(
        when.as_second() >= started.as_second() && when <= jiff::Timestamp::now(),
        "{when} is not within the test"
    );
    assert_eq!(page.matches(marker).count(), 200);
}
