//! Tenants: one token each, a `tenant` label on every series, and a tenant whose token is
//! revoked, rate-limited or slow failing alone; a reload rotates one tenant's token.

use std::time::Duration;

use mailhost_exporter::config::Config;
use mailhost_sim::{Account, AccountSeed, FaultSpec, ManagementToken, Route, SimConfig};

use crate::helpers::{spawn_exporter, spawn_sim_with, value, wait_for};

/// Accounts of each tenant: alpha 1-5, beta 11-15, gamma (revoked) 21-25, slow 31-35, limited
/// (rate-limited) 41-45.
fn accounts(base: i32) -> Vec<i32> {
    (base + 1..=base + 5).collect()
}

fn sim_config() -> SimConfig {
    sim_config_with(&["alpha", "beta", "slow", "limited"])
}

fn sim_config_with(known: &[&str]) -> SimConfig {
    let token = |token: &str, base: i32| ManagementToken {
        token: token.to_owned(),
        accounts: Some(accounts(base)),
    };
    SimConfig {
        // A tenant's token the simulator does not know answers 401, as a revoked one does.
        management_tokens: [
            ("alpha", 0),
            ("beta", 10),
            ("gamma", 20),
            ("slow", 30),
            ("limited", 40),
        ]
        .into_iter()
        .filter(|(name, _)| known.contains(name))
        .map(|(name, base)| token(&format!("{name}-token"), base))
        .collect(),
        accounts: [0, 10, 20, 30, 40]
            .into_iter()
            .flat_map(accounts)
            .map(AccountSeed::with_id)
            .collect(),
        ..SimConfig::default()
    }
}

fn tenant(name: &str, env: &str, base: i32) -> String {
    let ids: Vec<String> = accounts(base).iter().map(|i| i.to_string()).collect();
    format!(
        "  - name: {name}\n    token_env: {env}\n    collectors:\n      delivery_account:\n        accounts: [{}]\n",
        ids.join(", ")
    )
}

fn yaml(base_url: &str) -> String {
    format!(
        "api:\n  base_url: {base_url}\n  timeout: 1s\n  max_retries: 0\ncollectors:\n  delivery_account:\n    interval: 1s\n    deadline: 900ms\n    max_age: 30s\ntenants:\n{}{}{}{}{}",
        tenant("alpha", "ALPHA", 0),
        tenant("beta", "BETA", 10),
        tenant("gamma", "GAMMA", 20),
        tenant("slow", "SLOW", 30),
        tenant("limited", "LIMITED", 40),
    )
}

fn env(name: &str) -> Option<String> {
    Some(format!("{}-token", name.to_ascii_lowercase()))
}

fn remaining(tenant: &str, id: i32) -> String {
    format!("mailhost_delivery_remaining_messages{{tenant=\"{tenant}\",account_id=\"{id}\"}}")
}

fn success(tenant: &str) -> String {
    format!("mailhost_collector_success{{tenant=\"{tenant}\",collector=\"delivery_account\"}}")
}

