//! `--shard=i/n`: replicas split a static fleet without a coordinator, each account polled by
//! exactly one of them, and the split agrees with Prometheus' own `hashmod`.

use mailhost_exporter::config::Config;
use mailhost_exporter::shard::Shard;
use mailhost_sim::{AccountSeed, ManagementToken, SimConfig};

use crate::helpers::{
    TOKEN, config, spawn_exporter, spawn_prometheus, spawn_sim_with, tool, wait_for,
};

const ACCOUNTS: std::ops::RangeInclusive<i32> = 1..=30;

fn sim_config() -> SimConfig {
    SimConfig {
        management_tokens: vec![ManagementToken {
            token: TOKEN.to_owned(),
            accounts: None,
        }],
        accounts: ACCOUNTS.map(AccountSeed::with_id).collect(),
        ..SimConfig::default()
    }
}

fn series(id: i32) -> String {
    format!("mailhost_delivery_remaining_messages{{account_id=\"{id}\"}}")
}

#[tokio::test]
async fn three_replicas_poll_every_account_exactly_once_between_them() {
    let sim = spawn_sim_with(sim_config()).await;
    let ids: Vec<i32> = ACCOUNTS.collect();
    let mut replicas = Vec::new();
    for i in 0..3 {
        let config = Config {
            shard: format!("{i}/3").parse().unwrap(),
            ..config(&sim.url, TOKEN, &ids, "")
        };
        replicas.push(spawn_exporter(config).await);
    }
    // Every account shows up on some replica...
    let bodies = wait_for("every account on some replica", || async {
        let mut bodies = Vec::new();
        for r in &replicas {
            bodies.push(r.scrape().await);
        }
        ACCOUNTS
            .clone()
            .all(|id| bodies.iter().any(|b| b.contains(&series(id))))
            .then_some(bodies)
    })
    .await;
    // ...on exactly one, the one whose shard owns it; no replica even has a target it does not
    // own, so none of them calls the provider for it.
    for id in ACCOUNTS {
        let holders: Vec<usize> = (0..3)
            .filter(|&i| bodies[i].contains(&series(id)))
            .collect();
        assert_eq!(holders.len(), 1, "account {id} on replicas {holders:?}");
        let owner: Shard = format!("{}/3", holders[0]).parse().unwrap();
        assert!(owner.owns("", &id.to_string()), "account {id}");
        for (i, body) in bodies.iter().enumerate() {
            let targeted = body.contains(&format!(
                "mailhost_target_success{{collector=\"delivery_account\",target=\"{id}\"}}"
            ));
            assert_eq!(targeted, i == holders[0], "account {id}, replica {i}");
        }
    }
    let sizes: Vec<usize> = bodies
        .iter()
        .map(|b| ACCOUNTS.filter(|&id| b.contains(&series(id))).count())
        .collect();
    assert!(
        sizes.iter().all(|&n| n > 0),
        "every replica has work: {sizes:?}"
    );
}

/// The exporter's shards are those a Prometheus `hashmod` relabel over `[tenant, account_id]`
/// gives, so a Prometheus fleet sharded that way agrees with the exporter replicas.
#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn shards_agree_with_a_real_prometheus_hashmod() {
    let Some(prometheus) = tool("prometheus", "apt-get install prometheus") else {
        return;
    };
    let n = 7;
    // Targets nobody listens on: only their labels after relabeling matter.
    let targets: String = (1..=60)
        .map(|id| {
            let tenant = if id % 2 == 0 { "acme" } else { "" };
            let tenant_label = if tenant.is_empty() {
                String::new()
            } else {
                format!(", tenant: \"{tenant}\"")
            };
            format!(
                "      - targets: [\"127.0.0.{id}:9\"]\n        labels: {{account_id: \"{id}\"{tenant_label}}}\n"
            )
        })
        .collect();
    let config = format!(
        "global:\n  scrape_interval: 1h\nscrape_configs:\n  - job_name: shards\n    static_configs:\n{targets}    relabel_configs:\n      - source_labels: [tenant, account_id]\n        modulus: {n}\n        target_label: shard\n        action: hashmod\n"
    );
    let prometheus = spawn_prometheus(prometheus, &config);
    let url = format!("{}/api/v1/targets", prometheus.url);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let targets: Vec<serde_json::Value> = runtime.block_on(wait_for("the targets", || async {
        let body: serde_json::Value = reqwest::get(&url).await.ok()?.json().await.ok()?;
        let active = body["data"]["activeTargets"].as_array()?.clone();
        (active.len() == 60).then_some(active)
    }));
    for target in targets {
        let labels = &target["labels"];
        let id = labels["account_id"].as_str().unwrap();
        let tenant = labels["tenant"].as_str().unwrap_or("");
        let shard: u32 = labels["shard"].as_str().unwrap().parse().unwrap();
        let ours: Shard = format!("{shard}/{n}").parse().unwrap();
        assert!(
            ours.owns(tenant, id),
            "tenant {tenant:?} account {id}: Prometheus says shard {shard}"
        );
    }
}
