//! Validation of the values collectors' blocks share: account ids, codes, durations within bounds,
//! time zones and date formats. Each message names the field and the fix.

use std::collections::HashSet;
use std::fmt;
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
    /// The day's settings by name, as a collector's kept targets are keyed under them: the zone
    /// by its configured name, the date format as the provider's dates are read with it.
    pub fn key_fields(&self) -> [(&'static str, String); 2] {
        [
            ("timezone", self.timezone_name.clone()),
            ("date_format", self.date_format.strftime().to_owned()),
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
    if required && values.is_empty() {
        return Err(invalid(
            field,
            format!("is empty; list codes written as {expected}"),
        ));
    }
    at_most(field, values.len())?;
    let mut seen = HashSet::with_capacity(values.len());
    let mut out: Vec<String> = Vec::with_capacity(values.len());
    for (i, v) in values.iter().enumerate() {
        let at = format!("{field}[{i}]");
        let v = code(&at, v, forms, expected)?;
        if !seen.insert(v.clone()) {
            return Err(invalid(at, format!("{v} is listed twice")));
        }
        out.push(v);
    }
    Ok(out)
}

/// Refuses a list longer than [`limits::MAX_TARGETS`].
pub fn at_most(field: &str, len: usize) -> Result<(), ConfigError> {
    if len > limits::MAX_TARGETS {
        return Err(invalid(
            field,
            format!(
                "lists {len} entries; at most {} are supported by one exporter (split the fleet with shards)",
                limits::MAX_TARGETS
            ),
        ));
    }
    Ok(())
}

pub fn account_ids(field: &str, ids: &[i64]) -> Result<Vec<i32>, ConfigError> {
    account_list(field, ids, true)
}

/// Validates distinct account ids; an empty list is refused when `required`.
pub fn account_list(field: &str, ids: &[i64], required: bool) -> Result<Vec<i32>, ConfigError> {
    if required && ids.is_empty() {
        return Err(invalid(
            field,
            "is empty; list the Delivery account ids to watch, e.g. [1001, 1002]",
        ));
    }
    at_most(field, ids.len())?;
    let mut seen = HashSet::with_capacity(ids.len());
    let mut out = Vec::with_capacity(ids.len());
    for (i, &id) in ids.iter().enumerate() {
        let id32 = i32::try_from(id).ok().filter(|v| *v > 0).ok_or_else(|| {
            invalid(
                format!("{field}[{i}]"),
                format!(
                    "{id} is out of range: Delivery account ids are int32, from 1 to 2147483647"
                ),
            )
        })?;
        if !seen.insert(id32) {
            return Err(invalid(
                format!("{field}[{i}]"),
                format!("{id} is listed twice"),
            ));
        }
        out.push(id32);
    }
    Ok(out)
}
