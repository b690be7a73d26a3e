//! Lifecycle: config reload on SIGHUP and `POST /-/reload` (the old config keeps running when
//! the new one is bad), the bound on concurrent scrapes, and SIGTERM in the middle of a refresh.

use std::process::Command;
use std::time::Duration;

use mailhost_sim::{FaultSpec, Route};

use crate::helpers::{
    PATIENCE, Running, TOKEN, config, spawn_exporter, spawn_sim, value, wait_for,
};

fn config_text(url: &str, accounts: &str) -> String {
    format!(
        "api:\n  base_url: {url}\n  timeout: 2s\ncollectors:\n  delivery_account:\n    interval: 1s\n    accounts: [{accounts}]\n"
    )
}

fn remaining(id: i32) -> String {
    format!("mailhost_delivery_remaining_messages{{account_id=\"{id}\"}}")
}

/// The exporter binary on a config file in a temporary folder.
struct Deployed {
    exporter: Running,
    base: String,
    config: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

async fn deploy(sim_url: &str, accounts: &str, flags: &[&str]) -> Deployed {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yml");
    std::fs::write(&config, config_text(sim_url, accounts)).unwrap();
    let file_flag = format!("--config.file={}", config.display());
    let mut args = vec![file_flag.as_str(), "--web.listen-address=127.0.0.1:0"];
    args.extend_from_slice(flags);
    let exporter = Running::start_with_env(&args, &[("MAILHOST_API_TOKEN", TOKEN)]);
    let address = exporter
        .logged("mailhost_exporter listening", "address")
        .await;
    Deployed {
        exporter,
        base: format!("http://{address}"),
        config,
        _dir: dir,
    }
}

/// Asks the exporter to reload, as config management does.
fn sighup(exporter: &Running) {
    let pid = exporter.pid().to_string();
    assert!(
        Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .unwrap()
            .success()
    );
}

async fn scrape(base: &str) -> String {
    reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

async fn scrape_until(base: &str, what: &str, ready: impl Fn(&str) -> bool) -> String {
    wait_for(what, || async {
        let body = scrape(base).await;
        ready(&body).then_some(body)
    })
    .await
}

async fn post_reload(base: &str) -> (u16, String) {
    let r = reqwest::Client::new()
        .post(format!("{base}/-/reload"))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test]
async fn a_bad_config_on_reload_is_refused_and_the_old_one_keeps_running() {
    let sim = spawn_sim().await;
    let d = deploy(&sim.url, "1001", &["--web.enable-lifecycle"]).await;
    scrape_until(&d.base, "1001", |b| value(b, &remaining(1001)).is_some()).await;
    let first_reload = value(
        &scrape(&d.base).await,
        "mailhost_config_last_reload_success_timestamp_seconds",
    )
    .unwrap();

    std::fs::write(
        &d.config,
        config_text(&sim.url, "1002").replace("accounts:", "acounts:"),
    )
    .unwrap();
    let (status, text) = post_reload(&d.base).await;
    assert_eq!(status, 500);
    assert!(text.contains("unknown field `acounts`"), "{text}");
    let body = scrape(&d.base).await;
    assert_eq!(
        value(&body, "mailhost_config_last_reload_successful"),
        Some(0.0)
    );
    assert!(
        value(&body, &remaining(1001)).is_some(),
        "the old config keeps collecting"
    );
    assert!(value(&body, &remaining(1002)).is_none());

    std::fs::write(&d.config, config_text(&sim.url, "1002")).unwrap();
    let (status, text) = post_reload(&d.base).await;
    assert_eq!((status, text.as_str()), (200, "Reloaded\n"));
    let body = scrape_until(&d.base, "1002 after the reload", |b| {
        value(b, &remaining(1002)).is_some()
    })
    .await;
    assert!(
        value(&body, &remaining(1001)).is_none(),
        "an account no longer configured vanishes"
    );
    assert!(!body.contains("target=\"1001\""), "its health series too");
    assert_eq!(
        value(&body, "mailhost_config_last_reload_successful"),
        Some(1.0)
    );
    assert!(
        value(
            &body,
            "mailhost_config_last_reload_success_timestamp_seconds"
        )
        .unwrap()
            >= first_reload
    );
}

#[tokio::test]
async fn a_refused_reload_names_what_failed_without_quoting_a_secret() {
    let sim = spawn_sim().await;
    let d = deploy(&sim.url, "1001", &["--web.enable-lifecycle"]).await;
    scrape_until(&d.base, "1001", |b| value(b, &remaining(1001)).is_some()).await;
    let secrets = ["S3cretT0kenValue", "mh_live_7fQ2x9Lk3Vb8Zp4Rt6Yw1Nc5"];
    for (text, names) in [
        (
            config_text(
                "http://admin:S3cretT0kenValue@127.0.0.1:99999/x?t=1",
                "1001",
            ),
            "api.base_url",
        ),
        (
            config_text(&sim.url, "1001").replace(
                "  timeout: 2s\n",
                "  timeout: 2s\n  token_file: mh_live_7fQ2x9Lk3Vb8Zp4Rt6Yw1Nc5\n",
            ),
            "api.token_file",
        ),
    ] {
        std::fs::write(&d.config, text).unwrap();
        let (status, answer) = post_reload(&d.base).await;
        assert_eq!(status, 500);
        assert!(answer.contains(names), "{answer}");
        for secret in secrets {
            assert!(!answer.contains(secret), "{secret} in the answer {answer}");
        }
    }
    // The log is read by a thread of its own: wait until both refusals are in it.
    let log = wait_for("both refusals in the log", || async {
        let log = d.exporter.log().join("\n");
        (log.matches("configuration reload refused").count() >= 2).then_some(log)
    })
    .await;
    for secret in secrets {
        assert!(!log.contains(secret), "{secret} in the log");
    }
}

#[tokio::test]
async fn sighup_reloads_the_config() {
    let sim = spawn_sim().await;
    let d = deploy(&sim.url, "1001", &[]).await;
    scrape_until(&d.base, "1001", |b| value(b, &remaining(1001)).is_some()).await;
    std::fs::write(&d.config, config_text(&sim.url, "1001, 1004")).unwrap();
    sighup(&d.exporter);
    scrape_until(&d.base, "1004 after SIGHUP", |b| {
        value(b, &remaining(1004)).is_some()
    })
    .await;
    // Without --web.enable-lifecycle the HTTP reload is refused.
    let (status, text) = post_reload(&d.base).await;
    assert_eq!(status, 403);
    assert!(text.contains("--web.enable-lifecycle"), "{text}");
}

/// `--shard` is a flag, not a key of the file: a reloaded config is split the same way.
#[tokio::test]
async fn a_sharded_exporter_keeps_its_shard_across_a_reload() {
    let sim = spawn_sim().await;
    // Shard 1 of 2 owns 1001 and 1004 (Prometheus' hashmod of ";1001" ... ";1004").
    let d = deploy(&sim.url, "1001, 1002", &["--shard=1/2"]).await;
    scrape_until(&d.base, "1001", |b| value(b, &remaining(1001)).is_some()).await;
    std::fs::write(&d.config, config_text(&sim.url, "1001, 1002, 1003, 1004")).unwrap();
    sighup(&d.exporter);
    let body = scrape_until(&d.base, "1004 after SIGHUP", |b| {
        value(b, &remaining(1004)).is_some()
    })
    .await;
    for other in [1002, 1003] {
        assert!(
            !body.contains(&format!("target=\"{other}\"")),
            "{other} is shard 0's"
        );
    }
    let landing = reqwest::get(format!("{}/", d.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(landing.contains("shard 1/2"), "{landing}");
    let logged: Vec<String> = d
        .exporter
        .log()
        .into_iter()
        .filter(|l| l.contains("polling only the targets of this shard"))
        .collect();
    assert_eq!(logged.len(), 2, "at start and at the reload: {logged:?}");
    assert!(
        logged[1].contains("polled=2") && logged[1].contains("configured=4"),
        "{}",
        logged[1]
    );
}

#[tokio::test]
async fn scrapes_beyond_max_requests_are_refused_with_503() {
    let sim = spawn_sim().await;
    let mut web_config = config(&sim.url, TOKEN, &[1001], "");
    web_config.api.concurrency = 1;
    let exporter = spawn_exporter(web_config).await;
    // The default bound (40) lets a scrape through; when every slot is taken, the next is refused.
    let limit = exporter.scrape_limit.clone().expect("a default bound");
    assert_eq!(exporter.get("/metrics").await.status(), 200);
    let held = limit
        .clone()
        .acquire_many_owned(mailhost_exporter::cli::DEFAULT_MAX_REQUESTS as u32)
        .await
        .unwrap();
    let refused = exporter.get("/metrics").await;
    assert_eq!(refused.status(), 503);
    assert!(refused.text().await.unwrap().contains("--web.max-requests"));
    assert_eq!(
        exporter.get("/-/healthy").await.status(),
        200,
        "only scrapes are bounded"
    );
    drop(held);
    assert_eq!(exporter.get("/metrics").await.status(), 200);
}

#[tokio::test]
async fn sigterm_during_a_refresh_exits_at_once_and_a_run_under_way_shows_what_it_fetched_but_not_its_end()
 {
    let sim = spawn_sim().await;
    // 1002 answers after 20 s: every run waits on it until its deadline.
    sim.sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            latency: Some(Duration::from_secs(20)),
            only_ids: Some(vec!["1002".to_owned()]),
            ..FaultSpec::default()
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yml");
    std::fs::write(
        &path,
        format!(
            "api:\n  base_url: {}\n  timeout: 30s\ncollectors:\n  delivery_account:\n    interval: 60s\n    deadline: 50s\n    accounts: [1001, 1002]\n",
            sim.url
        ),
    )
    .unwrap();
    let mut exporter = Running::start_with_env(
        &[
            &format!("--config.file={}", path.display()),
            "--web.listen-address=127.0.0.1:0",
        ],
        &[("MAILHOST_API_TOKEN", TOKEN)],
    );
    let base = exporter.base_url().await;
    // 1001 has answered and its value is shown while its run waits for 1002; the run's own
    // series wait for its end: not ready, not up, no duration, nothing of 1002.
    let body = scrape_until(&base, "1001's value", |b| {
        value(b, &remaining(1001)).is_some()
    })
    .await;
    assert!(value(&body, &remaining(1002)).is_none(), "{body}");
    let run = "mailhost_collector_duration_seconds{collector=\"delivery_account\"}";
    assert!(
        value(&body, run).is_none(),
        "a run's end was served before it ended:\n{body}"
    );
    assert_eq!(value(&body, "mailhost_up"), Some(0.0));
    assert_eq!(
        reqwest::get(format!("{base}/-/ready"))
            .await
            .unwrap()
            .status(),
        503
    );
    let (elapsed, clean) = exporter.terminate();
    assert!(clean, "exit status after SIGTERM");
    assert!(elapsed < PATIENCE);
    eprintln!(
        "exited {elapsed:?} after SIGTERM in the middle of a refresh (the promise: within 2 s)"
    );
    assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
}

#[tokio::test]
async fn a_token_file_replaced_by_a_fifo_is_refused_on_reload_and_sigterm_still_stops() {
    let sim = spawn_sim().await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let config = dir.path().join("config.yml");
    let text = config_text(&sim.url, "1001").replace(
        "  timeout: 2s\n",
        &format!("  timeout: 2s\n  token_file: {}\n", token.display()),
    );
    std::fs::write(&config, &text).unwrap();
    let file_flag = format!("--config.file={}", config.display());
    let mut exporter = Running::start(&[
        &file_flag,
        "--web.listen-address=127.0.0.1:0",
        "--web.enable-lifecycle",
    ]);
    let base = exporter.base_url().await;
    scrape_until(&base, "1001", |b| value(b, &remaining(1001)).is_some()).await;
    // Nobody ever writes to it: opening it for reading the usual way would wait forever.
    std::fs::remove_file(&token).unwrap();
    assert!(
        Command::new("mkfifo")
            .arg(&token)
            .status()
            .unwrap()
            .success()
    );
    let reload = tokio::time::timeout(PATIENCE, post_reload(&base))
        .await
        .expect("a reload reading a FIFO must not hang");
    assert_eq!(reload.0, 500, "{}", reload.1);
    assert!(
        reload.1.contains("api.token_file") && reload.1.contains("not a regular file"),
        "{}",
        reload.1
    );
    // The old config keeps running.
    let body = scrape(&base).await;
    assert_eq!(
        value(&body, "mailhost_config_last_reload_successful"),
        Some(0.0)
    );
    assert!(value(&body, &remaining(1001)).is_some());
    let (_, clean) = exporter.terminate();
    assert!(clean, "SIGTERM stops it cleanly");
}
