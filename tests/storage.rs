//! `--storage.path`: what the exporter learned survives a restart. Each promise of
//! docs/reliability.md's storage rows: served at once with the time it was fetched, only what
//! belongs to the current config, the daily counters' `_created` kept, no token in any file,
//! one exporter per directory, and every kind of bad state file refused in a warn line and a
//! series while the exporter starts cold and serves.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Duration;

use mailhost_exporter::config::Config;
use mailhost_exporter::{App, StorageOptions, WebOptions};
use mailhost_sim::{AccountSeed, ManagementToken, RateLimit, SimConfig, TokenRateLimit};
use tokio_util::sync::CancellationToken;

use crate::helpers::{
    Running, TOKEN, get_text, spawn_sim, spawn_sim_with, value, wait_for, wait_within,
};

const ACCOUNTS: [i32; 2] = [1001, 1002];

fn yaml(base_url: &str, accounts: &[i32]) -> String {
    let ids: Vec<String> = accounts.iter().map(ToString::to_string).collect();
    let ids = ids.join(", ");
    format!(
        "api:\n  base_url: {base_url}\n  timeout: 2s\n  max_retries: 0\ncollectors:\n  delivery_account:\n    interval: 1s\n    deadline: 900ms\n    max_age: 1h\n    accounts: [{ids}]\n  tracemail_daily:\n    interval: 1s\n    deadline: 900ms\n    max_age: 1h\n    accounts: [{ids}]\n"
    )
}

fn web() -> WebOptions {
    WebOptions {
        listen_addresses: vec!["127.0.0.1:0".to_owned()],
        telemetry_path: "/metrics".to_owned(),
        ..WebOptions::default()
    }
}

/// An exporter in this process with the storage at `dir`, stopped (with its checkpoint at
/// shutdown) by [`Stored::stop`].
struct Stored {
    url: String,
    cancel: CancellationToken,
    run: Option<tokio::task::JoinHandle<Result<(), mailhost_exporter::AppError>>>,
}

impl Stored {
    async fn start(yaml: &str, dir: &Path) -> Stored {
        Self::try_start(yaml, dir).await.unwrap()
    }

    async fn try_start(yaml: &str, dir: &Path) -> Result<Stored, mailhost_exporter::AppError> {
        Self::with_config(Config::parse(yaml, Some(TOKEN.to_owned())).unwrap(), dir).await
    }

    async fn with_config(
        config: Config,
        dir: &Path,
    ) -> Result<Stored, mailhost_exporter::AppError> {
        let app = App::build(config, web())
            .await?
            .with_storage(StorageOptions {
                path: dir.to_owned(),
                checkpoint_interval: Duration::from_secs(1),
            })
            .await?;
        let url = format!("http://{}", app.local_addr());
        let cancel = CancellationToken::new();
        let run = tokio::spawn(app.run(cancel.clone()));
        Ok(Stored {
            url,
            cancel,
            run: Some(run),
        })
    }

    async fn scrape(&self) -> String {
        get_text(&format!("{}/metrics", self.url), "text/plain").await
    }

    async fn scrape_until(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        wait_for(what, || async {
            let body = self.scrape().await;
            ready(&body).then_some(body)
        })
        .await
    }

    /// SIGTERM as the process takes it: the app stops, writing its checkpoint at shutdown.
    async fn stop(mut self) {
        self.cancel.cancel();
        let run = self.run.take().expect("stopped once");
        tokio::time::timeout(Duration::from_secs(30), run)
            .await
            .expect("the app stops within its bound")
            .unwrap()
            .unwrap();
    }
}

