//! Exposition formats: metric families written as the classic Prometheus text format (0.0.4)
//! or as OpenMetrics 1.0, chosen per request from the `Accept` header.
//!
//! Why not `prometheus-client` yet: it has no classic-text encoder (the `prometheus` crate has
//! one), `promtool check metrics` 2.42 rejects its OpenMetrics counters ("no help text"), and
//! many scrapers read only the classic format.
//! Moving the model onto `prometheus-client` with a classic writer fed by it is planned (issue
//! 10). This module keeps the naming rules of those libraries: a counter's `_total` and a unit
//! suffix are added here, never typed by hand in a metric name.

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
    /// Content negotiation as RFC 9110 (section 12.5.1) says: each format gets the quality of
    /// the most specific media range of `Accept` that matches it (a `version` parameter must
    /// name the version we write: OpenMetrics 1.0.0, classic 0.0.4), `q=0` means never, and the
    /// better quality wins, classic on a tie. Media types and parameter names are
    /// case-insensitive. Without a usable `Accept`, or when neither format is acceptable, classic
    /// text (a scrape is better answered than refused with a 406).
    pub fn negotiate(accept: Option<&str>) -> Self {
        let Some(accept) = accept else {
            return Format::Classic;
        };
        let classic = quality(accept, "text", "plain", "0.0.4");
        let openmetrics = quality(accept, "application", "openmetrics-text", "1.0.0");
        if openmetrics > classic {
            Format::OpenMetrics
        } else {
            Format::Classic
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Classic => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// Media ranges of one `Accept` header read at most; the rest are ignored.
const MAX_MEDIA_RANGES: usize = 64;

/// The quality (0 to 1000) that `accept` gives `type/subtype` in the given `version`: that of the
/// most specific matching range (with parameters, then exact, then `type/*`, then `*/*`); 0 when
/// none matches.
fn quality(accept: &str, ty: &str, subtype: &str, version: &str) -> u16 {
    let mut best: Option<(u8, u16)> = None;
    for range in accept.split(',').take(MAX_MEDIA_RANGES) {
        let mut parts = range.split(';');
        let Some((t, s)) = parts.next().and_then(|m| m.trim().split_once('/')) else {
            continue;
        };
        let (t, s) = (t.trim(), s.trim());
        let mut q = Some(1000);
        let mut other_version = false;
        let mut has_params = false;
        for param in parts {
            let Some((name, value)) = param.split_once('=') else {
                continue;
            };
            let name = name.trim();
            let value = value.trim().trim_matches('"');
            if name.eq_ignore_ascii_case("q") {
                q = parse_q(value);
            } else {
                has_params = true;
                if name.eq_ignore_ascii_case("version") && value != version {
                    other_version = true;
                }
            }
        }
        let Some(q) = q else {
            continue;
        };
        let specificity = if t.eq_ignore_ascii_case(ty) && s.eq_ignore_ascii_case(subtype) {
            if other_version {
                continue;
            }
            if has_params { 3 } else { 2 }
        } else if t.eq_ignore_ascii_case(ty) && s == "*" {
            1
        } else if t == "*" && s == "*" {
            0
        } else {
            continue;
        };
        if best.is_none_or(|(spec, _)| specificity > spec) {
            best = Some((specificity, q));
        }
    }
    best.map_or(0, |(_, q)| q)
}

/// A quality value (`0`, `0.5`, `1.000`) in thousandths; `None` when it is not one.
fn parse_q(value: &str) -> Option<u16> {
    let (whole, frac) = value.split_once('.').unwrap_or((value, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac_value = format!("{frac:0<3}").parse::<u16>().ok()?;
    match whole {
        "0" => Some(frac_value),
        "1" if frac_value == 0 => Some(1000),
        _ => None,
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

    #[test]
    fn negotiation_follows_rfc_9110_quality_values_versions_and_case() {
        let om = Format::OpenMetrics;
        let classic = Format::Classic;
        for (accept, want) in [
            ("application/openmetrics-text", om),
            ("Application/OpenMetrics-Text; Version=1.0.0", om),
            ("application/openmetrics-text; version=\"1.0.0\"", om),
            // q=0 means "never", whatever else is said.
            ("application/openmetrics-text;q=0, */*;q=0.1", classic),
            ("application/openmetrics-text;q=0.0", classic),
            // A version we do not write falls back to classic.
            ("application/openmetrics-text;version=0.0.1", classic),
            (
                "application/openmetrics-text;version=2.0.0,text/plain;q=0.1",
                classic,
            ),
            // The better quality wins; classic on a tie.
            (
                "text/plain;q=0.9, application/openmetrics-text;q=0.8",
                classic,
            ),
            ("text/plain;q=0.5, application/openmetrics-text;q=0.8", om),
            ("text/plain, application/openmetrics-text", classic),
            ("application/*", om),
            ("text/*;q=0.2, application/*;q=0.3", om),
            // The most specific range decides: here OpenMetrics is refused outright.
            ("application/*, application/openmetrics-text;q=0", classic),
            (
                "text/plain;version=0.0.4;q=0.3, */*;q=0.9, application/openmetrics-text;q=0.2",
                classic,
            ),
            // Garbage is ignored; nothing acceptable still gets classic text.
            ("application/openmetrics-text;q=1.5", classic),
            ("application/openmetrics-text;q=abc, text/plain", classic),
            ("application/json", classic),
            ("", classic),
            (";;;,,,/", classic),
        ] {
            assert_eq!(Format::negotiate(Some(accept)), want, "{accept}");
        }
        let long = format!("{}application/openmetrics-text", "x/y,".repeat(100));
        assert_eq!(
            Format::negotiate(Some(&long)),
            classic,
            "ranges past the bound are not read"
        );
    }
}