#[tokio::test]
async fn a_revoked_rate_limited_or_slow_tenant_fails_alone_and_every_series_names_its_tenant() {
    let sim = spawn_sim_with(sim_config()).await;
    // slow's accounts answer after longer than the timeout: every call of that tenant times out.
    sim.sim.add_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            latency: Some(Duration::from_secs(3600)),
            only_ids: Some(accounts(30).iter().map(|i| i.to_string()).collect()),
            ..FaultSpec::default()
        },
    );
    // limited's accounts answer 429 with a Retry-After far past the deadline.
    sim.sim.add_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            error_rate: 1.0,
            error_status: Some(429),
            only_ids: Some(accounts(40).iter().map(|i| i.to_string()).collect()),
            ..FaultSpec::default()
        },
    );
    let config = Config::parse_with_env(&yaml(&sim.url), &env).unwrap();
    assert_eq!(config.tenants.len(), 5);
    let exporter = spawn_exporter(config).await;
    let body = wait_for("every tenant's first run", || async {
        let body = exporter.scrape().await;
        ["alpha", "beta", "gamma", "slow", "limited"]
            .iter()
            .all(|t| value(&body, &success(t)).is_some())
            .then_some(body)
    })
    .await;
    for (t, base) in [("alpha", 0), ("beta", 10)] {
        assert_eq!(value(&body, &success(t)), Some(1.0), "{t}\n{body}");
        for id in accounts(base) {
            assert!(value(&body, &remaining(t, id)).is_some(), "{t} {id}");
        }
    }
    for t in ["gamma", "slow", "limited"] {
        assert_eq!(value(&body, &success(t)), Some(0.0), "{t}");
    }
    assert!(
        value(
            &body,
            "mailhost_api_request_failures_total{tenant=\"limited\",endpoint=\"delivery_account\",reason=\"rate_limited\"}"
        )
        .is_some_and(|n| n >= 1.0),
        "{body}"
    );
    assert!(
        value(
            &body,
            "mailhost_api_request_failures_total{tenant=\"gamma\",endpoint=\"delivery_account\",reason=\"unauthorized\"}"
        )
        .is_some_and(|n| n >= 5.0),
        "{body}"
    );
    assert!(
        value(
            &body,
            "mailhost_api_request_failures_total{tenant=\"slow\",endpoint=\"delivery_account\",reason=\"timeout\"}"
        )
        .is_some_and(|n| n >= 1.0)
    );
    // No healthy tenant counted a failure, and no series without a tenant label.
    for t in ["alpha", "beta"] {
        assert!(
            !body
                .lines()
                .any(|l| l.starts_with("mailhost_api_request_failures_total")
                    && l.contains(&format!("tenant=\"{t}\""))
                    && !l.ends_with(" 0")),
            "{t}"
        );
    }
    assert!(
        !body
            .lines()
            .any(|l| l.starts_with("mailhost_delivery_") && !l.contains("tenant=")),
        "{body}"
    );
    // The healthy tenants keep refreshing while the others fail.
    let before = value(
        &body,
        "mailhost_collector_last_success_timestamp_seconds{tenant=\"alpha\",collector=\"delivery_account\"}",
    )
    .unwrap();
    wait_for("alpha refreshed again", || async {
        let body = exporter.scrape().await;
        value(
            &body,
            "mailhost_collector_last_success_timestamp_seconds{tenant=\"alpha\",collector=\"delivery_account\"}",
        )
        .filter(|t| *t > before)
    })
    .await;
    // No token shows on /metrics, the landing page or /sd.
    let landing = exporter.get("/").await.text().await.unwrap();
    let sd = exporter.get("/sd").await.text().await.unwrap();
    assert!(
        landing.contains("gamma") && landing.contains("unauthorized"),
        "{landing}"
    );
    for secret in [
        "alpha-token",
        "beta-token",
        "gamma-token",
        "slow-token",
        "limited-token",
    ] {
        for (page, text) in [("/metrics", &body), ("/", &landing), ("/sd", &sd)] {
            assert!(!text.contains(secret), "{secret} on {page}");
        }
    }
}

#[tokio::test]
async fn a_reload_rotates_one_tenants_token_from_its_file() {
    let sim = spawn_sim_with(sim_config_with(&["alpha", "beta", "gamma", "slow"])).await;
    let dir = tempfile::tempdir().unwrap();
    // Every tenant's token in a file; gamma's is one the provider does not know.
    let mut text = yaml(&sim.url);
    for name in ["ALPHA", "BETA", "GAMMA", "SLOW", "LIMITED"] {
        let file = dir.path().join(name);
        let token = if name == "GAMMA" {
            "revoked-token".to_owned()
        } else {
            env(name).unwrap()
        };
        std::fs::write(&file, format!("{token}\n")).unwrap();
        text = text.replace(
            &format!("token_env: {name}\n"),
            &format!("token_file: {}\n", file.display()),
        );
    }
    let token_file = dir.path().join("GAMMA");
    let config_file = dir.path().join("config.yml");
    std::fs::write(&config_file, &text).unwrap();
    let config = Config::parse_with_env(&text, &|_| None).unwrap();
    let web = mailhost_exporter::WebOptions {
        listen_addresses: vec!["127.0.0.1:0".to_owned()],
        enable_lifecycle: true,
        ..Default::default()
    };
    let app = mailhost_exporter::App::build(config, web)
        .await
        .unwrap()
        .with_config_file(config_file);
    let exporter = crate::helpers::Exporter::start(app);
    wait_for("gamma refused", || async {
        let body = exporter.scrape().await;
        (value(&body, &success("gamma")) == Some(0.0)).then_some(())
    })
    .await;
    // The simulator knows gamma-token: the customer's token is rotated to it.
    std::fs::write(&token_file, "gamma-token\n").unwrap();
    let reload = exporter.reload().await;
    assert_eq!(reload.status(), 200, "{:?}", reload.text().await);
    wait_for("gamma polled with its new token", || async {
        let body = exporter.scrape().await;
        (value(&body, &success("gamma")) == Some(1.0)
            && value(&body, &remaining("gamma", 21)).is_some())
        .then_some(())
    })
    .await;
}