impl Drop for Stored {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

fn remaining(id: i32) -> String {
    format!("mailhost_delivery_remaining_messages{{account_id=\"{id}\"}}")
}

fn last_success(collector: &str, id: i32) -> String {
    format!(
        "mailhost_target_last_success_timestamp_seconds{{collector=\"{collector}\",target=\"{id}\"}}"
    )
}

fn every_account_shown(body: &str) -> bool {
    ACCOUNTS
        .iter()
        .all(|&id| value(body, &remaining(id)).is_some())
}

/// What an exporter with storage showed of every account, once it had them and a checkpoint
/// held them: the exporter is stopped as SIGTERM stops it.
async fn kept_once(yaml: &str, dir: &Path) -> String {
    let first = Stored::start(yaml, dir).await;
    let body = first
        .scrape_until("every account and a checkpoint", |b| {
            every_account_shown(b)
                && value(
                    b,
                    "mailhost_storage_last_checkpoint_success_timestamp_seconds",
                )
                .is_some()
        })
        .await;
    first.stop().await;
    body
}

/// A provider that takes connections and never answers, at `url`'s address (once the
/// simulator that was there has let it go).
async fn silent_at(url: &str) -> std::net::TcpListener {
    let addr = url.trim_start_matches("http://").to_owned();
    wait_for("the address to be free", || async {
        std::net::TcpListener::bind(&addr).ok()
    })
    .await
}

/// The config of [`yaml`] against a provider that never answers: a longer timeout and interval
/// (neither is part of what a collector is kept under), so nothing is attempted for a while.
fn patient(url: &str) -> String {
    yaml(url, &ACCOUNTS)
        .replace("timeout: 2s", "timeout: 60s")
        .replace(
            "interval: 1s\n    deadline: 900ms",
            "interval: 2m\n    deadline: 90s",
        )
}

/// State files refused at start for `problem`.
fn refused(body: &str, problem: &str) -> Option<f64> {
    value(
        body,
        &format!("mailhost_storage_state_refused_total{{problem=\"{problem}\"}}"),
    )
}

/// Every kind of bad state file made from the good one `whole`: (case, problem, text).
fn spoilt(whole: &str) -> [(&'static str, &'static str, String); 5] {
    // Its format number, whatever it is, made 99.
    let at = whole.find("\"version\":").unwrap() + "\"version\":".len();
    let end = at + whole[at..].find(',').unwrap();
    let newer = format!("{}99{}", &whole[..at], &whole[end..]);
    assert_ne!(newer, whole);
    let other_shape = "{\"version\":1,\"written_at\":\"2026-01-01T00:00:00Z\",\"data\":[1,2]}";
    [
        ("empty", "empty", String::new()),
        ("cut", "truncated", whole[..whole.len() / 2].to_owned()),
        ("garbage", "corrupt", "\u{0}\u{1}garbage{{{".to_owned()),
        ("newer", "newer_version", newer),
        ("another shape", "corrupt", other_shape.to_owned()),
    ]
}

#[tokio::test]
async fn a_restart_serves_what_was_kept_at_once_with_the_time_it_was_fetched() {
    let dir = tempfile::tempdir().unwrap();
    let sim = spawn_sim().await;
    let url = sim.url.clone();
    let before = kept_once(&yaml(&url, &ACCOUNTS), dir.path()).await;
    // The provider now takes calls and never answers: whatever the restarted exporter shows,
    // it did not fetch, and it has attempted nothing yet (a longer timeout and interval than
    // before: neither is part of what a collector is kept under).
    drop(sim);
    let silent = silent_at(&url).await;
    let second = Stored::start(&patient(&url), dir.path()).await;
    let after = second.scrape().await;
    for id in ACCOUNTS {
        assert!(value(&after, &remaining(id)).is_some(), "{after}");
        // The fetch's time, not the restart's. (The last checkpoint may hold a later fetch
        // than the scrape before it saw.)
        let (was, is) = (
            value(&before, &last_success("delivery_account", id)).unwrap(),
            value(&after, &last_success("delivery_account", id)).unwrap(),
        );
        assert!(
            is >= was && is < was + 5.0,
            "fetched at {was}, restored as {is}"
        );
    }
    let restored = |body: &str| {
        value(
            body,
            "mailhost_storage_restored_targets{collector=\"delivery_account\"}",
        )
    };
    assert_eq!(restored(&after), Some(2.0), "{after}");
    assert!(value(&after, "mailhost_storage_restore_duration_seconds").is_some());
    let page = get_text(&format!("{}/", second.url), "text/html").await;
    assert!(
        page.contains("2 targets restored from the storage directory")
            && page.contains("Storage (--storage.path)"),
        "{page}"
    );
    let debug = get_text(
        &format!("{}/probe?target=1001&debug=true", second.url),
        "text/plain",
    )
    .await;
    assert!(debug.contains("Restored: yes"), "{debug}");
    // Nothing fetched them since: the values are fresh and the provider silent.
    drop(silent);
    second.stop().await;
}

/// The series of the collectors (not the exporter's own, nor the health series, which speak of
/// this process's runs).
fn collector_series(body: &str) -> Vec<&str> {
    const OWN: [&str; 10] = [
        "mailhost_target_",
        "mailhost_collector_",
        "mailhost_up",
        "mailhost_storage_",
        "mailhost_api_",
        "mailhost_build_info",
        "mailhost_config_",
        "mailhost_probe_",
        "mailhost_parse_",
        "mailhost_exporter_",
    ];
    body.lines()
        .filter(|l| l.starts_with("mailhost_") && !OWN.iter().any(|o| l.starts_with(o)))
        .collect()
}

#[tokio::test]
async fn every_collectors_series_come_back_as_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let sim = spawn_sim().await;
    let config = || {
        let targets = SimConfig::demo(TOKEN).demo_targets();
        mailhost_exporter::demo::config(&sim.url, TOKEN, &targets)
    };
    let first = Stored::with_config(config(), dir.path()).await.unwrap();
    // Every collector has run, and a checkpoint was written after that.
    let ran = first
        .scrape_until("every collector's first run", |b| {
            value(b, "mailhost_up") == Some(1.0)
        })
        .await;
    let checkpointed = value(
        &ran,
        "mailhost_collector_last_success_timestamp_seconds{collector=\"team_member\"}",
    )
    .unwrap();
    first
        .scrape_until("a checkpoint after it", |b| {
            value(
                b,
                "mailhost_storage_last_checkpoint_success_timestamp_seconds",
            )
            .is_some_and(|at| at > checkpointed + 1.0)
        })
        .await;
    let before = first.scrape().await;
    first.stop().await;
    let config = config();
    drop(sim);
    let second = Stored::with_config(config, dir.path()).await.unwrap();
    let after = second.scrape().await;
    let (was, is) = (collector_series(&before), collector_series(&after));
    assert!(was.len() > 50, "{before}");
    assert_eq!(was, is);
    second.stop().await;
}

