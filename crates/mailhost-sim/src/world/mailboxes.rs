//! Email accounts (mailboxes) of hosted domains. Each keeps its counters as of one instant
//! (`as_of`) plus how fast they move, so the record is a pure function of the clock: used space
//! and messages grow (up to the limit), the outbound count grows during its 24-hour period and
//! goes back to zero at `reset_outbound_limit_time`, and the owner logs in now and then.

use jiff::{SignedDuration, Timestamp};
use serde_json::{Map, Value, json};

use super::clock::{format_datetime, shift};
use super::codes::{is_domain_code, is_mailbox_code};
use super::config::{Mailbox, MailboxSeed};
use super::error::SimConfigError;

/// Every member of an email account record (section 2.5 of the interface document).
pub const MAILBOX_RECORD_FIELDS: [&str; 103] = [
    // booleans
    "apply_allow_nets_webmail",
    "archive",
    "archive_disabled",
    "pop_disabled",
    "webmail_disabled",
    "imap_disabled",
    "smtp_disabled",
    "calendar",
    "meeting",
    "activesync",
    "chat",
    "dav",
    "domain_force_otp",
    "domain_limit_tracemail_21_days",
    "bounce_mail",
    "keep_copy",
    "autoresponder_enabled",
    "autoresponder_intervals_enabled",
    "otp",
    "spam_in_inbox",
    "hide_from_addressbook_company",
    "api_enabled",
    "force_otp",
    "block_old_password",
    "destroy_sessions_on_password_expiration",
    "password_recovery_disabled",
    "password_change_disabled",
    "force_new_password",
    "password_expired",
    "restrict_from_field",
    "is_partner_customer",
    // integers
    "email_services",
    "max_email_quota",
    "lastauth",
    "messages",
    "quota",
    "vault_quota",
    "vault_messages",
    "outbound_limit",
    "outbound_limit_status",
    "outbound_limit_period",
    "retention",
    "delegates_no",
    "password_expiration",
    "password_expiration_relative_days",
    "mtm_restores_current_month_counter",
    "vault_extra_space_quantity",
    // arrays
    "allow_nets",
    "identities",
    "forwards",
    "delegates",
    // strings
    "status",
    "status_detail",
    "archive_status",
    "archive_import_status",
    "timezone",
    "type",
    "code",
    "name",
    "domain_name",
    "domain_code",
    "email_address",
    "language",
    "bounce_msg",
    "autoresponder_subject",
    "autoresponder_body",
    "autoresponder_start_date",
    "autoresponder_end_date",
    "lastauth_protocol",
    "lastauth_datetime",
    "quota_human",
    "vault_quota_human",
    "reset_outbound_limit_time",
    "customization_logo",
    "customization_help_desk_url",
    "customization_company",
    "activated_at",
    "archive_activated_at",
    "archive_import_executed_at",
    "created_at",
    "updated_at",
    "service_vault_last_auth",
    "service_vault_session_ip",
    "firstname",
    "lastname",
    "secondary_email",
    "country",
    "city",
    "state",
    "zip",
    "address",
    "company",
    "role",
    "team_manager",
    "telephone",
    "mobilephone",
    "fax",
    "organizational_unit",
    "webmail_language",
    "webmail_time_format",
    "webmail_date_format",
    "webmail_timezone",
    "type_label",
];

/// Every member of a delegate record (section 2.6).
pub const DELEGATE_RECORD_FIELDS: [&str; 25] = [
    "status",
    "status_detail",
    "code",
    "type",
    "firstname",
    "lastname",
    "fullname",
    "language",
    "customer_code",
    "is_partner_customer",
    "company",
    "expiration",
    "visualization_start",
    "visualization_end",
    "username",
    "email_accounts",
    "domains",
    "email_address",
    "created_at",
    "updated_at",
    "manager_fullname",
    "manager_code",
    "is_customer_disabled",
    "service_vault_last_auth",
    "service_vault_session_ip",
];

/// Values of `archive_status`.
pub const ARCHIVE_STATUSES: [&str; 4] = ["active", "activating", "disabled", "deactivating"];

