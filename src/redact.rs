//! Redaction of text that may hold a secret before it reaches an error message: URLs lose their
//! userinfo and query, quoted YAML values are hidden unless their field can hold no secret, and
//! any value still quoted is cut short and escaped.

/// Longest quoted value, in characters, an error message repeats.
pub const MAX_QUOTED_CHARS: usize = 64;

/// What a hidden value is replaced with.
const HIDDEN: &str = "(value hidden)";

/// `url` without its userinfo, query and fragment, working on the raw text so that a URL that
/// does not parse is redacted too: `http://user:pw@host:99999/x?token=abc` -> `http://host:99999/x`.
///
/// The URL is split as RFC 3986 and the WHATWG parser (reqwest's) split it: the authority ends
/// at the first `/`, `?`, `#` or `\` after the scheme, its userinfo is everything up to the last
/// `@` inside it, and the query and fragment are always dropped, so an `@` in a path, a query
/// or a fragment never moves the cut (`https://host/p?u=a@b&key=S3cret` -> `https://host/p`).
///
/// A password that holds a raw `/`, `?` or `#` ends the authority early, leaving `user:pa`
/// (or, for a user named by an e-mail address, `corp.example:pa`) where a host belongs. Such a
/// host has a port that is not a number, so no parser takes it for one; when an `@` follows it,
/// everything after the scheme is hidden: losing the host in an error message is better than
/// quoting a password.
pub fn redact_url(url: &str) -> String {
    // A missing scheme (`://host`, `//host`) still ends where the authority starts.
    let (scheme, rest) = match url.find("://") {
        Some(i)
            if url[..i]
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.') =>
        {
            url.split_at(i + 3)
        }
        _ if url.starts_with("//") => url.split_at(2),
        _ => ("", url),
    };
    let (authority, after) = rest.split_at(rest.find(['/', '?', '#', '\\']).unwrap_or(rest.len()));
    let path = after.find(['?', '#']).map_or(after, |q| &after[..q]);
    let host = authority
        .rfind('@')
        .map_or(authority, |at| &authority[at + 1..]);
    if !a_host(host) && after.contains('@') {
        return format!("{scheme}{HIDDEN_URL}");
    }
    format!("{scheme}{host}{path}")
}

/// What [`redact_url`] leaves of a URL whose host cannot be told from a password.
const HIDDEN_URL: &str = "(address hidden)";

/// Whether `authority` (with no userinfo) can be a host with an optional port: its port, after
/// the last `:` that is not inside an IPv6 literal's brackets, is digits only.
fn a_host(authority: &str) -> bool {
    let port_at = match authority.rfind(']') {
        Some(close) => authority[close..].find(':').map(|c| close + c),
        None => authority.rfind(':'),
    };
    port_at.is_none_or(|c| authority[c + 1..].bytes().all(|b| b.is_ascii_digit()))
}

/// `value` in double quotes, escaped, and cut at [`MAX_QUOTED_CHARS`] characters so that a long
/// paste is never repeated whole.
pub fn quote(value: &str) -> String {
    match value.char_indices().nth(MAX_QUOTED_CHARS) {
        None => format!("{value:?}"),
        Some((cut, _)) => {
            let quoted = format!("{:?}", &value[..cut]);
            format!(
                "{}...\" (cut at {MAX_QUOTED_CHARS} characters)",
                &quoted[..quoted.len() - 1]
            )
        }
    }
}

/// Whether the value of the field at a path (`api.timeout`, `collectors.migration.migrations[2]`)
/// may be shown in an error: only the owner of a schema knows which of its fields can never hold
/// a secret. A value shown still has its token-like runs redacted and is cut and escaped.
pub type Shown = fn(&str) -> bool;

/// No field's value is shown: for a schema whose fields' secrecy is not spelled out.
pub fn nothing_shown(_: &str) -> bool {
    false
}

/// The message of a YAML error, with every value from the file hidden but those of fields
/// `shown` says hold no secret; the field path, the line and column and the expected type stay,
/// since they are what the operator needs to fix it.
pub fn yaml_error(e: &serde_yaml_ng::Error, shown: Shown) -> String {
    let msg = e.to_string();
    // serde_yaml_ng appends the location; keep it apart so that it is never taken for a value.
    if let Some(loc) = e.location() {
        let at = format!(" at line {} column {}", loc.line(), loc.column());
        if let Some(body) = msg.strip_suffix(&at) {
            return format!("{}{at}", serde_message(body, shown));
        }
    }
    serde_message(&msg, shown)
}

