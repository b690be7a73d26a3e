//! Redaction of text that may carry a secret, for messages and pages that show it: URLs, and
//! the values that config-file errors of both the config and the web config would quote.

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

/// Replaces every double-quoted string of a message (a YAML or serde error quoting the value it
/// could not read, which may be a secret pasted in the wrong place) (`"abc"`, with `\"` escapes inside) by
/// `(N characters)`; the rest of the message is kept.
pub fn quoted_strings(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut chars = msg.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            out.push(c);
            continue;
        }
        let mut n = 0usize;
        let mut escaped = false;
        for c in chars.by_ref() {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
                continue;
            } else if c == '"' {
                break;
            }
            n += 1;
        }
        out.push_str(&format!("({n} character{})", if n == 1 { "" } else { "s" }));
    }
    out
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

    #[test]
    fn quoted_strings_of_error_messages_are_replaced_by_their_length() {
        assert_eq!(
            quoted_strings(r#"invalid type: string "ab\"c", expected usize"#),
            "invalid type: string (4 characters), expected usize"
        );
        assert_eq!(quoted_strings("no quotes `key`"), "no quotes `key`");
        assert_eq!(
            quoted_strings(r#"a "b" c `d` "e"#),
            "a (1 character) c `d` (1 character)"
        );
        assert_eq!(
            quoted_strings(r#"unterminated "abc"#),
            "unterminated (3 characters)"
        );
    }
}