/// A restart costs no call that restored values do not need: an account fetched less than an
/// interval before is fetched again at its next tick, not at the restart, and the exporter is
/// ready at once.
#[tokio::test]
async fn a_restart_calls_nothing_for_values_younger_than_an_interval() {
    let dir = tempfile::tempdir().unwrap();
    let sim = spawn_sim().await;
    kept_once(&yaml(&sim.url, &ACCOUNTS), dir.path()).await;
    let hits = || {
        ACCOUNTS
            .iter()
            .map(|id| sim.sim.hits(&format!("/api/delivery/accounts/{id}")))
            .sum::<u64>()
    };
    let before = hits();
    // The same collectors every minute: what was fetched a moment ago is fresh.
    let minutely = yaml(&sim.url, &ACCOUNTS).replace(
        "interval: 1s\n    deadline: 900ms",
        "interval: 1m\n    deadline: 50s",
    );
    let second = Stored::start(&minutely, dir.path()).await;
    wait_for("ready", || async {
        let r = reqwest::get(format!("{}/-/ready", second.url)).await.ok()?;
        r.status().is_success().then_some(())
    })
    .await;
    let body = second.scrape().await;
    assert!(every_account_shown(&body), "{body}");
    assert_eq!(
        hits(),
        before,
        "no account was fetched again at the restart"
    );
    second.stop().await;
}

#[tokio::test]
async fn the_daily_counters_go_on_across_a_restart_with_their_created_time() {
    let dir = tempfile::tempdir().unwrap();
    let sim = spawn_sim().await;
    let yaml = yaml(&sim.url, &ACCOUNTS);
    let openmetrics = "application/openmetrics-text;version=1.0.0";
    let created = |body: &str| {
        body.lines()
            .find(|l| {
                l.starts_with("mailhost_delivery_messages_created{")
                    && l.contains("account_id=\"1001\"")
            })
            .map(str::to_owned)
    };
    let first = Stored::start(&yaml, dir.path()).await;
    let before = wait_for("the counters and a checkpoint", || async {
        let body = get_text(&format!("{}/metrics", first.url), openmetrics).await;
        let checkpointed = value(
            &body,
            "mailhost_storage_last_checkpoint_success_timestamp_seconds",
        )
        .is_some();
        created(&body).filter(|_| checkpointed)
    })
    .await;
    first.stop().await;
    let second = Stored::start(&yaml, dir.path()).await;
    // Still the same after this process fetched the figures again itself.
    let after = wait_for("the restored counters fetched again", || async {
        let body = get_text(&format!("{}/metrics", second.url), openmetrics).await;
        let refreshed = value(
            &body,
            "mailhost_storage_restored_targets{collector=\"tracemail_daily\"}",
        ) == Some(0.0);
        created(&body).filter(|_| refreshed)
    })
    .await;
    assert_eq!(before, after);
    second.stop().await;
}

