//! The seeded demo fleet: four Delivery accounts that between them show every state a dashboard
//! should render (healthy, nearly exhausted, disabled, expiring).

use std::time::Duration;

use super::config::{AccountSeed, ManagementToken, SimConfig, TokenSeed};

/// Healthy and busy.
pub const DEMO_BUSY: i32 = 1001;
/// About 95% of a 10000-message plan used, no extras.
pub const DEMO_NEARLY_EXHAUSTED: i32 = 1002;
/// Disabled: its sends are refused.
pub const DEMO_DISABLED: i32 = 1003;
/// Plan expires within three days.
pub const DEMO_EXPIRING: i32 = 1004;

/// Seed of the demo's random source, so two demo runs inject the same faults.
pub const DEMO_SEED: u64 = 0x6d61_696c;

const DAY: u64 = 86_400;

fn token(account: i32, label: &str, secret: &str) -> TokenSeed {
    TokenSeed {
        id: account + 4000,
        label: label.to_owned(),
        token: format!("sim-send-{account}-{secret}"),
        allow_nets: Vec::new(),
    }
}

impl SimConfig {
    /// The demo fleet: 1001 "business" healthy and busy; 1002 "starter" close to exhaustion
    /// (95% of a 10000 plan used, no extras); 1003 disabled; 1004 whose plan expires in about
    /// two and a half days; each with one send token and one or two sending domains. One
    /// unrestricted management token.
    pub fn demo(management_token: &str) -> Self {
        let accounts = vec![
            AccountSeed {
                id: DEMO_BUSY,
                username: "shop-business".to_owned(),
                plan: "business".to_owned(),
                account_type: "transactional".to_owned(),
                enabled: true,
                plan_messages_limit: 500_000,
                plan_messages_used: 123_456,
                extra_messages_total: 20_000,
                remaining_extra_messages_bought: 15_000,
                messages_sent: 1_834_221,
                ignore_suppression_list: false,
                domains: vec!["shop.example".to_owned(), "news.example".to_owned()],
                // Loopback only, so the account allow-list is visible in the demo yet lets the
                // traffic generator through.
                allow_nets: vec!["127.0.0.0/8".to_owned(), "::1".to_owned()],
                plan_expires_in: Duration::from_secs(200 * DAY),
                send_tokens: vec![token(DEMO_BUSY, "shop backend", "7c41d2a98f03be65")],
            },
            AccountSeed {
                id: DEMO_NEARLY_EXHAUSTED,
                username: "starter-nearly-full".to_owned(),
                plan: "starter".to_owned(),
                account_type: "transactional".to_owned(),
                enabled: true,
                plan_messages_limit: 10_000,
                plan_messages_used: 9_500,
                extra_messages_total: 0,
                remaining_extra_messages_bought: 0,
                messages_sent: 48_210,
                ignore_suppression_list: false,
                domains: vec!["starter.example".to_owned()],
                allow_nets: Vec::new(),
                plan_expires_in: Duration::from_secs(20 * DAY),
                send_tokens: vec![token(
                    DEMO_NEARLY_EXHAUSTED,
                    "newsletter",
                    "0b9e61f4c2d7a835",
                )],
            },
            AccountSeed {
                id: DEMO_DISABLED,
                username: "legacy-disabled".to_owned(),
                plan: "free".to_owned(),
                account_type: "transactional".to_owned(),
                enabled: false,
                plan_messages_limit: 1_000,
                plan_messages_used: 120,
                extra_messages_total: 0,
                remaining_extra_messages_bought: 0,
                messages_sent: 9_876,
                ignore_suppression_list: false,
                domains: vec!["legacy.example".to_owned()],
                allow_nets: Vec::new(),
                plan_expires_in: Duration::from_secs(100 * DAY),
                send_tokens: vec![token(DEMO_DISABLED, "old app", "5a3f0e8c71b2d946")],
            },
            AccountSeed {
                id: DEMO_EXPIRING,
                username: "trial-expiring".to_owned(),
                plan: "starter".to_owned(),
                account_type: "transactional".to_owned(),
                enabled: true,
                plan_messages_limit: 20_000,
                plan_messages_used: 7_300,
                extra_messages_total: 5_000,
                remaining_extra_messages_bought: 2_500,
                messages_sent: 31_004,
                ignore_suppression_list: false,
                domains: vec!["trial.example".to_owned(), "promo.example".to_owned()],
                allow_nets: Vec::new(),
                plan_expires_in: Duration::from_secs(2 * DAY + 12 * 3600),
                send_tokens: vec![token(DEMO_EXPIRING, "campaigns", "e2c8b7104d9f6a53")],
            },
        ];
        Self {
            management_tokens: vec![ManagementToken {
                token: management_token.to_owned(),
                accounts: None,
            }],
            accounts,
            seed: DEMO_SEED,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_fleet_has_one_identity_per_account_on_its_own_domain() {
        let config = SimConfig::demo("t");
        let identities = config.send_identities();
        assert_eq!(identities.len(), 4);
        for identity in &identities {
            let account = config
                .accounts
                .iter()
                .find(|a| a.id == identity.account_id)
                .expect("identity of a demo account");
            let domain = identity.from.split_once('@').map(|(_, d)| d);
            assert!(account.domains.iter().any(|d| Some(d.as_str()) == domain));
        }
    }

    #[test]
    fn the_nearly_exhausted_account_has_used_about_95_percent() {
        let config = SimConfig::demo("t");
        let starter = config
            .accounts
            .iter()
            .find(|a| a.id == DEMO_NEARLY_EXHAUSTED)
            .expect("account 1002");
        assert_eq!(starter.plan_messages_limit, 10_000);
        assert_eq!(
            starter.plan_messages_used * 100 / starter.plan_messages_limit,
            95
        );
        assert_eq!(starter.remaining_extra_messages_bought, 0);
    }
}