/// The outbound limit counts messages over this many hours.
pub const OUTBOUND_PERIOD_HOURS: i64 = 24;
const OUTBOUND_PERIOD: SignedDuration = SignedDuration::from_hours(OUTBOUND_PERIOD_HOURS);
/// Messages stored per MiB of growth (about 128 KiB a message).
const MESSAGES_PER_MIB: i64 = 8;
/// Days before expiry under the simulated password policy.
const PASSWORD_POLICY_DAYS: i64 = 90;
const MIB_PER_GIB: f64 = 1024.0;
const TIMEZONE: &str = "Europe/Rome";
const CUSTOMER_CODE: &str = "C000000042";
const COMPANY: &str = "Simulated Customer S.r.l.";

/// One email account as the simulator holds it: its [`Mailbox`] (read and written through
/// `Deref`) and what only a running mailbox has. Counters are true at `as_of` and move from
/// there; [`crate::Simulator::update_mailbox`] first brings them to the current instant, so a
/// test that sets `quota_used_mib = 900` sees 900 now, growing from now on.
#[derive(Clone, Debug)]
pub struct MailboxState {
    pub mailbox: Mailbox,
    pub messages_per_hour: i64,
    /// When the current period ends and the count goes back to zero; later periods follow
    /// every 24 hours.
    pub outbound_reset_at: Timestamp,
    /// -1: never expires; otherwise the policy's number of days.
    pub password_expiration: i64,
    /// The last login at `as_of`; later logins follow every `login_every` (zero: none).
    pub last_login: Timestamp,
    pub last_login_protocol: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub as_of: Timestamp,
}

super::embeds!(MailboxState => mailbox: Mailbox);

/// The moving values of a mailbox at one instant.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Live {
    quota_used: f64,
    messages: f64,
    outbound_sent: f64,
    reset_at: Timestamp,
    last_login: Timestamp,
}

fn hours_between(from: Timestamp, to: Timestamp) -> f64 {
    (to.duration_since(from).as_secs_f64() / 3600.0).max(0.0)
}

impl MailboxState {
    pub(crate) fn from_seed(seed: &MailboxSeed, now: Timestamp) -> Result<Self, SimConfigError> {
        let bad = |reason: &str| SimConfigError::BadMailbox {
            code: seed.code.clone(),
            reason: reason.to_owned(),
        };
        if !is_mailbox_code(&seed.code) {
            return Err(bad(
                "the code must be `EA` followed by 8 digits or `P` followed by 9 digits",
            ));
        }
        if !is_domain_code(&seed.domain_code) {
            return Err(bad("domain_code must be `D` followed by 9 digits"));
        }
        if seed.local_part.is_empty() || seed.local_part.contains('@') {
            return Err(bad("local_part must be the non-empty part before `@`"));
        }
        if seed.quota_limit_mib < 0 || seed.quota_used_mib < 0 || seed.outbound_limit < 0 {
            return Err(bad("quotas and limits must not be negative"));
        }
        if seed.fill_mib_per_hour < 0 || seed.outbound_per_hour < 0 {
            return Err(bad("rates must not be negative"));
        }
        if !ARCHIVE_STATUSES.contains(&seed.archive_status.as_str()) {
            return Err(bad(
                "archive_status must be active, activating, disabled or deactivating",
            ));
        }
        let reset_in = SignedDuration::try_from(seed.outbound_reset_in)
            .ok()
            .filter(|d| *d <= OUTBOUND_PERIOD)
            .ok_or_else(|| bad("outbound_reset_in must be at most 24 hours"))?;
        let created_at = shift(now, -SignedDuration::from_hours(400 * 24));
        Ok(Self {
            mailbox: seed.mailbox.clone(),
            messages_per_hour: seed.fill_mib_per_hour.saturating_mul(MESSAGES_PER_MIB),
            outbound_reset_at: shift(now, reset_in),
            password_expiration: if seed.password_expired {
                PASSWORD_POLICY_DAYS
            } else {
                -1
            },
            last_login: shift(now, -SignedDuration::from_mins(7)),
            last_login_protocol: "imap".to_owned(),
            created_at,
            updated_at: shift(created_at, SignedDuration::from_hours(24)),
            as_of: now,
        })
    }

    pub fn is_postmaster(&self) -> bool {
        self.code.starts_with('P')
    }

