//! The email account record (section 2.5 of the interface), as far as mailbox quota, outbound
//! limits, archiving and authentication go.
//!
//! The unit of `quota` (space used), `max_email_quota` (the limit) and `vault_quota` is not
//! documented. We take MiB, and when `quota_human` (or `vault_quota_human`) is present we check
//! which unit (bytes, KiB, MiB, GiB) agrees with it and use that one; when none agrees, the
//! figures are a parse problem and left out rather than exported wrong.

use serde_json::Value;

use crate::upstream::decode::{Fields, first_resource};
use crate::upstream::error::UpstreamError;
use crate::upstream::model::names::sanitize;
use crate::upstream::model::{Model, ParseProblem, Reader, Unreadable};

const MIB: f64 = 1024.0 * 1024.0;

#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Record {
    pub quota_used_bytes: Option<f64>,
    pub quota_limit_bytes: Option<f64>,
    pub messages: Option<f64>,
    pub vault_used_bytes: Option<f64>,
    pub vault_messages: Option<f64>,
    pub outbound_limit: Option<f64>,
    /// Messages sent in the current outbound-limit period (`outbound_limit_status`).
    pub outbound_sent: Option<f64>,
    pub outbound_reset: Option<f64>,
    pub last_auth: Option<f64>,
    pub archive: Option<bool>,
    pub archive_status: Option<String>,
    pub password_expired: Option<bool>,
    pub address: Option<String>,
    pub domain: Option<String>,
    pub status: Option<String>,
    // The security settings an operator checks: second factor, API access, protocols.
    pub otp: Option<bool>,
    pub force_otp: Option<bool>,
    pub domain_force_otp: Option<bool>,
    pub api_enabled: Option<bool>,
    pub smtp_disabled: Option<bool>,
    pub imap_disabled: Option<bool>,
    pub pop_disabled: Option<bool>,
    pub apply_allow_nets_webmail: Option<bool>,
}

impl Record {
    /// The members [`Self::from_record`] reads; the decoder skips every other one.
    pub const FIELDS: Fields = Fields::Only {
        keep: &[
            "quota",
            "max_email_quota",
            "quota_human",
            "vault_quota",
            "vault_quota_human",
            "lastauth",
            "lastauth_datetime",
            "messages",
            "vault_messages",
            "outbound_limit",
            "outbound_limit_status",
            "reset_outbound_limit_time",
            "archive",
            "archive_status",
            "password_expired",
            "email_address",
            "domain_name",
            "status",
            "otp",
            "force_otp",
            "domain_force_otp",
            "api_enabled",
            "smtp_disabled",
            "imap_disabled",
            "pop_disabled",
            "apply_allow_nets_webmail",
        ],
        lengths: &[],
    };

    /// Reads an email account record; `Err` only when it is not an object.
    pub fn from_record(record: &Value) -> Result<(Self, Vec<ParseProblem>), ParseProblem> {
        let mut r = Reader::new(record).ok_or_else(|| ParseProblem::new("resources[0]", record))?;
        let quota = r.count("quota");
        let limit = r.count("max_email_quota");
        let quota_human = r.string("quota_human");
        let vault = r.count("vault_quota");
        let vault_human = r.string("vault_quota_human");
        let mut problems = Vec::new();
        let unit = unit_for(quota, quota_human.as_deref(), "quota", &mut problems);
        let vault_unit = unit_for(vault, vault_human.as_deref(), "vault_quota", &mut problems);
        // `lastauth` (epoch) wins; `lastauth_datetime` when it is absent; 0 means never.
        let key = r.first_of(&["lastauth", "lastauth_datetime"]);
        let last_auth = key.and_then(|k| r.timestamp(k)).filter(|ts| *ts > 0.0);
        let mailbox = Record {
            quota_used_bytes: quota.zip(unit).and_then(bytes),
            quota_limit_bytes: limit.zip(unit).and_then(bytes),
            messages: r.count("messages"),
            vault_used_bytes: vault.zip(vault_unit).and_then(bytes),
            vault_messages: r.count("vault_messages"),
            outbound_limit: r.count("outbound_limit"),
            outbound_sent: r.count("outbound_limit_status"),
            outbound_reset: r.timestamp("reset_outbound_limit_time"),
            last_auth,
            archive: r.boolean("archive"),
            archive_status: r.string("archive_status").map(|s| sanitize(&s)),
            password_expired: r.boolean("password_expired"),
            address: r.string("email_address"),
            domain: r.string("domain_name"),
            status: r.string("status"),
            otp: r.boolean("otp"),
            force_otp: r.boolean("force_otp"),
            domain_force_otp: r.boolean("domain_force_otp"),
            api_enabled: r.boolean("api_enabled"),
            smtp_disabled: r.boolean("smtp_disabled"),
            imap_disabled: r.boolean("imap_disabled"),
            pop_disabled: r.boolean("pop_disabled"),
            apply_allow_nets_webmail: r.boolean("apply_allow_nets_webmail"),
        };
        problems.extend(r.into_problems());
        Ok((mailbox, problems))
    }
}

/// A figure times its unit, unless that overflows (a wrong number is worse than none).
fn bytes((value, unit): (f64, f64)) -> Option<f64> {
    Some(value * unit).filter(|b| b.is_finite())
}

