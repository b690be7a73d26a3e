//! Handlers of the simulated Send API (`/v1/send`, `/v1/send/bulk`): authentication by send
//! token, allow-lists, sender domains, the suppression list, quota consumption and the outcome
//! of every recipient in the sending statistics.

use std::net::IpAddr;

use axum::Json;
use axum::extract::State;
use serde_json::{Map, Value, json};

use super::Simulator;
use super::error::ApiError;
use super::extract::{
    BearerToken, ClientIp, Fields, JsonBody, domain_of, is_email_address, required,
};
use super::state::{SuppressionReason, nets_allow};
use super::stats::{self, Outcome};

/// Most messages (one per recipient) `POST /v1/send` takes in one request.
pub const SEND_MAX_MESSAGES: usize = 50;
/// Most messages (one per recipient) `POST /v1/send/bulk` takes in one request.
pub const SEND_BULK_MAX_MESSAGES: usize = 1000;
/// Recipients on this domain are accepted, then "bounce": each is added to the sending account's
/// suppression list, so later sends to it are rejected. This gives the demo a realistic trickle
/// of suppressed recipients.
pub const BOUNCE_DOMAIN: &str = "bounces.invalid";

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
    let unknown = || ApiError::Unauthorized("invalid send API token".to_owned());
    let (account_id, token_id) = *world.send_tokens.get(presented).ok_or_else(unknown)?;
    let account = world.accounts.get_mut(&account_id).ok_or_else(unknown)?;
    let token = account
        .api_tokens
        .iter_mut()
        .find(|token| token.id == token_id && token.matches(presented))
        .ok_or_else(unknown)?;
    if !nets_allow(&token.allow_nets, ip) {
        return Err(ApiError::Forbidden(format!(
            "source address {ip} is not in this token's allow-list"
        )));
    }
    token.last_used_at = Some(now);
    if !account.enabled {
        return Err(ApiError::Forbidden(format!(
            "Delivery account {account_id} is disabled"
        )));
    }
    if !nets_allow(&account.allow_nets, ip) {
        return Err(ApiError::Forbidden(format!(
            "source address {ip} is not in the allow-list of Delivery account {account_id}"
        )));
    }

    let messages = parse_messages(body)?;
    for message in &messages {
        let domain = domain_of(message.from);
        if !account
            .domains
            .iter()
            .any(|own| own.eq_ignore_ascii_case(domain))
        {
            return Err(ApiError::Forbidden(format!(
                "sender domain {domain:?} is not a sending domain of Delivery account {account_id}"
            )));
        }
    }
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

    let ignore_suppression = account.ignore_suppression_list;
    let own_domains = account.domains.clone();
    let mut outcomes: Vec<(&str, &str, Option<SuppressionReason>)> = Vec::with_capacity(requested);
    for message in &messages {
        // Statistics are kept under the account's own spelling of the sending domain.
        let sender = domain_of(message.from);
        let domain = own_domains
            .iter()
            .find(|own| own.eq_ignore_ascii_case(sender))
            .map_or(sender, String::as_str);
        for recipient in message.to.iter().copied() {
            let suppressed = if ignore_suppression {
                None
            } else {
                world.suppression_for(recipient, account_id)
            };
            outcomes.push((recipient, domain, suppressed));
        }
    }
    let accepted = outcomes.iter().filter(|(_, _, s)| s.is_none()).count();
    let accepted_i64 = i64::try_from(accepted).unwrap_or(i64::MAX);
    let account = world.accounts.get_mut(&account_id).ok_or_else(unknown)?;
    let remaining = account.remaining_messages();
    if accepted_i64 > remaining {
        return Err(ApiError::QuotaExhausted {
            requested: accepted_i64,
            remaining,
        });
    }
    account.consume(accepted_i64);

    let mut results = Vec::with_capacity(outcomes.len());
    for (recipient, domain, suppressed) in outcomes {
        let outcome = match suppressed {
            None if domain_of(recipient).eq_ignore_ascii_case(BOUNCE_DOMAIN) => Outcome::Bounced,
            None => stats::roll_accepted(&mut world.outcome_rng),
            Some(_) => Outcome::Rejected,
        };
        world.stats.record(account_id, domain, now, outcome, 1);
        match suppressed {
            None => {
                world.messages_accepted += 1;
                results.push(json!({
                    "id": format!("sim-{account_id}-{:012}", world.messages_accepted),
                    "to": recipient,
                    "status": "accepted",
                    "reason": Value::Null,
                    "suppression_reason": Value::Null,
                }));
                if domain_of(recipient).eq_ignore_ascii_case(BOUNCE_DOMAIN) {
                    world.suppress(
                        recipient,
                        SuppressionReason::Bounce,
                        Some(vec![account_id.to_string()]),
                        now,
                    );
                }
            }
            Some(reason) => results.push(json!({
                "id": Value::Null,
                "to": recipient,
                "status": "rejected",
                "reason": "suppressed",
                "suppression_reason": reason.as_str(),
            })),
        }
    }
    world.stats.prune(now);
    Ok(Json(json!({
        "accepted": accepted,
        "rejected": results.len() - accepted,
        "messages": results,
    })))
}
