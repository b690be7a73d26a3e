//! The binary as an operator runs it: demo mode from the README, shutdown on SIGTERM, and the
//! token kept out of logs and responses at trace level.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mailhost_sim::{BodyFault, FaultSpec, Route, SimConfig};

use crate::helpers::{Running, spawn_sim_with, value, wait_for};

async fn get(url: &str) -> (u16, String, String) {
    let r = reqwest::get(url).await.unwrap();
    let status = r.status().as_u16();
    let headers = format!("{:?}", r.headers());
    (status, headers, r.text().await.unwrap())
}

#[tokio::test]
async fn demo_mode_serves_every_metric_and_the_numbers_move() {
    let mut demo = Running::start(&["--demo", "--web.listen-address=127.0.0.1:0"]);
    let url = demo.logged("open this URL", "url").await;
    let accounts = [1001, 1002, 1003, 1004];
    let names = [
        "mailhost_delivery_remaining_messages",
        "mailhost_delivery_plan_messages_limit",
        "mailhost_delivery_plan_messages_used",
        "mailhost_delivery_messages_sent",
        "mailhost_delivery_extra_messages",
        "mailhost_delivery_remaining_extra_messages",
        "mailhost_delivery_account_status",
        "mailhost_delivery_domains",
        "mailhost_delivery_ignore_suppression_list",
        "mailhost_delivery_plan_expiration_timestamp_seconds",
        "mailhost_delivery_next_renewal_timestamp_seconds",
        "mailhost_delivery_last_renewal_timestamp_seconds",
    ];
    let all_there = |b: &str| {
        accounts.iter().all(|id| {
            names
                .iter()
                .all(|n| value(b, &format!("{n}{{account_id=\"{id}\"}}")).is_some())
                && b.contains(&format!(
                    "mailhost_delivery_account_info{{account_id=\"{id}\""
                ))
        })
    };
    let first = wait_for("every metric for every demo account", || async {
        let (_, _, body) = get(&url).await;
        all_there(&body).then_some(body)
    })
    .await;
    let remaining = "mailhost_delivery_remaining_messages{account_id=\"1001\"}";
    let sent = "mailhost_delivery_messages_sent{account_id=\"1001\"}";
    let today = "mailhost_tracemail_current_day_messages{status=";
    let migrated = "mailhost_migration_messages_migrated{migration=\"MG00000001\"}";
    let filling = "mailhost_mailbox_quota_used_bytes{mailbox=\"EA00000001\"}";
    let later = wait_for(
        "quota, statistics, migration and mailbox to move",
        || async {
            let (_, _, body) = get(&url).await;
            // The daily counters move once a second daily run has seen the traffic grow.
            let moved = value(&body, sent) > value(&first, sent)
                && sum(&body, today) > sum(&first, today)
                && sum(&body, "mailhost_delivery_messages_total{") > 0.0
                && value(&body, migrated) > value(&first, migrated)
                && value(&body, filling) > value(&first, filling);
            moved.then_some(body)
        },
    )
    .await;
    assert!(
        value(&later, remaining) < value(&first, remaining),
        "remaining falls while sent rises"
    );
    // Every series family of the statistics, migration and mailbox collectors carries data.
    for family in later
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
    {
        let business = [
            "mailhost_tracemail_",
            "mailhost_migration_",
            "mailhost_mailbox_",
            "mailhost_delivery_",
        ]
        .iter()
        .any(|p| family.starts_with(p));
        // A flag that is rightly 0 for the whole demo fleet.
        let may_be_zero = [
            "mailhost_mailbox_password_expired",
            "mailhost_delivery_ignore_suppression_list",
        ]
        .contains(&family);
        if business && !may_be_zero {
            assert!(
                sum(&later, &format!("{family}{{")) > 0.0
                    || value(&later, family).is_some_and(|v| v > 0.0),
                "{family} is all zeros in demo mode"
            );
        }
    }
    assert_eq!(value(&later, "mailhost_up"), Some(1.0));
    docs_list_every_metric_on_metrics_and_nothing_else(&later);
    let landing_url = url.replace("/metrics", "/");
    let (_, _, landing) = get(&landing_url).await;
    assert!(
        landing.contains(
            "</code> (demo mode: the built-in simulator with a demo fleet; no real account is called)</p>"
        ),
        "{landing}"
    );
    assert!(
        landing.contains("<p>Polling <code>http://127.0.0.1:"),
        "{landing}"
    );
    let (elapsed, clean) = demo.terminate();
    assert!(clean, "exit status after SIGTERM");
    eprintln!("demo mode exited {elapsed:?} after SIGTERM");
}

