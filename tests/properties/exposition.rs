//! A validating parser of what we write: both formats' line grammar, plus our own promises
//! (finite values, bounded label values, no duplicate series, the same samples in each format).
//! The parser itself must refuse what is not valid, or the properties prove nothing.

use std::collections::HashSet;

use mailhost_exporter::metrics::labels::MAX_LABEL_VALUE_LEN;
use mailhost_exporter::metrics::{EOF, Format};
use proptest::prelude::*;

#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    /// Unescaped label values, in written order.
    labels: Vec<(String, String)>,
    value: f64,
}

fn is_metric_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with("__")
}

fn parse_value(s: &str) -> Result<f64, String> {
    match s {
        "NaN" => return Ok(f64::NAN),
        "+Inf" => return Ok(f64::INFINITY),
        "-Inf" => return Ok(f64::NEG_INFINITY),
        _ => {}
    }
    // Digits, one optional sign, point and exponent: what Go's ParseFloat and Rust agree on.
    let ok = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
        && s.chars().any(|c| c.is_ascii_digit());
    if !ok {
        return Err(format!("value {s:?} is not a float"));
    }
    s.parse::<f64>()
        .map_err(|e| format!("value {s:?} is not a float: {e}"))
}

/// Unescapes HELP text; `quote` says whether `\"` is an escape (OpenMetrics) or not (classic).
fn check_help(text: &str, quote: bool) -> Result<(), String> {
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('\\' | 'n') => {}
                Some('"') if quote => {}
                other => return Err(format!("bad escape \\{other:?} in HELP {text:?}")),
            }
        }
    }
    Ok(())
}

/// Parses `name{l="v",...} value` and returns the sample.
fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(['{', ' '])
        .ok_or_else(|| format!("no value on {line:?}"))?;
    let name = &line[..name_end];
    if !is_metric_name(name) {
        return Err(format!("bad metric name {name:?}"));
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        rest = after;
        loop {
            if let Some(after) = rest.strip_prefix('}') {
                rest = after;
                break;
            }
            if !labels.is_empty() {
                rest = rest
                    .strip_prefix(',')
                    .ok_or_else(|| format!("labels not separated by ',' on {line:?}"))?;
            }
            let eq = rest
                .find('=')
                .ok_or_else(|| format!("label without '=' on {line:?}"))?;
            let label = &rest[..eq];
            if !is_label_name(label) {
                return Err(format!("bad label name {label:?} on {line:?}"));
            }
            rest = rest[eq + 1..]
                .strip_prefix('"')
                .ok_or_else(|| format!("label value not quoted on {line:?}"))?;
            let mut value = String::new();
            let mut chars = rest.char_indices();
            let end = loop {
                let (i, c) = chars
                    .next()
                    .ok_or_else(|| format!("unterminated label value on {line:?}"))?;
                match c {
                    '"' => break i,
                    '\\' => match chars.next() {
                        Some((_, '\\')) => value.push('\\'),
                        Some((_, '"')) => value.push('"'),
                        Some((_, 'n')) => value.push('\n'),
                        other => {
                            return Err(format!("bad escape {other:?} in label value on {line:?}"));
                        }
                    },
                    c if c.is_control() => {
                        return Err(format!("raw control character {c:?} on {line:?}"));
                    }
                    c => value.push(c),
                }
            };
            rest = &rest[end + 1..];
            if labels.iter().any(|(l, _): &(String, String)| l == label) {
                return Err(format!("label {label} twice on {line:?}"));
            }
            labels.push((label.to_owned(), value));
        }
    }
    let value = rest
        .strip_prefix(' ')
        .ok_or_else(|| format!("no single space before the value on {line:?}"))?;
    if value.contains(' ') {
        return Err(format!("more than a value after the labels on {line:?}"));
    }
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value: parse_value(value)?,
    })
}

/// The sample names a family declared as `declared` with `kind` may have.
fn belongs(sample: &str, declared: &str, kind: &str, format: Format) -> bool {
    match (kind, format) {
        ("counter", Format::OpenMetrics) => {
            sample == format!("{declared}_total") || sample == format!("{declared}_created")
        }
        ("histogram", _) => ["_bucket", "_sum", "_count"]
            .iter()
            .any(|s| sample == format!("{declared}{s}")),
        _ => sample == declared,
    }
}

