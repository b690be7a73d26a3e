//! Handlers of the simulated Management API (`/api/*`): Delivery accounts, their API tokens and
//! the suppression list. Bodies are checked here; the changes they ask for are the world's.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Map, Value, json};

use super::envelope::envelope;
use super::error::ApiError;
use super::extract::{AccountId, AccountTokenIds, Fields, JsonBody, Management, required};
use crate::Simulator;
use crate::world::accounts::{AccountSettings, Missing, SuppressionReason, parse_net};
use crate::world::codes::{is_domain_code, is_email_address};

/// Accepted values of `payment_method`.
pub const PAYMENT_METHODS: [&str; 3] = [
    "cardprocessor",
    "walletprovider_billingagreements",
    "walletprovider",
];

impl From<Missing> for ApiError {
    fn from(missing: Missing) -> Self {
        match missing {
            Missing::Account(id) => Self::NotFound(format!("Delivery account {id} not found")),
            Missing::Token { account, token } => Self::NotFound(format!(
                "API token {token} not found in Delivery account {account}"
            )),
            Missing::DomainCode(code) => {
                Self::BadRequest(format!("`domain_codes`: unknown domain code {code}"))
            }
            Missing::TeamMember(code) => Self::NotFound(format!("team member {code} not found")),
        }
    }
}

pub(crate) async fn get_account(
    State(sim): State<Simulator>,
    auth: Management,
    AccountId(id): AccountId,
) -> Result<Json<Value>, ApiError> {
    auth.check_account(id)?;
    let record = sim.world().record(id).ok_or(Missing::Account(id))?;
    Ok(envelope(vec![record]))
}

/// The body of `PUT /api/delivery/accounts/{id}`, checked whole before anything is applied.
fn parse_settings(body: &Map<String, Value>) -> Result<AccountSettings, ApiError> {
    let fields = Fields(body);
    let bounce_notification = fields
        .string("bounce_notification")?
        .map(|address| match address.trim() {
            "" => Ok(None),
            address if is_email_address(address) => Ok(Some(address.to_owned())),
            _ => Err(ApiError::bad_request(
                "`bounce_notification` must be an email address (or empty to clear it)",
            )),
        })
        .transpose()?;
    let domain_codes = fields
        .strings("domain_codes")?
        .map(|codes| {
            codes
                .into_iter()
                .map(|code| {
                    if is_domain_code(code) {
                        Ok(code.to_owned())
                    } else {
                        Err(ApiError::BadRequest(format!(
                            "`domain_codes`: {code:?} is not a domain code (`D` followed by 9 digits)"
                        )))
                    }
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    let payment_method = fields
        .string("payment_method")?
        .map(|method| {
            if PAYMENT_METHODS.contains(&method) {
                Ok(method)
            } else {
                Err(ApiError::BadRequest(format!(
                    "`payment_method` must be one of {}",
                    PAYMENT_METHODS.join(", ")
                )))
            }
        })
        .transpose()?;
    let volume = fields.int32("volume")?;
    if let Some(volume) = volume {
        if volume < 1 {
            return Err(ApiError::bad_request("`volume` must be at least 1"));
        }
        if payment_method.is_none() {
            return Err(ApiError::bad_request(
                "`payment_method` is required when `volume` is given",
            ));
        }
    }
    let allow_nets = fields.strings("allow_nets")?.map(parse_nets).transpose()?;
    Ok(AccountSettings {
        description: fields.string("description")?.map(str::to_owned),
        bounce_notification,
        bounce_notification_to_sender: fields.bool("bounce_notification_to_sender")?,
        domain_codes,
        volume,
        ignore_suppression_list: fields.bool("ignore_suppression_list")?,
        allow_nets,
    })
}

fn parse_nets(values: Vec<&str>) -> Result<Vec<ipnet::IpNet>, ApiError> {
    values
        .into_iter()
        .map(|value| {
            parse_net(value).ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "`allow_nets`: {value:?} is not an IP address or CIDR network"
                ))
            })
        })
        .collect()
}

pub(crate) async fn put_account(
    State(sim): State<Simulator>,
    auth: Management,
    AccountId(id): AccountId,
    JsonBody(body): JsonBody<Map<String, Value>>,
) -> Result<Json<Value>, ApiError> {
    auth.check_account(id)?;
    let now = sim.clock().now();
    let mut world = sim.world();
    world.account(id)?;
    let settings = parse_settings(&body)?;
    Ok(envelope(vec![world.update_settings(id, settings, now)?]))
}

pub(crate) async fn put_account_status(
    State(sim): State<Simulator>,
    auth: Management,
    AccountId(id): AccountId,
    JsonBody(body): JsonBody<Map<String, Value>>,
) -> Result<Json<Value>, ApiError> {
    auth.check_account(id)?;
    let now = sim.clock().now();
    let mut world = sim.world();
    world.account(id)?;
    let enabled = match required("status", Fields(&body).string("status")?)? {
        "enabled" => true,
        "disabled" => false,
        _ => {
            return Err(ApiError::bad_request(
                "`status` must be `enabled` or `disabled`",
            ));
        }
    };
    Ok(envelope(vec![world.set_enabled(id, enabled, now)?]))
}

/// Token updates answer an empty `pagination` object, unlike account reads: clients must not
/// rely on its members.
pub(crate) async fn put_api_token(
    State(sim): State<Simulator>,
    auth: Management,
    ids: AccountTokenIds,
    JsonBody(body): JsonBody<Map<String, Value>>,
) -> Result<Json<Value>, ApiError> {
    auth.check_account(ids.account)?;
    let mut world = sim.world();
    world.api_token(ids.account, ids.token)?;
    let nets = parse_nets(required(
        "allow_nets",
        Fields(&body).strings("allow_nets")?,
    )?)?;
    let record = world.set_token_nets(ids.account, ids.token, nets)?;
    Ok(Json(json!({
        "resources": [record],
        "pagination": {},
    })))
}

/// 204 with an empty body. A token restricted to some accounts may only add entries restricted
/// to those accounts.
pub(crate) async fn post_suppression(
    State(sim): State<Simulator>,
    auth: Management,
    JsonBody(body): JsonBody<Map<String, Value>>,
) -> Result<StatusCode, ApiError> {
    let fields = Fields(&body);
    let email = required("email", fields.string("email")?)?.trim();
    if !is_email_address(email) {
        return Err(ApiError::bad_request("`email` must be an email address"));
    }
    let reason = required("reason", fields.string("reason")?)?;
    let reason = SuppressionReason::parse(reason)
        .ok_or_else(|| ApiError::bad_request("`reason` must be `complaint` or `bounce`"))?;
    let accounts = fields
        .strings("accounts")?
        .map(|accounts| {
            accounts
                .into_iter()
                .map(|account| {
                    let account = account.trim();
                    if account.is_empty() {
                        Err(ApiError::bad_request(
                            "`accounts` must not contain empty strings",
                        ))
                    } else {
                        Ok(account.to_owned())
                    }
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    match &accounts {
        None => auth.check_unscoped("a global suppression entry")?,
        Some(accounts) => {
            for account in accounts {
                match account.parse::<i32>() {
                    Ok(id) => auth.check_account(id)?,
                    Err(_) => auth.check_unscoped("an entry naming account codes")?,
                }
            }
        }
    }
    let now = sim.clock().now();
    sim.world().suppress(email, reason, accounts, now);
    Ok(StatusCode::NO_CONTENT)
}
