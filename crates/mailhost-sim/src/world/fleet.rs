//! The seeded demo fleet: four Delivery accounts that between them show every state a dashboard
//! should render (healthy, nearly exhausted, disabled, expiring), with two days of sending
//! statistics, three migrations (running, completed, running with a failure), four mailboxes
//! (filling up, archive activating, at its outbound limit and open to the API without a second
//! factor, postmaster) and three team members (secured, API access without a second factor, API
//! access blocked).

use std::time::Duration;

use super::config::{
    Account, AccountSeed, Mailbox, MailboxSeed, ManagementToken, MigrationSeed, SimConfig,
    TeamMember, TokenSeed,
};

/// Healthy and busy.
pub const DEMO_BUSY: i32 = 1001;
/// About 95% of a 10000-message plan used, no extras.
pub const DEMO_NEARLY_EXHAUSTED: i32 = 1002;
/// Disabled: its sends are refused.
pub const DEMO_DISABLED: i32 = 1003;
/// Plan expires within three days.
pub const DEMO_EXPIRING: i32 = 1004;

/// Running, moving visibly every minute, finished about an hour after start.
pub const DEMO_MIGRATION_RUNNING: &str = "MG00000001";
/// Finished before the simulator started.
pub const DEMO_MIGRATION_COMPLETED: &str = "MG00000002";
/// Running, with one failed account and some errors.
pub const DEMO_MIGRATION_WITH_FAILURES: &str = "MG00000003";

/// Hosting domains of the demo mailboxes (not sending domains).
const DEMO_MAIL_DOMAIN: (&str, &str) = ("D000000901", "acme-mail.example");
const DEMO_STUDIO_DOMAIN: (&str, &str) = ("D000000902", "studio-mail.example");
/// At 89% of 2 GiB, growing 5 MiB a minute: crosses 90% about four minutes after start.
pub const DEMO_FILLING: &str = "EA00000001";
/// Archive being activated (`archive_status` `activating`, import running).
pub const DEMO_ARCHIVE_ACTIVATING: &str = "EA00000002";
/// Has sent its whole outbound limit; the count goes back to zero in five hours. It also has
/// `api_enabled` true and `otp` false: the mailbox with API access and no second factor.
pub const DEMO_OUTBOUND_AT_LIMIT: &str = "EA00000003";
/// The postmaster of the second domain.
pub const DEMO_POSTMASTER: &str = "P000000001";

/// Team member with a second factor (`otp`), API access and allowed networks: nothing to alert on.
pub const DEMO_TEAM_MEMBER_SECURED: &str = "T000000101";
/// Team member with API access (not blocked) and no second factor: the one an alert should catch.
pub const DEMO_TEAM_MEMBER_NO_OTP: &str = "T000000102";
/// Team member without a second factor whose API access is blocked, so the API is not exposed.
pub const DEMO_TEAM_MEMBER_API_BLOCKED: &str = "T000000103";

/// What a demo (or an exporter configuration written for it) can point at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DemoTargets {
    /// Delivery account ids.
    pub accounts: Vec<i32>,
    /// Migration codes.
    pub migrations: Vec<String>,
    /// `(domain_code, mailbox_code)` pairs.
    pub mailboxes: Vec<(String, String)>,
    /// Sending domain names, each once, in the order the accounts list them.
    pub domains: Vec<String>,
    /// Team member codes.
    pub team_members: Vec<String>,
}

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
    /// two and a half days; each with one send token, one or two sending domains, the
    /// `Europe/Rome` time zone and seeded history. One unrestricted management token. Three
    /// migrations, four mailboxes and three team members (see the `DEMO_*` constants).
    pub fn demo(management_token: &str) -> Self {
        Self {
            management_tokens: vec![ManagementToken {
                token: management_token.to_owned(),
                accounts: None,
            }],
            accounts: demo_accounts(),
            seed: DEMO_SEED,
            history: true,
            migrations: demo_migrations(),
            mailboxes: demo_mailboxes(),
            team_members: demo_team_members(),
            rate_limits: Vec::new(),
            route_rate_limits: Vec::new(),
        }
    }

    /// The accounts, migrations, mailboxes, sending domains and team members of this
    /// configuration.
    pub fn demo_targets(&self) -> DemoTargets {
        let mut domains: Vec<String> = Vec::new();
        for name in self.accounts.iter().flat_map(|a| &a.domains) {
            if !domains.iter().any(|known| known.eq_ignore_ascii_case(name)) {
                domains.push(name.clone());
            }
        }
        DemoTargets {
            accounts: self.accounts.iter().map(|a| a.id).collect(),
            migrations: self.migrations.iter().map(|m| m.code.clone()).collect(),
            mailboxes: self
                .mailboxes
                .iter()
                .map(|m| (m.domain_code.clone(), m.code.clone()))
                .collect(),
            domains,
            team_members: self.team_members.iter().map(|t| t.code.clone()).collect(),
        }
    }
}

