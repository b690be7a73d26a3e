//! Memory against hostile but valid answers: the exporter binary runs as a child process
//! against the simulator, and its peak resident memory (`VmHWM`) and log are checked while
//! every answer carries ~4 MB of tiny objects, or keys that change on every answer.

use mailhost_exporter::metrics::self_metrics::MAX_LOGGED_SHAPES;
use mailhost_sim::{Account, AccountSeed, BodyFault, FaultSpec, Route, SimConfig};

use crate::helpers::{Running, TOKEN, memory_kib, must, spawn_sim_with, value, wait_for};

/// Starts the exporter with `collectors` (YAML under `collectors:`) and `api` extra lines;
/// returns it with the base URL of its web server.
async fn exporter(
    dir: &tempfile::TempDir,
    sim_url: &str,
    api: &str,
    collectors: &str,
) -> (Running, String) {
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let config = dir.path().join("config.yml");
    let text = format!(
        "api:\n  base_url: {sim_url}\n  token_file: {}\n{api}collectors:\n{collectors}",
        token_file.display()
    );
    std::fs::write(&config, text).unwrap();
    let running = Running::start(&[
        &format!("--config.file={}", config.display()),
        "--web.listen-address=127.0.0.1:0",
    ]);
    let address = running
        .logged("mailhost_exporter listening", "address")
        .await;
    (running, format!("http://{address}/metrics"))
}

async fn scrape(url: &str) -> String {
    reqwest::get(url).await.unwrap().text().await.unwrap()
}

