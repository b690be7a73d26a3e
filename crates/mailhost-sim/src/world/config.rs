//! What a simulator starts with: management tokens and their rate limits (token-wide and per
//! route), Delivery accounts and their send tokens, migrations, mailboxes and team members.

use std::fmt;
use std::time::Duration;

use ipnet::IpNet;

use super::rate_limit::RateLimit;
use crate::route::Route;

/// Everything [`crate::Simulator::new`] needs.
#[derive(Clone, Debug, Default)]
pub struct SimConfig {
    pub management_tokens: Vec<ManagementToken>,
    pub accounts: Vec<AccountSeed>,
    /// Seeds the random sources of fault injection, sending outcomes and seeded history.
    pub seed: u64,
    /// Seeds each enabled account with synthetic sending statistics over yesterday and today so
    /// far (in the account's time zone), so dashboards show numbers at once.
    pub history: bool,
    /// Migrations whose statistics `GET /api/migrations/{code}/stats` serves.
    pub migrations: Vec<MigrationSeed>,
    /// Email accounts (mailboxes) served by `GET /api/domains/{domain}/email_accounts/{code}`.
    pub mailboxes: Vec<MailboxSeed>,
    /// Team members served by `GET /api/team_members/{code}`.
    pub team_members: Vec<TeamMember>,
    /// Per-token limits of the Management API in force from the start; each names one of
    /// `management_tokens`.
    pub rate_limits: Vec<TokenRateLimit>,
    /// Limits of one Management API route of one token, in force from the start, beside (and
    /// checked before) the token's own limit in `rate_limits`; each names one of
    /// `management_tokens`. A later entry for the same (token, route) replaces an earlier one's
    /// limit, as in `rate_limits`.
    pub route_rate_limits: Vec<RouteRateLimit>,
}

/// The rate limit of one Management API route of one management token.
#[derive(Clone)]
pub struct RouteRateLimit {
    /// One of [`SimConfig::management_tokens`].
    pub token: String,
    /// A Management API route ([`Route::is_management`]).
    pub route: Route,
    pub limit: RateLimit,
}

impl fmt::Debug for RouteRateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RouteRateLimit")
            .field("token", &"[redacted]")
            .field("route", &self.route)
            .field("limit", &self.limit)
            .finish()
    }
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

/// The rate limit of one management token.
#[derive(Clone)]
pub struct TokenRateLimit {
    /// One of [`SimConfig::management_tokens`].
    pub token: String,
    pub limit: RateLimit,
}

impl fmt::Debug for TokenRateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenRateLimit")
            .field("token", &"[redacted]")
            .field("limit", &self.limit)
            .finish()
    }
}

/// One Delivery account as its owner sets it and the traffic moves it: the starting value of an
/// [`AccountSeed`] and the heart of an [`AccountState`](crate::AccountState).
#[derive(Clone, Debug)]
pub struct Account {
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
    /// IANA name of the account's time zone: its "days" in the daily statistics are local days
    /// there.
    pub timezone: String,
    /// Whether an order (a plan change or extra messages) waits for payment
    /// (`has_pending_order`).
    pub has_pending_order: bool,
    /// Where bounce notifications go (`bounce_notification`); `None`: nowhere.
    pub bounce_notification: Option<String>,
}

impl Default for Account {
    /// An enabled, unused `free` account with a 1000-message plan, for tests that set only the
    /// fields they care about.
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
            timezone: "UTC".to_owned(),
            has_pending_order: false,
            bounce_notification: None,
        }
    }
}

/// The starting state of one Delivery account: its [`Account`], and what is relative to the
/// clock at start or not yet parsed.
#[derive(Clone, Debug)]
pub struct AccountSeed {
    pub account: Account,
    /// IP addresses or CIDR networks.
    pub allow_nets: Vec<String>,
    /// Time from the simulator clock at start to `plan_expiration_date`.
    pub plan_expires_in: Duration,
    pub send_tokens: Vec<TokenSeed>,
    /// Time from the simulator clock at start to the account's `delete_on`; `None`: no deletion
    /// scheduled (`delete_on` null).
    pub delete_in: Option<Duration>,
}

super::embeds!(AccountSeed => account: Account);

impl From<Account> for AccountSeed {
    /// `account` with no allowed network and no send token, its plan expiring in 30 days and no
    /// deletion scheduled.
    fn from(account: Account) -> Self {
        Self {
            account,
            allow_nets: Vec::new(),
            plan_expires_in: Duration::from_secs(30 * 86_400),
            send_tokens: Vec::new(),
            delete_in: None,
        }
    }
}