/// Shapes of serde's messages that quote a value, from `serde::de::Error`'s provided methods.
const INVALID_TYPE: &str = "invalid type: ";
const INVALID_VALUE: &str = "invalid value: ";
const UNKNOWN_FIELD: &str = "unknown field `";
const UNKNOWN_VARIANT: &str = "unknown variant `";
/// Shapes that quote only names from the schema.
const SAFE: [&str; 3] = ["invalid length ", "missing field `", "duplicate field `"];

/// A serde error message (optionally prefixed by `path: `) with the values it quotes hidden,
/// but for a field `shown` says holds no secret: its value that failed is shown (token-like runs
/// redacted, cut at [`MAX_QUOTED_CHARS`], escaped).
///
/// What follows the last `, expected ` comes from the schema, never from the file, so it is
/// kept; a value quoted before it may be anything an operator pasted.
pub fn serde_message(msg: &str, shown: Shown) -> String {
    let shapes = [INVALID_TYPE, INVALID_VALUE, UNKNOWN_FIELD, UNKNOWN_VARIANT]
        .into_iter()
        .chain(SAFE);
    // The path is made of known keys and indices only: unknown keys fail before it grows.
    let Some((start, shape)) = shapes
        .filter_map(|shape| {
            if msg.starts_with(shape) {
                Some((0, shape))
            } else {
                msg.find(&format!(": {shape}")).map(|i| (i + 2, shape))
            }
        })
        .min_by_key(|(start, _)| *start)
    else {
        return hide_quoted(msg);
    };
    let (path, body) = msg.split_at(start);
    if !path
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"_.[]?: ".contains(&b))
    {
        return hide_quoted(msg);
    }
    let rest = &body[shape.len()..];
    let field = path.strip_suffix(": ").unwrap_or(path);
    let redacted = match shape {
        INVALID_TYPE | INVALID_VALUE => match rest.rfind(", expected ") {
            Some(i) if !field.is_empty() && shown(field) => {
                format!("{shape}{}{}", shown_unexpected(&rest[..i]), &rest[i..])
            }
            Some(i) => format!("{shape}{}{}", unexpected(&rest[..i]), &rest[i..]),
            None => format!("{shape}{HIDDEN}"),
        },
        UNKNOWN_FIELD | UNKNOWN_VARIANT => {
            let (name, tail) = match rest.rfind("`, expected ") {
                Some(i) => (&rest[..i], &rest[i + 1..]),
                None => match rest.strip_suffix("`, there are no fields") {
                    Some(name) => (name, ", there are no fields"),
                    None => (rest, ""),
                },
            };
            let what = &shape[..shape.len() - 2];
            if shape == UNKNOWN_FIELD && looks_like_a_key(name) {
                format!("{what} `{name}`{tail}")
            } else {
                format!("{what} {HIDDEN}{tail}")
            }
        }
        _ if !rest.contains('"') => body.to_owned(),
        _ => hide_quoted(body),
    };
    format!("{path}{redacted}")
}

/// serde's `Unexpected` without its value: `string "abc"` -> `string (value hidden)`.
fn unexpected(unexp: &str) -> String {
    if unexp == "boolean `true`" || unexp == "boolean `false`" {
        return unexp.to_owned();
    }
    for kind in [
        "string",
        "integer",
        "floating point",
        "character",
        "boolean",
    ] {
        if unexp.strip_prefix(kind).is_some_and(|r| r.starts_with(' ')) {
            return format!("{kind} {HIDDEN}");
        }
    }
    // `sequence`, `map`, `unit value` and the like name a shape, not a value.
    if unexp.bytes().all(|b| b.is_ascii_lowercase() || b == b' ') && unexp.len() <= 32 {
        unexp.to_owned()
    } else {
        HIDDEN.to_owned()
    }
}

/// serde's `Unexpected` of a field that holds no secret, with its value: a string is
/// unescaped, its token-like runs redacted (a token pasted in the wrong field stays unseen), then
/// [`quote`]d; a number or a boolean is kept as serde writes it. Anything of another form is
/// hidden as [`unexpected`] hides it.
fn shown_unexpected(unexp: &str) -> String {
    if let Some(value) = unexp.strip_prefix("string ").and_then(unescape_debug) {
        return format!("string {}", quote(&redact(&value)));
    }
    for kind in ["integer", "floating point", "boolean"] {
        let value = unexp
            .strip_prefix(kind)
            .and_then(|r| r.strip_prefix(" `"))
            .and_then(|r| r.strip_suffix('`'));
        let plain = |v: &str| {
            v.len() <= MAX_QUOTED_CHARS
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
        };
        if value.is_some_and(plain) {
            return unexp.to_owned();
        }
    }
    unexpected(unexp)
}

