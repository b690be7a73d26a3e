//! Decoding of upstream answers in bounded memory: the answer streams through serde once, and
//! only what the readers use is kept, as a pruned [`Value`] whose size has a hard bound.
//!
//! A whole `serde_json::Value` tree of an untrusted answer costs about 20 times its bytes (a
//! 4 MB answer of tiny objects became ~90 MB), so it is never built. Instead:
//! - the `{resources, pagination}` envelope keeps its records (only the first for operations
//!   that answer one record: the rest is skipped with [`IgnoredAny`], which allocates nothing);
//! - a record with a known field set keeps those fields only, unknown members are skipped while
//!   streaming, and a field read only for its length (`domains`) keeps just the length;
//! - what is kept is bounded per answer: [`MAX_VALUES`] values, [`MAX_DEPTH`] levels of nesting,
//!   strings cut at [`MAX_STRING_BYTES`] and [`MAX_TEXT_BYTES`] of text in all. Beyond a bound
//!   the call fails with reason `decode` and a detail that names the bound.
//!
//! Peak memory of one call is thus the body buffer (at most `api.max_response_bytes`) plus the
//! kept tree: at most about 2.7 MB of objects or 2 MB of scalars (`MAX_VALUES` x ~64 bytes)
//! plus `MAX_TEXT_BYTES` of text; the body is freed before the readers run, and their parse
//! problems (one per kept value at worst, ~150 bytes each) stay under 4.5 MB. With the default
//! 4 MiB limit a call peaks under about 2 x `api.max_response_bytes`, and the exporter under
//! `api.concurrency` times that above its idle footprint.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use super::error::{FailureReason, UpstreamError};

/// Values kept per answer, an object counting as [`OBJECT_COST`]. Real answers hold a few
/// hundred; a domains-rank list of 1 500 domains of a dozen members each just fits.
pub const MAX_VALUES: usize = 30_000;
/// What an object counts for: its first B-tree node takes about ten times a scalar's slot
/// (measured: ~800 bytes for a one-member object, ~64 for a number in an array).
pub const OBJECT_COST: usize = 8;
/// Nesting kept below a record (the readers look at most four levels down).
pub const MAX_DEPTH: usize = 32;
/// A longer string (or member name) keeps this many bytes and ends with `…`, which no reader
/// takes for a number, date or boolean; label values are cut shorter than this anyway.
pub const MAX_STRING_BYTES: usize = 1024;
/// Bytes of strings and member names kept per answer, in all.
pub const MAX_TEXT_BYTES: usize = 1024 * 1024;
/// A field read only for its length is kept as `<name>#len`: a number. No upstream member can
/// collide with it, since only the named fields of such a record are kept.
pub const LENGTH_SUFFIX: &str = "#len";

/// Which members of each record are kept.
#[derive(Clone, Copy, Debug)]
pub enum Fields {
    /// Every member, within the bounds: for shapes that are not documented.
    All,
    /// Only `keep`; of `lengths`, the length when it is an array (else the value, so that the
    /// reader can report what it found).
    Only {
        keep: &'static [&'static str],
        lengths: &'static [&'static str],
    },
}

/// What is left of the bounds of one answer.
struct Budget {
    values: usize,
    text: usize,
    /// The bound that was hit, for the error detail (serde's own error loses it).
    exceeded: Option<String>,
}

impl Budget {
    fn new() -> Self {
        Budget {
            values: MAX_VALUES,
            text: MAX_TEXT_BYTES,
            exceeded: None,
        }
    }

    fn fail<E: de::Error>(&mut self, detail: String) -> E {
        let e = E::custom(&detail);
        self.exceeded = Some(detail);
        e
    }

    /// Charges `values` values and `text` bytes.
    fn take<E: de::Error>(&mut self, values: usize, text: usize) -> Result<(), E> {
        if values > self.values {
            return Err(self.fail(format!(
                "answer holds more than {MAX_VALUES} values we would keep"
            )));
        }
        if text > self.text {
            return Err(self.fail(format!(
                "answer holds more than {MAX_TEXT_BYTES} bytes of text we would keep"
            )));
        }
        self.values -= values;
        self.text -= text;
        Ok(())
    }

    fn scalar<E: de::Error>(&mut self) -> Result<(), E> {
        self.take(1, 0)
    }

    fn string<E: de::Error>(&mut self, s: &str) -> Result<String, E> {
        let s = cut(s);
        self.take(1, s.len())?;
        Ok(s.into_owned())
    }