/// Checks the whole text and returns its samples.
fn parse_exposition(text: &str, format: Format) -> Result<Vec<Sample>, String> {
    let body = match format {
        Format::Classic => {
            if text.contains("# EOF") {
                return Err("classic text has an # EOF".into());
            }
            text
        }
        Format::OpenMetrics => {
            let body = text
                .strip_suffix(EOF)
                .ok_or("OpenMetrics text does not end with # EOF")?;
            if body.contains("# EOF") {
                return Err("more than one # EOF".into());
            }
            body
        }
    };
    if !body.is_empty() && !body.ends_with('\n') {
        return Err("the text does not end with a newline".into());
    }
    let types: &[&str] = match format {
        Format::Classic => &["counter", "gauge", "histogram", "summary", "untyped"],
        Format::OpenMetrics => &[
            "counter",
            "gauge",
            "histogram",
            "gaugehistogram",
            "stateset",
            "info",
            "summary",
            "unknown",
        ],
    };
    let mut declared: HashSet<String> = HashSet::new();
    // The family being written: name, whether HELP was seen, its type once TYPE was seen.
    let mut family: Option<(String, Option<String>)> = None;
    let mut series: HashSet<(String, Vec<(String, String)>)> = HashSet::new();
    let mut samples = Vec::new();
    for line in body.lines() {
        if let Some(comment) = line.strip_prefix("# ") {
            let (keyword, rest) = comment
                .split_once(' ')
                .ok_or(format!("bad comment {line:?}"))?;
            let (name, text) = rest
                .split_once(' ')
                .ok_or(format!("bad comment {line:?}"))?;
            if !is_metric_name(name) {
                return Err(format!("bad metric name in {line:?}"));
            }
            match keyword {
                "HELP" => {
                    if !declared.insert(name.to_owned()) {
                        return Err(format!("family {name} declared twice"));
                    }
                    check_help(text, format == Format::OpenMetrics)?;
                    family = Some((name.to_owned(), None));
                }
                "TYPE" => {
                    let Some((current, kind @ None)) = &mut family else {
                        return Err(format!("TYPE without its HELP, or twice: {line:?}"));
                    };
                    if current != name || !types.contains(&text) {
                        return Err(format!("bad TYPE {line:?}"));
                    }
                    *kind = Some(text.to_owned());
                }
                "UNIT" if format == Format::OpenMetrics => {
                    let ok = matches!(&family, Some((current, Some(_))) if current == name)
                        && !text.is_empty()
                        && name.ends_with(&format!("_{text}"));
                    if !ok {
                        return Err(format!("bad UNIT {line:?}"));
                    }
                }
                _ => return Err(format!("unexpected comment {line:?}")),
            }
            continue;
        }
        let sample = parse_sample(line)?;
        let Some((current, Some(kind))) = &family else {
            return Err(format!("sample before its HELP and TYPE: {line:?}"));
        };
        if !belongs(&sample.name, current, kind, format) {
            return Err(format!("sample {line:?} outside its family {current}"));
        }
        let mut key = sample.labels.clone();
        key.sort();
        if !series.insert((sample.name.clone(), key)) {
            return Err(format!("duplicate series {line:?}"));
        }
        samples.push(sample);
    }
    Ok(samples)
}

/// Valid exposition in both formats, the same samples in each, every value finite and every
/// label value within the bound.
pub fn check(classic: &str, openmetrics: &str) -> Result<(), TestCaseError> {
    let c = parse_exposition(classic, Format::Classic)
        .map_err(|e| TestCaseError::fail(format!("classic: {e}\n{classic}")))?;
    let o = parse_exposition(openmetrics, Format::OpenMetrics)
        .map_err(|e| TestCaseError::fail(format!("OpenMetrics: {e}\n{openmetrics}")))?;
    // A counter's `_created` sample has no classic form; every other sample is in both.
    let o: Vec<_> = o
        .into_iter()
        .filter(|s| !s.name.ends_with("_created"))
        .collect();
    prop_assert!(c == o, "the formats carry different samples");
    for s in &c {
        // Readers drop non-finite numbers, so nothing here may be NaN or infinite.
        prop_assert!(
            s.value.is_finite(),
            "non-finite value in {} {:?}: {}\n{classic}",
            s.name,
            s.labels,
            s.value
        );
        for (label, v) in &s.labels {
            let n = v.chars().count();
            prop_assert!(
                n <= MAX_LABEL_VALUE_LEN || (n == MAX_LABEL_VALUE_LEN + 1 && v.ends_with('…')),
                "label {label} of {} is {n} characters long",
                s.name
            );
        }
    }
    Ok(())
}