// Several threads: the simulator runs in this process and must keep answering promptly while
// the exporter hammers it through every fault.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_never_appears_in_logs_or_responses_even_at_trace_level() {
    const SENTINEL: &str = "sentinel-Tok3n-9f2c41d7";
    let sim = spawn_sim_with(SimConfig::demo(SENTINEL)).await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{SENTINEL}\n")).unwrap();
    // Every collector of demo mode, an unknown account, the token from a file, and a breaker
    // that opens quickly so that path is walked too.
    let mut targets = SimConfig::demo(SENTINEL).demo_targets();
    targets.accounts.push(31337);
    let accounts: Vec<String> = targets.accounts.iter().map(|a| a.to_string()).collect();
    let mailboxes: Vec<String> = targets
        .mailboxes
        .iter()
        .map(|(d, m)| format!("{{domain: {d}, mailbox: {m}}}"))
        .collect();
    let every = "interval: 2s, deadline: 1500ms";
    let config_text = format!(
        "api:\n  base_url: {}\n  token_file: {}\n  timeout: 800ms\n  max_response_bytes: 1048576\n  max_retries: 1\n  retry_backoff: 50ms\n  circuit_breaker_failures: 3\n  circuit_breaker_cooldown: 1s\ncollectors:\n  delivery_account: {{{every}, accounts: [{a}]}}\n  tracemail_dashboard: {{{every}, views: [{{account: 1001}}]}}\n  tracemail_daily: {{{every}, accounts: [{a}]}}\n  migration: {{{every}, migrations: [{m}]}}\n  mailbox: {{{every}, mailboxes: [{b}]}}\n",
        sim.url,
        token_file.display(),
        a = accounts.join(", "),
        m = targets.migrations.join(", "),
        b = mailboxes.join(", "),
    );
    let config = dir.path().join("config.yml");
    std::fs::write(&config, &config_text).unwrap();
    let mut exporter = Running::start(&[
        &format!("--config.file={}", config.display()),
        "--web.listen-address=127.0.0.1:0",
        "--log.level=trace",
        "--web.enable-lifecycle",
    ]);
    let address = exporter
        .logged("mailhost_exporter listening", "address")
        .await;
    let base = format!("http://{address}");
    let mut seen = String::new();

    // Walk every error path: each fault on every route until its reason is counted.
    let f = FaultSpec::default;
    let status = |code| FaultSpec {
        error_rate: 1.0,
        error_status: Some(code),
        ..f()
    };
    let body = |b| FaultSpec {
        body: Some(b),
        ..f()
    };
    let faults = [
        ("server_error", status(500)),
        ("unauthorized", status(401)),
        ("forbidden", status(403)),
        ("not_found", status(404)),
        // A 429 pauses the whole token for its Retry-After: short, so the walk goes on.
        (
            "rate_limited",
            FaultSpec {
                rate_limit_rate: 1.0,
                retry_after_secs: 2,
                ..f()
            },
        ),
        (
            "rate_limited",
            FaultSpec {
                rate_limit_rate: 1.0,
                retry_after_omit: true,
                ..f()
            },
        ),
        (
            "timeout",
            FaultSpec {
                latency: Some(Duration::from_secs(1)),
                ..f()
            },
        ),
        (
            "timeout",
            FaultSpec {
                slow_body: Some(Duration::from_secs(1)),
                ..f()
            },
        ),
        (
            "connect",
            FaultSpec {
                reset_mid_body: true,
                ..f()
            },
        ),
        ("decode", body(BodyFault::NotJson)),
        ("decode", body(BodyFault::TruncatedJson)),
        ("decode", body(BodyFault::WrongShape)),
        ("decode", body(BodyFault::EmptyResources)),
        // Just over a 1 MiB limit: a bigger body only costs the simulator time.
        (
            "decode",
            FaultSpec {
                oversized_bytes: Some(1536 * 1024),
                ..body(BodyFault::Oversized)
            },
        ),
    ];
    let routes = [
        Route::DeliveryAccountGet,
        Route::TracemailDashboard,
        Route::TracemailDaily,
        Route::MigrationStats,
        Route::EmailAccountGet,
    ];
    // Every endpoint's count of a reason: a 429 on one route pauses the token for all of them,
    // so which endpoint meets a fault first is not known.
    let failures = |body: &str, reason: &str| {
        body.lines()
            .filter(|l| {
                l.starts_with("mailhost_api_request_failures_total{")
                    && l.contains(&format!("reason=\"{reason}\""))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    for (reason, fault) in faults {
        let (_, _, before) = get(&format!("{base}/metrics")).await;
        let before = failures(&before, reason);
        for route in routes {
            sim.sim.set_fault(route, fault.clone());
        }
        let started = std::time::Instant::now();
        loop {
            let (_, _, body) = get(&format!("{base}/metrics")).await;
            if failures(&body, reason) > before {
                break;
            }
            if started.elapsed() > crate::helpers::PATIENCE {
                let log = exporter.log();
                let tail: Vec<&String> = log
                    .iter()
                    .filter(|l| l.contains("collector=delivery_account") || l.contains("circuit"))
                    .collect();
                let tail = tail[tail.len().saturating_sub(40)..]
                    .iter()
                    .map(|l| l.as_str())
                    .collect::<Vec<_>>()
                    .join("\n");
                let failures: Vec<&str> = body
                    .lines()
                    .filter(|l| {
                        l.contains("failures_total{endpoint=\"delivery_account\"")
                            || l.contains("circuit_open{")
                    })
                    .collect();
                panic!(
                    "gave up waiting for {reason}\n{}\n{tail}",
                    failures.join("\n")
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (_, headers, landing) = get(&format!("{base}/")).await;
        seen.push_str(&headers);
        seen.push_str(&landing);
    }
    // The breaker: 500s until a circuit opens (a 429 never opens one; every other reason above
    // moved on at its first count).
    for route in routes {
        sim.sim.set_fault(route, status(500));
    }
    wait_for("a circuit to open", || async {
        let (_, _, body) = get(&format!("{base}/metrics")).await;
        body.lines()
            .any(|l| {
                l.starts_with("mailhost_api_open_circuits{")
                    && l.rsplit(' ').next().is_some_and(|v| v != "0")
            })
            .then_some(())
    })
    .await;
    // Answers we can read but whose values we cannot: each until ten more requests were
    // answered with it (the circuits let a request through every cooldown).
    let served = || sim.sim.all_hits().values().sum::<u64>();
    for b in [BodyFault::OutOfRange, BodyFault::HugeValues] {
        for route in routes {
            sim.sim.set_fault(route, body(b));
        }
        let before = served();
        wait_for("ten answers with values out of range", || async {
            (served() >= before + 10).then_some(())
        })
        .await;
    }
    sim.sim.clear_faults();

    // The reload paths: a bad file (refused, its error answered over HTTP), then a good one.
    std::fs::write(&config, config_text.replace("timeout:", "timeuot:")).unwrap();
    let r = reqwest::Client::new()
        .post(format!("{base}/-/reload"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 500);
    seen.push_str(&r.text().await.unwrap());
    std::fs::write(&config, &config_text).unwrap();
    let r = reqwest::Client::new()
        .post(format!("{base}/-/reload"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    for path in ["/metrics", "/", "/-/healthy", "/-/ready", "/no-such-page"] {
        let (_, headers, body) = get(&format!("{base}{path}")).await;
        seen.push_str(&headers);
        seen.push_str(&body);
    }
    // Once the faults are gone, the unknown account shows its own reason on the landing page.
    wait_for("not_found on the landing page", || async {
        let (_, _, landing) = get(&format!("{base}/")).await;
        landing.contains("not_found: HTTP 404").then_some(())
    })
    .await;
    let (_, clean) = exporter.terminate();
    assert!(clean);

    // The config check, on a good and on a bad file, says nothing of the token either.
    for text in [
        config_text.clone(),
        config_text.replace("timeout:", "timeuot:"),
    ] {
        std::fs::write(&config, text).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_mailhost_exporter"))
            .args([
                "--config.check",
                &format!("--config.file={}", config.display()),
            ])
            .output()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&out.stdout));
        seen.push_str(&String::from_utf8_lossy(&out.stderr));
    }

    let log = exporter.log().join("\n");
    assert!(
        log.contains("level=trace"),
        "trace logging was on, so the check means something"
    );
    for reason in [
        "timeout",
        "server_error",
        "unauthorized",
        "forbidden",
        "not_found",
        "rate_limited",
        "connect",
        "decode",
    ] {
        assert!(
            log.contains(&format!("reason={reason}")),
            "the {reason} path was walked and logged"
        );
    }
    assert!(
        log.contains("targets with an open circuit breaker changed"),
        "the breaker path was walked"
    );
    assert!(
        log.contains("configuration reload refused"),
        "the reload error path was walked"
    );
    assert!(!log.contains(SENTINEL), "the token leaked into the log");
    assert!(
        !seen.contains(SENTINEL),
        "the token leaked into an HTTP response or the config check"
    );
}

#[tokio::test]
async fn a_bad_config_file_is_refused_at_start_with_its_reason() {
    let out = Command::new(env!("CARGO_BIN_EXE_mailhost_exporter"))
        .args([
            "--config.file=tests/fixtures/config/unknown-key.yml",
            "--web.listen-address=127.0.0.1:0",
        ])
        .env("MAILHOST_API_TOKEN", "t")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown field `acounts`"), "{stderr}");
}

#[test]
fn a_port_in_use_is_reported_once_with_the_flag_to_change() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_mailhost_exporter"))
        .args(["--demo", &format!("--web.listen-address={address}")])
        .env_remove("MAILHOST_API_TOKEN")
        .output()
        .unwrap();
    drop(taken);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let message = format!(
        "cannot listen on {address}: the port is already in use, perhaps by another mailhost_exporter (stop it, or choose another --web.listen-address)"
    );
    assert_eq!(stderr.matches(&message).count(), 1, "{stderr}");
    assert_eq!(stderr.matches("cannot listen").count(), 1, "{stderr}");
}

#[test]
fn help_says_where_the_token_comes_from() {
    let out = Command::new(env!("CARGO_BIN_EXE_mailhost_exporter"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("The API token: the file named by api.token_file in the config, or else the environment\nvariable MAILHOST_API_TOKEN."),
        "{help}"
    );
}

/// A plain `cargo test` on a machine without promtool still passes, and says what it did not
/// check: the report goes past libtest's capture of a passing test's output.
#[test]
fn a_missing_tool_is_reported_through_the_test_harness_with_the_checks_it_skipped() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "rules::promtool_accepts_the_shipped_prometheus_config",
            "--exact",
            "--include-ignored",
        ])
        .env("PATH", "")
        .env_remove("CI")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("test result: ok. 1 passed"), "{stdout}");
    // Once, naming every check that needs the tool, however many there are.
    let (_, install, checks) = crate::helpers::NEEDS_TOOLS
        .iter()
        .find(|(t, _, _)| *t == "promtool")
        .unwrap();
    assert_eq!(
        stderr,
        crate::helpers::skip_report("promtool", install, checks)
    );
    assert!(
        stderr.starts_with(&format!(
            "SKIPPED: promtool is not installed (apt-get install prometheus); the checks that \
             need it pass without checking anything ({}): process::the_readme_promtool_commands_succeed, ",
            checks.len()
        )),
        "{stderr}"
    );
    assert!(
        stderr.ends_with(". CI=true makes a missing tool an error.\n"),
        "{stderr}"
    );
}

#[test]
fn in_ci_a_missing_tool_fails_its_check() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "container::hadolint_finds_nothing_in_the_dockerfile",
            "--exact",
            "--include-ignored",
        ])
        .env("PATH", "")
        .env("CI", "true")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stdout.contains("hadolint is required when CI=true"),
        "{stdout}"
    );
}