/// Bytes per unit of a quota figure: MiB unless `human` says otherwise; `None` (a problem)
/// when `human` agrees with no unit.
fn unit_for(
    value: Option<f64>,
    human: Option<&str>,
    field: &str,
    problems: &mut Vec<ParseProblem>,
) -> Option<f64> {
    let (Some(v), Some(h)) = (value, human) else {
        return Some(MIB);
    };
    let Some(human_bytes) = parse_size(h) else {
        problems.push(ParseProblem::new(
            format!("{field}_human"),
            &Value::String(h.to_owned()),
        ));
        return None;
    };
    if v == 0.0 || human_bytes == 0.0 {
        return (v == 0.0 && human_bytes < 1024.0)
            .then_some(MIB)
            .or_else(|| {
                problems.push(ParseProblem::new(field, &Value::from(v)));
                None
            });
    }
    // A human figure is rounded, and may count GB as 10^9: accept 10%.
    let close = |unit: f64| ((v * unit) - human_bytes).abs() / human_bytes < 0.1;
    let found = [MIB, 1.0, 1024.0, 1024.0 * MIB]
        .into_iter()
        .find(|u| close(*u));
    if found.is_none() {
        problems.push(ParseProblem::new(
            format!("{field} ({v}) against {field}_human"),
            &Value::String(h.to_owned()),
        ));
    }
    found
}

/// Reads sizes like `1.20 GB`, `812 MB`, `1,5 GiB`, `512K`, `100 B`; units are powers of 1024.
pub fn parse_size(text: &str) -> Option<f64> {
    let t = text.trim().replace(',', ".");
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: f64 = number.parse().ok()?;
    let power = match unit
        .trim()
        .to_ascii_lowercase()
        .trim_end_matches("ib")
        .trim_end_matches('b')
    {
        "" => 0,
        "k" => 1,
        "m" => 2,
        "g" => 3,
        "t" => 4,
        _ => return None,
    };
    // Hundreds of digits parse as infinity: no size.
    Some(n * 1024f64.powi(power)).filter(|b| b.is_finite())
}

/// `GET /api/domains/{domain_code}/email_accounts/{code}`: the envelope around one email
/// account record.
impl Model for Record {
    type Decoded = Value;
    type Params = ();

    fn decode(body: &[u8]) -> Result<Value, UpstreamError> {
        first_resource(body, Self::FIELDS)
    }

    fn read(record: &Value, _: &()) -> Result<(Self, Vec<ParseProblem>), Unreadable> {
        Self::from_record(record)
            .map_err(|p| Unreadable::not_an_object("the email account record", p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(v: &Value) -> (Record, Vec<ParseProblem>) {
        Record::from_record(v).unwrap()
    }

    #[test]
    fn sizes_for_people_are_read() {
        assert_eq!(parse_size("1.20 GB"), Some(1.2 * 1024.0 * MIB));
        assert_eq!(parse_size("812 MB"), Some(812.0 * MIB));
        assert_eq!(parse_size("1,5 GiB"), Some(1.5 * 1024.0 * MIB));
        assert_eq!(parse_size("512K"), Some(512.0 * 1024.0));
        assert_eq!(parse_size("100 B"), Some(100.0));
        assert_eq!(parse_size("lots"), None);
    }

    #[test]
    fn quota_is_mib_unless_quota_human_says_otherwise() {
        let (m, p) = record(&json!({"quota": 1229, "max_email_quota": 2048}));
        assert!(p.is_empty());
        assert_eq!(m.quota_used_bytes, Some(1229.0 * MIB));
        assert_eq!(m.quota_limit_bytes, Some(2048.0 * MIB));
        let (m, _) =
            record(&json!({"quota": 1229, "quota_human": "1.20 GB", "max_email_quota": 2048}));
        assert_eq!(m.quota_used_bytes, Some(1229.0 * MIB));
        let (m, p) = record(
            &json!({"quota": 1_288_490_188_u64, "quota_human": "1.2 GB", "max_email_quota": 2_147_483_648_u64}),
        );
        assert!(p.is_empty());
        assert_eq!(
            m.quota_used_bytes,
            Some(1_288_490_188.0),
            "bytes, confirmed by quota_human"
        );
        assert_eq!(m.quota_limit_bytes, Some(2_147_483_648.0));
    }

    #[test]
    fn a_quota_human_that_fits_no_unit_leaves_quota_out() {
        let (m, p) =
            record(&json!({"quota": 700, "quota_human": "3.1 GB", "max_email_quota": 2048}));
        assert_eq!(m.quota_used_bytes, None);
        assert_eq!(m.quota_limit_bytes, None);
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn last_auth_comes_from_epoch_or_date_time_and_zero_means_never() {
        let (m, _) = record(&json!({"lastauth": 1_795_334_400}));
        assert_eq!(m.last_auth, Some(1_795_334_400.0));
        let (m, _) = record(&json!({"lastauth": null, "lastauth_datetime": "2026-11-22 08:00:00"}));
        assert_eq!(m.last_auth, Some(1_795_334_400.0));
        let (m, _) = record(&json!({"lastauth": 0}));
        assert_eq!(m.last_auth, None);
    }

    #[test]
    fn a_size_or_quota_too_large_for_a_float_is_a_problem_not_infinity() {
        let digits = "9".repeat(400);
        assert_eq!(parse_size(&format!("{digits} B")), None);
        assert_eq!(
            parse_size("99999999999999999999 TB"),
            Some(99999999999999999999.0 * 1024f64.powi(4))
        );
        let (m, p) = record(
            &json!({"quota": 1000, "quota_human": format!("{digits} MB"), "max_email_quota": 2048}),
        );
        assert_eq!(m.quota_used_bytes, None);
        assert_eq!(m.quota_limit_bytes, None);
        assert_eq!(p.len(), 1);
        // The largest count, in MiB: a finite, if absurd, byte count; never infinity.
        let (m, _) = record(&json!({"quota": crate::upstream::model::MAX_EXACT}));
        assert!(m.quota_used_bytes.is_some_and(f64::is_finite));
    }
}
