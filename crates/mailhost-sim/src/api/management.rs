//! Handlers of the simulated Management API (`/api/*`): Delivery accounts, their API tokens and
//! the suppression list.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Map, Value, json};

use super::envelope::envelope;
use super::error::ApiError;
use super::extract::{AccountId, AccountTokenIds, Fields, JsonBody, Management, required};
use crate::Simulator;
use crate::world::accounts::{SuppressionReason, parse_net};
use crate::world::codes::{is_domain_code, is_email_address};

/// Accepted values of `payment_method`.
pub const PAYMENT_METHODS: [&str; 3] = [
    "cardprocessor",
    "walletprovider_billingagreements",
    "walletprovider",
];

fn account_not_found(id: i32) -> ApiError {
    ApiError::NotFound(format!("Delivery account {id} not found"))
}

pub(crate) async fn get_account(
    State(sim): State<Simulator>,
    auth: Management,
    AccountId(id): AccountId,
) -> Result<Json<Value>, ApiError> {
    auth.check_account(id)?;
    let record = sim
        .world()
        .record(id)
        .ok_or_else(|| account_not_found(id))?;
    Ok(envelope(vec![record]))
}

/// The validated body of `PUT /api/delivery/accounts/{id}`; nothing is applied unless all of it
/// is valid.
struct Settings {
    description: Option<String>,
    bounce_notification: Option<Option<String>>,
    bounce_notification_to_sender: Option<bool>,
    domain_codes: Option<Vec<String>>,
    volume: Option<i32>,
    ignore_suppression_list: Option<bool>,
    allow_nets: Option<Vec<ipnet::IpNet>>,
}

impl Settings {
    fn parse(body: &Map<String, Value>) -> Result<Self, ApiError> {
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
        Ok(Self {
            description: fields.string("description")?.map(str::to_owned),
            bounce_notification,
            bounce_notification_to_sender: fields.bool("bounce_notification_to_sender")?,
            domain_codes,
            volume,
            ignore_suppression_list: fields.bool("ignore_suppression_list")?,
            allow_nets,
        })
    }
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
    if !world.accounts.contains_key(&id) {
        return Err(account_not_found(id));
    }
    let settings = Settings::parse(&body)?;
    let domains = settings
        .domain_codes
        .map(|codes| {
            let mut names: Vec<String> = Vec::with_capacity(codes.len());
            for code in codes {
                let name = world.domains.name_of(&code).ok_or_else(|| {
                    ApiError::BadRequest(format!("`domain_codes`: unknown domain code {code}"))
                })?;
                if !names.iter().any(|known| known == name) {
                    names.push(name.to_owned());
                }
            }
            Ok::<_, ApiError>(names)
        })
        .transpose()?;
    let account = world
        .accounts
        .get_mut(&id)
        .ok_or_else(|| account_not_found(id))?;
    if let Some(description) = settings.description {
        account.description = Some(description);
    }
    if let Some(address) = settings.bounce_notification {
        account.bounce_notification = address;
    }
    if let Some(flag) = settings.bounce_notification_to_sender {
        account.bounce_notification_to_sender = flag;
    }
    if let Some(domains) = domains {
        account.domains = domains;
    }
    if let Some(volume) = settings.volume {
        account.buy_extras(volume, now);
    }
    if let Some(flag) = settings.ignore_suppression_list {
        account.ignore_suppression_list = flag;
    }
    if let Some(nets) = settings.allow_nets {
        account.allow_nets = nets;
    }
    account.updated_at = now;
    let record = world.record(id).ok_or_else(|| account_not_found(id))?;
    Ok(envelope(vec![record]))
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
    let account = world
        .accounts
        .get_mut(&id)
        .ok_or_else(|| account_not_found(id))?;
    let enabled = match required("status", Fields(&body).string("status")?)? {
        "enabled" => true,
        "disabled" => false,
        _ => {
            return Err(ApiError::bad_request(
                "`status` must be `enabled` or `disabled`",
            ));
        }
    };
    account.enabled = enabled;
    account.updated_at = now;
    let record = world.record(id).ok_or_else(|| account_not_found(id))?;
    Ok(envelope(vec![record]))
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
    let account = world
        .accounts
        .get_mut(&ids.account)
        .ok_or_else(|| account_not_found(ids.account))?;
    let token = account
        .api_tokens
        .iter_mut()
        .find(|token| token.id == ids.token)
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "API token {} not found in Delivery account {}",
                ids.token, ids.account
            ))
        })?;
    let nets = parse_nets(required(
        "allow_nets",
        Fields(&body).strings("allow_nets")?,
    )?)?;
    token.allow_nets = nets;
    Ok(Json(json!({
        "resources": [token.record()],
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
