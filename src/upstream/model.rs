//! Lenient reading of upstream records: numbers may come as strings, fields may be null,
//! missing or of another shape. A value we cannot read is reported as a [`ParseProblem`] and
//! left out; it never becomes a zero.

use serde_json::{Map, Value};

/// A field whose shape we could not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseProblem {
    /// Dotted path of the field inside the record, e.g. `remaining_messages`.
    pub path: String,
    /// What was found there, e.g. `string "abc"` (cut short), `object`.
    pub found: String,
}

/// Reads typed values out of one JSON object, collecting problems as it goes.
pub struct Reader<'a> {
    object: &'a Map<String, Value>,
    prefix: String,
    problems: Vec<ParseProblem>,
}

impl<'a> Reader<'a> {
    /// `None` when the record itself is not an object (the caller decides how bad that is).
    pub fn new(record: &'a Value) -> Option<Self> {
        record.as_object().map(|object| Reader {
            object,
            prefix: String::new(),
            problems: Vec::new(),
        })
    }

    pub fn into_problems(self) -> Vec<ParseProblem> {
        self.problems
    }

    fn problem(&mut self, key: &str, value: &Value) {
        let found = match value {
            Value::String(s) => {
                let short: String = s.chars().take(32).collect();
                format!("string {short:?}")
            }
            Value::Number(n) => format!("number {n}"),
            Value::Bool(b) => format!("boolean {b}"),
            Value::Array(_) => "array".to_owned(),
            Value::Object(_) => "object".to_owned(),
            Value::Null => "null".to_owned(),
        };
        self.problems.push(ParseProblem {
            path: format!("{}{key}", self.prefix),
            found,
        });
    }

    /// The raw value, treating JSON null like an absent field.
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.object.get(key).filter(|v| !v.is_null())
    }

    /// A finite number, from a JSON number or a numeric string. Missing, null or an empty
    /// string give `None` quietly; anything else unreadable is a problem.
    pub fn number(&mut self, key: &str) -> Option<f64> {
        let v = self.get(key)?;
        let parsed = match v {
            Value::Number(n) => n.as_f64(),
            Value::String(s) if s.trim().is_empty() => return None,
            Value::String(s) => s.trim().parse::<f64>().ok(),
            _ => None,
        };
        match parsed {
            Some(x) if x.is_finite() => Some(x),
            _ => {
                self.problem(key, v);
                None
            }
        }
    }

    /// A boolean from `true`/`false`, `0`/`1` or their string forms.
    pub fn boolean(&mut self, key: &str) -> Option<bool> {
        let v = self.get(key)?;
        let parsed = match v {
            Value::Bool(b) => Some(*b),
            Value::Number(n) => match n.as_f64() {
                Some(0.0) => Some(false),
                Some(1.0) => Some(true),
                _ => None,
            },
            Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" => Some(true),
                "false" | "0" | "no" => Some(false),
                _ => None,
            },
            _ => None,
        };
        if parsed.is_none() {
            self.problem(key, v);
        }
        parsed
    }

    /// A string; numbers and booleans are accepted as their text.
    pub fn string(&mut self, key: &str) -> Option<String> {
        let v = self.get(key)?;
        match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => {
                self.problem(key, v);
                None
            }
        }
    }

    /// A point in time as Unix seconds; see [`parse_timestamp`] for the forms accepted.
    pub fn timestamp(&mut self, key: &str) -> Option<f64> {
        let v = self.get(key)?;
        if let Value::String(s) = v
            && s.trim().is_empty()
        {
            return None;
        }
        let parsed = match v {
            Value::Number(n) => n.as_f64().and_then(epoch),
            Value::String(s) => parse_timestamp(s),
            _ => None,
        };
        if parsed.is_none() {
            self.problem(key, v);
        }
        parsed
    }

    /// The number of elements of an array field.
    pub fn array_len(&mut self, key: &str) -> Option<usize> {
        let v = self.get(key)?;
        match v {
            Value::Array(a) => Some(a.len()),
            _ => {
                self.problem(key, v);
                None
            }
        }
    }
}

/// Epoch numbers: seconds, or milliseconds when too large to be seconds (after year 5000).
fn epoch(x: f64) -> Option<f64> {
    if !x.is_finite() || x < 0.0 {
        None
    } else if x > 1e11 {
        Some((x / 1000.0).floor())
    } else {
        Some(x)
    }
}

