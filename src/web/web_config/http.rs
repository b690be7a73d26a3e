//! Basic auth users and the extra response headers the toolkit lets an operator set.

use std::collections::BTreeMap;

use axum::http::{HeaderName, HeaderValue};

use crate::web::auth::{self, Users};

use super::{WebConfigError, invalid};

/// The headers the toolkit lets an operator set, with their allowed values where those are an
/// enumeration; kept identical so that one file works for every exporter.
const ALLOWED_HEADERS: &[(&str, &[&str])] = &[
    ("Strict-Transport-Security", &[]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-XSS-Protection", &[]),
    ("Content-Security-Policy", &[]),
];

pub(super) fn headers(
    raw: BTreeMap<String, String>,
) -> Result<Vec<(HeaderName, HeaderValue)>, WebConfigError> {
    let mut out = Vec::with_capacity(raw.len());
    for (name, value) in raw {
        let field = format!("http_server_config.headers.{name}");
        let Some((_, allowed)) = ALLOWED_HEADERS.iter().find(|(n, _)| *n == name) else {
            let names: Vec<&str> = ALLOWED_HEADERS.iter().map(|(n, _)| *n).collect();
            return Err(invalid(
                field,
                format!(
                    "this header cannot be configured; use one of {}",
                    names.join(", ")
                ),
            ));
        };
        if !allowed.is_empty() && !allowed.contains(&value.as_str()) {
            return Err(invalid(
                field,
                format!(
                    "{value:?} is not allowed; use one of {}",
                    allowed.join(", ")
                ),
            ));
        }
        let value = HeaderValue::from_str(&value).map_err(|_| {
            invalid(
                &field,
                "is not a valid header value; use visible ASCII characters only",
            )
        })?;
        let name = HeaderName::from_bytes(name.as_bytes()).expect("the allowed names are valid");
        out.push((name, value));
    }
    Ok(out)
}

pub(super) fn users(raw: BTreeMap<String, Option<String>>) -> Result<Users, WebConfigError> {
    let mut hashes = BTreeMap::new();
    for (user, hash) in raw {
        if user.contains(':') {
            // The toolkit accepts it, so we do; but basic auth splits on ':', so nobody can
            // log in as this user.
            tracing::warn!(%user, "basic_auth_users: a user name with ':' can never log in");
        }
        let hash = hash.unwrap_or_default();
        auth::check_hash(&hash).map_err(|problem| {
            invalid(
                format!("basic_auth_users.{user}"),
                format!(
                    "{problem}; write a bcrypt hash such as the output of `htpasswd -nbBC 10 \"\" PASSWORD | tr -d ':\\n'`"
                ),
            )
        })?;
        hashes.insert(user, hash);
    }
    Ok(Users::from_checked(hashes))
}