    /// A member name: text only, its value is charged on its own.
    fn key<E: de::Error>(&mut self, key: &str) -> Result<(), E> {
        self.take(0, key.len())
    }

    /// An array or object at `depth` below the record.
    fn nest<E: de::Error>(&mut self, depth: usize, cost: usize) -> Result<(), E> {
        if depth > MAX_DEPTH {
            return Err(self.fail(format!(
                "answer is nested deeper than {MAX_DEPTH} levels below a record"
            )));
        }
        self.take(cost, 0)
    }
}

/// `s` cut at [`MAX_STRING_BYTES`] (on a character boundary) and marked with `…`.
fn cut(s: &str) -> Cow<'_, str> {
    if s.len() <= MAX_STRING_BYTES {
        return Cow::Borrowed(s);
    }
    let mut end = MAX_STRING_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", &s[..end]))
}

/// A seed that is its own visitor, handed the value by `$method`.
macro_rules! seed_visits_itself {
    ($seed:ty, $method:ident) => {
        impl<'de> DeserializeSeed<'de> for $seed {
            type Value = <Self as Visitor<'de>>::Value;
            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                d.$method(self)
            }
        }
    };
}

/// A member name, borrowed from the body when it has no escapes, cut when long.
struct Key;

seed_visits_itself!(Key, deserialize_str);

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(cut(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(cut(v).into_owned()))
    }
}

/// Any value, kept within the budget; `depth` is its nesting below the record.
struct Pruned<'b> {
    budget: &'b mut Budget,
    depth: usize,
}

seed_visits_itself!(Pruned<'_>, deserialize_any);

impl<'de> Visitor<'de> for Pruned<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.budget.scalar()?;
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.budget.scalar()?;
        Ok(Value::from(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.budget.scalar()?;
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.budget.scalar()?;
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(self.budget.string(v)?))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.budget.scalar()?;
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.budget.nest(self.depth, 1)?;
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(Pruned {
            budget: &mut *self.budget,
            depth: self.depth + 1,
        })? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.budget.nest(self.depth, OBJECT_COST)?;
        let mut out = Map::new();
        while let Some(key) = map.next_key_seed(Key)? {
            let v = map.next_value_seed(Pruned {
                budget: &mut *self.budget,
                depth: self.depth + 1,
            })?;
            self.budget.key(&key)?;
            out.insert(key.into_owned(), v);
        }
        Ok(Value::Object(out))
    }
}

/// A record: an object keeps the members `fields` names; anything else is kept as it is (the
/// reader reports it).
struct Record<'b> {
    budget: &'b mut Budget,
    fields: Fields,
}

impl<'de> DeserializeSeed<'de> for Record<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        let pruned = Pruned {
            budget: self.budget,
            depth: 0,
        };
        match self.fields {
            Fields::All => d.deserialize_any(pruned),
            Fields::Only { keep, lengths } => d.deserialize_any(Picked {
                pruned,
                keep,
                lengths,
            }),
        }
    }
}

/// The visitor of a record with a known field set.
struct Picked<'b> {
    pruned: Pruned<'b>,
    keep: &'static [&'static str],
    lengths: &'static [&'static str],
}

/// Every scalar goes to the plain pruned visitor `self.$field`.
macro_rules! delegate_scalars {
    ($field:tt) => {
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
            self.$field.visit_bool(v).map(Into::into)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            self.$field.visit_i64(v).map(Into::into)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            self.$field.visit_u64(v).map(Into::into)
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            self.$field.visit_f64(v).map(Into::into)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            self.$field.visit_str(v).map(Into::into)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            self.$field.visit_unit().map(Into::into)
        }
    };
}

impl<'de> Visitor<'de> for Picked<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a record")
    }
    delegate_scalars!(pruned);
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Value, A::Error> {
        self.pruned.visit_seq(seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let budget = self.pruned.budget;
        budget.nest(0, OBJECT_COST)?;
        let mut out = Map::new();
        while let Some(key) = map.next_key_seed(Key)? {
            let key = key.as_ref();
            if let Some(&name) = self.lengths.iter().find(|n| **n == key) {
                let length_key = format!("{name}{LENGTH_SUFFIX}");
                // The last of repeated members wins, as in a plain JSON object.
                budget.key(name)?;
                match map.next_value_seed(Length(Pruned {
                    budget: &mut *budget,
                    depth: 1,
                }))? {
                    Sized::Length(n) => {
                        out.remove(name);
                        out.insert(length_key, Value::from(n));
                    }
                    Sized::Other(v) => {
                        out.remove(&length_key);
                        out.insert(name.to_owned(), v);
                    }
                }
            } else if let Some(&name) = self.keep.iter().find(|n| **n == key) {
                budget.key(name)?;
                let v = map.next_value_seed(Pruned {
                    budget: &mut *budget,
                    depth: 1,
                })?;
                out.insert(name.to_owned(), v);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Value::Object(out))
    }
}

/// An array's length, or any other value as it is.
enum Sized {
    Length(u64),
    Other(Value),
}

impl From<Value> for Sized {
    fn from(v: Value) -> Self {
        Sized::Other(v)
    }
}

struct Length<'b>(Pruned<'b>);