/// A `targets.json` of format 1 (collectors keyed by a digest of their settings' `Debug` text):
/// a collector without settings is taken back, as its digest was one; one whose digest stood
/// for settings is dropped, never served under settings it cannot check.
#[tokio::test]
async fn a_targets_file_of_format_1_is_taken_back_for_collectors_without_settings() {
    let sim = spawn_sim().await;
    let yaml = yaml(&sim.url, &ACCOUNTS);
    let good = tempfile::tempdir().unwrap();
    kept_once(&yaml, good.path()).await;
    let whole = std::fs::read_to_string(good.path().join("targets.json")).unwrap();
    assert!(
        whole.contains("\"version\":2") && whole.contains("\"settings\":\"v1\""),
        "{whole}"
    );
    let restored = |body: &str| {
        value(
            body,
            "mailhost_storage_restored_targets{collector=\"delivery_account\"}",
        )
    };
    for (digest, expected) in [("07e11f07b4a6665a", Some(2.0)), ("0123456789abcdef", None)] {
        let dir = tempfile::tempdir().unwrap();
        let format_1 = whole
            .replacen("\"version\":2", "\"version\":1", 1)
            .replace("\"settings\":\"v1\"", &format!("\"settings\":\"{digest}\""));
        std::fs::write(dir.path().join("targets.json"), format_1).unwrap();
        let exporter = Stored::start(&yaml, dir.path()).await;
        let body = exporter.scrape().await;
        let got = restored(&body).filter(|n| *n > 0.0);
        assert_eq!(got, expected, "{digest}: {body}");
        assert_eq!(
            refused(&body, "older_version"),
            Some(0.0),
            "{digest}: {body}"
        );
        exporter.stop().await;
    }
}

#[tokio::test]
async fn what_no_longer_belongs_to_the_config_is_dropped_never_served() {
    let dir = tempfile::tempdir().unwrap();
    let sim = spawn_sim().await;
    kept_once(&yaml(&sim.url, &ACCOUNTS), dir.path()).await;
    // One account removed: the other is restored, the removed one never shows.
    let fewer = Stored::start(&yaml(&sim.url, &[1001]), dir.path()).await;
    let body = fewer.scrape().await;
    assert!(value(&body, &remaining(1001)).is_some(), "{body}");
    assert!(!body.contains("account_id=\"1002\""), "{body}");
    fewer.stop().await;
    // Another provider (the same simulator under another address): nothing is restored.
    let elsewhere = sim.url.replace("127.0.0.1", "localhost");
    let moved = Stored::start(&yaml(&elsewhere, &ACCOUNTS), dir.path()).await;
    let body = moved.scrape().await;
    assert!(
        !body.contains("mailhost_storage_restored_targets"),
        "{body}"
    );
    moved.stop().await;
}

#[tokio::test]
async fn the_directory_is_private_and_no_file_in_it_holds_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state");
    let sim = spawn_sim().await;
    kept_once(&yaml(&sim.url, &ACCOUNTS), &path).await;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o700);
    let mut files = 0;
    for entry in std::fs::read_dir(&path).unwrap() {
        let file = entry.unwrap().path();
        let text = std::fs::read(&file).unwrap();
        assert!(
            !text.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()),
            "{} holds the token",
            file.display()
        );
        if file.extension().is_some_and(|e| e == "json") {
            assert_eq!(mode(&file), 0o600, "{}", file.display());
            files += 1;
        }
    }
    assert_eq!(files, 2, "two state files: targets.json and pace.json");
}

#[tokio::test]
async fn a_second_exporter_on_the_same_directory_is_refused_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let sim = spawn_sim().await;
    let yaml = yaml(&sim.url, &ACCOUNTS);
    let first = Stored::start(&yaml, dir.path()).await;
    let refused = Stored::try_start(&yaml, dir.path())
        .await
        .err()
        .expect("a second exporter is refused");
    let message = refused.to_string();
    assert!(
        message.contains("--storage.path")
            && message.contains(&format!("process {}", std::process::id()))
            && message.contains("two exporters never share one"),
        "{message}"
    );
    first.stop().await;
    // Once the first has stopped, the directory is free.
    Stored::start(&yaml, dir.path()).await.stop().await;
}

