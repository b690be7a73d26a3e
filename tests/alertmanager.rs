//! The Alertmanager example (`examples/alertmanager/`): amtool accepts it, every label set
//! reaches the receiver it must, each template renders, and it routes and inhibits on what the
//! mixin's alerts carry. End to end on loopback, simulator -> exporter -> Prometheus ->
//! Alertmanager -> a webhook receiver: one tenant's account heading for exhaustion notifies that
//! tenant's receiver alone, resolves after a top-up, and stopping the exporter pages operations
//! while the account's alert is held back; the same for a fleet scraped through `/probe` and `/sd`
//! as `examples/prometheus/fleet.yml` says.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mailhost_exporter::config::Config;
use mailhost_sim::{Account, AccountSeed, ManagementToken, SimConfig};
use serde_json::Value as Json;
use serde_yaml_ng::Value;

use crate::helpers::{
    Running, free_port, get_json, outcome, repo_root, spawn_exporter, spawn_prometheus,
    spawn_sim_with, tool, wait_for,
};

const AMTOOL: (&str, &str) = ("amtool", "apt-get install prometheus-alertmanager");
const ALERTMANAGER: (&str, &str) = (
    "prometheus-alertmanager",
    "apt-get install prometheus-alertmanager",
);
const EXAMPLE: &str = "examples/alertmanager";

fn example() -> std::path::PathBuf {
    repo_root().join(EXAMPLE)
}