/// Parses a date or date-time leniently: RFC 3339 (`2026-11-22T10:00:00Z`, with any offset),
/// `YYYY-MM-DD HH:MM:SS` or `YYYY-MM-DDTHH:MM:SS` (taken as UTC), `YYYY-MM-DD` (midnight UTC),
/// or epoch seconds as text. Returns Unix seconds.
pub fn parse_timestamp(s: &str) -> Option<f64> {
    let s = s.trim();
    if let Ok(ts) = s.parse::<jiff::Timestamp>() {
        return Some(ts.as_second() as f64);
    }
    if let Ok(dt) = s.parse::<jiff::civil::DateTime>() {
        return dt
            .to_zoned(jiff::tz::TimeZone::UTC)
            .ok()
            .map(|z| z.timestamp().as_second() as f64);
    }
    if let Ok(d) = s.parse::<jiff::civil::Date>() {
        return d
            .to_zoned(jiff::tz::TimeZone::UTC)
            .ok()
            .map(|z| z.timestamp().as_second() as f64);
    }
    s.parse::<f64>().ok().and_then(epoch)
}

/// The Delivery account figures we export; `None` where the API gave nothing readable.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeliveryAccount {
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

impl DeliveryAccount {
    /// Reads a Delivery account record. `Err` only when the record is not an object at all.
    pub fn from_record(record: &Value) -> Result<(Self, Vec<ParseProblem>), ParseProblem> {
        let mut r = Reader::new(record).ok_or_else(|| ParseProblem {
            path: "resources[0]".to_owned(),
            found: "not an object".to_owned(),
        })?;
        let domains = r
            .number("domains_count")
            .or_else(|| r.array_len("domains").map(|n| n as f64));
        let account = DeliveryAccount {
            remaining_messages: r.number("remaining_messages"),
            plan_messages_limit: r.number("plan_messages_limit"),
            plan_messages_used: r.number("plan_messages_used"),
            messages_sent: r.number("messages_sent"),
            extra_messages_total: r.number("extra_messages_total"),
            remaining_extra_messages_bought: r.number("remaining_extra_messages_bought"),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_may_come_as_strings_and_nulls_are_absent() {
        let v =
            json!({"remaining_messages": "1234", "plan_messages_limit": null, "messages_sent": 7});
        let (a, problems) = DeliveryAccount::from_record(&v).unwrap();
        assert_eq!(a.remaining_messages, Some(1234.0));
        assert_eq!(a.plan_messages_limit, None);
        assert_eq!(a.messages_sent, Some(7.0));
        assert!(problems.is_empty());
    }

    #[test]
    fn an_unreadable_value_is_a_problem_not_a_zero() {
        let v = json!({"remaining_messages": "lots", "plan_messages_used": {"n": 1}, "status": "NaN", "plan_expiration_date": "soon"});
        let (a, problems) = DeliveryAccount::from_record(&v).unwrap();
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
    fn dates_are_read_in_every_documented_form() {
        let want = 1_795_334_400.0; // 2026-11-22T08:00:00Z
        for s in [
            "2026-11-22T08:00:00Z",
            "2026-11-22T09:00:00+01:00",
            "2026-11-22 08:00:00",
            "2026-11-22T08:00:00",
            "1795334400",
        ] {
            assert_eq!(parse_timestamp(s), Some(want), "{s}");
        }
        assert_eq!(parse_timestamp("2026-11-22"), Some(1_795_305_600.0));
        assert_eq!(parse_timestamp("22/11/2026"), None);
        let (a, _) =
            DeliveryAccount::from_record(&json!({"last_renewal_date": 1_795_334_400_000_u64}))
                .unwrap();
        assert_eq!(a.last_renewal, Some(want), "milliseconds are recognised");
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
                DeliveryAccount::from_record(&json!({"ignore_suppression_list": v})).unwrap();
            assert_eq!(a.ignore_suppression_list, Some(want));
            assert!(p.is_empty());
        }
        let (a, p) =
            DeliveryAccount::from_record(&json!({"ignore_suppression_list": "maybe"})).unwrap();
        assert_eq!(a.ignore_suppression_list, None);
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn domains_count_wins_over_the_array_length() {
        let (a, _) =
            DeliveryAccount::from_record(&json!({"domains": [{"name": "a"}, {"name": "b"}]}))
                .unwrap();
        assert_eq!(a.domains, Some(2.0));
        let (a, _) =
            DeliveryAccount::from_record(&json!({"domains": [], "domains_count": "3"})).unwrap();
        assert_eq!(a.domains, Some(3.0));
    }
}