// Several threads: the simulator in this process writes 4 MB answers while the child reads them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_concurrent_answers_of_four_megabytes_of_tiny_objects_stay_under_128_mib() {
    let mut config = SimConfig::demo(TOKEN);
    // Eight Delivery accounts: the demo's four and four more.
    for id in 2001..=2004 {
        config.accounts.push(AccountSeed::from(Account {
            id,
            username: format!("extra-{id}"),
            ..Account::default()
        }));
    }
    let sim = spawn_sim_with(config).await;
    let tiny = FaultSpec {
        body: Some(BodyFault::TinyObjects { bytes: 4_000_000 }),
        ..FaultSpec::default()
    };
    // Single-record answers and the migration statistics skip the tiny objects; the daily list
    // would keep them all, which is over the decoder's bound.
    for route in [
        Route::DeliveryAccountGet,
        Route::MigrationStats,
        Route::TracemailDaily,
    ] {
        sim.sim.set_fault(route, tiny.clone());
    }
    let dir = tempfile::tempdir().unwrap();
    // Generous timeouts: the debug binary decodes 4 MB per call on a slow, shared machine.
    let (running, url) = exporter(
        &dir,
        &sim.url,
        "  timeout: 8s\n  concurrency: 8\n  max_retries: 0\n",
        "  delivery_account:\n    interval: 10s\n    deadline: 9s\n    accounts: [1001, 1002, 1003, 1004, 2001, 2002, 2003, 2004]\n  \
           migration:\n    interval: 10s\n    deadline: 9s\n    migrations: [MG00000001]\n  \
           tracemail_daily:\n    interval: 10s\n    deadline: 9s\n    accounts: [1001]\n",
    )
    .await;
    let accounts = [1001, 1002, 1003, 1004, 2001, 2002, 2003, 2004];
    let body = wait_for("every target's outcome", || async {
        let body = scrape(&url).await;
        let values = accounts.iter().all(|id| {
            value(
                &body,
                &format!("mailhost_delivery_remaining_messages{{account_id=\"{id}\"}}"),
            )
            .is_some()
        });
        let migration = value(
            &body,
            "mailhost_migration_messages_migrated{migration=\"MG00000001\"}",
        )
        .is_some();
        let daily = value(
            &body,
            "mailhost_api_request_failures_total{endpoint=\"tracemail_daily\",reason=\"decode\"}",
        )
        .is_some_and(|n| n >= 1.0);
        (values && migration && daily).then_some(body)
    })
    .await;
    assert_eq!(
        must(
            &body,
            "mailhost_delivery_remaining_messages{account_id=\"2001\"}"
        ),
        1000.0,
        "the real record is read past the tiny objects"
    );
    let hwm = memory_kib(running.pid(), "VmHWM");
    let rss = memory_kib(running.pid(), "VmRSS");
    eprintln!("exporter after 8 x 4 MB of tiny objects: VmHWM {hwm} KiB, VmRSS {rss} KiB");
    assert!(
        hwm < 128 * 1024,
        "peak resident memory {hwm} KiB is over 128 MiB"
    );
    let log = running.log().join("\n");
    assert!(
        log.contains("more than 30000 values"),
        "the daily list failed on the value bound, and the log says which"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_whose_keys_change_every_time_log_a_bounded_number_of_warn_lines() {
    let sim = spawn_sim_with(SimConfig::demo(TOKEN)).await;
    // Each object of the dashboard record gets 100 fresh keys with unreadable values per answer.
    sim.sim.set_fault(
        Route::TracemailDashboard,
        FaultSpec {
            body: Some(BodyFault::ChangingKeys { count: 100 }),
            ..FaultSpec::default()
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let (running, url) = exporter(
        &dir,
        &sim.url,
        "  timeout: 5s\n",
        "  tracemail_dashboard:\n    interval: 1s\n    deadline: 900ms\n",
    )
    .await;
    let problems = "mailhost_parse_problems_total{endpoint=\"tracemail_dashboard\"}";
    // Enough answers that the fresh paths outnumber the bound several times over.
    let wanted = (MAX_LOGGED_SHAPES * 4) as f64;
    wait_for("many parse problems", || async {
        let body = scrape(&url).await;
        value(&body, problems)
            .is_some_and(|n| n >= wanted)
            .then_some(())
    })
    .await;
    // The suppression line follows the last warn line: wait until the log pipe has brought it.
    wait_for("the line saying new shapes are suppressed", || async {
        running
            .log()
            .iter()
            .any(|l| l.contains("new shapes are no longer logged at warn level"))
            .then_some(())
    })
    .await;
    let log = running.log();
    let shapes = log
        .iter()
        .filter(|l| l.contains("unexpected shape in upstream answer"))
        .count();
    let suppressed = log
        .iter()
        .filter(|l| l.contains("new shapes are no longer logged at warn level"))
        .count();
    assert!(
        shapes <= MAX_LOGGED_SHAPES,
        "{shapes} warn lines for parse problems, more than {MAX_LOGGED_SHAPES}"
    );
    assert_eq!(
        suppressed, 1,
        "one line says that new shapes are suppressed"
    );
    let longest = log.iter().map(String::len).max().unwrap_or(0);
    assert!(longest < 1000, "a log line of {longest} bytes");
}

/// The allocator's built-in options are the ones jemalloc reads at start, and the environment
/// still overrides them (docs/performance.md, "The allocator").
#[cfg(feature = "jemalloc")]
#[test]
fn the_binary_returns_freed_pages_at_once_unless_the_environment_says_otherwise() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mailhost_exporter"))
        .arg("--version")
        .env("_RJEM_MALLOC_CONF", "confirm_conf:true,dirty_decay_ms:5000")
        .output()
        .unwrap();
    assert!(out.status.success());
    let told = String::from_utf8_lossy(&out.stderr);
    let built_in = told
        .lines()
        .skip_while(|l| !l.contains("global variable malloc_conf)"))
        .take(3)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        built_in.contains("\"dirty_decay_ms:0,muzzy_decay_ms:0\"")
            && built_in.contains("Set conf value: dirty_decay_ms:0"),
        "{told}"
    );
    let env = told
        .lines()
        .skip_while(|l| !l.contains("environment variable MALLOC_CONF"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        env.contains("Set conf value: dirty_decay_ms:5000"),
        "{told}"
    );
}