impl AccountSeed {
    /// The default account (see [`Account::default`]) numbered `id`.
    pub fn with_id(id: i32) -> Self {
        Self::from(Account {
            id,
            ..Account::default()
        })
    }
}

impl Default for AccountSeed {
    /// The default [`Account`], its plan expiring in 30 days.
    fn default() -> Self {
        Account::default().into()
    }
}

/// The plan of one migration run. Its progress is a pure function of the simulator clock: it
/// starts at `clock at start + start_in - started_ago` and migrates `rate` messages a minute,
/// spread over `parallel` accounts at a time.
#[derive(Clone, Debug)]
pub struct MigrationSeed {
    /// `MG` followed by 8 digits.
    pub code: String,
    /// Time from the simulator clock at start to the start of the run.
    pub start_in: Duration,
    /// For runs that began before the simulator: moves the start back by this much.
    pub started_ago: Duration,
    /// Email accounts migrated by the run.
    pub accounts: u32,
    /// Messages to migrate, over all accounts (split evenly).
    pub messages: i64,
    /// Bytes to migrate; migrated bytes follow migrated messages proportionally.
    pub bytes: i64,
    /// Messages migrated per minute, over all accounts being migrated.
    pub rate: i64,
    /// Accounts migrated at the same time (at least 1).
    pub parallel: u32,
    /// How many accounts fail (the first ones of the run), each half-way through its messages.
    pub failed_accounts: u32,
}

impl Default for MigrationSeed {
    /// A run of 4 accounts and 4000 messages (1 GiB) starting at once at 100 messages a minute.
    fn default() -> Self {
        Self {
            code: "MG00000000".to_owned(),
            start_in: Duration::ZERO,
            started_ago: Duration::ZERO,
            accounts: 4,
            messages: 4000,
            bytes: 1 << 30,
            rate: 100,
            parallel: 2,
            failed_accounts: 0,
        }
    }
}

/// One email account (mailbox) as its owner sets it and the traffic moves it: the starting value
/// of a [`MailboxSeed`] and the heart of a [`MailboxState`](crate::MailboxState), whose counters
/// then move with the clock.
#[derive(Clone, Debug)]
pub struct Mailbox {
    /// `D` followed by 9 digits: the hosting domain of the mailbox.
    pub domain_code: String,
    pub domain_name: String,
    /// `EA` followed by 8 digits, or `P` followed by 9 digits for a postmaster.
    pub code: String,
    /// The part of the address before `@`.
    pub local_part: String,
    /// Space used, MiB: at start in a seed, at `as_of` in a state.
    pub quota_used_mib: i64,
    /// The mailbox limit, MiB; used space stops growing there.
    pub quota_limit_mib: i64,
    /// How fast the used space grows (until the limit); messages grow with it.
    pub fill_mib_per_hour: i64,
    /// Messages stored: at start in a seed, at `as_of` in a state.
    pub messages: i64,
    /// Outbound messages allowed per 24-hour period.
    pub outbound_limit: i64,
    /// Outbound messages already sent in the current period: at start in a seed, at `as_of` in
    /// a state.
    pub outbound_sent: i64,
    /// How fast the outbound count grows during a period (until the limit).
    pub outbound_per_hour: i64,
    pub archive: bool,
    /// One of [`ARCHIVE_STATUSES`](crate::ARCHIVE_STATUSES): `active`, `activating`, `disabled`
    /// or `deactivating`.
    pub archive_status: String,
    /// Vault (archive) space used, MiB, and messages in it.
    pub vault_quota_mib: i64,
    pub vault_messages: i64,
    pub password_expired: bool,
    pub enabled: bool,
    /// How often the owner logs in (zero: never again after the seeded last login).
    pub login_every: Duration,
    /// A second factor (one-time password) is set up for the mailbox.
    pub otp: bool,
    /// The mailbox must use a second factor.
    pub force_otp: bool,
    /// Its domain makes every mailbox use a second factor.
    pub domain_force_otp: bool,
    /// The mailbox may use the API.
    pub api_enabled: bool,
    /// SMTP is turned off for the mailbox; the record also shows `smtp_disabled` true while the
    /// mailbox is disabled.
    pub smtp_disabled: bool,
    pub imap_disabled: bool,
    pub pop_disabled: bool,
    /// The mailbox's allowed networks apply to webmail too.
    pub apply_allow_nets_webmail: bool,
}

