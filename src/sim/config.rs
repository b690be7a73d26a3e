//! What a simulator starts with: management tokens, Delivery accounts and their send tokens.

use std::fmt;
use std::time::Duration;

/// Everything [`super::Simulator::new`] needs.
#[derive(Clone, Debug, Default)]
pub struct SimConfig {
    pub management_tokens: Vec<ManagementToken>,
    pub accounts: Vec<AccountSeed>,
    /// Seeds the random source of fault injection and message ids.
    pub seed: u64,
}

/// A Management API token (`X-Api-Token`).
#[derive(Clone)]
pub struct ManagementToken {
    pub token: String,
    /// Delivery account ids this token may see and change; `None` means all of them.
    pub accounts: Option<Vec<i32>>,
}

impl fmt::Debug for ManagementToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManagementToken")
            .field("token", &"[redacted]")
            .field("accounts", &self.accounts)
            .finish()
    }
}

/// The starting state of one Delivery account.
#[derive(Clone, Debug)]
pub struct AccountSeed {
    pub id: i32,
    pub username: String,
    pub plan: String,
    pub account_type: String,
    pub enabled: bool,
    pub plan_messages_limit: i64,
    pub plan_messages_used: i64,
    pub extra_messages_total: i64,
    pub remaining_extra_messages_bought: i64,
    pub messages_sent: i64,
    pub ignore_suppression_list: bool,
    /// Sending domain names; the simulator gives each distinct name a `D` + 9 digits code.
    pub domains: Vec<String>,
    /// IP addresses or CIDR networks.
    pub allow_nets: Vec<String>,
    /// Time from the simulator clock at start to `plan_expiration_date`.
    pub plan_expires_in: Duration,
    pub send_tokens: Vec<TokenSeed>,
}

impl Default for AccountSeed {
    /// An enabled, unused `free` account with a 1000-message plan expiring in 30 days, for tests
    /// that set only the fields they care about.
    fn default() -> Self {
        Self {
            id: 0,
            username: String::new(),
            plan: "free".to_owned(),
            account_type: "transactional".to_owned(),
            enabled: true,
            plan_messages_limit: 1000,
            plan_messages_used: 0,
            extra_messages_total: 0,
            remaining_extra_messages_bought: 0,
            messages_sent: 0,
            ignore_suppression_list: false,
            domains: Vec::new(),
            allow_nets: Vec::new(),
            plan_expires_in: Duration::from_secs(30 * 86_400),
            send_tokens: Vec::new(),
        }
    }
}

/// A Send API token of one account.
#[derive(Clone, Default)]
pub struct TokenSeed {
    pub id: i32,
    pub label: String,
    pub token: String,
    /// IP addresses or CIDR networks.
    pub allow_nets: Vec<String>,
}

impl fmt::Debug for TokenSeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSeed")
            .field("id", &self.id)
            .field("label", &self.label)
            .field("token", &"[redacted]")
            .field("allow_nets", &self.allow_nets)
            .finish()
    }
}

/// Who the traffic generator sends as.
#[derive(Clone)]
pub struct SendIdentity {
    pub account_id: i32,
    pub token: String,
    pub from: String,
}

impl fmt::Debug for SendIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendIdentity")
            .field("account_id", &self.account_id)
            .field("token", &"[redacted]")
            .field("from", &self.from)
            .finish()
    }
}

impl SimConfig {
    /// One identity per send token of every account that has a sending domain, sending as
    /// `noreply@<first domain>`.
    pub fn send_identities(&self) -> Vec<SendIdentity> {
        self.accounts
            .iter()
            .filter_map(|account| account.domains.first().map(|domain| (account, domain)))
            .flat_map(|(account, domain)| {
                account.send_tokens.iter().map(move |token| SendIdentity {
                    account_id: account.id,
                    token: token.token.clone(),
                    from: format!("noreply@{domain}"),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_never_shows_a_token() {
        let config = SimConfig {
            management_tokens: vec![ManagementToken {
                token: "very-secret-management".into(),
                accounts: None,
            }],
            accounts: vec![AccountSeed {
                id: 1,
                domains: vec!["a.example".into()],
                send_tokens: vec![TokenSeed {
                    id: 1,
                    label: "l".into(),
                    token: "very-secret-send".into(),
                    allow_nets: vec![],
                }],
                ..AccountSeed::default()
            }],
            seed: 0,
        };
        let printed = format!("{config:?} {:?}", config.send_identities());
        assert!(!printed.contains("very-secret"), "{printed}");
    }

    #[test]
    fn accounts_without_a_domain_have_no_send_identity() {
        let config = SimConfig {
            accounts: vec![AccountSeed {
                id: 1,
                send_tokens: vec![TokenSeed {
                    token: "t".into(),
                    ..TokenSeed::default()
                }],
                ..AccountSeed::default()
            }],
            ..SimConfig::default()
        };
        assert!(config.send_identities().is_empty());
    }
}