seed_visits_itself!(Length<'_>, deserialize_any);

impl<'de> Visitor<'de> for Length<'_> {
    type Value = Sized;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array")
    }
    delegate_scalars!(0);
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Sized, A::Error> {
        self.0.visit_map(map).map(Into::into)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Sized, A::Error> {
        self.0.budget.scalar()?;
        let mut n = 0u64;
        while seq.next_element::<IgnoredAny>()?.is_some() {
            n = n.saturating_add(1);
        }
        Ok(Sized::Length(n))
    }
}

/// What a body held where records or an aggregate were expected.
enum Found<T> {
    Kept(T),
    /// The member exists but is not of the expected type.
    WrongType,
    /// The body is not an object, or has no such member.
    Missing,
    NotObject,
}

/// A scalar where something else was expected: every scalar `visit_*` answers `$found`
/// (`None`, the wrong type, for a member; `Found::NotObject` for a body).
macro_rules! scalars_answer {
    ($found:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($found)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($found)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($found)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($found)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($found)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($found)
        }
    };
}

/// The `resources` member: its records (only the first when `first_only`), or `None` when it
/// is not an array.
struct Resources<'b> {
    budget: &'b mut Budget,
    fields: Fields,
    first_only: bool,
}

seed_visits_itself!(Resources<'_>, deserialize_any);

impl<'de> Visitor<'de> for Resources<'_> {
    type Value = Option<Vec<Value>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of records")
    }
    scalars_answer!(None);
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut records = Vec::new();
        loop {
            if self.first_only && !records.is_empty() {
                if seq.next_element::<IgnoredAny>()?.is_none() {
                    break;
                }
                continue;
            }
            let seed = Record {
                budget: &mut *self.budget,
                fields: self.fields,
            };
            match seq.next_element_seed(seed)? {
                Some(r) => records.push(r),
                None => break,
            }
        }
        Ok(Some(records))
    }
}

/// A top-level object of which one member is kept by `seed`; every other member is skipped.
struct Member<S> {
    name: &'static str,
    seed: S,
}

impl<'de, S, T> DeserializeSeed<'de> for Member<S>
where
    S: DeserializeSeed<'de, Value = Option<T>>,
{
    type Value = Found<T>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// A member's seed is used once: a repeated member is skipped after the first (serde_json's
/// `Value` would keep the last; for the envelope no real answer repeats it).
impl<'de, S, T> Visitor<'de> for Member<S>
where
    S: DeserializeSeed<'de, Value = Option<T>>,
{
    type Value = Found<T>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    scalars_answer!(Found::NotObject);
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Found::NotObject)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seed = Some(self.seed);
        let mut found = Found::Missing;
        while let Some(key) = map.next_key_seed(Key)? {
            match seed.take_if(|_| key == self.name) {
                Some(seed) => {
                    found = match map.next_value_seed(seed)? {
                        Some(v) => Found::Kept(v),
                        None => Found::WrongType,
                    }
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(found)
    }
}

/// The `aggregate` member: an object, or `None`.
struct Aggregate<'b>(&'b mut Budget);

seed_visits_itself!(Aggregate<'_>, deserialize_any);

impl<'de> Visitor<'de> for Aggregate<'_> {
    type Value = Option<Value>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }
    scalars_answer!(None);
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Pruned {
            budget: self.0,
            depth: 0,
        }
        .visit_map(map)
        .map(Some)
    }
}

fn decode_error(budget: &mut Budget, e: &serde_json::Error) -> UpstreamError {
    let detail = budget.exceeded.take().unwrap_or_else(|| {
        let what = match e.classify() {
            serde_json::error::Category::Eof => "truncated",
            serde_json::error::Category::Syntax => "syntax error",
            serde_json::error::Category::Data => "bad data",
            serde_json::error::Category::Io => "read error",
        };
        format!(
            "body is not JSON ({what} at line {} column {})",
            e.line(),
            e.column()
        )
    });
    UpstreamError::new(FailureReason::Decode, detail)
}

