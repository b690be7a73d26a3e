//! The provider's state and its rules: accounts, tokens, domains, the suppression list, sending
//! statistics, migrations, mailboxes, team members, rate limits (per token and per route), the
//! clock, the demo fleet and the traffic model. Nothing here knows HTTP: the `api` module reads and
//! changes this state, never the other way round. The one name borrowed from `api` is
//! [`crate::Route`], the operations' names, which key the per-route rate limits.

/// `Deref` and `DerefMut` from a seed or state to the resource it embeds, so that `state.field`
/// reads and writes a field of the resource as if it were the state's own.
macro_rules! embeds {
    ($outer:ty => $field:ident: $inner:ty) => {
        impl std::ops::Deref for $outer {
            type Target = $inner;

            fn deref(&self) -> &$inner {
                &self.$field
            }
        }

        impl std::ops::DerefMut for $outer {
            fn deref_mut(&mut self) -> &mut $inner {
                &mut self.$field
            }
        }
    };
}
use embeds;

pub(crate) mod accounts;
pub(crate) mod clock;
pub(crate) mod codes;
pub(crate) mod config;
pub(crate) mod error;
pub(crate) mod fleet;
pub(crate) mod mailboxes;
pub(crate) mod migrations;
pub(crate) mod rate_limit;
pub(crate) mod sending;
pub(crate) mod stats;
pub(crate) mod team_members;
pub(crate) mod tracemail;
pub(crate) mod traffic;

use std::collections::{BTreeMap, HashMap};

use jiff::Timestamp;
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::{Map, Value, json};

pub use accounts::{
    ACCOUNT_RECORD_FIELDS, AccountState, ApiTokenState, MESSAGES_PER_VOLUME_UNIT,
    SuppressionReason, TOKEN_RECORD_FIELDS,
};
pub use clock::{SimClock, format_datetime};
pub use config::{
    Account, AccountSeed, Mailbox, MailboxSeed, ManagementToken, MigrationSeed, RouteRateLimit,
    SendIdentity, SimConfig, TeamMember, TokenRateLimit, TokenSeed,
};
pub use error::SimConfigError;
pub use fleet::{
    DEMO_ARCHIVE_ACTIVATING, DEMO_BUSY, DEMO_DISABLED, DEMO_EXPIRING, DEMO_FILLING,
    DEMO_MIGRATION_COMPLETED, DEMO_MIGRATION_RUNNING, DEMO_MIGRATION_WITH_FAILURES,
    DEMO_NEARLY_EXHAUSTED, DEMO_OUTBOUND_AT_LIMIT, DEMO_POSTMASTER, DEMO_SEED,
    DEMO_TEAM_MEMBER_API_BLOCKED, DEMO_TEAM_MEMBER_NO_OTP, DEMO_TEAM_MEMBER_SECURED, DemoTargets,
};
pub use mailboxes::{
    ARCHIVE_STATUSES, DELEGATE_RECORD_FIELDS, MAILBOX_RECORD_FIELDS, MailboxState,
    OUTBOUND_PERIOD_HOURS,
};
pub use rate_limit::{
    DEFAULT_REFUSAL_STATUS, MAX_BURST, MAX_RATE, MAX_RETRY_AFTER_SECS, MIN_RATE, RECENT_REQUESTS,
    REFUSAL_STATUSES, RateLimit, RateLimitHeaders, RateLimitStats, RetryAfterStyle,
};
pub use sending::BOUNCE_DOMAIN;
pub use stats::{OUTCOMES, Outcome};
pub use team_members::{
    PERMISSION_KEY_MAX_CHARS, TEAM_MEMBER_MAX_PERMISSIONS, TEAM_MEMBER_PASSWORD_MAX_CHARS,
    TEAM_MEMBER_PASSWORD_MIN_CHARS, TEAM_MEMBER_RECORD_FIELDS, TeamMemberState,
};
pub use tracemail::DAILY_DAYS;

use accounts::{DomainCatalogue, SuppressionEntry};
use migrations::MigrationState;
use stats::Stats;

