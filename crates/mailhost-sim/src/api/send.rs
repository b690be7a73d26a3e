//! Handlers of the simulated Send API (`/v1/send`, `/v1/send/bulk`): the bearer token, the body
//! and the size limit are checked here; who may send and what sending does are the world's rules
//! (`world::sending`).

use std::net::IpAddr;

use axum::Json;
use axum::extract::State;
use serde_json::{Map, Value};

use super::error::ApiError;
use super::extract::{BearerToken, ClientIp, Fields, JsonBody, required};
use crate::Simulator;
use crate::world::codes::is_email_address;
use crate::world::sending::SendRefusal;

/// Most messages (one per recipient) `POST /v1/send` takes in one request.
pub const SEND_MAX_MESSAGES: usize = 50;
/// Most messages (one per recipient) `POST /v1/send/bulk` takes in one request.
pub const SEND_BULK_MAX_MESSAGES: usize = 1000;

pub(crate) async fn send(
    State(sim): State<Simulator>,
    ClientIp(ip): ClientIp,
    BearerToken(token): BearerToken,
    JsonBody(body): JsonBody<Map<String, Value>>,
) -> Result<Json<Value>, ApiError> {
    deliver(&sim, ip, &token, &body, SEND_MAX_MESSAGES, "/v1/send/bulk")
}

pub(crate) async fn send_bulk(
    State(sim): State<Simulator>,
    ClientIp(ip): ClientIp,
    BearerToken(token): BearerToken,
    JsonBody(body): JsonBody<Map<String, Value>>,
) -> Result<Json<Value>, ApiError> {
    deliver(&sim, ip, &token, &body, SEND_BULK_MAX_MESSAGES, "")
}

/// One message of the request body, validated.
struct Message<'a> {
    from: &'a str,
    to: Vec<&'a str>,
}

fn parse_messages(body: &Map<String, Value>) -> Result<Vec<Message<'_>>, ApiError> {
    let items = required("messages", body.get("messages").filter(|v| !v.is_null()))?
        .as_array()
        .ok_or_else(|| ApiError::bad_request("`messages` must be an array of message objects"))?;
    if items.is_empty() {
        return Err(ApiError::bad_request(
            "`messages` must contain at least one message",
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let object = item.as_object().ok_or_else(|| {
                ApiError::BadRequest(format!("`messages[{i}]` must be an object"))
            })?;
            let fields = Fields(object);
            let at = |e: ApiError| ApiError::BadRequest(format!("`messages[{i}]`: {e}"));
            let from = required("from", fields.string("from").map_err(at)?).map_err(at)?;
            if !is_email_address(from) {
                return Err(ApiError::BadRequest(format!(
                    "`messages[{i}].from` is not an email address"
                )));
            }
            let to = required("to", fields.strings("to").map_err(at)?).map_err(at)?;
            if to.is_empty() {
                return Err(ApiError::BadRequest(format!(
                    "`messages[{i}].to` must name at least one recipient"
                )));
            }
            if let Some(j) = to.iter().position(|address| !is_email_address(address)) {
                return Err(ApiError::BadRequest(format!(
                    "`messages[{i}].to[{j}]` is not an email address"
                )));
            }
            fields.string("subject").map_err(at)?;
            fields.string("text_body").map_err(at)?;
            Ok(Message { from, to })
        })
        .collect()
}

/// Checks run in this order: token (401), the token's allow-list (403), account enabled (403), the
/// account's allow-list (403), body (400), sender domain (403), size limit (400), suppression (per
/// recipient), quota (402, nothing sent). A token that passes its own allow-list counts as used.
fn deliver(
    sim: &Simulator,
    ip: IpAddr,
    presented: &str,
    body: &Map<String, Value>,
    max_messages: usize,
    bigger_route: &str,
) -> Result<Json<Value>, ApiError> {
    let now = sim.clock().now();
    let mut world = sim.world();
    let account_id = world.send_account(presented, ip, now)?;
    let messages = parse_messages(body)?;
    let domains = messages
        .iter()
        .map(|message| world.sending_domain(account_id, message.from))
        .collect::<Result<Vec<_>, _>>()?;
    let requested: usize = messages.iter().map(|m| m.to.len()).sum();
    if requested > max_messages {
        let hint = if bigger_route.is_empty() {
            String::new()
        } else {
            format!("; use {bigger_route} for more")
        };
        return Err(ApiError::BadRequest(format!(
            "{requested} messages in one request; at most {max_messages} are accepted{hint}"
        )));
    }
    let recipients: Vec<(String, &str)> = messages
        .iter()
        .zip(domains)
        .flat_map(|(message, domain)| {
            message
                .to
                .iter()
                .map(move |recipient| (domain.clone(), *recipient))
        })
        .collect();
    Ok(Json(world.send(account_id, &recipients, now)?))
}

impl From<SendRefusal> for ApiError {
    fn from(refusal: SendRefusal) -> Self {
        match refusal {
            SendRefusal::UnknownToken => Self::Unauthorized("invalid send API token".to_owned()),
            SendRefusal::NotAllowed(message) => Self::Forbidden(message),
            SendRefusal::QuotaExhausted {
                requested,
                remaining,
            } => Self::QuotaExhausted {
                requested,
                remaining,
            },
        }
    }
}