fn envelope(body: &[u8], fields: Fields, first_only: bool) -> Result<Vec<Value>, UpstreamError> {
    let mut budget = Budget::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    let seed = Member {
        name: "resources",
        seed: Resources {
            budget: &mut budget,
            fields,
            first_only,
        },
    };
    let found = seed
        .deserialize(&mut de)
        .and_then(|found| de.end().map(|()| found))
        .map_err(|e| decode_error(&mut budget, &e))?;
    let detail = match found {
        Found::Kept(records) => return Ok(records),
        Found::WrongType => "resources is not an array",
        Found::Missing => "no resources member in the body",
        Found::NotObject => "body is not a JSON object",
    };
    Err(UpstreamError::new(FailureReason::Decode, detail))
}

/// Every record of a `{resources: [record, ...], pagination: {}}` body (an empty list is fine:
/// a day with no statistics is not an error).
pub fn resources(body: &[u8], fields: Fields) -> Result<Vec<Value>, UpstreamError> {
    envelope(body, fields, false)
}

/// The first record of the envelope; the others are skipped unread. An empty `resources` is a
/// decode failure, since the operation returns one record.
pub fn first_resource(body: &[u8], fields: Fields) -> Result<Value, UpstreamError> {
    envelope(body, fields, true)?
        .into_iter()
        .next()
        .ok_or_else(|| UpstreamError::new(FailureReason::Decode, "resources is empty"))
}

