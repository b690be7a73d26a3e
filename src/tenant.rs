//! Tenants: one management token each, with the accounts that token sees. The name is the value
//! of the `tenant` label on every series a tenant produces; the one tenant of a single-token
//! config has the empty name and adds no label, so its series read as they always have.

use std::fmt;
use std::sync::Arc;

/// Longest tenant name.
pub const MAX_NAME_CHARS: usize = 64;

/// Tenants one config may name at most.
pub const MAX_TENANTS: usize = 10_000;

/// A tenant's name: letters, digits, `_`, `-` and `.`, so that it can stand in a URL query, a
/// label value and a log line as it is. Empty for the tenant of a single-token config.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TenantName(Arc<str>);

impl TenantName {
    /// A configured tenant's name, or why it cannot be one.
    pub fn parse(name: &str) -> Result<TenantName, String> {
        if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
            return Err(format!(
                "a tenant name has 1 to {MAX_NAME_CHARS} characters"
            ));
        }
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        {
            return Err("use letters, digits, _, - and . only, e.g. customer-42".to_owned());
        }
        Ok(TenantName(Arc::from(name)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is the one tenant of a single-token config (no `tenant` label).
    pub fn is_default(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for TenantName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_words_safe_in_urls_and_labels() {
        for good in ["a", "customer-42", "eu_west.7", &"x".repeat(MAX_NAME_CHARS)] {
            assert_eq!(TenantName::parse(good).unwrap().as_str(), good);
        }
        for bad in [
            "",
            "a b",
            "a/b",
            "a&b=c",
            "é",
            "a\"",
            &"x".repeat(MAX_NAME_CHARS + 1),
        ] {
            assert!(TenantName::parse(bad).is_err(), "{bad:?}");
        }
        assert!(TenantName::default().is_default());
    }
}