/// Runs amtool with `args` in the example's folder; its success and its output.
fn amtool(amtool: &str, args: &[&str], dir: &Path) -> (bool, String) {
    outcome(Command::new(amtool).args(args).current_dir(dir))
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn amtool_accepts_the_example_config_and_its_templates() {
    let Some(amtool_bin) = tool(AMTOOL.0, AMTOOL.1) else {
        return;
    };
    let (ok, out) = amtool(
        amtool_bin,
        &["check-config", "alertmanager.yml"],
        &example(),
    );
    assert!(ok, "{out}");
    assert!(out.contains("1 templates"), "{out}");
}

/// Label sets and the receiver each must reach: a tenant's alerts reach its receiver whatever
/// their severity, the exporter's own health reaches operations (paged when critical) whatever
/// the tenant, and alerts without a tenant fall back to operations.
const ROUTES: &[(&str, &[&str])] = &[
    (
        "customer-a",
        &[
            "tenant=customer-a",
            "severity=warning",
            "alertname=MailhostDeliveryQuotaExhaustionPredicted",
        ],
    ),
    (
        "customer-a",
        &[
            "tenant=customer-a",
            "severity=critical",
            "alertname=MailhostDeliveryQuotaCritical",
        ],
    ),
    (
        "customer-a",
        &[
            "tenant=customer-a",
            "severity=info",
            "alertname=MailhostDeliveryQuotaLow",
        ],
    ),
    (
        "customer-b",
        &[
            "tenant=customer-b",
            "severity=warning",
            "alertname=MailhostMailboxQuotaHigh",
        ],
    ),
    (
        "customer-b",
        &[
            "tenant=customer-b",
            "severity=critical",
            "alertname=MailhostDeliveryBounceRatioCritical",
        ],
    ),
    (
        "operations",
        &[
            "tenant=customer-a",
            "severity=warning",
            "alertname=MailhostCollectorFailing",
        ],
    ),
    (
        "operations",
        &[
            "tenant=customer-b",
            "severity=warning",
            "alertname=MailhostTenantFleetExceedsRateLimit",
        ],
    ),
    (
        "operations",
        &[
            "tenant=customer-a",
            "severity=warning",
            "alertname=MailhostCollectorRestarted",
            "collector=delivery_account",
        ],
    ),
    (
        "operations-pager",
        &["severity=critical", "alertname=MailhostExporterDown"],
    ),
    (
        "operations",
        &[
            "severity=warning",
            "alertname=MailhostDeliveryQuotaLow",
            "account_id=1001",
        ],
    ),
    (
        "operations-pager",
        &[
            "severity=critical",
            "alertname=MailhostDeliveryQuotaCritical",
            "account_id=1001",
        ],
    ),
    (
        "operations",
        &[
            "tenant=customer-unlisted",
            "severity=warning",
            "alertname=MailhostDeliveryQuotaLow",
        ],
    ),
];

fn route_test(amtool_bin: &str, receiver: &str, labels: &[&str]) -> (bool, String) {
    let mut args = vec!["config", "routes", "test", "--config.file=alertmanager.yml"];
    let verify = format!("--verify.receivers={receiver}");
    args.push(&verify);
    args.extend(labels);
    amtool(amtool_bin, &args, &example())
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn every_label_set_reaches_the_receiver_it_must() {
    let Some(amtool_bin) = tool(AMTOOL.0, AMTOOL.1) else {
        return;
    };
    for (receiver, labels) in ROUTES {
        let (ok, out) = route_test(amtool_bin, receiver, labels);
        assert!(ok, "{labels:?} should reach {receiver}: {out}");
    }
    // The check can fail: a tenant's alert does not reach the other tenant.
    let (ok, out) = route_test(amtool_bin, "customer-b", ROUTES[0].1);
    assert!(!ok, "{out}");
}

/// Template data shaped as Alertmanager gives it (and as its webhook posts it): one firing
/// quota alert with the annotations the mixin gives it, one resolved mailbox alert.
fn template_data() -> Json {
    serde_json::json!({
        "receiver": "customer-a",
        "status": "firing",
        "alerts": [
            {
                "status": "firing",
                "labels": {
                    "alertname": "MailhostDeliveryQuotaExhaustionPredicted",
                    "tenant": "customer-a",
                    "account_id": "11",
                    "severity": "warning",
                },
                "annotations": {
                    "summary": "A Delivery account will run out of messages before its quota renews.",
                    "description": "Delivery account 11 (exporter:9101) runs out of messages in 2h 10m at its current rate.",
                    "figure": "43210 messages left",
                    "time_left": "2h 10m 0s at the last hour's sending rate",
                    "quota_resets": "2026-12-01 00:00:00 +0000 UTC",
                    "runbook_url": "https://runbooks.example.com/mailhost#mailhostdeliveryquotaexhaustionpredicted",
                },
                "startsAt": "2026-11-25T16:00:00Z",
                "endsAt": "0001-01-01T00:00:00Z",
            },
            {
                "status": "resolved",
                "labels": {
                    "alertname": "MailhostMailboxQuotaHigh",
                    "tenant": "customer-a",
                    "mailbox": "EA00000003",
                    "severity": "warning",
                },
                "annotations": {
                    "summary": "A mailbox is nearly full.",
                    "description": "Mailbox EA00000003 (exporter:9101) uses 93% of its quota.",
                    "runbook_url": "https://runbooks.example.com/mailhost#mailhostmailboxquotahigh",
                },
                "startsAt": "2026-11-25T15:00:00Z",
                "endsAt": "2026-11-25T16:05:00Z",
            },
        ],
        "groupLabels": {"tenant": "customer-a"},
        "commonLabels": {"tenant": "customer-a", "severity": "warning"},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager.example.com",
    })
}

/// `amtool template render` of template `name` of the example with `data`.
fn render_template(amtool_bin: &str, name: &str, data: &Json) -> String {
    render_text(
        amtool_bin,
        &format!("{{{{ template \"{name}\" . }}}}"),
        data,
    )
}

/// `amtool template render` of `text` with the example's templates and `data`.
fn render_text(amtool_bin: &str, text: &str, data: &Json) -> String {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), data.to_string()).unwrap();
    let (ok, out) = amtool(
        amtool_bin,
        &[
            "template",
            "render",
            "--template.glob=templates/*.tmpl",
            &format!("--template.text={text}"),
            &format!("--template.data={}", file.path().display()),
        ],
        &example(),
    );
    assert!(ok, "amtool template render {text}: {out}");
    out
}

