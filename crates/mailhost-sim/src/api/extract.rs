//! Request extractors whose every rejection is the simulator's JSON error, never axum's plain text.

use std::net::{IpAddr, SocketAddr};

use axum::body::Bytes;
use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Query, RawPathParams, Request};
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::error::ApiError;
use crate::Simulator;
use crate::world::codes::{
    is_domain_code, is_mailbox_code, is_migration_code, is_team_member_code,
};

/// Header carrying the Management API token.
pub const MANAGEMENT_TOKEN_HEADER: &str = "X-Api-Token";

const EMPTY_BODY: &str = "the request body is empty";

/// A JSON request body. The `Content-Type` is not checked (clients are many and sloppy); the body
/// must parse as `T`, else 400.
pub(crate) struct JsonBody<T>(pub T);

impl<S, T> FromRequest<S> for JsonBody<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::PayloadTooLarge(rejection.body_text())
                } else {
                    ApiError::BadRequest(format!(
                        "could not read the request body: {}",
                        rejection.body_text()
                    ))
                }
            })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiError::BadRequest(format!(
                "{EMPTY_BODY}; a JSON object is required"
            )));
        }
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| ApiError::BadRequest(format!("invalid JSON body: {e}")))
    }
}

/// Typed access to the members of a JSON object body, with messages naming the member.
/// A member that is `null` counts as absent.
pub(crate) struct Fields<'a>(pub &'a Map<String, Value>);

impl<'a> Fields<'a> {
    fn get(&self, name: &str) -> Option<&'a Value> {
        self.0.get(name).filter(|value| !value.is_null())
    }

    pub(crate) fn string(&self, name: &str) -> Result<Option<&'a str>, ApiError> {
        self.get(name)
            .map(|value| {
                value
                    .as_str()
                    .ok_or_else(|| ApiError::BadRequest(format!("`{name}` must be a string")))
            })
            .transpose()
    }

    pub(crate) fn bool(&self, name: &str) -> Result<Option<bool>, ApiError> {
        self.get(name)
            .map(|value| {
                value
                    .as_bool()
                    .ok_or_else(|| ApiError::BadRequest(format!("`{name}` must be a boolean")))
            })
            .transpose()
    }

    pub(crate) fn int32(&self, name: &str) -> Result<Option<i32>, ApiError> {
        self.get(name)
            .map(|value| {
                value
                    .as_i64()
                    .and_then(|n| i32::try_from(n).ok())
                    .ok_or_else(|| {
                        ApiError::BadRequest(format!("`{name}` must be an int32 integer"))
                    })
            })
            .transpose()
    }

    pub(crate) fn strings(&self, name: &str) -> Result<Option<Vec<&'a str>>, ApiError> {
        self.get(name)
            .map(|value| {
                value
                    .as_array()
                    .and_then(|items| items.iter().map(Value::as_str).collect::<Option<Vec<_>>>())
                    .ok_or_else(|| {
                        ApiError::BadRequest(format!("`{name}` must be an array of strings"))
                    })
            })
            .transpose()
    }
}

/// Turns an absent required member into a 400 naming it.
pub(crate) fn required<T>(name: &str, value: Option<T>) -> Result<T, ApiError> {
    value.ok_or_else(|| ApiError::BadRequest(format!("missing required field `{name}`")))
}

/// The int32 `{id}` of a Delivery account path.
pub(crate) struct AccountId(pub i32);

/// The `{id}` and `{token_id}` of a Delivery API token path.
pub(crate) struct AccountTokenIds {
    pub account: i32,
    pub token: i32,
}

/// The account of a mail-tracing daily statistics path (`{account}`, an int32).
pub(crate) struct TracemailAccount(pub i32);

/// The `{migration_code}` of a migration path, checked to be `MG` + 8 digits.
pub(crate) struct MigrationCode(pub String);

/// The `{team_member_code}` of a team member path, checked to be `T` + 9 digits.
pub(crate) struct TeamMemberCode(pub String);

/// The `{domain_code}` and `{email_account_code}` of an email account path, both checked.
pub(crate) struct MailboxPath {
    pub domain: String,
    pub code: String,
}