/// Every kind of bad state file: a warn line in the series, a cold start, and the exporter
/// serving and keeping new checkpoints.
#[tokio::test]
async fn a_bad_state_file_is_refused_with_its_problem_and_the_exporter_starts_cold() {
    let sim = spawn_sim().await;
    let yaml = yaml(&sim.url, &ACCOUNTS);
    let good = tempfile::tempdir().unwrap();
    kept_once(&yaml, good.path()).await;
    let whole = std::fs::read_to_string(good.path().join("targets.json")).unwrap();
    for (case, problem, text) in spoilt(&whole) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("targets.json"), text).unwrap();
        let exporter = Stored::start(&yaml, dir.path()).await;
        let body = exporter
            .scrape_until(case, |b| {
                every_account_shown(b)
                    && value(
                        b,
                        "mailhost_storage_last_checkpoint_success_timestamp_seconds",
                    )
                    .is_some()
            })
            .await;
        assert_eq!(refused(&body, problem), Some(1.0), "{case}: {body}");
        assert!(
            !body.contains("mailhost_storage_restored_targets"),
            "{case}"
        );
        exporter.stop().await;
    }
}

#[tokio::test]
async fn a_vanished_directory_is_counted_and_the_exporter_serves_from_memory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state");
    let sim = spawn_sim().await;
    let exporter = Stored::start(&yaml(&sim.url, &ACCOUNTS), &path).await;
    exporter
        .scrape_until("a first checkpoint", |b| {
            value(
                b,
                "mailhost_storage_last_checkpoint_success_timestamp_seconds",
            )
            .is_some()
        })
        .await;
    std::fs::remove_dir_all(&path).unwrap();
    let body = exporter
        .scrape_until("a failed checkpoint", |b| {
            value(
                b,
                "mailhost_storage_checkpoint_failures_total{cause=\"vanished\"}",
            )
            .is_some_and(|n| n >= 1.0)
        })
        .await;
    assert!(every_account_shown(&body), "{body}");
    exporter.stop().await;
}

/// The binary as an operator runs it: killed with SIGKILL, it loses at most one checkpoint;
/// the next process serves what the last one held at once.
#[tokio::test]
async fn after_sigkill_the_next_process_serves_the_last_checkpoint_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let sim = spawn_sim().await;
    let config = dir.path().join("config.yml");
    std::fs::write(&config, yaml(&sim.url, &ACCOUNTS)).unwrap();
    let state = dir.path().join("state");
    let args = [
        "--config.file",
        config.to_str().unwrap(),
        "--web.listen-address",
        "127.0.0.1:0",
        "--storage.path",
        state.to_str().unwrap(),
        "--storage.checkpoint-interval",
        "1s",
    ];
    let env = [("MAILHOST_API_TOKEN", TOKEN)];
    let mut first = Running::start_with_env(&args, &env);
    let url = format!("{}/metrics", first.base_url().await);
    wait_for("every account and a checkpoint", || async {
        let body = get_text(&url, "text/plain").await;
        (every_account_shown(&body)
            && value(
                &body,
                "mailhost_storage_last_checkpoint_success_timestamp_seconds",
            )
            .is_some())
        .then_some(())
    })
    .await;
    first.kill();
    drop(sim);
    let second = Running::start_with_env(&args, &env);
    let url = format!("{}/metrics", second.base_url().await);
    let body = get_text(&url, "text/plain").await;
    assert!(every_account_shown(&body), "{body}");
    assert!(
        second
            .log()
            .iter()
            .any(|l| l.contains("took over the lock of the storage directory")),
        "{:?}",
        second.log()
    );
}

