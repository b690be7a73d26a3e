//! Delivery accounts, their send tokens, sending domains and the suppression list, and how
//! accounts and tokens are rendered as records.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use super::World;
use super::clock::{format_datetime, shift};
use super::config::{Account, AccountSeed};
use super::error::SimConfigError;

/// Every member of a Delivery account record (section 2.2 of the interface document).
pub const ACCOUNT_RECORD_FIELDS: [&str; 39] = [
    "id",
    "status",
    "status_detail",
    "type",
    "plan",
    "username",
    "description",
    "config_hostname",
    "password",
    "created_at",
    "updated_at",
    "start_date",
    "next_renewal_date",
    "last_renewal_date",
    "plan_expiration_date",
    "extra_messages_expires_at",
    "delete_on",
    "num_messages",
    "plan_num_messages",
    "reset_to_plan_num_messages",
    "remaining_messages",
    "messages_sent",
    "plan_messages_limit",
    "plan_messages_used",
    "remaining_extra_messages_bought",
    "extra_messages_total",
    "remaining_messages_error",
    "customer_code",
    "customer_fullname",
    "manager_code",
    "manager_fullname",
    "domains",
    "domains_count",
    "allow_nets",
    "bounce_notification",
    "bounce_notification_to_sender",
    "ignore_suppression_list",
    "delivery_analytics",
    "has_pending_order",
];

/// Every member of a Delivery API token record (section 2.3).
pub const TOKEN_RECORD_FIELDS: [&str; 6] = [
    "id",
    "label",
    "token_preview",
    "allow_nets",
    "created_at",
    "last_used_at",
];

/// How many messages one unit of `volume` buys.
pub const MESSAGES_PER_VOLUME_UNIT: i64 = 1000;

/// The plan period: `last_renewal_date` is this long before `plan_expiration_date`.
const PLAN_PERIOD: SignedDuration = SignedDuration::from_hours(30 * 24);
/// Extra message packs stay usable this long after purchase.
const EXTRA_MESSAGES_VALIDITY: SignedDuration = SignedDuration::from_hours(365 * 24);
/// How long before the current plan period a seeded account was created.
const SEEDED_ACCOUNT_AGE: SignedDuration = SignedDuration::from_hours(400 * 24);

/// The owner every simulated account belongs to; the interface leaves these references opaque.
pub(crate) const CUSTOMER_CODE: &str = "C000000042";
const CUSTOMER_FULLNAME: &str = "Simulated Customer S.r.l.";
const CONFIG_HOSTNAME: &str = "smtp.delivery.sim.invalid";
const MASKED_PASSWORD: &str = "********";

/// One Delivery account as the simulator holds it: its [`Account`] (read and written through
/// `Deref`, as in `state.plan_messages_used`) and what only a running account has.
#[derive(Clone, Debug)]
pub struct AccountState {
    pub account: Account,
    pub allow_nets: Vec<IpNet>,
    pub plan_expiration: Timestamp,
    pub next_renewal: Timestamp,
    pub last_renewal: Timestamp,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub extra_messages_expires_at: Option<Timestamp>,
    /// When the account is due to be deleted (`delete_on`); `None`: not scheduled.
    pub delete_on: Option<Timestamp>,
    pub description: Option<String>,
    pub bounce_notification_to_sender: bool,
    pub api_tokens: Vec<ApiTokenState>,
}

super::embeds!(AccountState => account: Account);

/// A Send API token of an account.
#[derive(Clone, Debug)]
pub struct ApiTokenState {
    pub id: i32,
    pub label: String,
    pub token: SecretString,
    pub allow_nets: Vec<IpNet>,
    pub created_at: Timestamp,
    pub last_used_at: Option<Timestamp>,
}

impl AccountState {
    /// Messages the account can still send: what is left of the plan plus bought extras.
    pub fn remaining_messages(&self) -> i64 {
        self.plan_remaining()
            .saturating_add(self.remaining_extra_messages_bought.max(0))
    }

    /// The account's time zone; UTC if `timezone` was changed to a name jiff does not know.
    pub fn time_zone(&self) -> TimeZone {
        TimeZone::get(&self.timezone).unwrap_or(TimeZone::UTC)
    }

    /// The integer `status` of the record: 1 enabled, 0 disabled.
    pub fn status_code(&self) -> i64 {
        i64::from(self.enabled)
    }

