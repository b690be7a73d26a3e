//! Tenants: one token each, a `tenant` label on every series, and a tenant whose token is
//! revoked, rate-limited or slow failing alone; a reload rotates one tenant's token.

use std::time::Duration;

use mailhost_exporter::config::Config;
use mailhost_sim::{AccountSeed, FaultSpec, ManagementToken, Route, SimConfig};

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
            .map(|id| AccountSeed {
                id,
                ..AccountSeed::default()
            })
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
        listen_address: "127.0.0.1:0".to_owned(),
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