async fn string_param<S: Send + Sync>(
    parts: &mut Parts,
    state: &S,
    name: &str,
) -> Result<String, ApiError> {
    let params = RawPathParams::from_request_parts(parts, state)
        .await
        .map_err(|rejection| ApiError::BadRequest(rejection.body_text()))?;
    params
        .iter()
        .find_map(|(key, value)| (key == name).then(|| value.to_owned()))
        .ok_or_else(|| ApiError::Internal(format!("route has no `{name}` path parameter")))
}

/// Longest part of a refused path value quoted back in a 400; the rest is cut.
const QUOTED_VALUE_MAX_CHARS: usize = 32;

/// `value` as an error message quotes it: at most [`QUOTED_VALUE_MAX_CHARS`] characters, then `…`.
fn quoted(value: &str) -> String {
    match value.char_indices().nth(QUOTED_VALUE_MAX_CHARS) {
        Some((cut, _)) => format!("{:?}…", &value[..cut]),
        None => format!("{value:?}"),
    }
}

/// Path parameter `name`, which must satisfy `valid`; `format` describes it in the 400.
async fn code_param<S: Send + Sync>(
    parts: &mut Parts,
    state: &S,
    name: &str,
    valid: fn(&str) -> bool,
    format: &str,
) -> Result<String, ApiError> {
    let value = string_param(parts, state, name).await?;
    if valid(&value) {
        Ok(value)
    } else {
        Err(ApiError::BadRequest(format!(
            "path parameter `{name}` must be {format}, got {}",
            quoted(&value)
        )))
    }
}

async fn int32_param<S: Send + Sync>(
    parts: &mut Parts,
    state: &S,
    name: &str,
) -> Result<i32, ApiError> {
    let value = string_param(parts, state, name).await?;
    value.parse::<i32>().map_err(|_| {
        ApiError::BadRequest(format!(
            "path parameter `{name}` must be an int32 integer, got {}",
            quoted(&value)
        ))
    })
}

impl<S: Send + Sync> FromRequestParts<S> for AccountId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(Self(int32_param(parts, state, "id").await?))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for AccountTokenIds {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(Self {
            account: int32_param(parts, state, "id").await?,
            token: int32_param(parts, state, "token_id").await?,
        })
    }
}

impl<S: Send + Sync> FromRequestParts<S> for TracemailAccount {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(Self(int32_param(parts, state, "account").await?))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for MigrationCode {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let code = code_param(
            parts,
            state,
            "migration_code",
            is_migration_code,
            "`MG` followed by 8 digits",
        )
        .await?;
        Ok(Self(code))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for TeamMemberCode {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let code = code_param(
            parts,
            state,
            "team_member_code",
            is_team_member_code,
            "`T` followed by 9 digits",
        )
        .await?;
        Ok(Self(code))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for MailboxPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let domain = code_param(
            parts,
            state,
            "domain_code",
            is_domain_code,
            "`D` followed by 9 digits",
        )
        .await?;
        let code = code_param(
            parts,
            state,
            "email_account_code",
            is_mailbox_code,
            "`EA` followed by 8 digits or `P` followed by 9 digits",
        )
        .await?;
        Ok(Self { domain, code })
    }
}

/// The query string as `(name, value)` pairs, percent-decoded; an undecodable query is a 400.
pub(crate) struct QueryPairs(pub Vec<(String, String)>);

impl QueryPairs {
    /// The last value given for `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find_map(|(key, value)| (key == name).then_some(value.as_str()))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for QueryPairs {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Query::<Vec<(String, String)>>::from_request_parts(parts, state)
            .await
            .map(|Query(pairs)| Self(pairs))
            .map_err(|rejection| {
                ApiError::BadRequest(format!("invalid query string: {}", rejection.body_text()))
            })
    }
}

/// A JSON object body that may also be empty (every member optional): an empty body reads as
/// `{}`; anything else must be a JSON object, else 400.
pub(crate) struct OptionalJsonObject(pub Map<String, Value>);

impl<S: Send + Sync> FromRequest<S> for OptionalJsonObject {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        match JsonBody::<Map<String, Value>>::from_request(request, state).await {
            Ok(JsonBody(map)) => Ok(Self(map)),
            Err(ApiError::BadRequest(message)) if message.starts_with(EMPTY_BODY) => {
                Ok(Self(Map::new()))
            }
            Err(error) => Err(error),
        }
    }
}

