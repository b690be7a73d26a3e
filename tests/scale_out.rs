//! Scaling out on engines people already run: vmagent in cluster mode and sharded Prometheus
//! agents probe each (tenant, account) on one of two exporter replicas and remote-write into one
//! store; the shipped configs under `examples/scale-out/` are the ones these tests run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mailhost_sim::{Account, AccountSeed, ManagementToken, SimConfig};
use serde_json::Value;

use crate::helpers::{
    PrometheusMode, PrometheusServer, Running, Sim, free_port, repo_root, spawn_prometheus_as,
    spawn_sim_with, tool, wait_for, wait_within,
};

/// The collector interval of the replicas and the scrape interval of every scraper.
const INTERVAL: Duration = Duration::from_secs(2);

/// Accounts per tenant: about 200 in all.
const PER_TENANT: i32 = 66;

/// The tenant whose token the provider does not know (revoked): it must fail alone.
const REVOKED: &str = "gamma";

const INSTALL_VM: &str = "apt-get install victoria-metrics";

struct Tenant {
    name: &'static str,
    token: String,
    accounts: Vec<i32>,
}

/// Three tenants, each with its own token that sees its own third of the accounts.
fn tenants() -> Vec<Tenant> {
    ["alpha", "beta", REVOKED]
        .into_iter()
        .zip(0..)
        .map(|(name, i)| Tenant {
            name,
            token: format!("{name}-management-token"),
            accounts: (0..PER_TENANT).map(|n| 100_001 + i * 1000 + n).collect(),
        })
        .collect()
}

fn valid(tenants: &[Tenant]) -> impl Iterator<Item = &Tenant> {
    tenants.iter().filter(|t| t.name != REVOKED)
}

/// Every (tenant, account) of the tenants whose token works.
fn valid_targets(tenants: &[Tenant]) -> BTreeSet<(String, String)> {
    valid(tenants)
        .flat_map(|t| {
            t.accounts
                .iter()
                .map(|a| (t.name.to_owned(), a.to_string()))
        })
        .collect()
}

/// The revoked tenant fails alone: one health series per valid target, each 1. The revoked
/// tenant's accounts never succeed, so each expires and is registered again by the next probe
/// (an account that never succeeded does not stay on a stranger's word): some may be away at
/// any moment, and those present are 0.
fn assert_health(success: &[(BTreeMap<String, String>, f64)], tenants: &[Tenant]) {
    let revoked_accounts: usize = tenants
        .iter()
        .filter(|t| t.name == REVOKED)
        .map(|t| t.accounts.len())
        .sum();
    let mut valid = BTreeSet::new();
    let mut revoked = 0;
    for (labels, value) in success {
        if labels["tenant"] == REVOKED {
            revoked += 1;
            assert_eq!(*value, 0.0, "{labels:?}");
        } else {
            let target = labels["target"].trim_start_matches("account:").to_owned();
            assert!(
                valid.insert((labels["tenant"].clone(), target)),
                "{labels:?} twice"
            );
            assert_eq!(*value, 1.0, "{labels:?}");
        }
    }
    assert_eq!(
        valid,
        valid_targets(tenants),
        "one health series per valid target"
    );
    assert!(revoked <= revoked_accounts, "{revoked} revoked series");
}