/// The `aggregate` object of a migration statistics body; `None` when the body has none or it
/// is not an object.
pub fn aggregate(body: &[u8]) -> Result<Option<Value>, UpstreamError> {
    let mut budget = Budget::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    let seed = Member {
        name: "aggregate",
        seed: Aggregate(&mut budget),
    };
    let found = seed
        .deserialize(&mut de)
        .and_then(|found| de.end().map(|()| found))
        .map_err(|e| decode_error(&mut budget, &e))?;
    Ok(match found {
        Found::Kept(a) => Some(a),
        Found::WrongType | Found::Missing | Found::NotObject => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ACCOUNT: Fields = Fields::Only {
        keep: &["a", "b"],
        lengths: &["list"],
    };

    fn bytes(v: &Value) -> Vec<u8> {
        serde_json::to_vec(v).unwrap()
    }

    #[test]
    fn an_envelope_with_many_records_keeps_only_the_first_for_a_single_record_call() {
        let mut body = String::from(r#"{"pagination":{},"resources":[{"a":1}"#);
        for _ in 0..(MAX_VALUES * 2) {
            body.push_str(r#",{"a":1}"#);
        }
        body.push_str("]}");
        let r = first_resource(body.as_bytes(), Fields::All).unwrap();
        assert_eq!(r, json!({"a": 1}));
        // Kept whole, the same list is over the bound.
        let e = resources(body.as_bytes(), Fields::All).unwrap_err();
        assert_eq!(e.reason, FailureReason::Decode);
        assert!(e.detail.contains("30000 values"), "{}", e.detail);
    }

    #[test]
    fn unknown_members_of_a_record_are_skipped_and_lengths_replace_arrays() {
        let body = json!({"resources": [{
            "a": 1, "b": {"x": [1, 2]}, "c": "skipped", "big": vec![json!({}); 1000],
            "list": [{"name": "x"}, {"name": "y"}, 3]
        }]});
        let r = first_resource(&bytes(&body), ACCOUNT).unwrap();
        assert_eq!(r, json!({"a": 1, "b": {"x": [1, 2]}, "list#len": 3}));
        let body = json!({"resources": [{"list": {"not": "an array"}}]});
        let r = first_resource(&bytes(&body), ACCOUNT).unwrap();
        assert_eq!(
            r,
            json!({"list": {"not": "an array"}}),
            "kept for the reader"
        );
    }

    #[test]
    fn skipped_members_cost_nothing_against_the_bounds() {
        let huge: Vec<Value> = (0..MAX_VALUES * 2).map(|i| json!({"i": i})).collect();
        let body = json!({"resources": [{"a": 1, "huge": huge}], "extra": huge});
        assert_eq!(
            first_resource(&bytes(&body), ACCOUNT).unwrap(),
            json!({"a": 1})
        );
        assert_eq!(
            aggregate(&bytes(&json!({"aggregate": {"n": 1}, "extra": huge}))).unwrap(),
            Some(json!({"n": 1}))
        );
    }

    #[test]
    fn nesting_deeper_than_the_bound_is_a_decode_failure() {
        let mut deep = json!(1);
        for _ in 0..MAX_DEPTH {
            deep = json!([deep]);
        }
        let ok = json!({"resources": [{"a": deep.clone()}]});
        assert!(first_resource(&bytes(&ok), Fields::All).is_ok());
        let too_deep = json!({"resources": [{"a": [deep]}]});
        let e = first_resource(&bytes(&too_deep), Fields::All).unwrap_err();
        assert_eq!(e.reason, FailureReason::Decode);
        assert!(e.detail.contains("nested deeper than 32"), "{}", e.detail);
    }

    #[test]
    fn long_strings_are_cut_and_text_in_all_is_bounded() {
        let long = "7".repeat(MAX_STRING_BYTES * 3);
        let body = json!({"resources": [{"a": long, "é".repeat(MAX_STRING_BYTES): 1}]});
        let r = first_resource(&bytes(&body), Fields::All).unwrap();
        let a = r["a"].as_str().unwrap();
        assert!(a.len() <= MAX_STRING_BYTES + 3 && a.ends_with('…'), "{a}");
        assert!(a.trim_end_matches('…').parse::<f64>().is_ok());
        assert!(a.parse::<f64>().is_err(), "a cut number is no number");
        let key = r.as_object().unwrap().keys().find(|k| *k != "a").unwrap();
        assert!(
            key.len() <= MAX_STRING_BYTES + 3,
            "member names are cut too"
        );
        let many: Vec<String> = (0..MAX_TEXT_BYTES / MAX_STRING_BYTES + 2)
            .map(|_| "x".repeat(MAX_STRING_BYTES))
            .collect();
        let e = resources(&bytes(&json!({"resources": many})), Fields::All).unwrap_err();
        assert!(e.detail.contains("bytes of text"), "{}", e.detail);
    }

    #[test]
    fn envelope_shapes_give_the_same_failures_as_before() {
        for (body, detail) in [
            (json!({"resources": []}), "resources is empty"),
            (json!({"data": []}), "no resources member in the body"),
            (json!([1]), "body is not a JSON object"),
            (json!({"resources": {}}), "resources is not an array"),
            (json!({"resources": null}), "resources is not an array"),
        ] {
            let e = first_resource(&bytes(&body), Fields::All).unwrap_err();
            assert_eq!(e.reason, FailureReason::Decode);
            assert_eq!(e.detail, detail);
        }
        let e = first_resource(b"{\"resources\": [", Fields::All).unwrap_err();
        assert!(
            e.detail.starts_with("body is not JSON (truncated"),
            "{}",
            e.detail
        );
        let e = first_resource(b"{\"resources\": []} x", Fields::All).unwrap_err();
        assert!(e.detail.starts_with("body is not JSON"), "{}", e.detail);
    }

    #[test]
    fn a_kept_record_equals_the_plain_json_value() {
        let record = json!({"a": [1, -2, 2.5, "3", null, true, {"b": {}}], "c": {"d": "e"}});
        let body = json!({"resources": [record.clone(), {"x": 1}], "pagination": {}});
        assert_eq!(first_resource(&bytes(&body), Fields::All).unwrap(), record);
        assert_eq!(
            resources(&bytes(&body), Fields::All).unwrap(),
            vec![record, json!({"x": 1})]
        );
    }

    #[test]
    fn a_large_honest_list_fits_and_objects_count_for_more_than_scalars() {
        let statuses = ["delivered", "bounced", "deferred", "failed", "complained"];
        let domains: Vec<Value> = (0..1500)
            .map(|i| {
                let mut d = json!({"domain": format!("d{i}.example"), "total": i});
                for (j, s) in statuses.iter().enumerate() {
                    d[*s] = json!(i * j);
                    d[format!("{s}_rate")] = json!("0.5");
                }
                d
            })
            .collect();
        let body = json!({"resources": domains, "pagination": {}});
        assert_eq!(resources(&bytes(&body), Fields::All).unwrap().len(), 1500);
        // The same number of values as empty objects is over the bound.
        let objects = vec![json!({}); MAX_VALUES / OBJECT_COST + 1];
        let e = resources(&bytes(&json!({"resources": objects})), Fields::All).unwrap_err();
        assert!(e.detail.contains("values"), "{}", e.detail);
        let numbers = vec![json!(1); MAX_VALUES / OBJECT_COST + 1];
        assert!(resources(&bytes(&json!({"resources": numbers})), Fields::All).is_ok());
    }
}
