//! Validation of the values collectors' blocks share: account ids, codes, durations within bounds,
//! time zones and date formats. Each message names the field and the fix.

use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::hash::Hash;
use std::ops::RangeInclusive;
use std::time::Duration;

use super::date_format::DateFormat;
use super::error::{ConfigError, invalid};
use super::{defaults, limits};
use crate::redact::quote;

/// How a mail-tracing collector names a day: the time zone of its "today" and how dates are written
/// in its requests.
#[derive(Debug, Clone)]
pub struct Day {
    pub timezone: jiff::tz::TimeZone,
    /// The IANA name, as configured and as the dashboard's request sends it.
    pub timezone_name: String,
    pub date_format: DateFormat,
}

impl Day {
    /// The day's settings and one more of the collector's by name, as kept targets are keyed under
    /// them: the zone by its configured name, the date format as the provider's dates are read.
    pub fn key_fields_and(&self, key: &'static str, value: usize) -> Vec<(&'static str, String)> {
        vec![
            ("timezone", self.timezone_name.clone()),
            ("date_format", self.date_format.strftime().to_owned()),
            (key, value.to_string()),
        ]
    }
}

impl PartialEq for Day {
    /// The zone by its name: the name is what is configured and sent.
    fn eq(&self, other: &Day) -> bool {
        self.timezone_name == other.timezone_name && self.date_format == other.date_format
    }
}

impl Day {
    /// The `timezone` and `date_format` keys of the block at `field`.
    pub fn from_keys(
        field: &str,
        timezone: Option<String>,
        date_format: Option<String>,
    ) -> Result<Day, ConfigError> {
        let (timezone, timezone_name) = self::timezone(&format!("{field}.timezone"), timezone)?;
        Ok(Day {
            timezone,
            timezone_name,
            date_format: self::date_format(&format!("{field}.date_format"), date_format)?,
        })
    }

    /// `now` in the zone.
    pub fn zoned(&self, now: jiff::Timestamp) -> jiff::Zoned {
        now.to_zoned(self.timezone.clone())
    }
}

/// `value` if `range` holds it, else an error naming `field` and the value, then `fix`: how to
/// write it (the range, what its low end means, an example).
pub fn in_range<T: PartialOrd + fmt::Display>(
    field: impl Into<String>,
    value: T,
    range: RangeInclusive<T>,
    fix: impl fmt::Display,
) -> Result<T, ConfigError> {
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(invalid(field, format!("{value} is out of range: {fix}")))
    }
}

/// [`in_range`] whose fix is the range itself.
pub fn in_bounds<T: PartialOrd + fmt::Display>(
    field: impl Into<String>,
    value: T,
    range: RangeInclusive<T>,
) -> Result<T, ConfigError> {
    let fix = format!("use {} to {}", range.start(), range.end());
    in_range(field, value, range, fix)
}

/// Refuses a duration outside `min..=max`, naming the field, the bound and an example.
pub fn within(
    field: &str,
    value: Duration,
    min: Duration,
    max: Duration,
    example: &str,
) -> Result<(), ConfigError> {
    if (min..=max).contains(&value) {
        return Ok(());
    }
    let f = humantime::format_duration;
    Err(invalid(
        field,
        format!(
            "{} is out of range: use {} to {}, for example {example}",
            f(value),
            f(min),
            f(max)
        ),
    ))
}

pub fn timezone(
    field: &str,
    name: Option<String>,
) -> Result<(jiff::tz::TimeZone, String), ConfigError> {
    let name = name.unwrap_or_else(|| defaults::TIMEZONE.to_owned());
    jiff::tz::TimeZone::get(&name)
        .map(|tz| (tz, name.clone()))
        .map_err(|_| {
            invalid(
                field,
                format!(
                    "{} is not a known time zone; use an IANA name such as UTC or Europe/Rome",
                    quote(&name)
                ),
            )
        })
}

