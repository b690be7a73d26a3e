//! The `discovery:` block, at the top level and in a tenant: as written, validated, and what a
//! tenant discovers ([`DiscoveryConfig`]).

use std::collections::BTreeSet;

use serde::Deserialize;

use super::fields::{account_set, in_bounds};
use super::{ConfigError, defaults, limits};

/// What discovery follows; at the top level, every tenant's defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDiscovery {
    pub(crate) accounts: Option<bool>,
    pub(crate) domains: Option<bool>,
    pub(crate) max_accounts: Option<usize>,
    pub(crate) max_domains: Option<usize>,
    pub(crate) allow: Option<Vec<i64>>,
    pub(crate) deny: Option<Vec<i64>>,
}

/// What a tenant discovers of the accounts the provider reveals: the accounts in the
/// dashboard's top lists (polled by the account collectors), and the sending domains of the
/// daily statistics (each a dashboard view). Off unless asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryConfig {
    pub accounts: bool,
    pub domains: bool,
    pub max_accounts: usize,
    pub max_domains: usize,
    /// When set, only these accounts are taken.
    pub allow: Option<BTreeSet<i32>>,
    pub deny: BTreeSet<i32>,
}

impl Default for DiscoveryConfig {
    fn default() -> Self {
        DiscoveryConfig {
            accounts: false,
            domains: false,
            max_accounts: defaults::DISCOVERY_MAX_ACCOUNTS,
            max_domains: defaults::DISCOVERY_MAX_DOMAINS,
            allow: None,
            deny: BTreeSet::new(),
        }
    }
}

/// A `discovery:` block over `defaults`; `field` names it in messages.
pub(crate) fn discovery(
    field: &str,
    raw: Option<RawDiscovery>,
    defaults: &DiscoveryConfig,
) -> Result<DiscoveryConfig, ConfigError> {
    let Some(raw) = raw else {
        return Ok(defaults.clone());
    };
    let cap = |key: &str, value: Option<usize>, default: usize| {
        in_bounds(
            format!("{field}.{key}"),
            value.unwrap_or(default),
            0..=limits::MAX_TARGETS,
        )
    };
    let ids = |key: &str, list| account_set(&format!("{field}.{key}"), list);
    Ok(DiscoveryConfig {
        accounts: raw.accounts.unwrap_or(defaults.accounts),
        domains: raw.domains.unwrap_or(defaults.domains),
        max_accounts: cap("max_accounts", raw.max_accounts, defaults.max_accounts)?,
        max_domains: cap("max_domains", raw.max_domains, defaults.max_domains)?,
        allow: ids("allow", raw.allow)?.or_else(|| defaults.allow.clone()),
        deny: ids("deny", raw.deny)?.unwrap_or_else(|| defaults.deny.clone()),
    })
}