/// The text of a string as Rust's `{:?}` writes it (serde quotes a string so), or `None` when
/// `quoted` is not one.
fn unescape_debug(quoted: &str) -> Option<String> {
    let inner = quoted.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next()? {
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            '0' => '\0',
            c @ ('\\' | '"' | '\'') => c,
            'u' if chars.next()? == '{' => {
                let hex: String = chars.by_ref().take_while(|&c| c != '}').collect();
                char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?
            }
            _ => return None,
        });
    }
    Some(out)
}

/// A key the operator chose (of a map, such as `endpoint_rate_limits`) as a field path shows it:
/// as written when it reads like a key of the schema, else hidden (it may be a pasted secret, or
/// control characters that would reach the terminal).
pub fn map_key(name: &str) -> &str {
    if looks_like_a_key(name) {
        name
    } else {
        "(key hidden)"
    }
}

/// A key as the schema writes them: a typo of one is worth showing, while a pasted secret
/// (mixed case, digits, symbols) is not.
fn looks_like_a_key(name: &str) -> bool {
    (1..=MAX_QUOTED_CHARS).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
}

/// Everything from the first quote mark to the last one hidden; for messages of no known shape.
fn hide_quoted(msg: &str) -> String {
    let marks = ['"', '`', '\''];
    match (msg.find(marks), msg.rfind(marks)) {
        // A lone mark opens a value that never closes: hide the rest.
        (Some(first), Some(last)) if first == last => format!("{}{HIDDEN}", &msg[..first]),
        (Some(first), Some(last)) => {
            format!("{}{HIDDEN}{}", &msg[..first], &msg[last + 1..])
        }
        _ => msg.to_owned(),
    }
}

/// `text` cut at `max` characters, marked with `…` when cut.
pub fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// Characters of base64, base64url and hex: what tokens and keys are written in.
fn token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '_' | '-')
}