/// All mutable state, behind one lock: operations are short and never await while holding it.
#[derive(Debug)]
pub(crate) struct World {
    pub accounts: BTreeMap<i32, AccountState>,
    /// Send token -> (account id, token id).
    pub send_tokens: HashMap<String, (i32, i32)>,
    pub domains: DomainCatalogue,
    pub suppression: Vec<SuppressionEntry>,
    pub messages_accepted: u64,
    pub stats: Stats,
    /// Decides the outcome of each accepted message.
    pub outcome_rng: StdRng,
    /// By migration code.
    pub migrations: BTreeMap<String, MigrationState>,
    /// By email account code.
    pub mailboxes: BTreeMap<String, MailboxState>,
    /// By team member code.
    pub team_members: BTreeMap<String, TeamMemberState>,
}

impl Default for World {
    fn default() -> Self {
        Self::new(0)
    }
}

impl World {
    /// An empty world whose random choices follow `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            accounts: BTreeMap::new(),
            send_tokens: HashMap::new(),
            domains: DomainCatalogue::default(),
            suppression: Vec::new(),
            messages_accepted: 0,
            stats: Stats::default(),
            // Not the fault injector's stream: faults set by a test must not change outcomes.
            outcome_rng: StdRng::seed_from_u64(seed ^ 0x6f75_7463_6f6d_6573),
            migrations: BTreeMap::new(),
            mailboxes: BTreeMap::new(),
            team_members: BTreeMap::new(),
        }
    }

    /// Adds an account with its send tokens and sending domains; `now` dates the seed.
    pub(crate) fn insert_account(
        &mut self,
        seed: &AccountSeed,
        now: Timestamp,
    ) -> Result<(), SimConfigError> {
        let account = AccountState::from_seed(seed, now)?;
        if self.accounts.contains_key(&seed.id) {
            return Err(SimConfigError::DuplicateAccount(seed.id));
        }
        for token in &seed.send_tokens {
            if self.send_tokens.contains_key(&token.token) {
                return Err(SimConfigError::DuplicateToken { account: seed.id });
            }
        }
        for token in &seed.send_tokens {
            self.send_tokens
                .insert(token.token.clone(), (seed.id, token.id));
        }
        for domain in &seed.domains {
            self.domains.register(domain);
        }
        self.accounts.insert(seed.id, account);
        Ok(())
    }

    /// Adds a migration that starts relative to `now`.
    pub(crate) fn insert_migration(
        &mut self,
        seed: &MigrationSeed,
        now: Timestamp,
    ) -> Result<(), SimConfigError> {
        let state = MigrationState::from_seed(seed, now)?;
        if self.migrations.contains_key(&seed.code) {
            return Err(SimConfigError::BadMigration {
                code: seed.code.clone(),
                reason: "configured twice".to_owned(),
            });
        }
        self.migrations.insert(seed.code.clone(), state);
        Ok(())
    }

    /// Adds a mailbox whose counters are true at `now`. Its code must be new, and its domain code
    /// must not name another domain (sending domains included).
    pub(crate) fn insert_mailbox(
        &mut self,
        seed: &MailboxSeed,
        now: Timestamp,
    ) -> Result<(), SimConfigError> {
        let state = MailboxState::from_seed(seed, now)?;
        let bad = |reason: String| SimConfigError::BadMailbox {
            code: seed.code.clone(),
            reason,
        };
        if self.mailboxes.contains_key(&seed.code) {
            return Err(bad("configured twice".to_owned()));
        }
        let clash = self
            .mailboxes
            .values()
            .map(|m| (m.domain_code.as_str(), m.domain_name.as_str()))
            .chain(
                self.domains
                    .name_of(&seed.domain_code)
                    .map(|name| (seed.domain_code.as_str(), name)),
            )
            .chain(
                self.domains
                    .code_of(&seed.domain_name)
                    .map(|code| (code, seed.domain_name.as_str())),
            )
            .find(|(code, name)| {
                (*code == seed.domain_code) != name.eq_ignore_ascii_case(&seed.domain_name)
            });
        if let Some((code, name)) = clash {
            return Err(bad(format!(
                "domain {} ({}) clashes with domain {name} ({code})",
                seed.domain_name, seed.domain_code
            )));
        }
        self.mailboxes.insert(seed.code.clone(), state);
        Ok(())
    }

    /// Gives every enabled account of `seeds` (already inserted) a sending history up to `now`,
    /// drawn from `seed`.
    pub(crate) fn seed_history(&mut self, seed: u64, seeds: &[AccountSeed], now: Timestamp) {
        for account_seed in seeds.iter().filter(|a| a.enabled) {
            let Some(account) = self.accounts.get(&account_seed.id) else {
                continue;
            };
            // One stream per account, so adding an account leaves the others' history alone.
            let mut rng = StdRng::seed_from_u64(
                seed ^ u64::from(account_seed.id.unsigned_abs())
                    .wrapping_mul(0x9e37_79b9_7f4a_7c15),
            );
            stats::seed_history(
                &mut self.stats,
                &mut rng,
                account_seed.id,
                &account.domains,
                &account.time_zone(),
                now,
            );
        }
    }

    pub(crate) fn record(&self, id: i32) -> Option<Value> {
        self.accounts
            .get(&id)
            .map(|account| account.record(&self.domains))
    }

    pub(crate) fn suppression_for(
        &self,
        email: &str,
        account_id: i32,
    ) -> Option<SuppressionReason> {
        let email = email.to_ascii_lowercase();
        self.suppression
            .iter()
            .find(|entry| entry.email == email && entry.applies_to(account_id))
            .map(|entry| entry.reason)
    }

    /// Adds an entry; the same address with the same restriction only has its reason updated.
    pub(crate) fn suppress(
        &mut self,
        email: &str,
        reason: SuppressionReason,
        accounts: Option<Vec<String>>,
        now: Timestamp,
    ) {
        let email = email.to_ascii_lowercase();
        if let Some(entry) = self
            .suppression
            .iter_mut()
            .find(|entry| entry.email == email && entry.accounts == accounts)
        {
            entry.reason = reason;
            return;
        }
        self.suppression.push(SuppressionEntry {
            email,
            reason,
            accounts,
            created_at: now,
        });
    }

    /// Everything as the control plane shows it at `now`: accounts as records, their API tokens,
    /// domains, the suppression list, the messages accepted so far, migration statistics, mailbox
    /// records and team member records.
    pub(crate) fn dump(&self, now: Timestamp) -> Map<String, Value> {
        let accounts: Vec<Value> = self
            .accounts
            .values()
            .map(|account| account.record(&self.domains))
            .collect();
        let api_tokens: Map<String, Value> = self
            .accounts
            .values()
            .map(|account| {
                let tokens = account.api_tokens.iter().map(|t| t.record()).collect();
                (account.id.to_string(), Value::Array(tokens))
            })
            .collect();
        let suppression: Vec<Value> = self
            .suppression
            .iter()
            .map(|entry| {
                json!({
                    "email": entry.email,
                    "reason": entry.reason.as_str(),
                    "accounts": entry.accounts,
                    "created_at": format_datetime(entry.created_at),
                })
            })
            .collect();
        let migrations: Map<String, Value> = self
            .migrations
            .iter()
            .map(|(code, migration)| (code.clone(), migration.stats(now)))
            .collect();
        let mailboxes: Vec<Value> = self.mailboxes.values().map(|m| m.record(now)).collect();
        let team_members: Vec<Value> = self.team_members.values().map(|t| t.record()).collect();
        let mut dump = Map::new();
        for (name, value) in [
            ("now", json!(format_datetime(now))),
            ("migrations", Value::Object(migrations)),
            ("mailboxes", Value::Array(mailboxes)),
            ("team_members", Value::Array(team_members)),
            ("accounts", Value::Array(accounts)),
            ("api_tokens", Value::Object(api_tokens)),
            ("domains", self.domains.dump()),
            ("suppression_list", Value::Array(suppression)),
            ("messages_accepted", json!(self.messages_accepted)),
        ] {
            dump.insert(name.to_owned(), value);
        }
        dump
    }

    pub(crate) fn remove_account(&mut self, id: i32) -> bool {
        let removed = self.accounts.remove(&id).is_some();
        if removed {
            self.send_tokens.retain(|_, (account, _)| *account != id);
            self.stats.forget_account(id);
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restricted_suppression_entries_apply_only_to_their_accounts() {
        let mut world = World::default();
        world.suppress(
            "Someone@Example.net",
            SuppressionReason::Bounce,
            Some(vec!["7".into()]),
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(
            world.suppression_for("someone@example.net", 7),
            Some(SuppressionReason::Bounce)
        );
        assert_eq!(world.suppression_for("someone@example.net", 8), None);
    }
}
