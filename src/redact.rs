//! Redaction of text that may carry a secret, for messages and pages that show it.

/// A URL as it may be shown: scheme, host, port and path, without userinfo, query or fragment.
/// Works on any string, parsable or not (a bad port, no scheme, several `@`), since the text
/// that fails to parse is the one quoted in an error.
pub fn url(raw: &str) -> String {
    // Query and fragment go first: a `@` after them is not userinfo, and they may hold a token.
    let end = raw.find(['?', '#']).unwrap_or(raw.len());
    let kept = &raw[..end];
    let (scheme, rest) = match kept.find("://") {
        Some(i) => (&kept[..i + 3], &kept[i + 3..]),
        None => ("", kept),
    };
    // The authority ends at the first `/`; userinfo is everything up to its last `@`.
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let host = match authority.rfind('@') {
        Some(at) => &authority[at + 1..],
        None => authority,
    };
    format!("{scheme}{host}{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_query_and_fragment_go_even_when_the_url_does_not_parse() {
        for (raw, shown) in [
            (
                "http://user:S3cret@host:99999/x?token=abc",
                "http://host:99999/x",
            ),
            ("https://api.example.net/", "https://api.example.net/"),
            ("user:pw@host", "host"),
            ("http://a@b@c@host/p@q", "http://host/p@q"),
            ("http://host/path?x=1@evil", "http://host/path"),
            ("http://host?x=a@b", "http://host"),
            ("http://us er:p w@ho st:-1#frag@x", "http://ho st:-1"),
            ("", ""),
            ("@", ""),
            ("://@/", ":///"),
            ("http://ü:ß@ĥost/ä", "http://ĥost/ä"),
        ] {
            assert_eq!(url(raw), shown, "{raw}");
        }
        let long = format!("http://{}:{}@host/", "u".repeat(10_000), "p".repeat(10_000));
        assert_eq!(url(&long), "http://host/");
    }
}
