//! The team member record (section 2.4 of the interface), as far as access and its safeguards
//! go: status, second factor, blocked API access, allow-list and permissions, and the customer's
//! flags. The name and email address are kept only when the config asks for them.

use serde_json::Value;

use crate::upstream::decode::{Fields, first_resource};
use crate::upstream::error::UpstreamError;
use crate::upstream::model::names::sanitize;
use crate::upstream::model::{Model, ParseProblem, Reader, Unreadable};

#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Record {
    /// `status` is `enabled`.
    pub enabled: Option<bool>,
    pub otp: Option<bool>,
    pub api_access_blocked: Option<bool>,
    /// Networks in the member's IP allow-list (`allow_nets`); 0 means any address.
    pub allow_nets: Option<f64>,
    /// Permission keys granted (`permissions`).
    pub permissions: Option<f64>,
    pub customer_disabled: Option<bool>,
    pub customer_trial: Option<bool>,
    pub customer_reseller: Option<bool>,
    pub can_access_delivery: Option<bool>,
    pub status: Option<String>,
    pub status_detail: Option<String>,
    pub member_type: Option<String>,
    pub language: Option<String>,
    pub customer_code: Option<String>,
    /// Only with `identity_labels`.
    pub fullname: Option<String>,
    /// Only with `identity_labels`.
    pub email_address: Option<String>,
}

impl Record {
    /// The members [`Self::from_record`] reads; the decoder skips every other one, and keeps
    /// only the lengths of the lists.
    pub const FIELDS: Fields = Fields::Only {
        keep: &[
            "status",
            "status_detail",
            "type",
            "otp",
            "api_access_blocked",
            "language",
            "customer_code",
            "is_customer_disabled",
            "is_customer_trial",
            "is_customer_reseller",
            "can_access_delivery",
            "fullname",
            "email_address",
        ],
        lengths: &["allow_nets", "permissions"],
    };

    /// Reads a team member record; `Err` only when it is not an object. The name and address
    /// are read only when `identity` is set.
    pub fn from_record(
        record: &Value,
        identity: bool,
    ) -> Result<(Self, Vec<ParseProblem>), ParseProblem> {
        let mut r = Reader::new(record).ok_or_else(|| ParseProblem::new("resources[0]", record))?;
        let status = r.string("status");
        let member = Record {
            enabled: status
                .as_deref()
                .map(|s| s.trim().eq_ignore_ascii_case("enabled")),
            otp: r.boolean("otp"),
            api_access_blocked: r.boolean("api_access_blocked"),
            allow_nets: r.array_len("allow_nets").map(|n| n as f64),
            permissions: r.array_len("permissions").map(|n| n as f64),
            customer_disabled: r.boolean("is_customer_disabled"),
            customer_trial: r.boolean("is_customer_trial"),
            customer_reseller: r.boolean("is_customer_reseller"),
            can_access_delivery: r.boolean("can_access_delivery"),
            status: status.map(|s| sanitize(&s)),
            status_detail: r.string("status_detail").map(|s| sanitize(&s)),
            member_type: r.string("type"),
            language: r.string("language"),
            customer_code: r.string("customer_code"),
            fullname: identity.then(|| r.string("fullname")).flatten(),
            email_address: identity.then(|| r.string("email_address")).flatten(),
        };
        Ok((member, r.into_problems()))
    }
}

/// `GET /api/team_members/{code}`: the envelope around one team member record; the parameter
/// says whether the name and address are kept.
impl Model for Record {
    type Decoded = Value;
    type Params = bool;

    fn decode(body: &[u8]) -> Result<Value, UpstreamError> {
        first_resource(body, Self::FIELDS)
    }

    fn read(record: &Value, identity: &bool) -> Result<(Self, Vec<ParseProblem>), Unreadable> {
        Self::from_record(record, *identity)
            .map_err(|p| Unreadable::not_an_object("the team member record", p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn safeguards_are_read_and_the_person_only_when_asked() {
        let v = json!({
            "code": "T000000102", "status": "enabled", "otp": false, "api_access_blocked": 0,
            "allow_nets": [], "permissions": ["delivery.read", "mailboxes.write"],
            "is_customer_trial": "true", "fullname": "Ada Lovelace",
            "email_address": "ada@example.com",
        });
        let (m, problems) = Record::from_record(&v, false).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(m.enabled, Some(true));
        assert_eq!(m.otp, Some(false));
        assert_eq!(m.api_access_blocked, Some(false));
        assert_eq!(m.allow_nets, Some(0.0));
        assert_eq!(m.permissions, Some(2.0));
        assert_eq!(m.customer_trial, Some(true));
        assert_eq!((m.fullname, m.email_address), (None, None));
        let (m, _) = Record::from_record(&v, true).unwrap();
        assert_eq!(m.email_address.as_deref(), Some("ada@example.com"));
        assert_eq!(m.fullname.as_deref(), Some("Ada Lovelace"));
    }

    #[test]
    fn an_unreadable_flag_is_a_problem_not_a_false() {
        let (m, problems) =
            Record::from_record(&json!({"otp": "maybe", "status": "disabled"}), false).unwrap();
        assert_eq!((m.otp, m.enabled), (None, Some(false)));
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].path, "otp");
    }
}