    pub fn email_address(&self) -> String {
        format!("{}@{}", self.local_part, self.domain_name)
    }

    fn live(&self, now: Timestamp) -> Live {
        let now = now.max(self.as_of);
        // Space and messages grow together until the mailbox is full.
        let mut growth_hours = hours_between(self.as_of, now);
        let used = self.quota_used_mib as f64;
        let limit = self.quota_limit_mib as f64;
        let fill = self.fill_mib_per_hour.max(0) as f64;
        if fill > 0.0 {
            growth_hours = growth_hours.min(((limit - used) / fill).max(0.0));
        }
        let quota_used = used + fill * growth_hours;
        let messages = self.messages as f64 + self.messages_per_hour.max(0) as f64 * growth_hours;
        let outbound_rate = self.outbound_per_hour.max(0) as f64;

        let limit = self.outbound_limit as f64;
        let (outbound_sent, reset_at) = if now < self.outbound_reset_at {
            let sent = self.outbound_sent as f64 + outbound_rate * hours_between(self.as_of, now);
            (
                sent.min(limit.max(self.outbound_sent as f64)),
                self.outbound_reset_at,
            )
        } else {
            let periods =
                now.duration_since(self.outbound_reset_at).as_secs() / OUTBOUND_PERIOD.as_secs();
            let period_start = shift(
                self.outbound_reset_at,
                SignedDuration::from_secs(periods.saturating_mul(OUTBOUND_PERIOD.as_secs())),
            );
            let sent = outbound_rate * hours_between(period_start, now);
            (sent.min(limit), shift(period_start, OUTBOUND_PERIOD))
        };

        let last_login = match SignedDuration::try_from(self.login_every) {
            Ok(every) if !every.is_zero() && now > self.last_login => {
                let logins = now.duration_since(self.last_login).as_secs() / every.as_secs().max(1);
                shift(
                    self.last_login,
                    SignedDuration::from_secs(logins.saturating_mul(every.as_secs().max(1))),
                )
            }
            _ => self.last_login,
        };
        Live {
            quota_used,
            messages,
            outbound_sent,
            reset_at,
            last_login,
        }
    }

    /// Makes the counters true at `now` (rounding down), so they can be changed from there.
    pub(crate) fn materialize(&mut self, now: Timestamp) {
        if now <= self.as_of {
            return;
        }
        let live = self.live(now);
        self.quota_used_mib = live.quota_used.floor() as i64;
        self.messages = live.messages.floor() as i64;
        self.outbound_sent = live.outbound_sent.floor() as i64;
        self.outbound_reset_at = live.reset_at;
        self.last_login = live.last_login;
        self.as_of = now;
    }

    /// The record exactly as `GET /api/domains/{domain}/email_accounts/{code}` returns it.
    pub(crate) fn record(&self, now: Timestamp) -> Value {
        let live = self.live(now);
        let quota = live.quota_used.floor() as i64;
        let postmaster = self.is_postmaster();
        let name = display_name(&self.local_part);
        let import_status = self.archive_import_status();
        let delegates: Vec<Value> = (0..self.delegate_count())
            .map(|i| self.delegate(i, now))
            .collect();
        // Built in parts: one `json!` of a hundred members exceeds the macro recursion limit.
        let parts = [
            self.setting_members(postmaster),
            self.usage_members(&live, quota, delegates),
            self.identity_members(&live, quota, postmaster, &name, import_status),
            self.profile_members(postmaster, &name, import_status),
        ];
        let mut record = Map::new();
        for part in parts {
            if let Value::Object(members) = part {
                record.extend(members);
            }
        }
        Value::Object(record)
    }

