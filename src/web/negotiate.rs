//! Content negotiation of `/metrics`: which text format a scrape gets, from its `Accept`
//! header.

use crate::metrics::Format;

/// Content negotiation as RFC 9110 (section 12.5.1) says: each format gets the quality of
/// the most specific media range of `Accept` that matches it (a `version` parameter must
/// name the version we write: OpenMetrics 1.0.0, classic 0.0.4), `q=0` means never, and the
/// better quality wins, classic on a tie. Media types and parameter names are
/// case-insensitive. Without a usable `Accept`, or when neither format is acceptable, classic
/// text (a scrape is better answered than refused with a 406).
pub fn format(accept: Option<&str>) -> Format {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_prefers_openmetrics_only_when_asked() {
        let prom = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(format(Some(prom)), Format::OpenMetrics);
        assert_eq!(format(Some("*/*")), Format::Classic);
        assert_eq!(format(None), Format::Classic);
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
            assert_eq!(format(Some(accept)), want, "{accept}");
        }
        let long = format!("{}application/openmetrics-text", "x/y,".repeat(100));
        assert_eq!(
            format(Some(&long)),
            classic,
            "ranges past the bound are not read"
        );
    }
}