#[test]
fn the_validating_parser_refuses_broken_exposition() {
    let head = "# HELP m Help.\n# TYPE m gauge\n";
    for (bad, why) in [
        ("m 1\n", "sample before HELP"),
        ("# HELP m Help.\n# TYPE m gauge\nm 1\nm 2\n", "duplicate"),
        (
            "# HELP m Help.\n# TYPE m gauge\nm{a=\"1\",b=\"2\"} 1\nm{b=\"2\",a=\"1\"} 1\n",
            "duplicate in another label order",
        ),
        (
            "# HELP m Help.\n# TYPE m gauge\nn 1\n",
            "outside its family",
        ),
        (
            "# HELP m Help.\n# TYPE m gauge\nm{a=\"\\t\"} 1\n",
            "bad escape",
        ),
        (
            "# HELP m Help.\n# TYPE m gauge\nm{a=\"x} 1\n",
            "unterminated",
        ),
        (
            "# HELP m Help.\n# TYPE m gauge\nm{1a=\"x\"} 1\n",
            "label name",
        ),
        (
            "# HELP m Help.\n# TYPE m gauge\nm{a=\"x\",a=\"y\"} 1\n",
            "label twice",
        ),
        ("# HELP m Help.\n# TYPE m gauge\nm one\n", "value"),
        ("# HELP m Help.\n# TYPE m gauge\nm 1 2 3\n", "extra"),
        (
            "# HELP m Help.\n# TYPE m gauge\n# UNIT m seconds\nm 1\n",
            "UNIT in classic",
        ),
        (
            "# HELP m Help.\n# TYPE m gauge\nm 1\n# EOF\n",
            "EOF in classic",
        ),
        ("# HELP m Help.\n# TYPE m wobbly\nm 1\n", "type"),
        ("# HELP 1m Help.\n# TYPE 1m gauge\n1m 1\n", "metric name"),
        ("# HELP m He\\lp.\n# TYPE m gauge\nm 1\n", "HELP escape"),
        ("# HELP m Help.\n# TYPE m gauge\nm 1", "no final newline"),
        (
            "# HELP m Help.\n# TYPE m gauge\nm 1\n# HELP m Help.\n# TYPE m gauge\n",
            "twice",
        ),
    ] {
        assert!(
            parse_exposition(bad, Format::Classic).is_err(),
            "accepted ({why}): {bad:?}"
        );
    }
    assert!(parse_exposition(&format!("{head}m 1\n"), Format::OpenMetrics).is_err());
    assert!(parse_exposition(&format!("{head}m 1\n# EOF\n# EOF\n"), Format::OpenMetrics).is_err());
    let good = "# HELP c_total Count.\n# TYPE c_total counter\nc_total{a=\"x\\\"\\\\\\n\"} 1e300\n\
                # HELP m_seconds Help \\\\ \\n.\n# TYPE m_seconds gauge\nm_seconds -0.5\nm_seconds{a=\"\"} NaN\n";
    let samples = parse_exposition(good, Format::Classic).unwrap();
    assert_eq!(
        samples[0].labels,
        vec![("a".to_owned(), "x\"\\\n".to_owned())]
    );
    let om = "# HELP c Count.\n# TYPE c counter\nc_total 1\n\
              # HELP m_seconds Help \\\".\n# TYPE m_seconds gauge\n# UNIT m_seconds seconds\nm_seconds 2\n# EOF\n";
    assert_eq!(parse_exposition(om, Format::OpenMetrics).unwrap().len(), 2);
}