/// Tenants, accounts per tenant and `api.concurrency` of the descriptor test: 2,400 calls asked
/// for at once, under an open-file limit of 1,024.
const MANY: usize = 300;
const EACH: usize = 8;

/// A child's open descriptors and threads.
fn descriptors_and_threads(pid: u32) -> (usize, u64) {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0);
    let threads = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("Threads:")
                .map(|v| v.trim().parse().unwrap_or(0))
        })
        .unwrap_or(0);
    (fds, threads)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_hundred_tenants_under_a_small_open_file_limit_keep_metrics_and_health_answering() {
    use crate::helpers::{PATIENCE, Running};
    let first = 1_000;
    let config = SimConfig {
        management_tokens: (0..MANY)
            .map(|t| ManagementToken {
                token: format!("many-{t}"),
                accounts: Some((0..EACH).map(|a| first + (t * EACH + a) as i32).collect()),
            })
            .collect(),
        accounts: (0..MANY * EACH)
            .map(|i| {
                AccountSeed::from(Account {
                    id: first + i as i32,
                    ..Account::default()
                })
            })
            .collect(),
        ..SimConfig::default()
    };
    let sim = spawn_sim_with(config).await;
    // Every answer takes 1 s: the tenants' calls pile up, each asking for a connection (the
    // 240 calls the plan allows at once take 10 s for the 2,400 accounts).
    sim.sim.set_fault(
        Route::DeliveryAccountGet,
        FaultSpec {
            latency: Some(Duration::from_secs(1)),
            ..FaultSpec::default()
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let mut yaml = format!(
        "api:\n  base_url: {}\n  timeout: 5s\n  concurrency: {EACH}\ncollectors:\n  delivery_account:\n    interval: 20s\n    deadline: 18s\n    max_age: 60s\ntenants:\n",
        sim.url
    );
    for t in 0..MANY {
        let path = dir.path().join(format!("token-{t}"));
        std::fs::write(&path, format!("many-{t}")).unwrap();
        let ids: Vec<String> = (0..EACH)
            .map(|a| (first + (t * EACH + a) as i32).to_string())
            .collect();
        yaml.push_str(&format!(
            "  - name: t{t}\n    token_file: {}\n    collectors:\n      delivery_account:\n        accounts: [{}]\n",
            path.display(),
            ids.join(", ")
        ));
    }
    let path = dir.path().join("config.yml");
    std::fs::write(&path, yaml).unwrap();

    let limit = 1024;
    let mut command = std::process::Command::new("bash");
    command
        .arg("-c")
        .arg(format!(
            "ulimit -Sn {limit} -Hn {limit} && exec \"$0\" \"$@\""
        ))
        .arg(env!("CARGO_BIN_EXE_mailhost_exporter"))
        .arg(format!("--config.file={}", path.display()))
        .arg("--web.listen-address=127.0.0.1:0");
    let exporter = Running::spawn(command);
    let address = exporter
        .logged("mailhost_exporter listening", "address")
        .await;
    // Told once at start, with the figures and the fix.
    let told: Vec<String> = exporter
        .log()
        .into_iter()
        .filter(|l| l.contains("open-file limit (1024)"))
        .collect();
    assert_eq!(told.len(), 1, "{:?}", exporter.log());
    assert!(
        told[0].contains("level=warn") && told[0].contains("2400"),
        "{}",
        told[0]
    );

    // While every tenant's calls wait on the slow provider, /metrics and /-/healthy answer, and
    // the process stays within its descriptors with threads that do not grow with tenants.
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let (mut most_fds, mut most_threads) = (0, 0);
    for round in 0..20 {
        for route in ["/-/healthy", "/metrics"] {
            let r = client
                .get(format!("http://{address}{route}"))
                .send()
                .await
                .unwrap_or_else(|e| panic!("{route} in round {round}: {e}"));
            assert_eq!(r.status(), 200, "{route} in round {round}");
        }
        let (fds, threads) = descriptors_and_threads(exporter.pid());
        most_fds = most_fds.max(fds);
        most_threads = most_threads.max(threads);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        most_fds > 200,
        "calls were in flight: {most_fds} descriptors"
    );
    assert!(most_fds < limit, "{most_fds} descriptors of {limit}");
    assert!(
        most_threads <= 40,
        "{most_threads} threads for {MANY} tenants"
    );

    // Every account gets its values: the calls beyond the cap waited for a turn.
    let started = std::time::Instant::now();
    loop {
        let body = client
            .get(format!("http://{address}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let shown = body
            .lines()
            .filter(|l| l.starts_with("mailhost_delivery_remaining_messages{"))
            .count();
        if shown == MANY * EACH {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{shown} of {} accounts shown",
            MANY * EACH
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Tenants of each config of the rotation test, and rotations: every reload replaces them all.
const ROTATED: usize = 40;
const ROTATIONS: usize = 12;

/// A config of `ROTATED` tenants named `c{round}-{i}`, each polling account 1001 of the demo
/// fleet with the token in `token`.
fn rotated_config(base_url: &str, token: &std::path::Path, round: usize) -> String {
    let mut text = format!(
        "api:\n  base_url: {base_url}\n  timeout: 2s\n  max_retries: 0\ncollectors:\n  delivery_account:\n    interval: 1s\n    max_age: 30s\ntenants:\n"
    );
    for i in 0..ROTATED {
        text.push_str(&format!(
            "  - name: c{round}-{i}\n    token_file: {}\n    collectors:\n      delivery_account:\n        accounts: [1001]\n",
            token.display()
        ));
    }
    text
}

#[tokio::test]
async fn tenants_rotated_out_by_reloads_leave_no_series_and_memory_stays_flat() {
    use crate::helpers::{Running, TOKEN, get_text, memory_kib, spawn_sim};
    let sim = spawn_sim().await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let config = dir.path().join("config.yml");
    std::fs::write(&config, rotated_config(&sim.url, &token, 0)).unwrap();
    let file_flag = format!("--config.file={}", config.display());
    let exporter = Running::start(&[
        &file_flag,
        "--web.listen-address=127.0.0.1:0",
        "--web.enable-lifecycle",
    ]);
    let base = exporter.base_url().await;
    let client = reqwest::Client::new();
    let metrics = format!("{base}/metrics");
    let scrape = || get_text(&metrics, "text/plain");
    let mut settled = 0;
    for round in 0..=ROTATIONS {
        if round > 0 {
            std::fs::write(&config, rotated_config(&sim.url, &token, round)).unwrap();
            let reload = client
                .post(format!("{base}/-/reload"))
                .send()
                .await
                .unwrap();
            assert_eq!(reload.status(), 200, "{:?}", reload.text().await);
        }
        let body = wait_for(
            "every tenant of the round polled, none of the last left",
            || {
                let scrape = &scrape;
                async move {
                    let body = scrape().await;
                    let polled = (0..ROTATED)
                        .all(|i| value(&body, &success(&format!("c{round}-{i}"))) == Some(1.0));
                    let gone = round
                        .checked_sub(1)
                        .is_none_or(|last| !body.contains(&format!("tenant=\"c{last}-")));
                    (polled && gone).then_some(body)
                }
            },
        )
        .await;
        // No series of any tenant rotated out, whatever its family.
        for old in 0..round {
            let label = format!("tenant=\"c{old}-");
            let left: Vec<&str> = body.lines().filter(|l| l.contains(&label)).collect();
            assert!(
                left.is_empty(),
                "round {round}: series of c{old}-*: {left:?}"
            );
        }
        // The tenants of the round have their per-tenant series (zero-initialised counters).
        assert!(
            body.contains(&format!(
                "mailhost_api_request_failures_total{{tenant=\"c{round}-0\",endpoint=\"delivery_account\",reason=\"timeout\"}}"
            )),
            "{body}"
        );
        let rss = memory_kib(exporter.pid(), "VmRSS");
        eprintln!("rotation {round}: VmRSS {rss} KiB");
        // The allocator settles over the first few rotations (about 10 MiB more than at
        // start, then flat): the baseline is the most seen over the first three.
        if (1..=3).contains(&round) {
            settled = settled.max(rss);
        }
        if round == ROTATIONS {
            // 360 tenants came and went after the third rotation. The series are checked
            // above; a tenant's state left behind (its pacer, breakers, collector states: tens
            // of KiB) would add well over 8 MiB.
            assert!(
                rss <= settled + 8 * 1024,
                "VmRSS {rss} KiB after {ROTATIONS} rotations, at most {settled} KiB over the first three"
            );
        }
    }
}

/// Reloads of the late-probe test: each removes the tenant strangers are probing.
const LEAVING: usize = 16;
/// Probes in flight at once, each of a made-up id of the tenant about to leave.
const STRANGERS: usize = 8;

/// A config of tenant `kept` and tenant `p{round}`, both polling account 1001 of the demo fleet.
fn leaving_config(base_url: &str, token: &std::path::Path, round: usize) -> String {
    let tenant = |name: &str| {
        format!(
            "  - name: {name}\n    token_file: {}\n    collectors:\n      delivery_account:\n        accounts: [1001]\n",
            token.display()
        )
    };
    format!(
        "api:\n  base_url: {base_url}\n  timeout: 2s\n  max_retries: 0\ncollectors:\n  delivery_account:\n    interval: 1s\n    max_age: 30s\ntenants:\n{}{}",
        tenant("kept"),
        tenant(&format!("p{round}"))
    )
}

/// Issue 42: a stranger probing made-up ids of a tenant as a reload removes it. A probe that
/// resolved its tenant before the reload and is answered 404 after it (its first fetch came back
/// refused, or the refusal was cached) must not count `mailhost_probe_refused_total` for a
/// tenant whose series are gone: nothing would remove it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn probes_in_flight_as_their_tenant_leaves_bring_none_of_its_series_back() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

    use crate::helpers::{TOKEN, spawn_sim};
    let sim = spawn_sim().await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let config_file = dir.path().join("config.yml");
    let text = leaving_config(&sim.url, &token, 0);
    std::fs::write(&config_file, &text).unwrap();
    let web = mailhost_exporter::WebOptions {
        listen_addresses: vec!["127.0.0.1:0".to_owned()],
        enable_lifecycle: true,
        ..Default::default()
    };
    let app = mailhost_exporter::App::build(Config::parse_with_env(&text, &|_| None).unwrap(), web)
        .await
        .unwrap()
        .with_config_file(config_file.clone());
    let exporter = Arc::new(crate::helpers::Exporter::start(app));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    // Made-up ids: the demo fleet has no account above 1,000,000, so each is answered 404.
    let next_id = Arc::new(AtomicI32::new(5_000_000));
    for round in 0..LEAVING {
        let tenant = format!("p{round}");
        exporter
            .scrape_until(&format!("{tenant} polled"), |body| {
                value(body, &success(&tenant)) == Some(1.0)
            })
            .await;
        let (stop, refused) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicUsize::new(0)),
        );
        let strangers: Vec<_> = (0..STRANGERS)
            .map(|_| {
                let (stop, refused, next_id) = (stop.clone(), refused.clone(), next_id.clone());
                let (client, exporter, tenant) = (client.clone(), exporter.clone(), tenant.clone());
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let id = next_id.fetch_add(1, Ordering::Relaxed);
                        let url = exporter.url(&format!("/probe?tenant={tenant}&target={id}"));
                        // A short scrape timeout: a probe whose tenant left waits at most 0.5 s.
                        let answer = client
                            .get(url)
                            .header("X-Prometheus-Scrape-Timeout-Seconds", "1")
                            .send()
                            .await
                            .unwrap();
                        if answer.status() == 404 {
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        // The strangers' probes are answered 404: some are on their way as the reload comes.
        wait_for(&format!("a made-up id of {tenant} answered 404"), || {
            let refused = refused.clone();
            async move { (refused.load(Ordering::Relaxed) >= STRANGERS).then_some(()) }
        })
        .await;
        std::fs::write(&config_file, leaving_config(&sim.url, &token, round + 1)).unwrap();
        let reload = exporter.reload().await;
        assert_eq!(reload.status(), 200, "{:?}", reload.text().await);
        stop.store(true, Ordering::Relaxed);
        for s in strangers {
            s.await.unwrap();
        }
    }
    // Every probe has been answered: no series of a tenant that left may stay. Values go at the
    // next publication (bounded wait); a counter put back by a late probe would stay for ever.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let body = exporter.scrape().await;
        let left: Vec<&str> = body
            .lines()
            .filter(|l| (0..LEAVING).any(|r| l.contains(&format!("tenant=\"p{r}\""))))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "series of tenants that left, 10 s after the last reload: {left:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