/// Alerts of `name` in `state` on Prometheus at `url`, as `account_id` and `activeAt`.
async fn alerts(url: &str, name: &str, state: &str) -> Vec<(String, String)> {
    let Some(answer) = crate::helpers::get_json(url, "/api/v1/alerts", &[]).await else {
        return Vec::new();
    };
    let mut found: Vec<(String, String)> = answer["data"]["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["labels"]["alertname"] == name && a["state"] == state)
        .filter_map(|a| {
            Some((
                a["labels"]["account_id"].as_str()?.to_owned(),
                a["activeAt"].as_str()?.to_owned(),
            ))
        })
        .collect();
    found.sort();
    found
}

/// Waits for Prometheus to take a new scrape of the exporter, so that a restart made at once
/// falls between two scrapes (a failed scrape would mark every series stale, and end every
/// pending alert, with or without storage).
async fn right_after_a_scrape(url: &str) {
    let last = || async {
        crate::helpers::instant_query(url, "timestamp(up{job=\"mailhost\"})", None)
            .await
            .and_then(|s| s.first().map(|s| s.value))
    };
    let before = wait_for("a scrape", last).await;
    wait_for("the next scrape", || async {
        last().await.filter(|at| *at > before)
    })
    .await;
}

/// An exporter in this process on `port` (the same `instance` for Prometheus across restarts),
/// with the storage at `dir` when one is given.
async fn on_port(config: Config, port: u16, dir: Option<&Path>) -> Stored {
    let web = WebOptions {
        listen_addresses: vec![format!("127.0.0.1:{port}")],
        ..web()
    };
    // The port was just given up by the exporter before: bound again at once, or soon.
    let app = wait_for("the port", || {
        let (config, web) = (config.clone(), web.clone());
        async move { App::build(config, web).await.ok() }
    })
    .await;
    let app = match dir {
        Some(dir) => app
            .with_storage(StorageOptions {
                path: dir.to_owned(),
                checkpoint_interval: Duration::from_secs(1),
            })
            .await
            .unwrap(),
        None => app,
    };
    let url = format!("http://{}", app.local_addr());
    let cancel = CancellationToken::new();
    let run = tokio::spawn(app.run(cancel.clone()));
    Stored {
        url,
        cancel,
        run: Some(run),
    }
}

/// With a real Prometheus and the shipped rules: across an exporter restart while the provider
/// does not answer, a firing quota alert and a pending `MailhostDeliveryQuotaExhaustionPredicted`
/// keep their state and `activeAt` with the storage; without it the pending one starts over
/// (the firing one is held by its `keep_firing_for` either way).
#[tokio::test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
async fn alerts_keep_their_state_and_active_time_across_a_restart_with_the_storage() {
    use mailhost_sim::FaultSpec;
    let Some(prometheus) = crate::helpers::tool("prometheus", "apt-get install prometheus") else {
        return;
    };
    let Some(jsonnet) = crate::mixin::jsonnet() else {
        return;
    };
    // The two quota alerts fire after 2 s rather than 2 minutes, and the forecast learns in
    // seconds what it learns in weeks; the prediction keeps its 6 hours and stays pending
    // throughout.
    let (rules_dir, _) = crate::mixin::render_rules(
        jsonnet,
        &format!(
            "{{ alertFor+: {{ MailhostDeliveryQuotaLow: '2s', MailhostDeliveryQuotaCritical: '2s' }} }} + {}",
            crate::mixin::FORECAST_IN_SECONDS
        ),
    );
    let sim = spawn_sim().await;
    let config = SimConfig::demo(TOKEN);
    let traffic = CancellationToken::new();
    tokio::spawn(mailhost_sim::traffic::run(
        sim.url.clone(),
        config.send_identities(),
        Duration::from_millis(200),
        50_000,
        traffic.clone(),
    ));
    // Account 1002 of the demo fleet is close to exhaustion; values are kept an hour.
    let demo = || Config::parse(&yaml(&sim.url, &ACCOUNTS), Some(TOKEN.to_owned())).unwrap();
    let port = crate::helpers::free_port();
    let state = tempfile::tempdir().unwrap();
    let mut exporter = on_port(demo(), port, Some(state.path())).await;
    let prom = crate::helpers::spawn_prometheus(
        prometheus,
        &format!(
            "global:\n  scrape_interval: 2s\n  evaluation_interval: 1s\nrule_files:\n  - {}\n  - {}\nscrape_configs:\n  - job_name: mailhost\n    static_configs:\n      - targets: [\"127.0.0.1:{port}\"]\n",
            rules_dir.path().join("prometheus/rules.yml").display(),
            rules_dir.path().join("prometheus/alerts.yml").display()
        ),
    );
    let url = prom.url.clone();
    const FIRING: &str = "MailhostDeliveryQuotaCritical|MailhostDeliveryQuotaLow";
    let firing = || async {
        let mut all = alerts(&url, "MailhostDeliveryQuotaCritical", "firing").await;
        all.extend(alerts(&url, "MailhostDeliveryQuotaLow", "firing").await);
        all
    };
    let pending = || alerts(&url, "MailhostDeliveryQuotaExhaustionPredicted", "pending");
    let (fired, waiting) = crate::helpers::wait_within(
        Duration::from_secs(180),
        "a firing quota alert and a pending prediction",
        || async {
            let (f, p) = (firing().await, pending().await);
            (!f.is_empty() && !p.is_empty()).then_some((f, p))
        },
    )
    .await;

    // A restart with the storage, while the provider holds every call unanswered.
    for restart in ["with the storage", "without it"] {
        right_after_a_scrape(&url).await;
        exporter.stop().await;
        sim.sim.set_fault_on_every_route(FaultSpec {
            no_answer_rate: 1.0,
            ..FaultSpec::default()
        });
        let dir = (restart == "with the storage").then(|| state.path());
        exporter = on_port(demo(), port, dir).await;
        if dir.is_some() {
            // Four scrapes of the restarted exporter while the provider is silent.
            for _ in 0..4 {
                right_after_a_scrape(&url).await;
            }
            assert_eq!(firing().await, fired, "{restart}: {FIRING}");
            assert_eq!(
                pending().await,
                waiting,
                "{restart}: the pending prediction"
            );
        } else {
            // The values are gone until fetched again: the prediction starts over.
            wait_within(
                Duration::from_secs(60),
                "the pending prediction to start over",
                || async { (pending().await != waiting).then_some(()) },
            )
            .await;
            assert_eq!(firing().await, fired, "{restart}: held by keep_firing_for");
        }
        sim.sim.clear_faults();
    }
    traffic.cancel();
    exporter.stop().await;
}

/// A provider that holds the token to `rate` calls a second (a bucket of one), for `ids`.
fn limited(ids: &[i32], rate: f64) -> SimConfig {
    SimConfig {
        management_tokens: vec![ManagementToken {
            token: TOKEN.to_owned(),
            accounts: Some(ids.to_vec()),
        }],
        accounts: ids.iter().copied().map(AccountSeed::with_id).collect(),
        rate_limits: vec![TokenRateLimit {
            token: TOKEN.to_owned(),
            limit: RateLimit {
                burst: Some(1.0),
                ..RateLimit::per_second(rate)
            },
        }],
        ..SimConfig::default()
    }
}

/// One collector polling `ids` every second: more calls than a limit of a few a second allows.
fn paced_yaml(base_url: &str, ids: &[i32]) -> String {
    let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
    format!(
        "api:\n  base_url: {base_url}\n  timeout: 2s\n  max_retries: 0\ncollectors:\n  delivery_account:\n    interval: 1s\n    deadline: 900ms\n    max_age: 1h\n    accounts: [{}]\n",
        ids.join(", ")
    )
}

const PACER_RATE: &str = "mailhost_api_pacer_rate";
const RESTORED_PACES: &str = "mailhost_storage_restored_paces";

/// The learned rates `pace.json` holds, of every pace in it.
fn kept_rates(text: &str) -> Vec<f64> {
    let file: serde_json::Value = serde_json::from_str(text).unwrap();
    let mut rates = Vec::new();
    for tenant in file["data"]["tenants"].as_array().unwrap() {
        let pace = &tenant["pace"];
        let paces = std::iter::once(&pace["token"]).chain(
            pace["endpoints"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| &e["pace"]),
        );
        rates.extend(paces.filter_map(|p| p["curve"]["rate"].as_f64()));
    }
    rates
}

/// Waits until the exporter has fetched every one of `ids` since `since` (a Unix time).
async fn fetched_all_since(exporter: &Stored, ids: &[i32], since: f64) -> String {
    exporter
        .scrape_until("every account fetched by this process", |b| {
            ids.iter().all(|&id| {
                value(b, &last_success("delivery_account", id)).is_some_and(|at| at > since)
            })
        })
        .await
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[tokio::test]
async fn a_restart_paces_at_once_at_the_pace_learned_before_and_without_pace_json_it_learns_again()
{
    let ids: Vec<i32> = (1..=12).collect();
    let sim = spawn_sim_with(limited(&ids, 4.0)).await;
    let yaml = paced_yaml(&sim.url, &ids);
    let dir = tempfile::tempdir().unwrap();
    let pace_file = dir.path().join("pace.json");

    // Twelve accounts a second against four calls a second: the pacer learns the limit.
    let first = Stored::start(&yaml, dir.path()).await;
    first
        .scrape_until("a learned pace", |b| value(b, PACER_RATE).is_some())
        .await;
    wait_for("a checkpoint holding the learned pace", || async {
        let text = std::fs::read_to_string(&pace_file).ok()?;
        (!kept_rates(&text).is_empty()).then_some(())
    })
    .await;
    first.stop().await;
    let text = std::fs::read_to_string(&pace_file).unwrap();
    assert!(!text.contains(TOKEN), "{text}");
    let kept = kept_rates(&text);
    let highest = kept.iter().copied().fold(0.0, f64::max);
    assert!(highest > 0.0 && highest < 10.0, "{text}");

    // The provider lifts its limit: whatever pace the next process goes at, it did not learn
    // it from this provider's answers.
    sim.sim.set_rate_limit(Some(TOKEN), None).unwrap();
    let since = unix_now();
    let second = Stored::start(&yaml, dir.path()).await;
    let at_once = second
        .scrape_until("the restored pace", |b| value(b, RESTORED_PACES).is_some())
        .await;
    assert_eq!(value(&at_once, RESTORED_PACES), Some(1.0), "{at_once}");
    let rate = value(&at_once, PACER_RATE).expect("paced from the start");
    // At the learned pace: the curve climbs from it while calls wait, by at most a tenth over
    // its first eight seconds, however slow the machine is to answer the first scrape.
    assert!(
        rate > 0.0 && rate <= highest * 1.1,
        "{rate} against {kept:?}"
    );
    // A whole run later it is still paced: it did not start from nothing.
    let body = fetched_all_since(&second, &ids, since).await;
    assert!(value(&body, PACER_RATE).is_some(), "{body}");
    second.stop().await;

    // Without pace.json, the same restart starts unlimited: nothing tells it the old pace.
    std::fs::remove_file(&pace_file).unwrap();
    let since = unix_now();
    let cold = Stored::start(&yaml, dir.path()).await;
    let body = fetched_all_since(&cold, &ids, since).await;
    assert_eq!(value(&body, RESTORED_PACES), Some(0.0), "{body}");
    assert!(value(&body, PACER_RATE).is_none(), "{body}");
    cold.stop().await;
}

#[tokio::test]
async fn a_bad_pace_file_is_refused_with_its_problem_while_the_targets_are_restored() {
    let sim = spawn_sim().await;
    let url = sim.url.clone();
    let good = tempfile::tempdir().unwrap();
    kept_once(&yaml(&url, &ACCOUNTS), good.path()).await;
    let targets = std::fs::read_to_string(good.path().join("targets.json")).unwrap();
    let pace = std::fs::read_to_string(good.path().join("pace.json")).unwrap();
    // The provider takes calls and never answers: what the exporter shows, it restored.
    drop(sim);
    let silent = silent_at(&url).await;
    let patient = patient(&url);
    for (case, problem, text) in spoilt(&pace) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("targets.json"), &targets).unwrap();
        std::fs::write(dir.path().join("pace.json"), text).unwrap();
        let exporter = Stored::start(&patient, dir.path()).await;
        let body = exporter.scrape().await;
        assert_eq!(refused(&body, problem), Some(1.0), "{case}: {body}");
        assert_eq!(value(&body, RESTORED_PACES), Some(0.0), "{case}: {body}");
        assert_eq!(
            value(
                &body,
                "mailhost_storage_restored_targets{collector=\"delivery_account\"}"
            ),
            Some(2.0),
            "{case}: {body}"
        );
        assert!(every_account_shown(&body), "{case}: {body}");
        exporter.stop().await;
    }
    drop(silent);
}

