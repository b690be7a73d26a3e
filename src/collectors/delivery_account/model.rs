//! The Delivery account record (section 2.2 of the interface).

use serde_json::Value;

use crate::upstream::decode::{Fields, first_resource};
use crate::upstream::error::UpstreamError;
use crate::upstream::model::{Model, ParseProblem, Reader, Unreadable};

/// The Delivery account figures we export; `None` where the API gave nothing readable.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
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
    /// Networks in the account's allow-list (`allow_nets`): 0 means any address may send.
    pub allow_nets: Option<f64>,
    /// A fingerprint of the allow-list as a set: it changes when the list changes.
    pub allow_nets_fingerprint: Option<f64>,
    /// Whether bounce notifications go to an address (`bounce_notification` set); the address
    /// itself is never kept.
    pub bounce_notification: Option<bool>,
    pub delete_on: Option<f64>,
    pub extra_messages_expires_at: Option<f64>,
    pub has_pending_order: Option<bool>,
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
            "allow_nets",
            "bounce_notification",
            "delete_on",
            "extra_messages_expires_at",
            "has_pending_order",
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
        let nets = r.string_list("allow_nets").map(normalized);
        // An address that cannot be read is a problem and absent, never "not configured".
        let bounce_notification = r
            .string("bounce_notification")
            .map(|s| !s.trim().is_empty());
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
            allow_nets: nets.as_ref().map(|n| n.len() as f64),
            allow_nets_fingerprint: nets.as_deref().map(fingerprint),
            bounce_notification,
            delete_on: r.timestamp("delete_on"),
            extra_messages_expires_at: r.timestamp("extra_messages_expires_at"),
            has_pending_order: r.boolean("has_pending_order"),
        };
        Ok((account, r.into_problems()))
    }
}

/// An allow-list as a set: entries trimmed and lower-cased, sorted, without repeats.
fn normalized(nets: Vec<String>) -> Vec<String> {
    let mut nets: Vec<String> = nets
        .into_iter()
        .map(|n| n.trim().to_ascii_lowercase())
        .filter(|n| !n.is_empty())
        .collect();
    nets.sort_unstable();
    nets.dedup();
    nets
}

/// A fingerprint of a normalized allow-list: FNV-1a over its entries, kept to 53 bits so that a
/// float holds it exactly. It tells that the list changed (`changes()`), never what it holds,
/// so no address reaches a label.
fn fingerprint(nets: &[String]) -> f64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in nets.iter().flat_map(|n| n.bytes().chain([b'\n'])) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash & ((1 << 53) - 1)) as f64
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
            Record::from_record(&json!({"last_renewal_date": 1_795_334_400_000_u64})).unwrap();
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
            let (a, p) = Record::from_record(&json!({"ignore_suppression_list": v})).unwrap();
            assert_eq!(a.ignore_suppression_list, Some(want));
            assert!(p.is_empty());
        }
        let (a, p) = Record::from_record(&json!({"ignore_suppression_list": "maybe"})).unwrap();
        assert_eq!(a.ignore_suppression_list, None);
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn the_allow_list_is_counted_and_its_fingerprint_follows_the_set_not_the_order() {
        let read = |v: serde_json::Value| Record::from_record(&json!({"allow_nets": v})).unwrap();
        let (a, p) = read(json!(["10.0.0.0/8", "192.0.2.7"]));
        assert!(p.is_empty());
        assert_eq!(a.allow_nets, Some(2.0));
        let (b, _) = read(json!(["192.0.2.7", " 10.0.0.0/8", "192.0.2.7"]));
        assert_eq!(b.allow_nets, Some(2.0), "repeats count once");
        assert_eq!(a.allow_nets_fingerprint, b.allow_nets_fingerprint);
        let (c, _) = read(json!(["10.0.0.0/8"]));
        assert_ne!(a.allow_nets_fingerprint, c.allow_nets_fingerprint);
        let (empty, _) = read(json!([]));
        assert_eq!(
            empty.allow_nets,
            Some(0.0),
            "an empty list: any address may send"
        );
        let (text, _) = read(json!("10.0.0.0/8, 192.0.2.7"));
        assert_eq!(text.allow_nets_fingerprint, a.allow_nets_fingerprint);
        let (bad, p) = read(json!({"ip": "x"}));
        assert_eq!((bad.allow_nets, p.len()), (None, 1));
        let f = a.allow_nets_fingerprint.unwrap();
        assert!(f >= 0.0 && f < 2f64.powi(53) && f.fract() == 0.0);
    }

    #[test]
    fn lifecycle_fields_are_read_and_the_bounce_address_is_only_a_flag() {
        let (a, p) = Record::from_record(&json!({
            "delete_on": "2026-12-01 00:00:00",
            "extra_messages_expires_at": "2026-12-24T10:00:00Z",
            "has_pending_order": true,
            "bounce_notification": "ops@example.com",
        }))
        .unwrap();
        assert!(p.is_empty());
        assert_eq!(a.delete_on, Some(1_796_083_200.0));
        assert_eq!(a.extra_messages_expires_at, Some(1_798_106_400.0));
        assert_eq!(a.has_pending_order, Some(true));
        assert_eq!(a.bounce_notification, Some(true));
        let (a, _) =
            Record::from_record(&json!({"bounce_notification": "", "delete_on": null})).unwrap();
        assert_eq!((a.bounce_notification, a.delete_on), (Some(false), None));
        let (a, _) = Record::from_record(&json!({"bounce_notification": null})).unwrap();
        assert_eq!(a.bounce_notification, None);
        let (a, p) = Record::from_record(&json!({"bounce_notification": {"to": "x"}})).unwrap();
        assert_eq!((a.bounce_notification, p.len()), (None, 1));
    }

    #[test]
    fn domains_count_wins_over_the_array_length() {
        let (a, _) =
            Record::from_record(&json!({"domains": [{"name": "a"}, {"name": "b"}]})).unwrap();
        assert_eq!(a.domains, Some(2.0));
        let (a, _) = Record::from_record(&json!({"domains": [], "domains_count": "3"})).unwrap();
        assert_eq!(a.domains, Some(3.0));
    }
}
