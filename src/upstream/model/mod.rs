//! Lenient reading of upstream records: numbers may come as strings, fields may be null,
//! missing or of another shape. A value we cannot read is reported as a [`ParseProblem`] and
//! left out; it never becomes a zero.
//!
//! Each answer the client reads is a [`Model`]: how its body is decoded in bounded memory, and
//! how the decoded answer is read. The client runs both and counts what went wrong, so callers
//! get a typed value or an [`UpstreamError`](super::error::UpstreamError).

pub mod counts;
pub mod names;

use serde_json::{Map, Value};

use super::decode::LENGTH_SUFFIX;
use super::error::UpstreamError;

/// One kind of upstream answer, read into a typed value.
pub trait Model: Sized {
    /// The answer as the bounded decoder keeps it: one record, or a list of records.
    type Decoded;
    /// What reading needs besides the answer: the configured date format, today, a limit.
    type Params;

    /// Decodes a successful answer's body within the bounds of the decoder; any failure here
    /// has reason `decode`.
    fn decode(body: &[u8]) -> Result<Self::Decoded, UpstreamError>;

    /// Reads the decoded answer leniently: a field we cannot read is a [`ParseProblem`] and
    /// left out; only an answer that is not the thing asked for at all is [`Unreadable`].
    fn read(
        decoded: &Self::Decoded,
        params: &Self::Params,
    ) -> Result<(Self, Vec<ParseProblem>), Unreadable>;
}

/// Reads one answer's body as the client does, without counting: decoded within the bounds of
/// the decoder, then read leniently. An answer that cannot be read fails with reason `decode`.
pub fn read_body<M: Model>(
    body: &[u8],
    params: &M::Params,
) -> Result<(M, Vec<ParseProblem>), UpstreamError> {
    let decoded = M::decode(body)?;
    M::read(&decoded, params).map_err(|unreadable| {
        UpstreamError::new(super::error::FailureReason::Decode, unreadable.detail)
    })
}

/// A decoded answer that is not what was asked for (a record that is not an object, a list with
/// no days): the call fails with reason `decode`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreadable {
    /// Where and what, counted as a parse problem too; `None` when no one field is at fault.
    pub problem: Option<ParseProblem>,
    /// For logs and the landing page.
    pub detail: String,
}

impl Unreadable {
    /// A record that is not an object; `what` names it in the detail.
    pub fn not_an_object(what: &str, problem: ParseProblem) -> Self {
        Unreadable {
            problem: Some(problem),
            detail: format!("{what} is not a JSON object"),
        }
    }
}

/// A field whose shape we could not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseProblem {
    /// Dotted path of the field inside the record, e.g. `remaining_messages`.
    pub path: String,
    /// What was found there, e.g. `string "abc"` (cut short), `object`.
    pub found: String,
}

impl ParseProblem {
    pub fn new(path: impl Into<String>, value: &Value) -> Self {
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
        ParseProblem {
            path: path.into(),
            found,
        }
    }
}

/// A finite number from a JSON number or a numeric string; `None` for anything else.
pub fn as_number(v: &Value) -> Option<f64> {
    let x = match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }?;
    x.is_finite().then_some(x)
}

/// The largest integer a float holds exactly; a count beyond it cannot be right.
pub const MAX_EXACT: f64 = 9_007_199_254_740_992.0;

/// A count: a finite number from 0 to [`MAX_EXACT`]. A negative count or one beyond exact
/// range is a value we cannot trust, so it is not one.
pub fn as_count(v: &Value) -> Option<f64> {
    as_number(v).filter(|x| (0.0..=MAX_EXACT).contains(x))
}

/// Reads typed values out of one JSON object, collecting problems as it goes.
pub struct Reader<'a> {
    object: &'a Map<String, Value>,
    problems: Vec<ParseProblem>,
}

impl<'a> Reader<'a> {
    /// `None` when the record itself is not an object (the caller decides how bad that is).
    pub fn new(record: &'a Value) -> Option<Self> {
        record.as_object().map(|object| Reader {
            object,
            problems: Vec::new(),
        })
    }