/// The attribute that puts a test in the end-to-end tier.
const END_TO_END: &str = "#[ignore = \"end-to-end tier: cargo test --locked -- --ignored\"]";

/// Every check the skip report names is a test of the end-to-end tier, and the end-to-end
/// tier holds nothing else: the README's `cargo test --locked` runs every test that needs no
/// outside tool, and `cargo test --locked -- --ignored` every one that does.
#[test]
fn every_check_in_the_skip_report_exists_and_the_end_to_end_tier_holds_exactly_them() {
    let mut needing: Vec<&str> = crate::helpers::NEEDS_TOOLS
        .iter()
        .flat_map(|(_, _, checks)| checks.iter().copied())
        .collect();
    needing.sort_unstable();
    needing.dedup();
    for check in &needing {
        // A test of a nested module (`properties::all_collectors::...`) is in its folder.
        let (module, name) = check.rsplit_once("::").unwrap();
        let source =
            std::fs::read_to_string(format!("tests/{}.rs", module.replace("::", "/"))).unwrap();
        let head = source
            .find(&format!("fn {name}()"))
            .unwrap_or_else(|| panic!("{check} is in helpers::NEEDS_TOOLS but is no test"));
        // The attribute sits among the lines just above the function's.
        let line = source[..head].rfind('\n').map_or(0, |i| i + 1);
        let above: Vec<&str> = source[..line].lines().rev().take(3).collect();
        assert!(
            above.iter().any(|l| l.trim() == END_TO_END),
            "{check} needs a tool: mark it {END_TO_END}"
        );
    }
    let mut tiered = Vec::new();
    for file in test_sources(Path::new("tests")) {
        let source = std::fs::read_to_string(&file).unwrap();
        let module = file
            .strip_prefix("tests")
            .unwrap()
            .with_extension("")
            .to_string_lossy()
            .trim_start_matches('/')
            .replace('/', "::");
        let lines: Vec<&str> = source.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.trim() != END_TO_END {
                continue;
            }
            let name = lines[i + 1..]
                .iter()
                .find_map(|l| l.split("fn ").nth(1)?.split('(').next())
                .unwrap_or_else(|| panic!("{}: {END_TO_END} on no function", file.display()));
            tiered.push(format!("{module}::{name}"));
        }
    }
    tiered.sort_unstable();
    assert_eq!(
        tiered, needing,
        "the end-to-end tier is the tests that need a tool (helpers::NEEDS_TOOLS), no more"
    );
}