    /// The state of the archive's import as the record shows it: running while the archive is
    /// activating, completed once it is active, none otherwise.
    fn archive_import_status(&self) -> Option<&'static str> {
        match self.archive_status.as_str() {
            "activating" => Some("running"),
            "active" => Some("completed"),
            _ => None,
        }
    }

    /// Days until the password expires as the record shows them: -1 when it never expires, 0
    /// once it has expired.
    fn password_expiration_relative_days(&self) -> i64 {
        if self.password_expiration < 0 {
            -1
        } else if self.password_expired {
            0
        } else {
            self.password_expiration
        }
    }

    /// The record's members that switch services and security rules on or off.
    fn setting_members(&self, postmaster: bool) -> Value {
        json!({
        "apply_allow_nets_webmail": self.apply_allow_nets_webmail,
        "archive": self.archive,
        "archive_disabled": !self.archive,
        "pop_disabled": self.pop_disabled,
        "webmail_disabled": false,
        "imap_disabled": self.imap_disabled,
        "smtp_disabled": self.smtp_disabled || !self.enabled,
        "calendar": true,
        "meeting": false,
        "activesync": false,
        "chat": false,
        "dav": true,
        "domain_force_otp": self.domain_force_otp,
        "domain_limit_tracemail_21_days": false,
        "bounce_mail": false,
        "keep_copy": false,
        "autoresponder_enabled": false,
        "autoresponder_intervals_enabled": false,
        "otp": self.otp,
        "spam_in_inbox": false,
        "hide_from_addressbook_company": postmaster,
        "api_enabled": self.api_enabled,
        "force_otp": self.force_otp,
        "block_old_password": true,
        "destroy_sessions_on_password_expiration": false,
        "password_recovery_disabled": false,
        "password_change_disabled": false,
        "force_new_password": self.password_expired,
        "password_expired": self.password_expired,
        "restrict_from_field": false,
        "is_partner_customer": false,
        })
    }

    /// The record's members that count usage, limits and delegates at the instant of `live`.
    fn usage_members(&self, live: &Live, quota: i64, delegates: Vec<Value>) -> Value {
        let relative_days = self.password_expiration_relative_days();
        json!({
        "email_services": 1,
        "max_email_quota": self.quota_limit_mib,
        "lastauth": live.last_login.as_second(),
        "messages": live.messages.floor() as i64,
        "quota": quota,
        "vault_quota": self.vault_quota_mib,
        "vault_messages": self.vault_messages,
        "outbound_limit": self.outbound_limit,
        "outbound_limit_status": live.outbound_sent.floor() as i64,
        "outbound_limit_period": OUTBOUND_PERIOD_HOURS,
        "retention": if self.archive { 120 } else { 0 },
        "delegates_no": delegates.len(),
        "password_expiration": self.password_expiration,
        "password_expiration_relative_days": relative_days,
        "mtm_restores_current_month_counter": 0,
        "vault_extra_space_quantity": 0,
        "allow_nets": [],
        "identities": [],
        "forwards": [],
        "delegates": delegates,
        })
    }

    /// The record's members that say who and what the mailbox is, and its state at `live`.
    fn identity_members(
        &self,
        live: &Live,
        quota: i64,
        postmaster: bool,
        name: &str,
        import_status: Option<&str>,
    ) -> Value {
        let email = self.email_address();
        json!({
        "status": if self.enabled { "enabled" } else { "disabled" },
        "status_detail": "ok",
        "archive_status": self.archive_status,
        "archive_import_status": import_status,
        "timezone": TIMEZONE,
        "type": if postmaster { "Postmaster" } else { "EmailAccount" },
        "code": self.code,
        "name": name,
        "domain_name": self.domain_name,
        "domain_code": self.domain_code,
        "email_address": email,
        "language": "it",
        "bounce_msg": Value::Null,
        "autoresponder_subject": Value::Null,
        "autoresponder_body": Value::Null,
        "autoresponder_start_date": Value::Null,
        "autoresponder_end_date": Value::Null,
        "lastauth_protocol": self.last_login_protocol,
        "lastauth_datetime": format_datetime(live.last_login),
        "quota_human": human_mib(quota),
        "vault_quota_human": human_mib(self.vault_quota_mib),
        "reset_outbound_limit_time": format_datetime(live.reset_at),
        "customization_logo": Value::Null,
        "customization_help_desk_url": Value::Null,
        "customization_company": Value::Null,
        })
    }

    /// The record's members with its dates and the owner's profile.
    fn profile_members(&self, postmaster: bool, name: &str, import_status: Option<&str>) -> Value {
        let archive_active = self.archive && self.archive_status == "active";
        let archive_since = shift(self.created_at, SignedDuration::from_hours(30 * 24));
        json!({
        "activated_at": format_datetime(self.created_at),
        "archive_activated_at": archive_active.then(|| format_datetime(archive_since)),
        "archive_import_executed_at": import_status.map(|_| format_datetime(archive_since)),
        "created_at": format_datetime(self.created_at),
        "updated_at": format_datetime(self.updated_at),
        "service_vault_last_auth": Value::Null,
        "service_vault_session_ip": Value::Null,
        "firstname": name,
        "lastname": Value::Null,
        "secondary_email": Value::Null,
        "country": "IT",
        "city": Value::Null,
        "state": Value::Null,
        "zip": Value::Null,
        "address": Value::Null,
        "company": COMPANY,
        "role": Value::Null,
        "team_manager": Value::Null,
        "telephone": Value::Null,
        "mobilephone": Value::Null,
        "fax": Value::Null,
        "organizational_unit": Value::Null,
        "webmail_language": "it",
        "webmail_time_format": "24h",
        "webmail_date_format": "DD/MM/YYYY",
        "webmail_timezone": TIMEZONE,
        "type_label": if postmaster { "Postmaster" } else { "Email account" },
        })
    }

    /// 0, 1 or 2 delegates, from the last digit of the code.
    fn delegate_count(&self) -> usize {
        self.code
            .bytes()
            .last()
            .map_or(0, |digit| usize::from(digit.wrapping_sub(b'0')) % 3)
    }

    fn delegate(&self, index: usize, now: Timestamp) -> Value {
        let (first, last) = [("Giulia", "Bianchi"), ("Marco", "Rossi")][index % 2];
        let digits: String = self.code.chars().filter(char::is_ascii_digit).collect();
        let number = digits.parse::<u64>().unwrap_or(0) % 100_000_000;
        let username = format!("{}.{}@{}", first, last, self.domain_name).to_ascii_lowercase();
        json!({
            "status": "enabled",
            "status_detail": "customer",
            "code": format!("T{:09}", number * 10 + index as u64 + 1),
            "type": "Delegate",
            "firstname": first,
            "lastname": last,
            "fullname": format!("{first} {last}"),
            "language": "it",
            "customer_code": CUSTOMER_CODE,
            "is_partner_customer": false,
            "company": COMPANY,
            "expiration": Value::Null,
            "visualization_start": Value::Null,
            "visualization_end": Value::Null,
            "username": username,
            "email_accounts": [self.code],
            "domains": [self.domain_code],
            "email_address": username,
            "created_at": format_datetime(self.created_at),
            "updated_at": format_datetime(shift(now, -SignedDuration::from_hours(24)).max(self.created_at)),
            "manager_fullname": Value::Null,
            "manager_code": Value::Null,
            "is_customer_disabled": false,
            "service_vault_last_auth": Value::Null,
            "service_vault_session_ip": Value::Null,
        })
    }
}