pub fn date_format(field: &str, pattern: Option<String>) -> Result<DateFormat, ConfigError> {
    let pattern = pattern.unwrap_or_else(|| defaults::DATE_FORMAT.to_owned());
    DateFormat::parse(&pattern).ok_or_else(|| {
        invalid(
            field,
            format!(
                "{} is not a date format: write YYYY, MM and DD once each with separators, e.g. YYYY-MM-DD",
                quote(&pattern)
            ),
        )
    })
}

/// Validates one identifier code: a prefix followed by a number of digits.
pub fn code(
    field: &str,
    value: &str,
    forms: &[(&str, usize)],
    expected: &str,
) -> Result<String, ConfigError> {
    let ok = forms.iter().any(|(prefix, digits)| {
        value
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.len() == *digits && rest.bytes().all(|b| b.is_ascii_digit()))
    });
    if ok {
        Ok(value.to_owned())
    } else {
        Err(invalid(
            field,
            format!("{} is not a valid code: expected {expected}", quote(value)),
        ))
    }
}

/// Validates a list of distinct codes; an empty one is refused when `required`.
pub fn codes(
    field: &str,
    values: &[String],
    forms: &[(&str, usize)],
    expected: &str,
    required: bool,
) -> Result<Vec<String>, ConfigError> {
    let empty = format!("is empty; list codes written as {expected}");
    distinct(
        field,
        values,
        required.then_some(&*empty),
        |at, v| code(at, v, forms, expected),
        String::clone,
        |v| format!("{v} is listed twice"),
    )
}

/// The entries of the list at `field`, each read by `read` (which names it `field[i]`); an entry
/// whose `key` an earlier one has is refused, saying `twice` of the key. An empty list is
/// refused with `empty`, when given, and one longer than [`limits::MAX_TARGETS`] always.
pub fn distinct<I, T, K: Eq + Hash>(
    field: &str,
    items: &[I],
    empty: Option<&str>,
    read: impl Fn(&str, &I) -> Result<T, ConfigError>,
    key: impl Fn(&T) -> K,
    twice: impl Fn(&K) -> String,
) -> Result<Vec<T>, ConfigError> {
    if let Some(empty) = empty
        && items.is_empty()
    {
        return Err(invalid(field, empty));
    }
    if items.len() > limits::MAX_TARGETS {
        return Err(invalid(
            field,
            format!(
                "lists {} entries; at most {} are supported by one exporter (split the fleet with shards)",
                items.len(),
                limits::MAX_TARGETS
            ),
        ));
    }
    let mut seen = HashSet::with_capacity(items.len());
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("{field}[{i}]");
        let entry = read(&at, item)?;
        let key = key(&entry);
        if seen.contains(&key) {
            return Err(invalid(at, twice(&key)));
        }
        seen.insert(key);
        out.push(entry);
    }
    Ok(out)
}

/// Validates distinct account ids; an empty list is refused when `required`.
pub fn account_list(field: &str, ids: &[i64], required: bool) -> Result<Vec<i32>, ConfigError> {
    let id = |at: &str, &id: &i64| {
        i32::try_from(id).ok().filter(|v| *v > 0).ok_or_else(|| {
            invalid(
                at,
                format!(
                    "{id} is out of range: Delivery account ids are int32, from 1 to 2147483647"
                ),
            )
        })
    };
    distinct(
        field,
        ids,
        required.then_some("is empty; list the Delivery account ids to watch, e.g. [1001, 1002]"),
        id,
        |id| *id,
        |id| format!("{id} is listed twice"),
    )
}

/// The distinct account ids of the list at `field`, as a set, when one is given.
pub fn account_set(
    field: &str,
    ids: Option<Vec<i64>>,
) -> Result<Option<BTreeSet<i32>>, ConfigError> {
    ids.map(|ids| Ok(account_list(field, &ids, false)?.into_iter().collect()))
        .transpose()
}