const DEMO_TIMEZONE: &str = "Europe/Rome";
const MIB_PER_GIB: i64 = 1024;

/// The four demo accounts, each with its send token (see [`SimConfig::demo`]).
fn demo_accounts() -> Vec<AccountSeed> {
    vec![
        AccountSeed {
            account: Account {
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
                timezone: DEMO_TIMEZONE.to_owned(),
                has_pending_order: false,
                bounce_notification: Some("bounces@shop.example".to_owned()),
            },
            // Loopback only, so the account allow-list is visible in the demo yet lets the
            // traffic generator through.
            allow_nets: vec!["127.0.0.0/8".to_owned(), "::1".to_owned()],
            plan_expires_in: Duration::from_secs(200 * DAY),
            send_tokens: vec![token(DEMO_BUSY, "shop backend", "7c41d2a98f03be65")],
            delete_in: None,
        },
        AccountSeed {
            account: Account {
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
                timezone: DEMO_TIMEZONE.to_owned(),
                // More messages are on order.
                has_pending_order: true,
                bounce_notification: None,
            },
            allow_nets: Vec::new(),
            plan_expires_in: Duration::from_secs(20 * DAY),
            send_tokens: vec![token(
                DEMO_NEARLY_EXHAUSTED,
                "newsletter",
                "0b9e61f4c2d7a835",
            )],
            delete_in: None,
        },
        AccountSeed {
            account: Account {
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
                timezone: DEMO_TIMEZONE.to_owned(),
                has_pending_order: false,
                bounce_notification: None,
            },
            allow_nets: Vec::new(),
            plan_expires_in: Duration::from_secs(100 * DAY),
            send_tokens: vec![token(DEMO_DISABLED, "old app", "5a3f0e8c71b2d946")],
            // Disabled and due for deletion: the lifecycle series has something to show.
            delete_in: Some(Duration::from_secs(30 * DAY)),
        },
        AccountSeed {
            account: Account {
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
                timezone: DEMO_TIMEZONE.to_owned(),
                has_pending_order: false,
                bounce_notification: None,
            },
            allow_nets: Vec::new(),
            plan_expires_in: Duration::from_secs(2 * DAY + 12 * 3600),
            send_tokens: vec![token(DEMO_EXPIRING, "campaigns", "e2c8b7104d9f6a53")],
            delete_in: None,
        },
    ]
}

fn demo_migrations() -> Vec<MigrationSeed> {
    vec![
        // 36000 messages at 500 a minute over 4 lanes, begun 10 minutes ago: 72 minutes in all.
        MigrationSeed {
            code: DEMO_MIGRATION_RUNNING.to_owned(),
            start_in: Duration::ZERO,
            started_ago: Duration::from_secs(10 * 60),
            accounts: 12,
            messages: 36_000,
            bytes: 7 * MIB_PER_GIB * 1024 * 1024,
            rate: 500,
            parallel: 4,
            failed_accounts: 0,
        },
        // Took four hours, three days ago.
        MigrationSeed {
            code: DEMO_MIGRATION_COMPLETED.to_owned(),
            start_in: Duration::ZERO,
            started_ago: Duration::from_secs(3 * DAY),
            accounts: 5,
            messages: 80_000,
            bytes: 12 * MIB_PER_GIB * 1024 * 1024,
            rate: 400,
            parallel: 2,
            failed_accounts: 0,
        },
        // Its first account failed after about 4 hours; the run lasts about 21 hours.
        MigrationSeed {
            code: DEMO_MIGRATION_WITH_FAILURES.to_owned(),
            start_in: Duration::ZERO,
            started_ago: Duration::from_secs(5 * 3600),
            accounts: 8,
            messages: 400_000,
            bytes: 30 * MIB_PER_GIB * 1024 * 1024,
            rate: 300,
            parallel: 3,
            failed_accounts: 1,
        },
    ]
}