    pub fn status_detail(&self) -> &str {
        if self.enabled { "ok" } else { "disabled" }
    }

    fn plan_remaining(&self) -> i64 {
        self.plan_messages_limit
            .saturating_sub(self.plan_messages_used)
            .max(0)
    }

    /// Charges `n` sent messages: the plan first, then bought extras. The caller has checked
    /// that `n` fits in [`Self::remaining_messages`].
    pub(crate) fn consume(&mut self, n: i64) {
        let from_plan = n.min(self.plan_remaining());
        self.plan_messages_used = self.plan_messages_used.saturating_add(from_plan);
        self.remaining_extra_messages_bought = self
            .remaining_extra_messages_bought
            .saturating_sub(n - from_plan);
        self.messages_sent = self.messages_sent.saturating_add(n);
    }

    /// Adds `volume` extra message packs bought at `now`.
    pub(crate) fn buy_extras(&mut self, volume: i32, now: Timestamp) {
        let messages = i64::from(volume).saturating_mul(MESSAGES_PER_VOLUME_UNIT);
        self.extra_messages_total = self.extra_messages_total.saturating_add(messages);
        self.remaining_extra_messages_bought = self
            .remaining_extra_messages_bought
            .saturating_add(messages);
        self.extra_messages_expires_at = Some(shift(now, EXTRA_MESSAGES_VALIDITY));
    }