/// A caller authenticated with a Management API token, and what that token may see.
#[derive(Debug)]
pub(crate) struct Management {
    scope: Option<Vec<i32>>,
}

impl Management {
    /// 403 unless the token may see account `id`.
    pub(crate) fn check_account(&self, id: i32) -> Result<(), ApiError> {
        match &self.scope {
            Some(accounts) if !accounts.contains(&id) => Err(ApiError::Forbidden(format!(
                "this API token has no access to Delivery account {id}"
            ))),
            _ => Ok(()),
        }
    }

    /// The accounts this token may see; `None` for all.
    pub(crate) fn scope(&self) -> Option<&[i32]> {
        self.scope.as_deref()
    }

    /// 403 unless the token is unrestricted.
    pub(crate) fn check_unscoped(&self, what: &str) -> Result<(), ApiError> {
        match self.scope {
            Some(_) => Err(ApiError::Forbidden(format!(
                "{what} needs an API token that is not restricted to some accounts"
            ))),
            None => Ok(()),
        }
    }
}

impl FromRequestParts<Simulator> for Management {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        sim: &Simulator,
    ) -> Result<Self, Self::Rejection> {
        let presented = parts
            .headers
            .get(MANAGEMENT_TOKEN_HEADER)
            .ok_or_else(|| ApiError::Unauthorized("missing X-Api-Token header".to_owned()))?
            .to_str()
            .map_err(|_| ApiError::Unauthorized("invalid API token".to_owned()))?;
        sim.management_scope(presented)
            .map(|scope| Self { scope })
            .ok_or_else(|| ApiError::Unauthorized("invalid API token".to_owned()))
    }
}

/// The token of an `Authorization: Bearer <token>` header, not yet looked up.
pub(crate) struct BearerToken(pub String);

impl<S: Send + Sync> FromRequestParts<S> for BearerToken {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let unauthorized = |message: &str| ApiError::Unauthorized(message.to_owned());
        let value = parts
            .headers
            .get(AUTHORIZATION)
            .ok_or_else(|| unauthorized("missing Authorization header"))?
            .to_str()
            .map_err(|_| unauthorized("invalid Authorization header"))?;
        let (scheme, token) = value
            .trim()
            .split_once(' ')
            .ok_or_else(|| unauthorized("Authorization header must be `Bearer <token>`"))?;
        let token = token.trim();
        if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
            return Err(unauthorized(
                "Authorization header must be `Bearer <token>`",
            ));
        }
        Ok(Self(token.to_owned()))
    }
}

/// The peer address of the connection, IPv4-mapped IPv6 addresses unwrapped so allow-lists
/// written with IPv4 networks work on a dual-stack listener.
pub(crate) struct ClientIp(pub IpAddr);

impl<S: Send + Sync> FromRequestParts<S> for ClientIp {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let ConnectInfo(addr) = ConnectInfo::<SocketAddr>::from_request_parts(parts, state)
            .await
            .map_err(|_| {
                ApiError::Internal(
                    "the simulator was served without connection info; use Simulator::serve"
                        .to_owned(),
                )
            })?;
        Ok(Self(addr.ip().to_canonical()))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn long_path_values_are_quoted_cut() {
        assert_eq!(quoted("abc"), "\"abc\"");
        let long = "é".repeat(100);
        let shown = quoted(&long);
        assert!(shown.ends_with('…'), "{shown}");
        assert_eq!(
            shown.chars().filter(|c| *c == 'é').count(),
            QUOTED_VALUE_MAX_CHARS
        );
    }

    #[test]
    fn field_errors_name_the_field() {
        let body = json!({"volume": "3", "allow_nets": ["ok", 1], "flag": null});
        let map = body.as_object().expect("object");
        let fields = Fields(map);
        let message = |e: ApiError| e.to_string();
        assert!(
            fields
                .int32("volume")
                .map_err(message)
                .err()
                .is_some_and(|m| m.contains("`volume`"))
        );
        assert!(
            fields
                .strings("allow_nets")
                .map_err(message)
                .err()
                .is_some_and(|m| m.contains("`allow_nets`"))
        );
        assert!(matches!(fields.bool("flag"), Ok(None)));
        assert!(
            required("status", fields.string("status").ok().flatten())
                .map_err(message)
                .err()
                .is_some_and(|m| m.contains("`status`"))
        );
    }
}