fn demo_mailboxes() -> Vec<MailboxSeed> {
    let on = |(domain_code, domain_name): (&str, &str), code: &str, local_part: &str| Mailbox {
        domain_code: domain_code.to_owned(),
        domain_name: domain_name.to_owned(),
        code: code.to_owned(),
        local_part: local_part.to_owned(),
        ..Mailbox::default()
    };
    vec![
        Mailbox {
            quota_limit_mib: 2 * MIB_PER_GIB,
            quota_used_mib: 1823,
            fill_mib_per_hour: 300,
            messages: 14_200,
            outbound_limit: 500,
            outbound_sent: 35,
            outbound_per_hour: 12,
            // A shared inbox: a second factor required, no POP.
            otp: true,
            force_otp: true,
            pop_disabled: true,
            ..on(DEMO_MAIL_DOMAIN, DEMO_FILLING, "info")
        }
        .into(),
        Mailbox {
            quota_limit_mib: 5 * MIB_PER_GIB,
            quota_used_mib: 1229,
            fill_mib_per_hour: 2,
            messages: 8_050,
            archive: true,
            archive_status: "activating".to_owned(),
            vault_quota_mib: 640,
            vault_messages: 4_100,
            outbound_sent: 120,
            outbound_per_hour: 4,
            // The domain requires a second factor; webmail only from the allowed networks.
            otp: true,
            domain_force_otp: true,
            imap_disabled: true,
            apply_allow_nets_webmail: true,
            ..on(DEMO_MAIL_DOMAIN, DEMO_ARCHIVE_ACTIVATING, "archive")
        }
        .into(),
        MailboxSeed {
            mailbox: Mailbox {
                quota_limit_mib: 10 * MIB_PER_GIB,
                quota_used_mib: 812,
                fill_mib_per_hour: 1,
                messages: 3_900,
                outbound_limit: 300,
                outbound_sent: 300,
                outbound_per_hour: 30,
                // A CRM sends through the API with the mailbox's password alone.
                api_enabled: true,
                otp: false,
                ..on(DEMO_STUDIO_DOMAIN, DEMO_OUTBOUND_AT_LIMIT, "sales")
            },
            outbound_reset_in: Duration::from_secs(5 * 3600),
        },
        Mailbox {
            quota_limit_mib: MIB_PER_GIB,
            quota_used_mib: 96,
            messages: 410,
            password_expired: true,
            login_every: Duration::from_secs(6 * 3600),
            // The postmaster receives; it never sends.
            smtp_disabled: true,
            ..on(DEMO_STUDIO_DOMAIN, DEMO_POSTMASTER, "postmaster")
        }
        .into(),
    ]
}

fn demo_team_members() -> Vec<TeamMember> {
    let member = |code: &str, firstname: &str, lastname: &str| TeamMember {
        code: code.to_owned(),
        firstname: firstname.to_owned(),
        lastname: lastname.to_owned(),
        email_address: format!(
            "{}.{}@{}",
            firstname.to_ascii_lowercase(),
            lastname.to_ascii_lowercase(),
            DEMO_MAIL_DOMAIN.1
        ),
        timezone: DEMO_TIMEZONE.to_owned(),
        ..TeamMember::default()
    };
    let keys = |keys: &[&str]| keys.iter().map(|k| (*k).to_owned()).collect::<Vec<_>>();
    vec![
        TeamMember {
            otp: true,
            api_access_blocked: false,
            allow_nets: vec![
                "203.0.113.0/24".parse().expect("a valid network"),
                "2001:db8:42::/48".parse().expect("a valid network"),
            ],
            permissions: keys(&["api", "delivery", "email_accounts", "domains"]),
            ..member(DEMO_TEAM_MEMBER_SECURED, "Laura", "Verdi")
        },
        TeamMember {
            otp: false,
            api_access_blocked: false,
            permissions: keys(&["api", "delivery"]),
            ..member(DEMO_TEAM_MEMBER_NO_OTP, "Paolo", "Neri")
        },
        TeamMember {
            otp: false,
            api_access_blocked: true,
            permissions: keys(&["email_accounts"]),
            ..member(DEMO_TEAM_MEMBER_API_BLOCKED, "Sara", "Gallo")
        },
    ]
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