    pub(crate) fn from_seed(seed: &AccountSeed, now: Timestamp) -> Result<Self, SimConfigError> {
        let expires_in = SignedDuration::try_from(seed.plan_expires_in)
            .map_err(|_| SimConfigError::DateOutOfRange(seed.id))?;
        let plan_expiration = now
            .checked_add(expires_in)
            .map_err(|_| SimConfigError::DateOutOfRange(seed.id))?;
        let delete_on = seed
            .delete_in
            .map(|delete_in| {
                SignedDuration::try_from(delete_in)
                    .ok()
                    .and_then(|d| now.checked_add(d).ok())
                    .ok_or(SimConfigError::DateOutOfRange(seed.id))
            })
            .transpose()?;
        let last_renewal = shift(plan_expiration, -PLAN_PERIOD);
        let created_at = shift(last_renewal, -SEEDED_ACCOUNT_AGE);
        if TimeZone::get(&seed.timezone).is_err() {
            return Err(SimConfigError::BadTimeZone {
                account: seed.id,
                value: seed.timezone.clone(),
            });
        }
        let allow_nets = seed
            .allow_nets
            .iter()
            .map(|value| {
                parse_net(value).ok_or_else(|| SimConfigError::BadAccountNet {
                    account: seed.id,
                    value: value.clone(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut api_tokens: Vec<ApiTokenState> = Vec::with_capacity(seed.send_tokens.len());
        for token in &seed.send_tokens {
            if api_tokens.iter().any(|t| t.id == token.id) {
                return Err(SimConfigError::DuplicateTokenId {
                    account: seed.id,
                    token: token.id,
                });
            }
            if token.token.is_empty() {
                return Err(SimConfigError::EmptyToken { account: seed.id });
            }
            let allow_nets = token
                .allow_nets
                .iter()
                .map(|value| {
                    parse_net(value).ok_or_else(|| SimConfigError::BadTokenNet {
                        account: seed.id,
                        token: token.id,
                        value: value.clone(),
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            api_tokens.push(ApiTokenState {
                id: token.id,
                label: token.label.clone(),
                token: SecretString::from(token.token.clone()),
                allow_nets,
                created_at: shift(created_at, SignedDuration::from_hours(24)),
                last_used_at: None,
            });
        }
        Ok(Self {
            account: seed.account.clone(),
            allow_nets,
            plan_expiration,
            next_renewal: plan_expiration,
            last_renewal,
            created_at,
            updated_at: last_renewal,
            extra_messages_expires_at: (seed.extra_messages_total > 0)
                .then(|| shift(last_renewal, EXTRA_MESSAGES_VALIDITY)),
            delete_on,
            description: None,
            bounce_notification_to_sender: false,
            api_tokens,
        })
    }

    /// The record exactly as the Management API returns it.
    pub(crate) fn record(&self, catalogue: &DomainCatalogue) -> Value {
        let domains: Vec<Value> = self
            .domains
            .iter()
            .map(|name| json!({ "code": catalogue.code_of(name), "name": name }))
            .collect();
        let allow_nets: Vec<String> = self.allow_nets.iter().map(render_net).collect();
        json!({
            "id": self.id,
            "status": self.status_code(),
            "status_detail": self.status_detail(),
            "type": self.account_type,
            "plan": self.plan,
            "username": self.username,
            "description": self.description,
            "config_hostname": CONFIG_HOSTNAME,
            "password": MASKED_PASSWORD,
            "created_at": format_datetime(self.created_at),
            "updated_at": format_datetime(self.updated_at),
            "start_date": format_datetime(self.created_at),
            "next_renewal_date": format_datetime(self.next_renewal),
            "last_renewal_date": format_datetime(self.last_renewal),
            "plan_expiration_date": format_datetime(self.plan_expiration),
            "extra_messages_expires_at": self.extra_messages_expires_at.map(format_datetime),
            "delete_on": self.delete_on.map(format_datetime),
            "num_messages": self.plan_messages_limit,
            "plan_num_messages": self.plan_messages_limit,
            "reset_to_plan_num_messages": self.plan_messages_limit,
            "remaining_messages": self.remaining_messages(),
            "messages_sent": self.messages_sent,
            "plan_messages_limit": self.plan_messages_limit,
            "plan_messages_used": self.plan_messages_used,
            "remaining_extra_messages_bought": self.remaining_extra_messages_bought,
            "extra_messages_total": self.extra_messages_total,
            "remaining_messages_error": Value::Null,
            "customer_code": CUSTOMER_CODE,
            "customer_fullname": CUSTOMER_FULLNAME,
            "manager_code": Value::Null,
            "manager_fullname": Value::Null,
            "domains_count": domains.len(),
            "domains": domains,
            "allow_nets": allow_nets,
            "bounce_notification": self.bounce_notification,
            "bounce_notification_to_sender": self.bounce_notification_to_sender,
            "ignore_suppression_list": self.ignore_suppression_list,
            "delivery_analytics": false,
            "has_pending_order": self.has_pending_order,
        })
    }
}

impl ApiTokenState {
    /// The first and last four characters of a long token, stars for the rest; only stars for a
    /// short one, so the preview never gives the token away.
    pub fn token_preview(&self) -> String {
        let token = self.token.expose_secret();
        let chars: Vec<char> = token.chars().collect();
        if chars.len() < 16 {
            return "********".to_owned();
        }
        let head: String = chars[..4].iter().collect();
        let tail: String = chars[chars.len() - 4..].iter().collect();
        format!("{head}********{tail}")
    }

    pub(crate) fn matches(&self, presented: &str) -> bool {
        self.token.expose_secret() == presented
    }

    pub(crate) fn record(&self) -> Value {
        json!({
            "id": self.id,
            "label": self.label,
            "token_preview": self.token_preview(),
            "allow_nets": self.allow_nets.iter().map(render_net).collect::<Vec<_>>(),
            "created_at": format_datetime(self.created_at),
            "last_used_at": self.last_used_at.map(format_datetime),
        })
    }
}

/// Sending domains known to the simulated service, each with a stable `D` + 9 digits code.
#[derive(Debug, Default)]
pub(crate) struct DomainCatalogue {
    codes: BTreeMap<String, String>,
    names: BTreeMap<String, String>,
}

impl DomainCatalogue {
    const FIRST_CODE: u32 = 101;

    /// Registers `name` if new; returns its code.
    pub(crate) fn register(&mut self, name: &str) -> String {
        let key = name.to_ascii_lowercase();
        if let Some(code) = self.codes.get(&key) {
            return code.clone();
        }
        let number = Self::FIRST_CODE + u32::try_from(self.codes.len()).unwrap_or(u32::MAX - 200);
        let code = format!("D{number:09}");
        self.codes.insert(key, code.clone());
        self.names.insert(code.clone(), name.to_owned());
        code
    }

    pub(crate) fn code_of(&self, name: &str) -> Option<&str> {
        self.codes
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    pub(crate) fn name_of(&self, code: &str) -> Option<&str> {
        self.names.get(code).map(String::as_str)
    }

    pub(crate) fn dump(&self) -> Value {
        self.names
            .iter()
            .map(|(code, name)| json!({ "code": code, "name": name }))
            .collect()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SuppressionReason {
    Complaint,
    Bounce,
}

impl SuppressionReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Complaint => "complaint",
            Self::Bounce => "bounce",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "complaint" => Some(Self::Complaint),
            "bounce" => Some(Self::Bounce),
            _ => None,
        }
    }
}

/// One entry of the suppression list.
#[derive(Clone, Debug)]
pub(crate) struct SuppressionEntry {
    /// Lower-cased, so lookups ignore case.
    pub email: String,
    pub reason: SuppressionReason,
    /// Account ids or codes the entry is restricted to; `None` is a global entry.
    pub accounts: Option<Vec<String>>,
    pub created_at: Timestamp,
}

impl SuppressionEntry {
    pub(crate) fn applies_to(&self, account_id: i32) -> bool {
        match &self.accounts {
            None => true,
            Some(accounts) => accounts
                .iter()
                .any(|a| a.trim().parse::<i32>() == Ok(account_id)),
        }
    }
}

/// A checked change of an account's settings, the body of `PUT /api/delivery/accounts/{id}`;
/// `None` leaves a setting as it is.
#[derive(Debug, Default)]
pub(crate) struct AccountSettings {
    pub description: Option<String>,
    /// `Some(None)` clears the address.
    pub bounce_notification: Option<Option<String>>,
    pub bounce_notification_to_sender: Option<bool>,
    /// Codes of registered sending domains; replaces the account's domains.
    pub domain_codes: Option<Vec<String>>,
    /// Volume units of extra messages to buy now.
    pub volume: Option<i32>,
    pub ignore_suppression_list: Option<bool>,
    pub allow_nets: Option<Vec<IpNet>>,
}

/// What a change (of an account or a team member) names that the world does not have; the `api`
/// module turns each into its HTTP answer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Missing {
    Account(i32),
    Token { account: i32, token: i32 },
    DomainCode(String),
    TeamMember(String),
}

impl World {
    /// The account `id`, or why not.
    pub(crate) fn account(&self, id: i32) -> Result<&AccountState, Missing> {
        self.accounts.get(&id).ok_or(Missing::Account(id))
    }

    /// The API token `token` of account `account`, or which of the two is missing.
    pub(crate) fn api_token(&self, account: i32, token: i32) -> Result<&ApiTokenState, Missing> {
        self.account(account)?
            .api_tokens
            .iter()
            .find(|t| t.id == token)
            .ok_or(Missing::Token { account, token })
    }

    /// Applies `settings` to account `id` whole, or nothing when a domain code is unknown; a
    /// volume buys extra messages at `now`. Returns the account's new record.
    pub(crate) fn update_settings(
        &mut self,
        id: i32,
        settings: AccountSettings,
        now: Timestamp,
    ) -> Result<Value, Missing> {
        self.account(id)?;
        let domains = settings
            .domain_codes
            .map(|codes| {
                let mut names: Vec<String> = Vec::with_capacity(codes.len());
                for code in codes {
                    let name = self
                        .domains
                        .name_of(&code)
                        .ok_or_else(|| Missing::DomainCode(code.clone()))?;
                    if !names.iter().any(|known| known == name) {
                        names.push(name.to_owned());
                    }
                }
                Ok(names)
            })
            .transpose()?;
        let account = self.accounts.get_mut(&id).ok_or(Missing::Account(id))?;
        if let Some(description) = settings.description {
            account.description = Some(description);
        }
        if let Some(address) = settings.bounce_notification {
            account.bounce_notification = address;
        }
        if let Some(flag) = settings.bounce_notification_to_sender {
            account.bounce_notification_to_sender = flag;
        }
        if let Some(domains) = domains {
            account.domains = domains;
        }
        if let Some(volume) = settings.volume {
            account.buy_extras(volume, now);
        }
        if let Some(flag) = settings.ignore_suppression_list {
            account.ignore_suppression_list = flag;
        }
        if let Some(nets) = settings.allow_nets {
            account.allow_nets = nets;
        }
        account.updated_at = now;
        self.record(id).ok_or(Missing::Account(id))
    }

    /// Enables or disables account `id` at `now`; returns its new record.
    pub(crate) fn set_enabled(
        &mut self,
        id: i32,
        enabled: bool,
        now: Timestamp,
    ) -> Result<Value, Missing> {
        let account = self.accounts.get_mut(&id).ok_or(Missing::Account(id))?;
        account.enabled = enabled;
        account.updated_at = now;
        self.record(id).ok_or(Missing::Account(id))
    }

    /// Replaces the allow-list of an API token; returns the token's new record.
    pub(crate) fn set_token_nets(
        &mut self,
        account: i32,
        token: i32,
        nets: Vec<IpNet>,
    ) -> Result<Value, Missing> {
        let found = self
            .accounts
            .get_mut(&account)
            .ok_or(Missing::Account(account))?
            .api_tokens
            .iter_mut()
            .find(|t| t.id == token)
            .ok_or(Missing::Token { account, token })?;
        found.allow_nets = nets;
        Ok(found.record())
    }
}

/// Parses an allow-list entry: a CIDR network, or a bare address meaning that one host.
pub fn parse_net(value: &str) -> Option<IpNet> {
    let value = value.trim();
    value
        .parse::<IpNet>()
        .ok()
        .or_else(|| value.parse::<IpAddr>().ok().map(IpNet::from))
}

/// Host networks are shown as bare addresses, the way they are usually entered.
pub fn render_net(net: &IpNet) -> String {
    if net.prefix_len() == net.max_prefix_len() {
        net.addr().to_string()
    } else {
        net.to_string()
    }
}

/// An empty allow-list accepts everyone; otherwise the address must fall in one of the networks.
pub fn nets_allow(nets: &[IpNet], ip: IpAddr) -> bool {
    nets.is_empty() || nets.iter().any(|net| net.contains(&ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account() -> AccountState {
        let seed = AccountSeed::from(Account {
            id: 7,
            plan_messages_limit: 100,
            plan_messages_used: 95,
            extra_messages_total: 50,
            remaining_extra_messages_bought: 20,
            ..Account::default()
        });
        AccountState::from_seed(&seed, Timestamp::UNIX_EPOCH).expect("valid seed")
    }

    #[test]
    fn remaining_messages_adds_the_plan_rest_and_the_extras() {
        let mut a = account();
        assert_eq!(a.remaining_messages(), 25);
        a.plan_messages_used = 150;
        assert_eq!(
            a.remaining_messages(),
            20,
            "an overdrawn plan counts as zero"
        );
    }

    #[test]
    fn consumption_takes_the_plan_first_then_the_extras() {
        let mut a = account();
        a.consume(8);
        assert_eq!(a.plan_messages_used, 100);
        assert_eq!(a.remaining_extra_messages_bought, 17);
        assert_eq!(a.messages_sent, 8);
        assert_eq!(a.remaining_messages(), 17);
    }

    #[test]
    fn bare_addresses_are_single_hosts_and_render_back_bare() {
        let net = parse_net("192.0.2.10").expect("ip");
        assert_eq!(net.prefix_len(), 32);
        assert_eq!(render_net(&net), "192.0.2.10");
        let v6 = parse_net("2001:db8::/32").expect("cidr");
        assert_eq!(render_net(&v6), "2001:db8::/32");
        assert!(parse_net("not-a-net").is_none());
        assert!(parse_net("10.0.0.0/33").is_none());
        assert!(nets_allow(&[], "198.51.100.1".parse().expect("ip")));
        assert!(nets_allow(&[v6], "2001:db8::5".parse().expect("ip")));
        assert!(!nets_allow(&[net], "192.0.2.11".parse().expect("ip")));
    }

    #[test]
    fn token_previews_never_contain_the_whole_token() {
        let mut token = ApiTokenState {
            id: 1,
            label: String::new(),
            token: SecretString::from("abcdefghijklmnopqrstuvwxyz"),
            allow_nets: vec![],
            created_at: Timestamp::UNIX_EPOCH,
            last_used_at: None,
        };
        assert_eq!(token.token_preview(), "abcd********wxyz");
        token.token = SecretString::from("short");
        assert_eq!(token.token_preview(), "********");
    }

    #[test]
    fn domain_codes_are_stable_and_case_insensitive() {
        let mut catalogue = DomainCatalogue::default();
        assert_eq!(catalogue.register("shop.example"), "D000000101");
        assert_eq!(catalogue.register("news.example"), "D000000102");
        assert_eq!(catalogue.register("SHOP.example"), "D000000101");
        assert_eq!(catalogue.name_of("D000000102"), Some("news.example"));
    }
}