/// The simulator knows every account but not the revoked tenant's token, so it answers that
/// token 401 as the provider answers a revoked one.
async fn simulator(tenants: &[Tenant]) -> Sim {
    spawn_sim_with(SimConfig {
        management_tokens: valid(tenants)
            .map(|t| ManagementToken {
                token: t.token.clone(),
                accounts: Some(t.accounts.clone()),
            })
            .collect(),
        accounts: tenants
            .iter()
            .flat_map(|t| &t.accounts)
            .map(|&id| {
                AccountSeed::from(Account {
                    id,
                    username: format!("acct{id}"),
                    ..Account::default()
                })
            })
            .collect(),
        ..SimConfig::default()
    })
    .await
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// One exporter replica as an operator runs it: tenants without static targets, so it polls
/// only what it is probed for.
struct Replica {
    _process: Running,
    addr: String,
}

async fn replicas(dir: &Path, sim: &Sim, tenants: &[Tenant]) -> Vec<Replica> {
    let mut tenant_yaml = String::new();
    for t in tenants {
        let token_file = dir.join(format!("{}.token", t.name));
        std::fs::write(&token_file, format!("{}\n", t.token)).unwrap();
        tenant_yaml.push_str(&format!(
            "  - name: {}\n    token_file: {}\n",
            t.name,
            token_file.display()
        ));
    }
    let config = format!(
        "api:\n  base_url: {}\n  timeout: 2s\n  concurrency: 8\ncollectors:\n  delivery_account:\n    interval: {}s\ntenants:\n{tenant_yaml}probe:\n  idle_intervals: 3\n",
        sim.url,
        INTERVAL.as_secs()
    );
    let config_path = dir.join("exporter.yml");
    std::fs::write(&config_path, config).unwrap();
    let mut out = Vec::new();
    for _ in 0..2 {
        let process = Running::start(&[
            &format!("--config.file={}", config_path.display()),
            "--web.listen-address=127.0.0.1:0",
        ]);
        let addr = process
            .logged("mailhost_exporter listening", "address")
            .await;
        out.push(Replica {
            _process: process,
            addr,
        });
    }
    out
}

/// The targets file in the shape of `examples/scale-out/mailhost-targets.yml`: one group per
/// tenant, the accounts as targets.
fn targets_file(dir: &Path, tenants: &[Tenant]) -> PathBuf {
    let mut text = String::new();
    for t in tenants {
        let ids: Vec<String> = t.accounts.iter().map(|a| format!("\"{a}\"")).collect();
        text.push_str(&format!(
            "- labels:\n    __param_tenant: {}\n  targets: [{}]\n",
            t.name,
            ids.join(", ")
        ));
    }
    let path = dir.join("mailhost-targets.yml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A shipped file of `examples/scale-out/` with the test's values put in; every placeholder must
/// still be there, so the file cannot drift from what this test runs.
fn example(name: &str, replacements: &[(&str, String)]) -> String {
    let path = repo_root().join("examples/scale-out").join(name);
    let mut text = std::fs::read_to_string(&path).unwrap();
    for (from, to) in replacements {
        assert!(
            text.contains(from),
            "examples/scale-out/{name} no longer contains {from:?}: update this test and docs/scaling.md with it"
        );
        text = text.replace(from, to);
    }
    text
}

/// The replacements every scrape config shares: interval and replica addresses.
fn common_replacements(replicas: &[Replica]) -> Vec<(&'static str, String)> {
    vec![
        (
            "scrape_interval: 60s",
            format!("scrape_interval: {}s", INTERVAL.as_secs()),
        ),
        ("mailhost-exporter-0:19587", replicas[0].addr.clone()),
        ("mailhost-exporter-1:19587", replicas[1].addr.clone()),
    ]
}

/// A store answering the Prometheus query API: VictoriaMetrics or a Prometheus receiver.
struct Store {
    /// The process behind it, stopped with the store.
    _process: Box<dyn std::any::Any + Send + Sync>,
    url: String,
    client: reqwest::Client,
}

impl Store {
    async fn ready(process: impl std::any::Any + Send + Sync, url: String, health: &str) -> Store {
        let client = reqwest::Client::new();
        let probe = format!("{url}{health}");
        wait_for(&probe, || async {
            let r = client.get(&probe).send().await.ok()?;
            r.status().is_success().then_some(())
        })
        .await;
        Store {
            _process: Box::new(process),
            url,
            client,
        }
    }

    /// An instant query: each series' labels and value. `None` while the store refuses it.
    async fn query(&self, q: &str) -> Option<Vec<(BTreeMap<String, String>, f64)>> {
        let samples = crate::helpers::instant_query(&self.url, q, None).await?;
        Some(samples.into_iter().map(|s| (s.labels, s.value)).collect())
    }

    /// Per (tenant, account_id) of the query's result, its value; a pair twice fails the test.
    async fn by_account(&self, q: &str) -> BTreeMap<(String, String), f64> {
        let mut out = BTreeMap::new();
        for (labels, value) in self.query(q).await.unwrap_or_default() {
            let key = (
                labels.get("tenant").cloned().unwrap_or_default(),
                labels.get("account_id").cloned().unwrap_or_default(),
            );
            assert!(
                out.insert(key.clone(), value).is_none(),
                "{q}: {key:?} twice"
            );
        }
        out
    }

    /// Makes what VictoriaMetrics received searchable at once.
    async fn flush(&self) {
        let r = self
            .client
            .get(format!("{}/internal/force_flush", self.url))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
    }

    /// VictoriaMetrics' raw samples of `selector` between two unix times: per (tenant,
    /// account_id), the sample times in seconds, sorted.
    async fn sample_times(
        &self,
        selector: &str,
        start: f64,
        end: f64,
    ) -> BTreeMap<(String, String), Vec<f64>> {
        let text = self
            .client
            .get(format!("{}/api/v1/export", self.url))
            .query(&[
                ("match[]", selector.to_owned()),
                ("start", format!("{start:.3}")),
                ("end", format!("{end:.3}")),
            ])
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let mut out: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let series: Value = serde_json::from_str(line).unwrap();
            let key = (
                series["metric"]["tenant"].as_str().unwrap().to_owned(),
                series["metric"]["account_id"].as_str().unwrap().to_owned(),
            );
            let times = out.entry(key).or_default();
            let values = series["values"].as_array().unwrap();
            for (t, v) in series["timestamps"].as_array().unwrap().iter().zip(values) {
                // A staleness marker is no sample.
                if v.as_f64().is_some_and(f64::is_finite) {
                    times.push(t.as_f64().unwrap() / 1000.0);
                }
            }
            times.sort_by(f64::total_cmp);
        }
        out
    }
}

fn victoria_metrics(dir: &Path) -> (Running, String) {
    let port = free_port();
    let mut command = Command::new("victoria-metrics");
    command.args([
        format!("-storageDataPath={}", dir.join("vm").display()),
        format!("-httpListenAddr=127.0.0.1:{port}"),
        format!("-dedup.minScrapeInterval={}s", INTERVAL.as_secs()),
        "-search.latencyOffset=0s".to_owned(),
        "-search.disableCache".to_owned(),
        "-retentionPeriod=1d".to_owned(),
        "-loggerLevel=WARN".to_owned(),
    ]);
    (Running::spawn(command), format!("http://127.0.0.1:{port}"))
}

/// One member of a vmagent cluster of two that scrapes every target twice (replication 2).
fn vmagent(dir: &Path, member: usize, config: &Path, store: &str) -> (Running, String) {
    let port = free_port();
    let mut command = Command::new("vmagent");
    command.args([
        format!("-promscrape.config={}", config.display()),
        "-promscrape.cluster.membersCount=2".to_owned(),
        format!("-promscrape.cluster.memberNum={member}"),
        "-promscrape.cluster.replicationFactor=2".to_owned(),
        format!("-remoteWrite.url={store}/api/v1/write"),
        format!(
            "-remoteWrite.tmpDataPath={}",
            dir.join(format!("vmagent-{member}")).display()
        ),
        format!("-httpListenAddr=127.0.0.1:{port}"),
        "-loggerLevel=WARN".to_owned(),
    ]);
    (Running::spawn(command), format!("http://127.0.0.1:{port}"))
}

/// The probe targets a scraper is scraping: `instance` (tenant/account) -> the exporter
/// replica's address, from its `/api/v1/targets`.
async fn probe_targets(scraper: &str) -> Option<BTreeMap<String, String>> {
    let body: Value = reqwest::get(format!("{scraper}/api/v1/targets"))
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    let mut out = BTreeMap::new();
    for target in body["data"]["activeTargets"].as_array()? {
        // Both jobs store job="mailhost"; a probe's instance is tenant/account.
        let instance = target["labels"]["instance"].as_str()?.to_owned();
        if !instance.contains('/') {
            continue;
        }
        let url = target["scrapeUrl"].as_str()?;
        let address = url.strip_prefix("http://")?.split('/').next()?.to_owned();
        out.insert(instance, address);
    }
    Some(out)
}

/// Simulator hits of each valid account's `GET /api/delivery/accounts/{id}`.
fn account_hits(sim: &Sim, tenants: &[Tenant]) -> BTreeMap<(String, String), u64> {
    valid(tenants)
        .flat_map(|t| {
            t.accounts.iter().map(|a| {
                (
                    (t.name.to_owned(), a.to_string()),
                    sim.sim.hits(&format!("/api/delivery/accounts/{a}")),
                )
            })
        })
        .collect()
}

/// The targets each replica polls, from its own `/metrics`: (tenant, account) of every
/// Delivery account target it reports health for.
async fn polled_by(replica: &Replica) -> BTreeSet<(String, String)> {
    let body = reqwest::get(format!("http://{}/metrics", replica.addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    body.lines()
        .filter_map(|l| l.strip_prefix("mailhost_target_success{"))
        .filter(|l| l.contains("collector=\"delivery_account\""))
        .filter_map(|l| {
            let label = |name: &str| {
                let start = l.find(&format!("{name}=\""))? + name.len() + 2;
                Some(l[start..].split('"').next()?.to_owned())
            };
            Some((label("tenant")?, label("target")?))
        })
        .collect()
}

/// Every valid account has its Delivery series in the store, and every target of the revoked
/// tenant has reported its failure.
async fn wait_until_stored(store: &Store, tenants: &[Tenant]) {
    let expected = valid_targets(tenants);
    let revoked = tenants.iter().find(|t| t.name == REVOKED).unwrap();
    wait_for("every account in the store", || async {
        let stored = store
            .by_account("mailhost_delivery_remaining_messages{job=\"mailhost\"}")
            .await;
        let failed = store
            .query(&format!(
                "mailhost_target_success{{tenant=\"{REVOKED}\"}} == 0"
            ))
            .await?;
        (stored.keys().cloned().collect::<BTreeSet<_>>() == expected
            && failed.len() == revoked.accounts.len())
        .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
async fn vmagent_cluster_with_replication_stores_every_account_once_and_polls_it_once() {
    let (Some(_), Some(_)) = (
        tool("victoria-metrics", INSTALL_VM),
        tool("vmagent", INSTALL_VM),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let tenants = tenants();
    let sim = simulator(&tenants).await;
    let replicas = replicas(dir.path(), &sim, &tenants).await;
    let (process, url) = victoria_metrics(dir.path());
    let store = Store::ready(process, url, "/health").await;

    let targets = targets_file(dir.path(), &tenants);
    let mut replacements = common_replacements(&replicas);
    replacements.push((
        "/etc/vmagent/mailhost-targets.yml",
        targets.display().to_string(),
    ));
    let config = dir.path().join("vmagent.yml");
    std::fs::write(&config, example("vmagent.yml", &replacements)).unwrap();
    let mut vmagents: Vec<(Running, String)> = (0..2)
        .map(|member| vmagent(dir.path(), member, &config, &store.url))
        .collect();

    // Replication 2 of 2: each vmagent scrapes every target, each target on the replica its
    // hashmod chose.
    let all = tenants.iter().map(|t| t.accounts.len()).sum::<usize>();
    let mut assignments = Vec::new();
    for (_, agent) in &vmagents {
        assignments.push(
            wait_for("the vmagent's probe targets", || async {
                probe_targets(agent).await.filter(|t| t.len() == all)
            })
            .await,
        );
    }
    assert_eq!(
        assignments[0], assignments[1],
        "both vmagents pin each account to the same replica"
    );
    let replica_of = assignments.swap_remove(0);
    for replica in &replicas {
        let n = replica_of.values().filter(|a| **a == replica.addr).count();
        assert!(n > 0, "replica {} has no account", replica.addr);
    }

    wait_until_stored(&store, &tenants).await;

    // A steady window, until every account was polled five more times: the simulator counts
    // each account's polls.
    let hits_before = account_hits(&sim, &tenants);
    let started = Instant::now();
    let hits_after = wait_within(
        INTERVAL * 40,
        "five more polls of every account",
        || async {
            let after = account_hits(&sim, &tenants);
            after
                .iter()
                .all(|(key, n)| n - hits_before[key] >= 5)
                .then_some(after)
        },
    )
    .await;
    let intervals = started.elapsed().as_secs_f64() / INTERVAL.as_secs_f64();
    // One poller per account polls at most once per interval (plus the runs under way at both
    // ends); two pollers would double that. A slow machine only polls less, never more.
    let most = intervals.ceil() as u64 + 1;
    for (key, after) in &hits_after {
        let polls = after - hits_before[key];
        assert!(
            (1..=most).contains(&polls),
            "{key:?} polled {polls} times in {intervals:.1} intervals (expected 1 to {most})"
        );
    }

    // Each valid account is polled by exactly one replica, the one vmagent probes it on.
    let polled: Vec<BTreeSet<(String, String)>> = {
        let mut out = Vec::new();
        for replica in &replicas {
            out.push(polled_by(replica).await);
        }
        out
    };
    for (tenant, account) in valid_targets(&tenants) {
        let pollers: Vec<&str> = replicas
            .iter()
            .zip(&polled)
            .filter(|(_, set)| set.contains(&(tenant.clone(), account.clone())))
            .map(|(r, _)| r.addr.as_str())
            .collect();
        let pinned = &replica_of[&format!("{tenant}/{account}")];
        assert_eq!(
            pollers,
            [pinned.as_str()],
            "{tenant}/{account}: polled by {pollers:?}, probed on {pinned}"
        );
    }

    // Stored once per series: one series per account, and after deduplication at most one
    // sample per interval although both vmagents wrote every sample.
    store.flush().await;
    let window = INTERVAL * 8;
    let samples = store
        .by_account(&format!(
            "count_over_time(mailhost_delivery_remaining_messages[{}s])",
            window.as_secs()
        ))
        .await;
    let expected = valid_targets(&tenants);
    assert_eq!(
        samples.keys().cloned().collect::<BTreeSet<_>>(),
        expected,
        "one series per valid account"
    );
    let per_window = (window.as_secs() / INTERVAL.as_secs()) as f64 + 1.0;
    for (key, n) in &samples {
        assert!(
            (1.0..=per_window).contains(n),
            "{key:?}: {n} samples in {window:?} after deduplication (at most {per_window})"
        );
    }

    // The revoked tenant fails alone: its targets report failure, the others success, and the
    // replicas count its failures as unauthorized.
    let success = store
        .query("mailhost_target_success{collector=\"delivery_account\"}")
        .await
        .unwrap();
    assert_health(&success, &tenants);
    let failures = store
        .query(
            "sum by (tenant, reason) (mailhost_api_request_failures_total{job=\"mailhost\"}) > 0",
        )
        .await
        .unwrap();
    let failing: BTreeSet<(String, String)> = failures
        .iter()
        .map(|(l, _)| (l["tenant"].clone(), l["reason"].clone()))
        .collect();
    assert_eq!(
        failing,
        BTreeSet::from([(REVOKED.to_owned(), "unauthorized".to_owned())]),
        "only the revoked tenant fails, as unauthorized"
    );

    // One vmagent stops; the other scrapes every target already, so no account's samples have
    // a gap longer than two intervals.
    let stopped_at = unix_now();
    let from = stopped_at - INTERVAL.as_secs_f64() * 4.0;
    let (mut stopped, _) = vmagents.pop().unwrap();
    stopped.terminate();
    // Until every account has a sample stored five intervals after the stop.
    let until = stopped_at + INTERVAL.as_secs_f64() * 5.0;
    let times = wait_within(
        INTERVAL * 40,
        "samples five intervals after the stop",
        || async {
            store.flush().await;
            let times = store
                .sample_times(
                    "mailhost_delivery_remaining_messages{job=\"mailhost\"}",
                    from,
                    unix_now(),
                )
                .await;
            (times.len() == expected.len()
                && times
                    .values()
                    .all(|ts| ts.last().is_some_and(|t| *t >= until)))
            .then_some(times)
        },
    )
    .await;
    assert_eq!(
        times.keys().cloned().collect::<BTreeSet<_>>(),
        expected,
        "every account still stored after one vmagent stopped"
    );
    let longest = INTERVAL.as_secs_f64() * 2.0;
    for (key, ts) in &times {
        let mut edges = vec![from];
        edges.extend(ts);
        let gap = edges
            .windows(2)
            .map(|w| w[1] - w[0])
            .fold(0.0_f64, f64::max);
        assert!(
            gap <= longest,
            "{key:?}: a gap of {gap:.1}s around the stop (samples {ts:?}, window {from:.1}..{until:.1})"
        );
    }
    drop(vmagents);
}

/// A Prometheus that stores only what the agents write: no scrape jobs of its own.
fn prometheus_receiver() -> PrometheusServer {
    spawn_prometheus_as(
        "prometheus",
        "global:\n  scrape_interval: 1m\n",
        PrometheusMode::Receiver,
    )
}

fn prometheus_agent(config: &str) -> PrometheusServer {
    spawn_prometheus_as("prometheus", config, PrometheusMode::Agent)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
async fn prometheus_agent_with_hashmod_remote_writes_into_a_receiver() {
    let Some(_) = tool("prometheus", "apt-get install prometheus") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let tenants = tenants();
    let sim = simulator(&tenants).await;
    let replicas = replicas(dir.path(), &sim, &tenants).await;
    let receiver = prometheus_receiver();
    let url = receiver.url.clone();
    let store = Store::ready(receiver, url, "/-/ready").await;

    let targets = targets_file(dir.path(), &tenants);
    let mut agents = Vec::new();
    for shard in 0..2 {
        let mut replacements = common_replacements(&replicas);
        replacements.extend([
            (
                "/etc/prometheus/mailhost-targets.yml",
                targets.display().to_string(),
            ),
            ("http://prometheus-receiver:9090", store.url.clone()),
            (
                "regex: \"0\" # this agent's shard",
                format!("regex: \"{shard}\" # this agent's shard"),
            ),
        ]);
        agents.push(prometheus_agent(&example(
            "prometheus-agent.yml",
            &replacements,
        )));
    }

    // The agents split the targets: each (tenant, account) on exactly one agent, and each
    // agent probes it on the replica of its own shard.
    let all = tenants.iter().map(|t| t.accounts.len()).sum::<usize>();
    let shares = wait_for("the agents' probe targets", || async {
        let mut shares = Vec::new();
        for agent in &agents {
            shares.push(probe_targets(&agent.url).await?);
        }
        (shares.iter().map(BTreeMap::len).sum::<usize>() == all).then_some(shares)
    })
    .await;
    let mut seen = BTreeSet::new();
    for (shard, share) in shares.iter().enumerate() {
        assert!(!share.is_empty(), "agent {shard} has no target");
        for (instance, address) in share {
            assert!(seen.insert(instance.clone()), "{instance} on both agents");
            assert_eq!(
                address, &replicas[shard].addr,
                "{instance} of agent {shard}"
            );
        }
    }

    wait_until_stored(&store, &tenants).await;

    // Stored exactly once: one series per valid account, one sample per scrape. Once the
    // window has filled (four samples each at least), none holds more than one per interval.
    let window = INTERVAL * 6;
    let samples = wait_within(INTERVAL * 40, "a window of samples per account", || async {
        let samples = store
            .by_account(&format!(
                "count_over_time(mailhost_delivery_remaining_messages[{}s])",
                window.as_secs()
            ))
            .await;
        (samples.len() >= valid_targets(&tenants).len() && samples.values().all(|n| *n >= 4.0))
            .then_some(samples)
    })
    .await;
    assert_eq!(
        samples.keys().cloned().collect::<BTreeSet<_>>(),
        valid_targets(&tenants),
        "one series per valid account"
    );
    let per_window = (window.as_secs() / INTERVAL.as_secs()) as f64 + 1.0;
    for (key, n) in &samples {
        assert!(
            (1.0..=per_window).contains(n),
            "{key:?}: {n} samples in {window:?} (at most {per_window})"
        );
    }
    let success = store
        .query("mailhost_target_success{collector=\"delivery_account\"}")
        .await
        .unwrap();
    assert_health(&success, &tenants);
}

/// The guide shows each shipped file of `examples/scale-out/` whole, as a user copies it, so the
/// configs the tests run are the configs the guide gives.
#[test]
fn the_scaling_guide_quotes_the_shipped_configs_verbatim() {
    let root = repo_root();
    let guide = std::fs::read_to_string(root.join("docs/scaling.md")).unwrap();
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("examples/scale-out"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 3, "{files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            guide.contains(&format!("```yaml\n{text}```")),
            "docs/scaling.md does not quote {} as it is",
            file.display()
        );
    }
}

/// Each scale-out config stores its series as `examples/prometheus/fleet.yml` does (the file the
/// end-to-end alert test runs with the shipped rules): the probe job under the job the rules
/// select, the replicas' `/metrics` under that job too, without the accounts' copies.
#[test]
fn the_scale_out_jobs_relabel_as_the_fleet_example() {
    let (metric_relabelings, relabelings) = crate::kubernetes::fleet_example();
    let job = relabelings.as_sequence().unwrap().last().unwrap().clone();
    for name in ["vmagent.yml", "prometheus-agent.yml"] {
        let config: serde_yaml_ng::Value = serde_yaml_ng::from_str(&example(name, &[])).unwrap();
        let jobs = config["scrape_configs"].as_sequence().unwrap();
        assert_eq!(jobs.len(), 2, "{name}");
        let probe = crate::kubernetes::crd_form(&jobs[0]["relabel_configs"]);
        assert_eq!(probe.as_sequence().unwrap().last(), Some(&job), "{name}");
        assert_eq!(jobs[1]["job_name"], "mailhost", "{name}");
        assert_eq!(
            crate::kubernetes::crd_form(&jobs[1]["metric_relabel_configs"]),
            metric_relabelings,
            "{name}"
        );
    }
}