/// `text` with every token-like run replaced by `[redacted]`: a run of [`token_char`]s of at
/// least 16 that mixes letters and digits, or of at least 40 of any kind. Field names (letters
/// and `_`, at most 32 long in this API) and numbers are kept.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        let n = run.chars().count();
        let mixed =
            run.chars().any(|c| c.is_ascii_digit()) && run.chars().any(|c| c.is_ascii_alphabetic());
        if (n >= 16 && mixed) || n >= 40 {
            out.push_str("[redacted]");
        } else {
            out.push_str(run);
        }
        run.clear();
    };
    for c in text.chars() {
        if token_char(c) {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_and_query_are_removed_even_when_the_port_does_not_parse() {
        assert_eq!(
            redact_url("http://user:pw@host:99999/x?token=abc"),
            "http://host:99999/x"
        );
    }

    #[test]
    fn a_clean_url_is_kept_as_written() {
        assert_eq!(
            redact_url("https://api.example.net/v2"),
            "https://api.example.net/v2"
        );
        assert_eq!(redact_url("ftp://x"), "ftp://x");
        assert_eq!(redact_url(""), "");
    }

    #[test]
    fn an_at_sign_in_the_query_never_moves_the_cut_into_it() {
        assert_eq!(
            redact_url("https://host/p?u=a@b&key=SECRET"),
            "https://host/p"
        );
    }

    #[test]
    fn hostile_urls_never_keep_what_may_be_a_password_or_a_query() {
        let cases = [
            // No scheme.
            ("user:S3cret@host:1/p", "host:1/p"),
            ("S3cret@", ""),
            ("host/p?u=a@b&key=S3cret", "host/p"),
            ("//user:S3cret@host/p?k=S3cret", "//host/p"),
            ("://S3cret@host", "://host"),
            // Several `@`: the password holds one.
            ("http://user:S3c@ret@host/p", "http://host/p"),
            ("http://@@S3cret@@host", "http://host"),
            // `@` in the path is the path's: the host stays.
            ("http://host/a@b", "http://host/a@b"),
            (
                "https://host/users/a@b/x?key=S3cret",
                "https://host/users/a@b/x",
            ),
            // `@` in the fragment, with and without a path.
            ("https://host/p#a@S3cret", "https://host/p"),
            ("https://host#x@S3cret", "https://host"),
            ("https://host?x#y@S3cret", "https://host"),
            // Userinfo and a query with an `@` of its own.
            (
                "https://user:S3cret@host/p?u=a@b&key=S3cret",
                "https://host/p",
            ),
            (
                "http://user:S3cret@[::1]:8080/p?x=a@S3cret",
                "http://[::1]:8080/p",
            ),
            // A backslash ends the authority as the WHATWG parser reads http(s).
            ("http://host\\p?u=a@S3cret", "http://host\\p"),
            // A password holding `?`, `#` or `/` ends the authority early: nothing is guessed.
            ("http://user:S3c?ret@host/p", "http://(address hidden)"),
            (
                "http://user:S3c#ret@host/p?q=S3cret#S3cret",
                "http://(address hidden)",
            ),
            ("https://user:S3c/ret@host", "https://(address hidden)"),
            // ... also behind a user named by an e-mail address.
            (
                "http://me@corp.example:S3c/ret@proxy",
                "http://(address hidden)",
            ),
            ("[::1]:S3c/ret@host", "(address hidden)"),
            // A bad port with no `@` anywhere hides nothing: it is what the operator must fix.
            ("http://host:abc/p", "http://host:abc/p"),
            // A scheme that is not one.
            ("user:S3cret@http://host", "http://host"),
            ("S3cret://host", "S3cret://host"),
            // Odd characters survive without panics or broken boundaries.
            ("http://ü:S3cret€@hôst/ä?ö=S3cret", "http://hôst/ä"),
            (
                "http://\u{0}\u{1b}:S3cret@h\u{fffd}st",
                "http://h\u{fffd}st",
            ),
            ("http://host?S3cret", "http://host"),
            ("http://host#S3cret", "http://host"),
        ];
        for (raw, want) in cases {
            let got = redact_url(raw);
            assert_eq!(got, want, "{raw:?}");
            assert!(
                !got.contains("S3c") || raw.starts_with("S3cret://"),
                "{raw:?}"
            );
        }
    }

    #[test]
    fn a_very_long_url_is_redacted_in_one_pass() {
        let secret = "S3cret".repeat(200_000);
        let raw = format!("http://u:{secret}@{}/?t={secret}", "h".repeat(100_000));
        let got = redact_url(&raw);
        assert_eq!(got.len(), "http://".len() + 100_000 + 1);
        assert!(!got.contains("S3cret"));
    }

    #[test]
    fn a_long_value_is_quoted_cut_at_64_characters() {
        assert_eq!(quote("UTC"), "\"UTC\"");
        let long = "é".repeat(100);
        let q = quote(&long);
        assert_eq!(
            q,
            format!(
                "\"{}...\" (cut at 64 characters)",
                "é".repeat(MAX_QUOTED_CHARS)
            )
        );
        assert_eq!(quote("a\"b\n"), "\"a\\\"b\\n\"");
    }

    #[test]
    fn quoted_strings_numbers_and_odd_keys_are_hidden_from_serde_messages() {
        let cases = [
            (
                "api.concurrency: invalid type: string \"S3cret, expected x\", expected usize",
                "api.concurrency: invalid type: string (value hidden), expected usize",
            ),
            (
                "api.timeout: invalid value: string \"S3cret\", expected a duration",
                "api.timeout: invalid value: string (value hidden), expected a duration",
            ),
            (
                "api.max_retries: invalid value: integer `123456789012`, expected u32",
                "api.max_retries: invalid value: integer (value hidden), expected u32",
            ),
            (
                "api.max_retries: invalid type: floating point `1.5`, expected u32",
                "api.max_retries: invalid type: floating point (value hidden), expected u32",
            ),
            (
                "api: unknown field `S3cret`, expected one of `base_url`, `token_file`",
                "api: unknown field (value hidden), expected one of `base_url`, `token_file`",
            ),
            (
                "unknown field `a`, expected `S3cret`, expected `api` or `collectors`",
                "unknown field (value hidden), expected `api` or `collectors`",
            ),
            (
                "x: unknown field `S3cret`, there are no fields",
                "x: unknown field (value hidden), there are no fields",
            ),
            (
                "x: unknown variant `S3cret`, expected `a`",
                "x: unknown variant (value hidden), expected `a`",
            ),
            (
                "something new \"S3cret\" or `S3cret` here",
                "something new (value hidden) here",
            ),
            ("odd \"S3cret", "odd (value hidden)"),
            (
                "invalid type: string \"S3cret",
                "invalid type: (value hidden)",
            ),
        ];
        for (raw, want) in cases {
            assert_eq!(serde_message(raw, nothing_shown), want, "{raw}");
        }
        // Messages that quote no value, or only names from the schema, are kept as they are.
        for kept in [
            "collectors.mailbox.enabled: invalid type: boolean `true`, expected a string",
            "api: invalid type: sequence, expected struct RawApi",
            "api: unknown field `tokn_file`, expected one of `base_url`, `token_file`",
            "api.accounts: invalid length 3, expected fewer",
            "missing field `base_url`",
            "recursion limit exceeded",
        ] {
            assert_eq!(serde_message(kept, nothing_shown), kept);
        }
    }

    #[test]
    fn yaml_errors_keep_the_path_line_and_column_and_hide_the_value() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct T {
            n: usize,
        }
        let e = serde_yaml_ng::from_str::<T>("n: S3cret-t0ken\n").unwrap_err();
        assert_eq!(
            yaml_error(&e, nothing_shown),
            "n: invalid type: string (value hidden), expected usize at line 1 column 4"
        );
    }

    #[test]
    fn a_field_that_holds_no_secret_shows_its_value_cut_escaped_and_with_tokens_redacted() {
        let shown = |path: &str| path.ends_with("interval") || path.ends_with("concurrency");
        let cases = [
            // A token pasted in a field that holds none is still not shown.
            (
                "api.concurrency: invalid type: string \"mh_live_7fQ2x9Lk3Vb8Zp4Rt6Yw1Nc5\", expected usize",
                "api.concurrency: invalid type: string \"[redacted]\", expected usize",
            ),
            // A field not said to hold no secret: hidden as before.
            (
                "api.token_file: invalid type: string \"S3cret\", expected usize",
                "api.token_file: invalid type: string (value hidden), expected usize",
            ),
            // Something that is not serde's quoting: hidden.
            (
                "api.concurrency: invalid type: string \"S3cret\\q\", expected usize",
                "api.concurrency: invalid type: string (value hidden), expected usize",
            ),
            (
                "api.concurrency: invalid type: character `\u{1b}`, expected usize",
                "api.concurrency: invalid type: character (value hidden), expected usize",
            ),
            // No path: no field to ask about.
            (
                "invalid type: string \"5x\", expected a duration",
                "invalid type: string (value hidden), expected a duration",
            ),
        ];
        for (raw, want) in cases {
            assert_eq!(serde_message(raw, shown), want, "{raw}");
        }
        // A value of a field said to hold no secret is shown as serde quotes it.
        for kept in [
            "collectors.migration.interval: invalid value: string \"5x\", expected a duration",
            "api.concurrency: invalid type: string \"four\", expected usize",
            "api.concurrency: invalid value: integer `-1`, expected usize",
            "api.concurrency: invalid type: floating point `1.5`, expected usize",
            // Control characters stay escaped; serde's escapes are read back first.
            "api.concurrency: invalid type: string \"4\\u{1b}[2J\\n\\\"x\\\\\", expected usize",
        ] {
            assert_eq!(serde_message(kept, shown), kept);
        }
        // A long value is cut at 64 characters, and a flood of escapes too.
        let long = format!(
            "collectors.migration.interval: invalid value: string {:?}, expected a duration",
            "5x ".repeat(1000)
        );
        let got = serde_message(&long, shown);
        assert!(
            got.contains("(cut at 64 characters), expected a duration"),
            "{got}"
        );
        assert!(got.len() < 200, "{got}");
        let escapes = format!(
            "collectors.migration.interval: invalid value: string {:?}, expected a duration",
            "\u{1b}".repeat(1000)
        );
        let got = serde_message(&escapes, shown);
        assert!(got.len() < 600 && !got.contains('\u{1b}'), "{got}");
    }

    #[test]
    fn token_like_runs_are_redacted_and_field_names_and_numbers_kept() {
        assert_eq!(
            redact("string \"sentinel-Tok3n-9f2c41d7\""),
            "string \"[redacted]\""
        );
        assert_eq!(
            redact("daily_activity[1].abcdef0123456789abcdef.count"),
            "daily_activity[1].[redacted].count"
        );
        assert_eq!(
            redact(&format!("string \"{}\"", "Q".repeat(40))),
            "string \"[redacted]\""
        );
        for kept in [
            "remaining_extra_messages_bought",
            "top_accounts_by_delivery_account[0]",
            "number 1795334400000",
            "string \"2026-11-22T08:00:00Z\"",
            "quota (700) against quota_human",
            "overview.key_123456789",
        ] {
            assert_eq!(redact(kept), kept);
        }
        assert_eq!(shorten("abcdef", 3), "abc…");
        assert_eq!(shorten("é漢🦀", 3), "é漢🦀");
    }
}
