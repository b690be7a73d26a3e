//! Names from the API (statuses, groups, states) made into bounded label values: sanitised,
//! and at most [`MAX_NAMES`] per record, so an upstream that invents names cannot explode the
//! series count. The model readers apply it while reading.

/// Most distinct names (statuses, groups, states) kept from one record; the rest are summed
/// into `other`, so an upstream that invents names cannot explode the series count.
pub const MAX_NAMES: usize = 16;

/// Longest name kept by [`sanitize`].
const MAX_NAME_LEN: usize = 32;

/// Turns a name from the API (a status, a group) into a label value: lower case, ASCII letters,
/// digits and `_` only, at most 32 characters; an empty result is `unknown`.
pub fn sanitize(name: &str) -> String {
    let mut out = String::with_capacity(name.len().min(MAX_NAME_LEN));
    for c in name.trim().chars() {
        if out.len() == MAX_NAME_LEN {
            break;
        }
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let trimmed = out.trim_matches('_');
    if trimmed.is_empty() {
        "unknown".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// Longest domain name (RFC 1035's 253 characters written out).
pub const MAX_DOMAIN_LEN: usize = 253;

/// Whether `c` may stand in a domain name as the exporter takes one: an ASCII letter, digit,
/// dot or hyphen.
fn domain_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '.' || c == '-'
}

/// A domain name as the config or the provider writes one, if it is one: trimmed, lower case,
/// 1 to [`MAX_DOMAIN_LEN`] letters, digits, dots and hyphens. It becomes a label value and a
/// request field; the one rule for a domain anywhere in the exporter.
pub fn domain_name(raw: &str) -> Option<String> {
    let d = raw.trim().to_ascii_lowercase();
    let ok = !d.is_empty() && d.len() <= MAX_DOMAIN_LEN && d.chars().all(domain_char);
    ok.then_some(d)
}

/// A domain name read leniently from an answer, as a label value: what [`domain_name`] allows
/// kept, the rest dropped, cut at [`MAX_DOMAIN_LEN`].
pub fn domain_label(raw: &str) -> String {
    raw.trim()
        .chars()
        .filter(|c| domain_char(*c))
        .take(MAX_DOMAIN_LEN)
        .collect::<String>()
        .to_ascii_lowercase()
}

/// Keeps at most [`MAX_NAMES`] names, summing the rest (and any duplicates after
/// sanitising) into their survivors and `other`. Order is kept; a sum that overflows to
/// infinity is dropped rather than shown.
pub fn bound_names(pairs: Vec<(String, f64)>) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for (name, v) in pairs {
        let name = sanitize(&name);
        if let Some(slot) = out.iter_mut().find(|(n, _)| *n == name) {
            slot.1 += v;
        } else if out.len() < MAX_NAMES - 1 || (out.len() == MAX_NAMES - 1 && name == "other") {
            out.push((name, v));
        } else if let Some(slot) = out.iter_mut().find(|(n, _)| n == "other") {
            slot.1 += v;
        } else {
            out.push(("other".to_owned(), v));
        }
    }
    // Summing huge values can overflow: an infinite count would be a wrong number, drop it.
    out.retain(|(_, v)| v.is_finite());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_domain_is_one_rule_strict_for_config_and_discovery_lenient_for_a_label() {
        assert_eq!(
            domain_name(" Shop.Example "),
            Some("shop.example".to_owned())
        );
        for bad in [
            "",
            "  ",
            "shop example",
            "shop_1.example",
            "ünicode.example",
        ] {
            assert_eq!(domain_name(bad), None, "{bad:?}");
        }
        let long = "a".repeat(MAX_DOMAIN_LEN);
        assert_eq!(domain_name(&long).map(|d| d.len()), Some(MAX_DOMAIN_LEN));
        assert_eq!(domain_name(&format!("{long}a")), None);
        assert_eq!(domain_label(" Shop Ex_ample.COM"), "shopexample.com");
        assert_eq!(domain_label(&format!("{long}bbb")).len(), MAX_DOMAIN_LEN);
    }

    #[test]
    fn names_from_the_api_become_safe_label_values() {
        assert_eq!(sanitize("Delivered"), "delivered");
        assert_eq!(sanitize("  soft-bounce (4xx) "), "soft_bounce_4xx");
        assert_eq!(sanitize("!!!"), "unknown");
        assert_eq!(sanitize(&"x".repeat(100)).len(), 32);
    }

    #[test]
    fn too_many_names_are_summed_into_other() {
        let pairs: Vec<_> = (0..40).map(|i| (format!("s{i}"), 1.0)).collect();
        let out = bound_names(pairs);
        assert_eq!(out.len(), MAX_NAMES);
        assert_eq!(out.last().unwrap(), &("other".to_owned(), 25.0));
        assert_eq!(out.iter().map(|(_, v)| v).sum::<f64>(), 40.0);
    }

    #[test]
    fn names_equal_after_sanitising_are_summed() {
        let out = bound_names(vec![("Bounced".into(), 2.0), ("bounced".into(), 3.0)]);
        assert_eq!(out, vec![("bounced".to_owned(), 5.0)]);
    }
}