impl Default for Mailbox {
    /// An enabled, empty 1 GiB mailbox without archive that sends nothing.
    fn default() -> Self {
        Self {
            domain_code: "D000000901".to_owned(),
            domain_name: "mail.example".to_owned(),
            code: "EA00000000".to_owned(),
            local_part: "user".to_owned(),
            quota_used_mib: 0,
            quota_limit_mib: 1024,
            fill_mib_per_hour: 0,
            messages: 0,
            outbound_limit: 1000,
            outbound_sent: 0,
            outbound_per_hour: 0,
            archive: false,
            archive_status: "disabled".to_owned(),
            vault_quota_mib: 0,
            vault_messages: 0,
            password_expired: false,
            enabled: true,
            login_every: Duration::from_secs(30 * 60),
            otp: false,
            force_otp: false,
            domain_force_otp: false,
            api_enabled: false,
            smtp_disabled: false,
            imap_disabled: false,
            pop_disabled: false,
            apply_allow_nets_webmail: false,
        }
    }
}

/// The starting state of one email account: its [`Mailbox`], and when its outbound period ends.
#[derive(Clone, Debug)]
pub struct MailboxSeed {
    pub mailbox: Mailbox,
    /// Time from the clock at start to the end of the current outbound period.
    pub outbound_reset_in: Duration,
}

super::embeds!(MailboxSeed => mailbox: Mailbox);

impl From<Mailbox> for MailboxSeed {
    /// `mailbox` with its current outbound period ending in 12 hours.
    fn from(mailbox: Mailbox) -> Self {
        Self {
            mailbox,
            outbound_reset_in: Duration::from_secs(12 * 3600),
        }
    }
}

impl Default for MailboxSeed {
    /// The default [`Mailbox`], its outbound period ending in 12 hours.
    fn default() -> Self {
        Mailbox::default().into()
    }
}

/// One team member, a user of the customer's panel and Management API, as the owner sets it: the
/// starting state of a [`TeamMemberState`](crate::TeamMemberState) and its heart.
#[derive(Clone, Debug)]
pub struct TeamMember {
    /// `T` followed by 9 digits.
    pub code: String,
    pub firstname: String,
    pub lastname: String,
    pub email_address: String,
    /// `status` `enabled` (true) or `disabled` (false).
    pub enabled: bool,
    /// A second factor (one-time password) is set up.
    pub otp: bool,
    /// The member is refused on the Management API.
    pub api_access_blocked: bool,
    /// Networks the member may log in from; empty: anywhere.
    pub allow_nets: Vec<IpNet>,
    /// Permission keys granted: each 1 to 64 ASCII letters, digits, `_`, `.`, `:` or `-`, at most
    /// 64 keys (a repeated key counts once); a state holds each once, in the order given.
    pub permissions: Vec<String>,
    /// Flags of the customer the member belongs to.
    pub is_customer_disabled: bool,
    pub is_customer_trial: bool,
    pub is_customer_reseller: bool,
    /// Not empty; `it` occurs upstream.
    pub language: String,
    /// IANA time zone name.
    pub timezone: String,
}

impl Default for TeamMember {
    /// An enabled member of an ordinary customer: no second factor, API access not blocked, no
    /// network restriction, no permission keys.
    fn default() -> Self {
        Self {
            code: "T000000000".to_owned(),
            firstname: "Team".to_owned(),
            lastname: "Member".to_owned(),
            email_address: "member@mail.example".to_owned(),
            enabled: true,
            otp: false,
            api_access_blocked: false,
            allow_nets: Vec::new(),
            permissions: Vec::new(),
            is_customer_disabled: false,
            is_customer_trial: false,
            is_customer_reseller: false,
            language: "it".to_owned(),
            timezone: "Europe/Rome".to_owned(),
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
                account: Account {
                    id: 1,
                    domains: vec!["a.example".into()],
                    ..Account::default()
                },
                send_tokens: vec![TokenSeed {
                    id: 1,
                    label: "l".into(),
                    token: "very-secret-send".into(),
                    allow_nets: vec![],
                }],
                ..AccountSeed::default()
            }],
            rate_limits: vec![TokenRateLimit {
                token: "very-secret-management".into(),
                limit: RateLimit::per_second(1.0),
            }],
            route_rate_limits: vec![RouteRateLimit {
                token: "very-secret-management".into(),
                route: Route::TracemailDaily,
                limit: RateLimit::per_second(5.0),
            }],
            ..SimConfig::default()
        };
        let printed = format!("{config:?} {:?}", config.send_identities());
        assert!(!printed.contains("very-secret"), "{printed}");
    }

    #[test]
    fn accounts_without_a_domain_have_no_send_identity() {
        let config = SimConfig {
            accounts: vec![AccountSeed {
                account: Account {
                    id: 1,
                    ..Account::default()
                },
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
