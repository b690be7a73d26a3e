//! The Delivery account record (section 2.2 of the interface).

use serde_json::Value;

use crate::upstream::decode::{Fields, first_resource};
use crate::upstream::error::UpstreamError;
use crate::upstream::model::{Model, ParseProblem, Reader, Unreadable};

/// The Delivery account figures we export; `None` where the API gave nothing readable.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Record {
    pub remaining_messages: Option<f64>,
    pub plan_messages_limit: Option<f64>,
    pub plan_messages_used: Option<f64>,
    pub messages_sent: Option<f64>,
    pub extra_messages_total: Option<f64>,
    pub remaining_extra_messages_bought: Option<f64>,
    pub status: Option<f64>,
    pub domains: Option<f64>,
    pub ignore_suppression_list: Option<bool>,
    pub plan_expiration: Option<f64>,
    pub next_renewal: Option<f64>,
    pub last_renewal: Option<f64>,
    pub username: Option<String>,
    pub plan: Option<String>,
    pub account_type: Option<String>,
    pub status_detail: Option<String>,
}

impl Record {
    /// The members [`Self::from_record`] reads; the decoder skips every other one, and keeps
    /// only the length of `domains`.
    pub const FIELDS: Fields = Fields::Only {
        keep: &[
            "remaining_messages",
            "plan_messages_limit",
            "plan_messages_used",
            "messages_sent",
            "extra_messages_total",
            "remaining_extra_messages_bought",
            "status",
            "domains_count",
            "ignore_suppression_list",
            "plan_expiration_date",
            "next_renewal_date",
            "last_renewal_date",
            "username",
            "plan",
            "type",
            "status_detail",
        ],
        lengths: &["domains"],
    };

    /// Reads a Delivery account record. `Err` only when the record is not an object at all.
    pub fn from_record(record: &Value) -> Result<(Self, Vec<ParseProblem>), ParseProblem> {
        let mut r = Reader::new(record).ok_or_else(|| ParseProblem {
            path: "resources[0]".to_owned(),
            found: "not an object".to_owned(),
        })?;
        let domains = r
            .count("domains_count")
            .or_else(|| r.array_len("domains").map(|n| n as f64));
        let account = Record {
            remaining_messages: r.count("remaining_messages"),
            plan_messages_limit: r.count("plan_messages_limit"),
            plan_messages_used: r.count("plan_messages_used"),
            messages_sent: r.count("messages_sent"),
            extra_messages_total: r.count("extra_messages_total"),
            remaining_extra_messages_bought: r.count("remaining_extra_messages_bought"),
            status: r.number("status"),
            domains,
            ignore_suppression_list: r.boolean("ignore_suppression_list"),
            plan_expiration: r.timestamp("plan_expiration_date"),
            next_renewal: r.timestamp("next_renewal_date"),
            last_renewal: r.timestamp("last_renewal_date"),
            username: r.string("username"),
            plan: r.string("plan"),
            account_type: r.string("type"),
            status_detail: r.string("status_detail"),
        };
        Ok((account, r.into_problems()))
    }
}

/// `GET /api/delivery/accounts/{id}`: the envelope around one account record.
impl Model for Record {
    type Decoded = Value;
    type Params = ();

    fn decode(body: &[u8]) -> Result<Value, UpstreamError> {
        first_resource(body, Self::FIELDS)
    }

    fn read(record: &Value, _: &()) -> Result<(Self, Vec<ParseProblem>), Unreadable> {
        Self::from_record(record).map_err(|p| Unreadable::not_an_object("the account record", p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_may_come_as_strings_and_nulls_are_absent() {
        let v =
            json!({"remaining_messages": "1234", "plan_messages_limit": null, "messages_sent": 7});
        let (a, problems) = Record::from_record(&v).unwrap();
        assert_eq!(a.remaining_messages, Some(1234.0));
        assert_eq!(a.plan_messages_limit, None);
        assert_eq!(a.messages_sent, Some(7.0));
        assert!(problems.is_empty());
    }

    #[test]
    fn an_unreadable_value_is_a_problem_not_a_zero() {
        let v = json!({"remaining_messages": "lots", "plan_messages_used": {"n": 1}, "status": "NaN", "plan_expiration_date": "soon"});
        let (a, problems) = Record::from_record(&v).unwrap();
        assert_eq!(a.remaining_messages, None);
        assert_eq!(a.plan_messages_used, None);
        assert_eq!(a.status, None);
        assert_eq!(a.plan_expiration, None);
        let mut paths: Vec<_> = problems.iter().map(|p| p.path.as_str()).collect();
        paths.sort_unstable();
        assert_eq!(
            paths,
            [
                "plan_expiration_date",
                "plan_messages_used",
                "remaining_messages",
                "status"
            ]
        );
    }

    #[test]
    fn milliseconds_are_recognised() {
        let (a, _) =
            Record::from_record(&json!({"last_renewal_date": 1_795_334_400_000_u64}))
                .unwrap();
        assert_eq!(a.last_renewal, Some(1_795_334_400.0));
    }

    #[test]
    fn booleans_accept_numbers_and_words() {
        for (v, want) in [
            (json!(true), true),
            (json!(0), false),
            (json!("1"), true),
            (json!("false"), false),
        ] {
            let (a, p) =
                Record::from_record(&json!({"ignore_suppression_list": v})).unwrap();
            assert_eq!(a.ignore_suppression_list, Some(want));
            assert!(p.is_empty());
        }
        let (a, p) =
            Record::from_record(&json!({"ignore_suppression_list": "maybe"})).unwrap();
        assert_eq!(a.ignore_suppression_list, None);
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn domains_count_wins_over_the_array_length() {
        let (a, _) =
            Record::from_record(&json!({"domains": [{"name": "a"}, {"name": "b"}]}))
                .unwrap();
        assert_eq!(a.domains, Some(2.0));
        let (a, _) =
            Record::from_record(&json!({"domains": [], "domains_count": "3"})).unwrap();
        assert_eq!(a.domains, Some(3.0));
    }
}