#[tokio::test]
async fn a_kept_back_off_of_a_target_no_longer_configured_is_not_taken_back() {
    let sim = spawn_sim().await;
    let dir = tempfile::tempdir().unwrap();
    // Two targets backing off on their own for five more minutes (within the bound of ten):
    // 1001, still configured, and 9999, no longer.
    let until = (unix_now() as u64 + 300) * 1000;
    let backoff = |target: i32| {
        format!(
            "{{\"endpoint\":\"delivery_account\",\"target\":\"{target}\",\"until_ms\":{until},\"refused\":3}}"
        )
    };
    let pace = format!(
        "{{\"version\":1,\"written_at\":\"2026-01-01T00:00:00Z\",\"data\":{{\"tenants\":[{{\"tenant\":\"\",\"origin\":\"{}\",\"pace\":{{\"backoffs\":[{},{}]}}}}]}}}}",
        sim.url,
        backoff(1001),
        backoff(9999)
    );
    std::fs::write(dir.path().join("pace.json"), pace).unwrap();
    let exporter = Stored::start(&yaml(&sim.url, &ACCOUNTS), dir.path()).await;
    // The endpoint's series come with its first call (of 1002, which is not backing off).
    let throttled = "mailhost_api_throttled_targets{endpoint=\"delivery_account\"}";
    let body = exporter
        .scrape_until("the endpoint's pace series", |b| {
            value(b, throttled).is_some()
        })
        .await;
    assert_eq!(value(&body, RESTORED_PACES), Some(1.0), "{body}");
    assert_eq!(
        value(&body, throttled),
        Some(1.0),
        "only the configured target's back-off is taken back: {body}"
    );
    exporter.stop().await;
}
