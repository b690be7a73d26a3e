//! Exposition formats: metric families written as the classic Prometheus text format (0.0.4)
//! or as OpenMetrics 1.0, chosen per request from the `Accept` header.
//!
//! Why not a client library: `promtool check metrics` and many scrapers read only the classic
//! format, and the Rust client libraries write only OpenMetrics. This module keeps the naming
//! rules of those libraries: a counter's `_total` and a unit suffix are added here, never typed
//! by hand in a metric name.

use std::fmt::Write as _;

/// Longest label value we expose; longer values from the API are cut (with `…`), so a
/// misbehaving upstream cannot blow up series size.
pub const MAX_LABEL_VALUE_LEN: usize = 128;

/// Which text format a scrape asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Classic,
    OpenMetrics,
}

impl Format {
    /// OpenMetrics when the scraper lists it in `Accept` (Prometheus does), else classic text.
    pub fn negotiate(accept: Option<&str>) -> Self {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Classic,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Classic => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
    Histogram,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Seconds,
    Bytes,
}

impl Unit {
    fn as_str(self) -> &'static str {
        match self {
            Unit::Seconds => "seconds",
            Unit::Bytes => "bytes",
        }
    }
}

/// One label pair. Names are compile-time constants; values come from anywhere and are
/// escaped and bounded when written.
pub type Label = (&'static str, String);

#[derive(Clone, Debug, PartialEq)]
struct Sample {
    suffix: &'static str,
    labels: Vec<Label>,
    value: f64,
}

/// A metric family: name, help, type and its samples.
#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    name: String,
    help: String,
    kind: Kind,
    unit: Option<Unit>,
    samples: Vec<Sample>,
}

impl Family {
    fn new(name: &str, help: impl Into<String>, kind: Kind) -> Self {
        Family {
            name: name.to_owned(),
            help: help.into(),
            kind,
            unit: None,
            samples: Vec::new(),
        }
    }

    pub fn gauge(name: &str, help: impl Into<String>) -> Self {
        Self::new(name, help, Kind::Gauge)
    }

    /// A counter; `_total` is appended to the sample name when written.
    pub fn counter(name: &str, help: impl Into<String>) -> Self {
        Self::new(name, help, Kind::Counter)
    }

    pub fn histogram(name: &str, help: impl Into<String>) -> Self {
        Self::new(name, help, Kind::Histogram)
    }

    /// Appends the unit to the family name (`_seconds`, `_bytes`) and declares it in OpenMetrics.
    pub fn unit(mut self, unit: Unit) -> Self {
        self.name.push('_');
        self.name.push_str(unit.as_str());
        self.unit = Some(unit);
        self
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Adds one gauge or counter sample.
    pub fn push(&mut self, labels: Vec<Label>, value: f64) {
        debug_assert!(self.kind != Kind::Histogram, "use push_histogram");
        let suffix = if self.kind == Kind::Counter {
            "_total"
        } else {
            ""
        };
        self.samples.push(Sample {
            suffix,
            labels,
            value,
        });
    }

    /// Adds one histogram: cumulative counts per upper bound (ascending, `+Inf` added here),
    /// the sum and the count.
    pub fn push_histogram(
        &mut self,
        labels: Vec<Label>,
        buckets: &[(f64, u64)],
        sum: f64,
        count: u64,
    ) {
        debug_assert!(self.kind == Kind::Histogram);
        for &(le, cumulative) in buckets {
            let mut l = labels.clone();
            l.push(("le", format_value(le)));
            self.samples.push(Sample {
                suffix: "_bucket",
                labels: l,
                value: cumulative as f64,
            });
        }
        let mut l = labels.clone();
        l.push(("le", "+Inf".to_owned()));
        self.samples.push(Sample {
            suffix: "_bucket",
            labels: l,
            value: count as f64,
        });
        self.samples.push(Sample {
            suffix: "_sum",
            labels: labels.clone(),
            value: sum,
        });
        self.samples.push(Sample {
            suffix: "_count",
            labels,
            value: count as f64,
        });
    }
}

/// Writes families (empty ones are skipped) without the OpenMetrics `# EOF` terminator, so
/// that prepared and per-scrape parts can be joined; see [`EOF`].
pub fn write_families(out: &mut String, families: &[Family], format: Format) {
    for family in families.iter().filter(|f| !f.samples.is_empty()) {
        write_family(out, family, format);
    }
}

/// The OpenMetrics terminator, written once at the very end of a response.
pub const EOF: &str = "# EOF\n";

fn write_family(out: &mut String, f: &Family, format: Format) {
    let kind = match f.kind {
        Kind::Gauge => "gauge",
        Kind::Counter => "counter",
        Kind::Histogram => "histogram",
    };
    // Classic text names a counter family with its `_total`; OpenMetrics names it without.
    let declared = match (format, f.kind) {
        (Format::Classic, Kind::Counter) => format!("{}_total", f.name),
        _ => f.name.clone(),
    };
    let _ = writeln!(out, "# HELP {declared} {}", escape_help(&f.help, format));
    let _ = writeln!(out, "# TYPE {declared} {kind}");
    if let (Format::OpenMetrics, Some(unit)) = (format, f.unit) {
        let _ = writeln!(out, "# UNIT {declared} {}", unit.as_str());
    }
    for s in &f.samples {
        out.push_str(&f.name);
        out.push_str(s.suffix);
        if !s.labels.is_empty() {
            out.push('{');
            for (i, (k, v)) in s.labels.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(k);
                out.push_str("=\"");
                escape_label_value(out, v);
                out.push('"');
            }
            out.push('}');
        }
        out.push(' ');
        out.push_str(&format_value(s.value));
        out.push('\n');
    }
}

