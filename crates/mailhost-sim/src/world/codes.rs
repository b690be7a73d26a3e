//! The shapes of the provider's identifiers and addresses, shared by seeds and request checks.

fn digits(value: &str, prefix: &str, count: usize) -> bool {
    value
        .strip_prefix(prefix)
        .is_some_and(|rest| rest.len() == count && rest.bytes().all(|b| b.is_ascii_digit()))
}

/// `D` followed by 9 digits.
pub(crate) fn is_domain_code(code: &str) -> bool {
    digits(code, "D", 9)
}

/// `T` followed by 9 digits.
pub(crate) fn is_team_member_code(code: &str) -> bool {
    digits(code, "T", 9)
}

/// `MG` followed by 8 digits.
pub(crate) fn is_migration_code(code: &str) -> bool {
    digits(code, "MG", 8)
}

/// `EA` followed by 8 digits, or a postmaster's `P` followed by 9 digits.
pub(crate) fn is_mailbox_code(code: &str) -> bool {
    digits(code, "EA", 8) || digits(code, "P", 9)
}

/// Loose address check the interface allows: one `@` with something on both sides.
pub(crate) fn is_email_address(value: &str) -> bool {
    match value.split_once('@') {
        Some((local, domain)) => {
            !local.trim().is_empty() && !domain.trim().is_empty() && !domain.contains('@')
        }
        None => false,
    }
}

/// The domain part of an address already checked with [`is_email_address`].
pub(crate) fn domain_of(address: &str) -> &str {
    address
        .rsplit_once('@')
        .map_or("", |(_, domain)| domain.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn team_member_codes_are_t_and_nine_ascii_digits() {
        assert!(is_team_member_code("T000000101"));
        assert!(!is_team_member_code("T00000101"));
        assert!(!is_team_member_code("T0000001010"));
        assert!(!is_team_member_code("t000000101"));
        assert!(!is_team_member_code("T00000010x"));
        // Nine bytes, but not nine ASCII digits.
        assert!(!is_team_member_code("T\u{0663}0000001"));
    }

    #[test]
    fn addresses_need_exactly_one_at_with_both_sides() {
        assert!(is_email_address("a@b.example"));
        assert!(!is_email_address("a.example"));
        assert!(!is_email_address("a@@b.example"));
        assert!(!is_email_address("a@b@c"));
        assert!(!is_email_address("@b.example"));
        assert!(!is_email_address("a@"));
        assert_eq!(domain_of("x@Shop.Example"), "Shop.Example");
    }
}