/// `info` -> `Info`.
fn display_name(local_part: &str) -> String {
    let mut chars = local_part.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

/// MiB for people: `"812 MB"` below 1 GiB, else GiB with two decimals (`"1.20 GB"`).
pub(crate) fn human_mib(mib: i64) -> String {
    if (mib as f64) < MIB_PER_GIB {
        format!("{mib} MB")
    } else {
        format!("{:.2} GB", mib as f64 / MIB_PER_GIB)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    fn mailbox(seed: impl Into<MailboxSeed>) -> MailboxState {
        MailboxState::from_seed(&seed.into(), ts("2026-11-22T08:00:00Z")).expect("valid seed")
    }

    #[test]
    fn sizes_are_shown_in_mb_below_a_gib_and_gb_above() {
        assert_eq!(human_mib(812), "812 MB");
        assert_eq!(human_mib(0), "0 MB");
        assert_eq!(human_mib(1229), "1.20 GB");
        assert_eq!(human_mib(1024), "1.00 GB");
    }

    #[test]
    fn used_space_grows_with_the_clock_and_stops_at_the_limit() {
        let m = mailbox(Mailbox {
            quota_used_mib: 900,
            quota_limit_mib: 1000,
            fill_mib_per_hour: 60,
            messages: 10,
            ..Mailbox::default()
        });
        let at = |mins| m.record(shift(m.as_of, SignedDuration::from_mins(mins)));
        assert_eq!(at(0)["quota"], 900);
        assert_eq!(at(30)["quota"], 930);
        assert_eq!(at(30)["messages"], 10 + 240);
        assert_eq!(at(600)["quota"], 1000);
        assert_eq!(at(600)["messages"], 10 + 800);
    }

    #[test]
    fn the_outbound_count_grows_then_resets_every_24_hours() {
        let m = mailbox(MailboxSeed {
            mailbox: Mailbox {
                outbound_limit: 100,
                outbound_sent: 90,
                outbound_per_hour: 10,
                ..Mailbox::default()
            },
            outbound_reset_in: Duration::from_secs(3 * 3600),
        });
        let at = |mins| m.record(shift(m.as_of, SignedDuration::from_mins(mins)));
        assert_eq!(at(30)["outbound_limit_status"], 95);
        assert_eq!(at(120)["outbound_limit_status"], 100, "capped at the limit");
        assert_eq!(at(120)["reset_outbound_limit_time"], "2026-11-22 11:00:00");
        assert_eq!(at(180)["outbound_limit_status"], 0);
        assert_eq!(at(240)["outbound_limit_status"], 10);
        assert_eq!(at(240)["reset_outbound_limit_time"], "2026-11-23 11:00:00");
        assert_eq!(
            at(180 + 24 * 60 + 1)["reset_outbound_limit_time"],
            "2026-11-24 11:00:00"
        );
    }

    #[test]
    fn the_last_login_moves_forward_now_and_then() {
        let m = mailbox(Mailbox {
            login_every: Duration::from_secs(600),
            ..Mailbox::default()
        });
        let first = m.record(m.as_of)["lastauth"].as_i64().expect("lastauth");
        let later = m.record(shift(m.as_of, SignedDuration::from_mins(30)));
        assert!(later["lastauth"].as_i64().expect("lastauth") > first);
        assert_eq!(
            later["lastauth_datetime"],
            format_datetime(
                Timestamp::from_second(later["lastauth"].as_i64().expect("s")).expect("ts")
            )
        );
    }

    #[test]
    fn materializing_keeps_the_values_and_restarts_from_now() {
        let mut m = mailbox(Mailbox {
            quota_used_mib: 100,
            quota_limit_mib: 1000,
            fill_mib_per_hour: 60,
            outbound_sent: 5,
            outbound_per_hour: 6,
            ..Mailbox::default()
        });
        let later = shift(m.as_of, SignedDuration::from_mins(90));
        let before = m.record(later);
        m.materialize(later);
        assert_eq!(m.record(later), before);
        assert_eq!(m.quota_used_mib, 190);
        assert_eq!(m.outbound_sent, 14);
    }

    #[test]
    fn security_flags_default_to_the_old_record_and_follow_the_state() {
        let mut m = mailbox(Mailbox::default());
        let flags = [
            "otp",
            "force_otp",
            "domain_force_otp",
            "api_enabled",
            "smtp_disabled",
            "imap_disabled",
            "pop_disabled",
            "apply_allow_nets_webmail",
        ];
        let record = m.record(m.as_of);
        for flag in flags {
            assert_eq!(record[flag], false, "{flag}");
        }
        m.otp = true;
        m.force_otp = true;
        m.domain_force_otp = true;
        m.api_enabled = true;
        m.smtp_disabled = true;
        m.imap_disabled = true;
        m.pop_disabled = true;
        m.apply_allow_nets_webmail = true;
        let record = m.record(m.as_of);
        for flag in flags {
            assert_eq!(record[flag], true, "{flag}");
        }
        m.smtp_disabled = false;
        m.enabled = false;
        assert_eq!(
            m.record(m.as_of)["smtp_disabled"],
            true,
            "a disabled mailbox cannot send"
        );
    }

    #[test]
    fn bad_codes_are_refused() {
        for (domain, code) in [
            ("D1", "EA00000001"),
            ("D000000001", "EA1"),
            ("D000000001", "P00000001"),
        ] {
            let seed = MailboxSeed::from(Mailbox {
                domain_code: domain.into(),
                code: code.into(),
                ..Mailbox::default()
            });
            assert!(
                MailboxState::from_seed(&seed, Timestamp::UNIX_EPOCH).is_err(),
                "{code}"
            );
        }
    }
}