    /// The first of `keys` that is present and not null, with its name.
    pub fn first_of(&self, keys: &[&'static str]) -> Option<&'static str> {
        keys.iter().copied().find(|k| self.get(k).is_some())
    }

    pub fn into_problems(self) -> Vec<ParseProblem> {
        self.problems
    }

    fn problem(&mut self, key: &str, value: &Value) {
        self.problems.push(ParseProblem::new(key, value));
    }

    /// The raw value, treating JSON null like an absent field.
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.object.get(key).filter(|v| !v.is_null())
    }

    /// The value of `key` as `parse` reads it: missing or null give `None` quietly, a value
    /// `parse` cannot read is a problem.
    fn read<T>(&mut self, key: &str, parse: impl FnOnce(&Value) -> Option<T>) -> Option<T> {
        let v = self.get(key)?;
        let parsed = parse(v);
        if parsed.is_none() {
            self.problem(key, v);
        }
        parsed
    }

    /// [`Reader::read`], an empty string giving `None` quietly too.
    fn read_filled<T>(&mut self, key: &str, parse: impl FnOnce(&Value) -> Option<T>) -> Option<T> {
        if self.get(key)?.as_str().is_some_and(|s| s.trim().is_empty()) {
            return None;
        }
        self.read(key, parse)
    }

    /// A finite number, from a JSON number or a numeric string. Missing, null or an empty
    /// string give `None` quietly; anything else unreadable is a problem.
    pub fn number(&mut self, key: &str) -> Option<f64> {
        // Beyond exact range a number is noise, not a code or a figure.
        self.read_filled(key, |v| as_number(v).filter(|x| x.abs() <= MAX_EXACT))
    }

    /// A count (see [`as_count`]): a negative or out-of-range number is a problem.
    pub fn count(&mut self, key: &str) -> Option<f64> {
        self.read_filled(key, as_count)
    }

    /// A boolean from `true`/`false`, `0`/`1` or their string forms.
    pub fn boolean(&mut self, key: &str) -> Option<bool> {
        self.read(key, |v| match v {
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
        })
    }

    /// A string; numbers and booleans are accepted as their text.
    pub fn string(&mut self, key: &str) -> Option<String> {
        self.read(key, |v| match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        })
    }

    /// A point in time as Unix seconds; see [`parse_timestamp`] for the forms accepted.
    pub fn timestamp(&mut self, key: &str) -> Option<f64> {
        self.read_filled(key, |v| match v {
            Value::Number(n) => n.as_f64().and_then(epoch),
            Value::String(s) => parse_timestamp(s),
            _ => None,
        })
    }

    /// A list of short texts: an array of strings (numbers taken as their text), or one string
    /// of items separated by commas or white space. An element of another kind is a problem
    /// and left out; anything else but null is a problem.
    pub fn string_list(&mut self, key: &str) -> Option<Vec<String>> {
        let v = self.get(key)?;
        match v {
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    match item {
                        Value::String(s) => out.push(s.clone()),
                        Value::Number(n) => out.push(n.to_string()),
                        Value::Null => {}
                        other => self.problem(&format!("{key}[{i}]"), other),
                    }
                }
                Some(out)
            }
            Value::String(s) => Some(
                s.split(|c: char| c == ',' || c.is_whitespace())
                    .filter(|p| !p.is_empty())
                    .map(str::to_owned)
                    .collect(),
            ),
            _ => {
                self.problem(key, v);
                None
            }
        }
    }

    /// The number of elements of an array field; the decoder keeps only the length of a field
    /// read for it, as `<key>#len` (see [`LENGTH_SUFFIX`]).
    pub fn array_len(&mut self, key: &str) -> Option<usize> {
        if let Some(n) = self
            .object
            .get(&format!("{key}{LENGTH_SUFFIX}"))
            .and_then(Value::as_u64)
        {
            return Some(usize::try_from(n).unwrap_or(usize::MAX));
        }
        self.read(key, |v| v.as_array().map(Vec::len))
    }
}

/// Epoch numbers: seconds, or milliseconds when too large to be seconds (after year 5000).
pub(crate) fn epoch(x: f64) -> Option<f64> {
    // Later than the year 9999 is no date (nor is its millisecond form).
    const LAST: f64 = 253_402_300_799.0;
    let seconds = if x > 1e11 { (x / 1000.0).floor() } else { x };
    (x.is_finite() && x >= 0.0 && seconds <= LAST).then_some(seconds)
}

/// Parses a date or date-time leniently: RFC 3339 (`2026-11-22T10:00:00Z`, with any offset),
/// `YYYY-MM-DD HH:MM:SS` or `YYYY-MM-DDTHH:MM:SS` (taken as UTC), `YYYY-MM-DD` (midnight UTC),
/// or epoch seconds as text. Returns Unix seconds.
pub fn parse_timestamp(s: &str) -> Option<f64> {
    let s = s.trim();
    if let Ok(ts) = s.parse::<jiff::Timestamp>() {
        return Some(ts.as_second() as f64);
    }
    let civil = s
        .parse::<jiff::civil::DateTime>()
        .or_else(|_| s.parse::<jiff::civil::Date>().map(Into::into));
    if let Ok(dt) = civil {
        return dt
            .to_zoned(jiff::tz::TimeZone::UTC)
            .ok()
            .map(|z| z.timestamp().as_second() as f64);
    }
    s.parse::<f64>().ok().and_then(epoch)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn numbers_are_finite_numbers_or_numeric_strings() {
        use serde_json::json;
        assert_eq!(as_number(&json!(3)), Some(3.0));
        assert_eq!(as_number(&json!(" 2.5 ")), Some(2.5));
        for v in [
            json!("NaN"),
            json!("inf"),
            json!("x"),
            json!(true),
            json!(null),
            json!([1]),
        ] {
            assert_eq!(as_number(&v), None, "{v}");
        }
    }
}