fn escape_help(help: &str, format: Format) -> String {
    let mut s = String::with_capacity(help.len());
    for c in help.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '"' if format == Format::OpenMetrics => s.push_str("\\\""),
            c => s.push(c),
        }
    }
    s
}

fn escape_label_value(out: &mut String, value: &str) {
    for (i, c) in value.chars().enumerate() {
        if i == MAX_LABEL_VALUE_LEN {
            out.push('…');
            break;
        }
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            // Other control characters are legal but useless in a label; make them visible.
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
}

/// Formats a sample value as both formats accept it: integers without a fraction,
/// `NaN`, `+Inf`, `-Inf`, and otherwise the shortest form that reads back exactly.
pub fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else if v.abs() >= 1e15 || (v != 0.0 && v.abs() < 1e-6) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_families() -> Vec<Family> {
        let mut g = Family::gauge("demo_remaining", "Messages left.");
        g.push(vec![("account_id", "1".into())], 42.0);
        let mut c = Family::counter("demo_requests", "Requests made.");
        c.push(vec![("code", "200".into())], 3.0);
        let mut h = Family::histogram("demo_duration", "How long.").unit(Unit::Seconds);
        h.push_histogram(
            vec![("endpoint", "x".into())],
            &[(0.1, 1), (1.0, 2)],
            0.55,
            3,
        );
        vec![g, c, h, Family::gauge("demo_empty", "Never shown.")]
    }

    #[test]
    fn classic_text_names_counters_with_total_and_has_no_eof() {
        let mut out = String::new();
        write_families(&mut out, &sample_families(), Format::Classic);
        assert_eq!(
            out,
            "# HELP demo_remaining Messages left.\n# TYPE demo_remaining gauge\ndemo_remaining{account_id=\"1\"} 42\n\
             # HELP demo_requests_total Requests made.\n# TYPE demo_requests_total counter\ndemo_requests_total{code=\"200\"} 3\n\
             # HELP demo_duration_seconds How long.\n# TYPE demo_duration_seconds histogram\n\
             demo_duration_seconds_bucket{endpoint=\"x\",le=\"0.1\"} 1\ndemo_duration_seconds_bucket{endpoint=\"x\",le=\"1\"} 2\n\
             demo_duration_seconds_bucket{endpoint=\"x\",le=\"+Inf\"} 3\ndemo_duration_seconds_sum{endpoint=\"x\"} 0.55\n\
             demo_duration_seconds_count{endpoint=\"x\"} 3\n"
        );
    }

    #[test]
    fn openmetrics_declares_counter_without_total_and_units() {
        let mut out = String::new();
        write_families(&mut out, &sample_families(), Format::OpenMetrics);
        assert!(
            out.contains("# TYPE demo_requests counter\ndemo_requests_total{code=\"200\"} 3\n")
        );
        assert!(out.contains("# UNIT demo_duration_seconds seconds\n"));
        assert!(!out.contains("demo_empty"));
    }

    #[test]
    fn label_values_are_escaped_and_bounded() {
        let mut g = Family::gauge("x", "h");
        g.push(vec![("v", "a\"b\\c\nd".into())], 1.0);
        g.push(vec![("v", "y".repeat(500))], 1.0);
        let mut out = String::new();
        write_families(&mut out, &[g], Format::Classic);
        assert!(out.contains(r#"x{v="a\"b\\c\nd"} 1"#));
        let long = out.lines().last().unwrap();
        assert_eq!(
            long,
            format!("x{{v=\"{}…\"}} 1", "y".repeat(MAX_LABEL_VALUE_LEN))
        );
    }

    #[test]
    fn special_values_are_written_as_the_format_says() {
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(f64::INFINITY), "+Inf");
        assert_eq!(format_value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_value(-3.0), "-3");
        assert_eq!(format_value(0.25), "0.25");
        assert_eq!(format_value(1e300), "1e300");
        assert_eq!(format_value(1.5e-9), "1.5e-9");
        assert_eq!(format_value(1_700_000_000.0), "1700000000");
    }

    #[test]
    fn negotiation_prefers_openmetrics_only_when_asked() {
        let prom = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prom)), Format::OpenMetrics);
        assert_eq!(Format::negotiate(Some("*/*")), Format::Classic);
        assert_eq!(Format::negotiate(None), Format::Classic);
    }
}