/// What a notification about an account's quota must give.
fn assert_gives_the_quota_facts(text: &str, account: &str) {
    for needle in [
        &format!("ccount {account}") as &str,
        "Figure: ",
        " messages left",
        "Time left: ",
        "Quota resets: ",
        "Runbook",
        "#mailhostdeliveryquotaexhaustionpredicted",
    ] {
        assert!(text.contains(needle), "no {needle:?} in:\n{text}");
    }
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn each_template_renders_the_account_figure_time_left_reset_and_runbook() {
    let Some(amtool_bin) = tool(AMTOOL.0, AMTOOL.1) else {
        return;
    };
    let source = std::fs::read_to_string(example().join("templates/mailhost.tmpl")).unwrap();
    let defined: BTreeSet<&str> = source
        .split("{{ define \"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .collect();
    assert_eq!(
        defined,
        BTreeSet::from([
            "mailhost.subject",
            "mailhost.alert.text",
            "mailhost.text",
            "mailhost.html"
        ])
    );
    let data = template_data();
    let subject = render_template(amtool_bin, "mailhost.subject", &data);
    assert!(
        subject.starts_with("[FIRING:1] ") && subject.contains("(customer-a)"),
        "{subject}"
    );
    let text = render_template(amtool_bin, "mailhost.text", &data);
    assert_gives_the_quota_facts(&text, "11");
    assert!(text.contains("Resolved (1):") && text.contains("Mailbox EA00000003"));
    let html = render_template(amtool_bin, "mailhost.html", &data);
    assert_gives_the_quota_facts(&html, "11");
    // The one-alert part, as the others call it.
    let one = render_text(
        amtool_bin,
        "{{ range .Alerts.Firing }}{{ template \"mailhost.alert.text\" . }}{{ end }}",
        &data,
    );
    assert_gives_the_quota_facts(&one, "11");
}

fn example_config() -> Value {
    serde_yaml_ng::from_str(&std::fs::read_to_string(example().join("alertmanager.yml")).unwrap())
        .unwrap()
}

/// The example names the mixin's alerts and labels: the exporter-health route lists exactly
/// the alerts that read no collector's targets, and each inhibition's source exists.
#[test]
fn the_example_routes_and_inhibits_on_what_the_mixins_alerts_carry() {
    let config = example_config();
    let alerts = crate::mixin::alert_rules(&repo_root());
    let names: BTreeSet<&str> = alerts.iter().filter_map(|a| a["alert"].as_str()).collect();
    let without_collector: BTreeSet<&str> = alerts
        .iter()
        .filter(|a| a["labels"]["collector"].is_null())
        .filter_map(|a| a["alert"].as_str())
        .collect();
    let health = config["route"]["routes"][0]["matchers"][0]
        .as_str()
        .unwrap();
    let listed: BTreeSet<&str> = health
        .strip_prefix("alertname=~\"")
        .and_then(|s| s.strip_suffix('"'))
        .unwrap()
        .split('|')
        .collect();
    assert_eq!(listed, without_collector);
    assert!(listed.is_subset(&names));
    let route_text = serde_yaml_ng::to_string(&config["inhibit_rules"]).unwrap();
    for source in ["MailhostExporterDown", "MailhostCollectorFailing"] {
        assert!(names.contains(source) && route_text.contains(source));
    }
    // Every per-account alert can be held back by a page on the same account.
    for alert in &alerts {
        let severity = alert["labels"]["severity"].as_str().unwrap();
        assert!(["critical", "warning", "info"].contains(&severity));
    }
    let group_by: Vec<&str> = config["route"]["group_by"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(group_by, ["tenant", "alertname"]);
}

/// Notifications a webhook receiver got: (receiver, payload) in arrival order.
type Received = Arc<Mutex<Vec<(String, Json)>>>;

/// A webhook receiver on loopback: POST /hooks/<receiver> records the payload.
async fn spawn_receiver() -> (String, Received, tokio::task::JoinHandle<()>) {
    let got: Received = Arc::default();
    let app = axum::Router::new()
        .route(
            "/hooks/{receiver}",
            axum::routing::post(
                |axum::extract::State(got): axum::extract::State<Received>,
                 axum::extract::Path(receiver): axum::extract::Path<String>,
                 axum::Json(body): axum::Json<Json>| async move {
                    got.lock().unwrap().push((receiver, body));
                },
            ),
        )
        .with_state(got.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (url, got, task)
}

/// The example config as the end-to-end test runs it: each receiver posts to the test's
/// webhook at /hooks/<name> instead of mailing or calling out, and the timers are seconds.
fn example_for_test(webhook: &str) -> String {
    fn timers(route: &mut Value) {
        let map = route.as_mapping_mut().unwrap();
        for (key, value) in [
            ("group_wait", "1s"),
            ("group_interval", "2s"),
            ("repeat_interval", "1h"),
        ] {
            if map.contains_key(key) {
                map.insert(key.into(), value.into());
            }
        }
        if let Some(routes) = map.get_mut("routes").and_then(|r| r.as_sequence_mut()) {
            routes.iter_mut().for_each(timers);
        }
    }
    let mut config = example_config();
    timers(&mut config["route"]);
    for receiver in config["receivers"].as_sequence_mut().unwrap() {
        let name = receiver["name"].as_str().unwrap().to_owned();
        let hook: Value = serde_yaml_ng::from_str(&format!(
            "name: {name}\nwebhook_configs:\n  - url: {webhook}/hooks/{name}\n    send_resolved: true\n"
        ))
        .unwrap();
        *receiver = hook;
    }
    config
        .as_mapping_mut()
        .unwrap()
        .remove("global")
        .expect("the example has global settings");
    serde_yaml_ng::to_string(&config).unwrap()
}

/// Alertmanager on loopback with `config`, the example's templates beside it, clustering off.
fn spawn_alertmanager(binary: &str, config: &str) -> (String, Running, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("alertmanager.yml"), config).unwrap();
    std::fs::create_dir(dir.path().join("templates")).unwrap();
    std::fs::copy(
        example().join("templates/mailhost.tmpl"),
        dir.path().join("templates/mailhost.tmpl"),
    )
    .unwrap();
    let port = free_port();
    let mut command = Command::new(binary);
    command
        .arg(format!(
            "--config.file={}",
            dir.path().join("alertmanager.yml").display()
        ))
        .arg(format!(
            "--storage.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--cluster.listen-address=");
    (
        format!("http://127.0.0.1:{port}"),
        Running::spawn(command),
        dir,
    )
}

/// The alerts Alertmanager holds for `alertname`, as its API gives them.
async fn alertmanager_alerts(url: &str, alertname: &str) -> Option<Vec<Json>> {
    let body = get_json(
        url,
        "/api/v2/alerts",
        &[("filter", format!("alertname=\"{alertname}\""))],
    )
    .await?;
    body.as_array().cloned()
}

/// The notifications received so far, as (receiver, status, alertname, account) per alert.
fn notifications(got: &Received) -> Vec<(String, String, String, String)> {
    got.lock()
        .unwrap()
        .iter()
        .map(|(receiver, body)| {
            let label = |name: &str| body["commonLabels"][name].as_str().unwrap_or("").to_owned();
            let accounts: Vec<&str> = body["alerts"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|a| a["labels"]["account_id"].as_str())
                .collect();
            (
                receiver.clone(),
                body["status"].as_str().unwrap().to_owned(),
                label("alertname"),
                accounts.join(","),
            )
        })
        .collect()
}

async fn wait_for_notifications(got: &Received, what: &str, count: usize) {
    wait_for(what, || async {
        (got.lock().unwrap().len() >= count).then_some(())
    })
    .await;
}

const TENANT_A_ACCOUNT: i32 = 11;
const TENANT_B_ACCOUNT: i32 = 21;

fn two_tenants() -> SimConfig {
    let account = |id: i32| AccountSeed {
        account: Account {
            id,
            plan_messages_limit: 1_000_000,
            plan_messages_used: 500_000,
            ..Account::default()
        },
        allow_nets: vec!["192.0.2.0/24".to_owned()],
        plan_expires_in: Duration::from_secs(30 * 86_400),
        ..AccountSeed::default()
    };
    // Customer B's account sends 5 messages a second with a hundred million left: 231 days,
    // past its renewal and past the forecast's horizon of 10 days.
    let mut healthy = account(TENANT_B_ACCOUNT);
    healthy.plan_messages_limit = 100_000_000;
    healthy.plan_messages_used = 0;
    SimConfig {
        management_tokens: vec![
            ManagementToken {
                token: "customer-a-token".to_owned(),
                accounts: Some(vec![TENANT_A_ACCOUNT]),
            },
            ManagementToken {
                token: "customer-b-token".to_owned(),
                accounts: Some(vec![TENANT_B_ACCOUNT]),
            },
        ],
        accounts: vec![account(TENANT_A_ACCOUNT), healthy],
        ..SimConfig::default()
    }
}

/// The whole path on loopback. Customer A's account sends 500 messages a second with 500,000
/// left (empty in about 17 minutes, its plan renews in 30 days): its receiver alone gets the
/// exhaustion warning, with the facts the templates give; a top-up resolves it. Drained again,
/// it fires again; then the exporter stops: operations is paged with MailhostExporterDown and
/// the account's alert, kept firing by keep_firing_for, is held back (neither repeated nor
/// resolved to the customer). Customer B's healthy account never notifies anyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
async fn a_tenant_heading_for_exhaustion_notifies_its_receiver_alone_and_exporter_down_inhibits_it()
{
    exhaustion_reaches_its_tenant_alone(Scrape::Metrics).await;
}

/// The same path for a reseller's fleet, scraped as `examples/prometheus/fleet.yml` says: each
/// account its own `/probe` target from `/sd`, the exporter's `/metrics` for its health. The
/// shipped rules select the probe targets' series, each account alerts once (not once per job),
/// and the probe target's own MailhostExporterDown holds back its account's alert.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
async fn a_fleet_scraped_through_probe_and_sd_alerts_once_per_account_and_is_inhibited_per_account()
{
    exhaustion_reaches_its_tenant_alone(Scrape::Fleet).await;
}

/// How Prometheus scrapes the exporter in the end-to-end test.
#[derive(Clone, Copy, PartialEq)]
enum Scrape {
    /// One job on `/metrics`, as `prometheus/prometheus.yml`.
    Metrics,
    /// The jobs of `examples/prometheus/fleet.yml`.
    Fleet,
}

/// The scrape jobs of the end-to-end test, for the exporter at `addr`.
fn scrape_configs(scrape: Scrape, addr: &str) -> String {
    match scrape {
        Scrape::Metrics => format!(
            "scrape_configs:\n  - job_name: mailhost\n    static_configs:\n      - targets: [\"{addr}\"]\n"
        ),
        Scrape::Fleet => {
            let example =
                std::fs::read_to_string(repo_root().join("examples/prometheus/fleet.yml")).unwrap();
            assert!(
                example.contains("localhost:19587"),
                "the example's address moved"
            );
            example.replace("localhost:19587", addr)
        }
    }
}

/// The tenants guide shows the fleet's scrape jobs whole, as a user copies them: the file this
/// end-to-end test runs.
#[test]
fn the_tenants_guide_quotes_the_fleet_example_verbatim() {
    let root = repo_root();
    let guide = std::fs::read_to_string(root.join("docs/tenants.md")).unwrap();
    let example = std::fs::read_to_string(root.join("examples/prometheus/fleet.yml")).unwrap();
    assert!(
        guide.contains(&format!("```yaml\n{example}```")),
        "docs/tenants.md does not quote examples/prometheus/fleet.yml as it is"
    );
}

async fn exhaustion_reaches_its_tenant_alone(scrape: Scrape) {
    let Some(prometheus) = tool("prometheus", "apt-get install prometheus") else {
        return;
    };
    let Some(alertmanager) = tool(ALERTMANAGER.0, ALERTMANAGER.1) else {
        return;
    };
    let Some(amtool_bin) = tool(AMTOOL.0, AMTOOL.1) else {
        return;
    };
    let Some(jsonnet) = crate::mixin::jsonnet() else {
        return;
    };
    // The watched alerts fire at once, on a forecast of seconds rather than weeks; the rest keep
    // their for: (none fires in this test).
    let (rules, _) = crate::mixin::render_rules(jsonnet, &quick_forecast());
    let (webhook, got, receiver_task) = spawn_receiver().await;
    let (am_url, _am, _am_dir) = spawn_alertmanager(alertmanager, &example_for_test(&webhook));

    let sim = spawn_sim_with(two_tenants()).await;
    let yaml = format!(
        "api:\n  base_url: {}\ncollectors:\n  delivery_account:\n    interval: 1s\ntenants:\n  - name: customer-a\n    token_env: A\n    collectors:\n      delivery_account:\n        accounts: [{TENANT_A_ACCOUNT}]\n  - name: customer-b\n    token_env: B\n    collectors:\n      delivery_account:\n        accounts: [{TENANT_B_ACCOUNT}]\n",
        sim.url
    );
    let config = Config::parse_with_env(&yaml, &|name: &str| {
        Some(format!("customer-{}-token", name.to_ascii_lowercase()))
    })
    .unwrap();
    let exporter = spawn_exporter(config).await;
    let prom = spawn_prometheus(
        prometheus,
        &format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nalerting:\n  alertmanagers:\n    - static_configs:\n        - targets: [\"{}\"]\nrule_files:\n  - {}\n  - {}\n{}",
            am_url.trim_start_matches("http://"),
            rules.path().join("prometheus/rules.yml").display(),
            rules.path().join("prometheus/alerts.yml").display(),
            scrape_configs(scrape, &exporter.addr.to_string())
        ),
    );

    // Customer A's account sends; customer B's sends a little, far from running out.
    let sender = {
        let sim = sim.sim.clone();
        tokio::spawn(async move {
            loop {
                sim.update_account(TENANT_A_ACCOUNT, |a| {
                    a.messages_sent += 100;
                    a.plan_messages_used += 100;
                });
                sim.update_account(TENANT_B_ACCOUNT, |a| a.messages_sent += 1);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };

    let exhaustion = "MailhostDeliveryQuotaExhaustionPredicted";
    let a = TENANT_A_ACCOUNT.to_string();
    let firing = |n: &str| {
        (
            "customer-a".to_owned(),
            n.to_owned(),
            exhaustion.to_owned(),
            a.clone(),
        )
    };
    wait_for_notifications(&got, "customer A's exhaustion warning", 1).await;
    assert_eq!(notifications(&got), [firing("firing")]);
    // What the customer reads, from the payload Alertmanager posted.
    let payload = got.lock().unwrap()[0].1.clone();
    let annotations = &payload["alerts"][0]["annotations"];
    assert!(
        annotations["quota_resets"]
            .as_str()
            .is_some_and(|r| r.starts_with("20")),
        "{annotations}"
    );
    let text = render_template(amtool_bin, "mailhost.text", &payload);
    assert_gives_the_quota_facts(&text, &a);
    assert!(text.contains("of tenant customer-a"), "{text}");

    // A top-up of a billion messages: the account no longer runs out before its renewal.
    sim.sim.update_account(TENANT_A_ACCOUNT, |a| {
        a.remaining_extra_messages_bought += 1_000_000_000
    });
    wait_for_notifications(&got, "customer A's resolved notification", 2).await;
    assert_eq!(notifications(&got), [firing("firing"), firing("resolved")]);

    // Drained again, it fires again; then the exporter stops.
    sim.sim
        .update_account(TENANT_A_ACCOUNT, |a| a.remaining_extra_messages_bought = 0);
    wait_for_notifications(&got, "customer A's second warning", 3).await;
    assert_eq!(
        notifications(&got),
        [firing("firing"), firing("resolved"), firing("firing")]
    );
    drop(exporter);
    wait_for_notifications(&got, "operations paged for the exporter", 4).await;
    let paged = notifications(&got)[3].clone();
    assert_eq!(
        (paged.0.as_str(), paged.1.as_str(), paged.2.as_str()),
        ("operations-pager", "firing", "MailhostExporterDown")
    );
    // The account's alert, still firing in Prometheus (keep_firing_for), is held back by it.
    let held = wait_for("the account's alert to be inhibited", || async {
        alertmanager_alerts(&am_url, exhaustion)
            .await?
            .into_iter()
            .find(|alert| {
                alert["status"]["state"] == "suppressed"
                    && alert["status"]["inhibitedBy"]
                        .as_array()
                        .is_some_and(|by| !by.is_empty())
            })
    })
    .await;
    assert_eq!(held["labels"]["tenant"], "customer-a", "{held}");
    assert_eq!(held["labels"]["collector"], "delivery_account", "{held}");
    assert_eq!(held["labels"]["job"], "mailhost", "{held}");
    if scrape == Scrape::Fleet {
        // From the account's own probe target, held back by that target's MailhostExporterDown
        // (the example's inhibition is equal: [job, instance]).
        assert_eq!(
            held["labels"]["instance"],
            format!("customer-a/{TENANT_A_ACCOUNT}"),
            "{held}"
        );
    }
    // keep_firing_for (15 s) runs out and Prometheus resolves the alert while the exporter is
    // still down: that resolution is held back too. Alertmanager's API leaves out a resolved
    // alert, so the wait ends when the alert is gone.
    wait_for("the account's alert to resolve in Alertmanager", || async {
        alertmanager_alerts(&am_url, exhaustion)
            .await?
            .is_empty()
            .then_some(())
    })
    .await;
    // The witness that the group has flushed since: a sentinel of another job (so no
    // inhibition applies) joins the account's group, and its notification must carry it alone.
    let mut sentinel = held["labels"].clone();
    for key in ["job", "instance", "account_id"] {
        sentinel[key] = "sentinel".into();
    }
    let posted = reqwest::Client::new()
        .post(format!("{am_url}/api/v2/alerts"))
        .json(&serde_json::json!([{ "labels": sentinel }]))
        .send()
        .await
        .unwrap();
    assert!(posted.status().is_success(), "{posted:?}");
    let all = wait_for("the sentinel's notification", || async {
        let all = notifications(&got);
        all.iter().any(|n| n.3.contains("sentinel")).then_some(all)
    })
    .await;
    let after_page: Vec<_> = all[4..].iter().filter(|n| n.3 != "sentinel").collect();
    assert_eq!(
        all.iter().filter(|n| n.3.contains("sentinel")).count(),
        1,
        "{all:?}"
    );
    assert!(
        all.contains(&(
            "customer-a".to_owned(),
            "firing".to_owned(),
            exhaustion.to_owned(),
            "sentinel".to_owned()
        )),
        "the sentinel's notification carries it alone: {all:?}"
    );
    match scrape {
        Scrape::Metrics => assert!(after_page.is_empty(), "nothing after the page: {all:?}"),
        // Each probe target is down too: their MailhostExporterDown alerts join the page's
        // group (no tenant label), and nothing else is sent.
        Scrape::Fleet => assert!(
            after_page
                .iter()
                .all(|n| (n.0.as_str(), n.1.as_str(), n.2.as_str())
                    == ("operations-pager", "firing", "MailhostExporterDown")),
            "only the page after it: {all:?}"
        ),
    }
    assert!(
        all.iter()
            .all(|n| n.0 != "customer-b" && !n.3.contains(&TENANT_B_ACCOUNT.to_string())),
        "{all:?}"
    );
    sender.abort();
    receiver_task.abort();
    drop(prom);
}

/// The inhibitions of the example on a real Alertmanager, fed alerts through its API: each
/// holds back exactly what it should. Exporter a:1 is down; on exporter b:2 customer-b's
/// mailbox collector fails and its account 22 pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
async fn each_inhibition_of_the_example_holds_back_what_it_should_and_nothing_else() {
    let Some(alertmanager) = tool(ALERTMANAGER.0, ALERTMANAGER.1) else {
        return;
    };
    let (webhook, _got, receiver_task) = spawn_receiver().await;
    let (am_url, _am, _am_dir) = spawn_alertmanager(alertmanager, &example_for_test(&webhook));
    // (name, labels besides job, whether it must be held back)
    let cases: &[(&str, &str, bool)] = &[
        (
            "MailhostExporterDown",
            "instance=a:1,severity=critical",
            false,
        ),
        (
            "MailhostDeliveryQuotaLow",
            "instance=a:1,tenant=customer-a,account_id=11,collector=delivery_account,severity=warning",
            true,
        ),
        (
            "MailhostDataStale",
            "instance=a:1,tenant=customer-a,target=11,collector=delivery_account,severity=warning",
            true,
        ),
        (
            "MailhostDeliveryQuotaLow",
            "instance=b:2,tenant=customer-a,account_id=11,collector=delivery_account,severity=warning",
            false,
        ),
        (
            "MailhostCollectorRestarted",
            "instance=a:1,tenant=customer-a,collector=delivery_account,severity=warning",
            true,
        ),
        (
            "MailhostCollectorFailing",
            "instance=b:2,tenant=customer-b,collector=mailbox,severity=warning",
            false,
        ),
        // A restart of the failing collector's loop is a bug of its own: told, not held back.
        (
            "MailhostCollectorRestarted",
            "instance=b:2,tenant=customer-b,collector=mailbox,severity=warning",
            false,
        ),
        (
            "MailhostMailboxQuotaHigh",
            "instance=b:2,tenant=customer-b,mailbox=EA00000003,collector=mailbox,severity=warning",
            true,
        ),
        (
            "MailhostMailboxQuotaHigh",
            "instance=b:2,tenant=customer-a,mailbox=EA00000004,collector=mailbox,severity=warning",
            false,
        ),
        (
            "MailhostDeliveryBounceRatioHigh",
            "instance=b:2,tenant=customer-b,account_id=21,collector=tracemail_daily,severity=warning",
            false,
        ),
        (
            "MailhostDeliveryQuotaCritical",
            "instance=b:2,tenant=customer-b,account_id=22,collector=delivery_account,severity=critical",
            false,
        ),
        (
            "MailhostDeliveryQuotaLow",
            "instance=b:2,tenant=customer-b,account_id=22,collector=delivery_account,severity=warning",
            true,
        ),
        (
            "MailhostDeliveryBounceRatioHigh",
            "instance=b:2,tenant=customer-b,account_id=22,collector=tracemail_daily,severity=warning",
            true,
        ),
        (
            "MailhostDeliveryQuotaLow",
            "instance=b:2,tenant=customer-b,account_id=23,collector=delivery_account,severity=warning",
            false,
        ),
    ];
    let labels = |name: &str, rest: &str| {
        let mut map = serde_json::Map::new();
        map.insert("alertname".into(), name.into());
        map.insert("job".into(), "mailhost".into());
        for pair in rest.split(',') {
            let (k, v) = pair.split_once('=').unwrap();
            map.insert(k.into(), v.into());
        }
        Json::Object(map)
    };
    let alerts: Vec<Json> = cases
        .iter()
        .map(|(name, rest, _)| serde_json::json!({ "labels": labels(name, rest) }))
        .collect();
    wait_for("Alertmanager to take the alerts", || async {
        let posted = reqwest::Client::new()
            .post(format!("{am_url}/api/v2/alerts"))
            .json(&alerts)
            .send()
            .await
            .ok()?;
        posted.status().is_success().then_some(())
    })
    .await;
    let expected: BTreeSet<String> = cases
        .iter()
        .filter(|c| c.2)
        .map(|(name, rest, _)| labels(name, rest).to_string())
        .collect();
    let held = wait_for("the inhibitions to settle", || async {
        let all = get_json(&am_url, "/api/v2/alerts", &[]).await?;
        let all = all.as_array()?;
        let held: BTreeSet<String> = all
            .iter()
            .filter(|a| a["status"]["state"] == "suppressed")
            .map(|a| a["labels"].to_string())
            .collect();
        (all.len() == cases.len() && held == expected).then_some(held)
    })
    .await;
    assert_eq!(held, expected);
    receiver_task.abort();
}

/// The mixin's config for these tests: the forecast in seconds (`mixin::FORECAST_IN_SECONDS`),
/// the prediction firing at once and kept 15 s.
fn quick_forecast() -> String {
    format!(
        "{{ alertFor+: {{ MailhostDeliveryQuotaExhaustionPredicted: '0s', MailhostExporterDown: '0s' }}, keepFiringFor: '15s', keepFiringForOf: {{}} }} + {}",
        crate::mixin::FORECAST_IN_SECONDS
    )
}