/// The Rust sources under `dir`, folders included.
fn test_sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(test_sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// The README's promtool commands, run as a user copies them: the rules, the Prometheus config
/// (with the rule files it loads) and the rules' unit tests.
#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn the_readme_promtool_commands_succeed() {
    let Some(promtool) = crate::helpers::promtool() else {
        return;
    };
    let readme = std::fs::read_to_string(crate::helpers::repo_root().join("README.md")).unwrap();
    let commands: Vec<&str> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("promtool "))
        .collect();
    assert_eq!(commands.len(), 3, "{commands:?}");
    for command in commands {
        let out = Command::new(promtool)
            .args(command.split_whitespace())
            .current_dir(crate::helpers::repo_root())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "promtool {command}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The sum of every sample whose line starts with `prefix`.
fn sum(body: &str, prefix: &str) -> f64 {
    body.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `docs/metrics.md` names exactly the families demo mode shows (first column of its tables).
fn docs_list_every_metric_on_metrics_and_nothing_else(body: &str) {
    use std::collections::BTreeSet;
    let shown: BTreeSet<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let docs =
        std::fs::read_to_string(crate::helpers::repo_root().join("docs/metrics.md")).unwrap();
    let documented: BTreeSet<&str> = docs
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .filter(|n| n.starts_with("mailhost_") || n.starts_with("process_"))
        .collect();
    let undocumented: Vec<_> = shown.difference(&documented).collect();
    let never_shown: Vec<_> = documented
        .difference(&shown)
        .filter(|n| !crate::helpers::ONLY_WHILE_FAILING.contains(n))
        .collect();
    assert!(
        undocumented.is_empty(),
        "on /metrics but not in docs/metrics.md: {undocumented:?}"
    );
    assert!(
        never_shown.is_empty(),
        "in docs/metrics.md but never on /metrics in demo mode: {never_shown:?}"
    );
}

/// `--log.target-failures`: `target` writes a warn line for each failing target, `summary` one
/// per reason naming a few, `none` no warn line at all (the debug lines stay).
#[tokio::test]
async fn the_target_failure_knob_sets_how_loud_failing_targets_are_in_the_log() {
    // Nothing listens on the port of a listener that was bound and dropped: every call fails.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "knob-test-token").unwrap();
    let config = dir.path().join("config.yml");
    std::fs::write(
        &config,
        format!(
            "api:\n  base_url: http://127.0.0.1:{port}\n  token_file: {}\n  max_retries: 0\ncollectors:\n  delivery_account: {{interval: 1s, accounts: [1001, 1002, 1003]}}\n",
            token_file.display()
        ),
    )
    .unwrap();
    let start = |mode: &str| {
        Running::start(&[
            &format!("--config.file={}", config.display()),
            "--web.listen-address=127.0.0.1:0",
            &format!("--log.target-failures={mode}"),
        ])
    };
    let warn_lines = |log: &[String], msg: &str| {
        log.iter()
            .filter(|l| l.contains("level=warn") && l.contains(msg))
            .cloned()
            .collect::<Vec<_>>()
    };

    // One line per target, each naming it.
    let mut loud = start("target");
    wait_for("a warn line for each target", || async {
        let lines = warn_lines(&loud.log(), "target failed");
        ["1001", "1002", "1003"]
            .iter()
            .all(|id| lines.iter().any(|l| l.contains(&format!("target={id}"))))
            .then_some(())
    })
    .await;
    assert!(warn_lines(&loud.log(), "targets failed").is_empty());
    loud.terminate();

    // One summary line naming the reason, no line per target at warn level.
    let mut summary = start("summary");
    let reason = summary.logged("targets failed", "reason").await;
    assert_eq!(reason, "connect");
    assert!(warn_lines(&summary.log(), "target failed").is_empty());
    summary.terminate();

    // Nothing at warn level about targets, over several failing runs.
    let mut quiet = start("none");
    let address = quiet.logged("mailhost_exporter listening", "address").await;
    wait_for("three failed runs of every target", || async {
        let body = reqwest::get(format!("http://{address}/metrics"))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        let failed = body
            .lines()
            .filter(|l| l.starts_with("mailhost_api_request_failures_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>();
        (failed >= 9.0).then_some(())
    })
    .await;
    let log = quiet.log();
    assert!(
        warn_lines(&log, "target failed").is_empty()
            && warn_lines(&log, "targets failed").is_empty(),
        "{log:?}"
    );
    quiet.terminate();

    // A bad value names the flag and its choices.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mailhost_exporter"))
        .args(["--log.target-failures=loud", "--demo"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--log.target-failures") && err.contains("summary"),
        "{err}"
    );
}

/// Demo mode's `/metrics` ends with the `process_*` series of the exporter's own process,
/// plausible against what `/proc` says of it; `--web.disable-exporter-metrics` leaves them out.
#[tokio::test]
async fn the_process_series_are_on_metrics_and_the_flag_leaves_them_out() {
    let mut with = Running::start(&["--demo", "--web.listen-address=127.0.0.1:0"]);
    let url = with.logged("open this URL", "url").await;
    let (_, _, body) = get(&url).await;
    let value = |name: &str| {
        crate::helpers::value(&body, name).unwrap_or_else(|| panic!("no {name} in:\n{body}"))
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let started = value("process_start_time_seconds");
    assert!(started <= now + 1.0 && started > now - 600.0, "{started}");
    let rss = value("process_resident_memory_bytes");
    assert!(rss > 1_000_000.0 && rss <= value("process_virtual_memory_bytes"));
    let kib = crate::helpers::memory_kib(with.pid(), "VmHWM") as f64;
    assert!(
        rss <= kib * 1024.0 * 1.5,
        "{rss} against a peak of {kib} KiB"
    );
    assert!(value("process_open_fds") >= 3.0);
    assert!(value("process_open_fds") <= value("process_max_fds"));
    assert!(value("process_threads") >= 1.0);
    assert!(value("process_cpu_seconds_total") >= 0.0);
    // They come before the exporter's self-metrics, the last series of a scrape.
    assert!(body.find("process_threads").unwrap() < body.find("mailhost_build_info").unwrap());
    with.terminate();

    let mut without = Running::start(&[
        "--demo",
        "--web.listen-address=127.0.0.1:0",
        "--web.disable-exporter-metrics",
    ]);
    let url = without.logged("open this URL", "url").await;
    let (_, _, body) = get(&url).await;
    assert!(body.contains("mailhost_build_info"));
    assert!(!body.contains("process_"), "{body}");
    without.terminate();
}

/// Whether `url` answers 200 with the exporter's build series.
async fn serves_metrics(url: &str) -> Option<()> {
    let response = reqwest::get(url).await.ok()?;
    let ok = response.status() == 200;
    (ok && response.text().await.ok()?.contains("mailhost_build_info")).then_some(())
}

/// `--web.listen-address` given twice: both addresses serve. `--web.systemd-socket` under
/// Debian's `systemd-socket-activate`: the exporter serves on the socket it is handed (the
/// first request is what starts it); without a socket the flag is refused with the fix.
#[tokio::test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
async fn it_listens_on_every_address_given_and_on_the_socket_systemd_passes() {
    let ports = [crate::helpers::free_port(), crate::helpers::free_port()];
    let flags: Vec<String> = ports
        .iter()
        .map(|p| format!("--web.listen-address=127.0.0.1:{p}"))
        .collect();
    let mut two = Running::start(&["--demo", &flags[0], &flags[1]]);
    for port in ports {
        let url = format!("http://127.0.0.1:{port}/metrics");
        wait_for(&url, || serves_metrics(&url)).await;
    }
    two.terminate();

    let mut refused = Command::new(env!("CARGO_BIN_EXE_mailhost_exporter"))
        .args(["--demo", "--web.systemd-socket"])
        .env_remove("LISTEN_FDS")
        .env_remove("LISTEN_PID")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = refused.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut refused.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success());
    assert!(
        stderr.contains("start the exporter from a .socket unit"),
        "{stderr}"
    );

    let Some(activate) = crate::helpers::tool("systemd-socket-activate", "apt-get install systemd")
    else {
        return;
    };
    let port = crate::helpers::free_port();
    let mut command = Command::new(activate);
    command.arg(format!("--listen=127.0.0.1:{port}")).args([
        env!("CARGO_BIN_EXE_mailhost_exporter"),
        "--demo",
        "--web.systemd-socket",
    ]);
    let mut activated = Running::spawn(command);
    let url = format!("http://127.0.0.1:{port}/metrics");
    wait_for(&url, || serves_metrics(&url)).await;
    activated.terminate();
}

/// `--collector.NAME` and `--no-collector.NAME` switch the collectors of the config file: at
/// `--config.check`, at start and again on every reload; the two of one collector exclude each
/// other, switching everything off is refused, and demo mode refuses them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collector_flags_switch_the_configs_collectors_at_start_and_on_reload() {
    let sim = spawn_sim_with(SimConfig::demo(crate::helpers::TOKEN)).await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, crate::helpers::TOKEN).unwrap();
    let config = dir.path().join("config.yml");
    std::fs::write(
        &config,
        format!(
            "api:\n  base_url: {}\n  token_file: {}\ncollectors:\n  delivery_account: {{interval: 1s, accounts: [1001]}}\n  tracemail_daily: {{interval: 1s, enabled: false, accounts: [1001]}}\n",
            sim.url,
            token_file.display()
        ),
    )
    .unwrap();
    let file = format!("--config.file={}", config.display());
    let check = |flags: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_mailhost_exporter"))
            .args([file.as_str(), "--config.check"])
            .args(flags)
            .output()
            .unwrap();
        (
            out.status.code(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    assert_eq!(check(&["--collector.tracemail_daily"]).0, Some(0));
    let (code, said) = check(&["--no-collector.delivery_account"]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("no collector is enabled"), "{said}");
    let (code, said) = check(&["--collector.mailbox", "--no-collector.mailbox"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("cannot be used with"), "{said}");
    let out = Command::new(env!("CARGO_BIN_EXE_mailhost_exporter"))
        .args(["--demo", "--no-collector.mailbox"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("demo mode runs every collector"));

    // Switched on over `enabled: false`, the other switched off: only the daily statistics run,
    // and a reload reads the file with the same flags.
    let port = crate::helpers::free_port();
    let listen = format!("--web.listen-address=127.0.0.1:{port}");
    let mut running = Running::start(&[
        &file,
        &listen,
        "--web.enable-lifecycle",
        "--collector.tracemail_daily",
        "--no-collector.delivery_account",
    ]);
    let url = format!("http://127.0.0.1:{port}/metrics");
    let only_daily = |body: &str| {
        value(
            body,
            "mailhost_collector_success{collector=\"tracemail_daily\"}",
        ) == Some(1.0)
            && !body.contains("collector=\"delivery_account\"")
    };
    wait_for("the daily statistics alone", || async {
        let body = reqwest::get(&url).await.ok()?.text().await.ok()?;
        only_daily(&body).then_some(())
    })
    .await;
    let reloaded = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/-/reload"))
        .send()
        .await
        .unwrap();
    assert_eq!(reloaded.status(), 200);
    let body = reqwest::get(&url).await.unwrap().text().await.unwrap();
    assert!(only_daily(&body), "{body}");
    running.terminate();
}
