//! How dates are written in mail-tracing requests and read back from answers.

use super::defaults;

/// How dates are written in requests: `YYYY`, `MM` and `DD` in any order with separators,
/// e.g. `YYYY-MM-DD` (the default) or `DD/MM/YYYY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DateFormat {
    strftime: String,
}

impl DateFormat {
    pub fn parse(pattern: &str) -> Option<DateFormat> {
        let ok = pattern.matches("YYYY").count() == 1
            && pattern.matches("MM").count() == 1
            && pattern.matches("DD").count() == 1
            && pattern.len() <= 32;
        let strftime = pattern
            .replace('%', "%%")
            .replace("YYYY", "%Y")
            .replace("MM", "%m")
            .replace("DD", "%d");
        // Nothing but the three fields and separators: no letters left over.
        let rest = pattern
            .replace("YYYY", "")
            .replace("MM", "")
            .replace("DD", "");
        (ok && !rest.chars().any(|c| c.is_alphanumeric())).then_some(DateFormat { strftime })
    }

    /// The pattern as `strftime` reads it (`%Y-%m-%d`).
    pub fn strftime(&self) -> &str {
        &self.strftime
    }

    pub fn format(&self, date: jiff::civil::Date) -> String {
        date.strftime(&self.strftime).to_string()
    }

    /// Reads a date written in this format (or as ISO `YYYY-MM-DD`, or a date-time whose date
    /// part is one of those).
    pub fn read(&self, text: &str) -> Option<jiff::civil::Date> {
        let t = text.trim();
        jiff::civil::Date::strptime(&self.strftime, t)
            .ok()
            .or_else(|| {
                t.get(..10)
                    .and_then(|d| d.parse::<jiff::civil::Date>().ok())
            })
    }
}

impl Default for DateFormat {
    fn default() -> Self {
        DateFormat::parse(defaults::DATE_FORMAT).expect("the default date format is valid")
    }
}
