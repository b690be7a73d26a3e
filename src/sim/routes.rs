//! The simulated routes: one `Route` per operation, each mapped to its method, path and handler,
//! wrapped in its own fault layer.

use std::fmt;
use std::str::FromStr;

use axum::Router;
use axum::http::{Method, Uri};
use axum::middleware::from_fn_with_state;
use axum::routing::{MethodRouter, get, post, put};
use serde::{Deserialize, Serialize};

use super::Simulator;
use super::control;
use super::error::ApiError;
use super::faults::{self, FaultLayerState};
use super::mailboxes;
use super::management;
use super::migrations;
use super::send;
use super::tracemail;

/// One operation of the simulated service, named for fault injection.
///
/// To add an operation: add a variant here, its name/method/path below, its handler in
/// [`handler`], and it is served and fault-injectable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// `GET /api/delivery/accounts/{id}`
    DeliveryAccountGet,
    /// `PUT /api/delivery/accounts/{id}`
    DeliveryAccountPut,
    /// `PUT /api/delivery/accounts/{id}/status`
    DeliveryAccountStatus,
    /// `PUT /api/delivery/accounts/{id}/api_tokens/{token_id}`
    DeliveryApiTokenPut,
    /// `POST /api/delivery/suppression_lists`
    SuppressionListPost,
    /// `POST /v1/send`
    Send,
    /// `POST /v1/send/bulk`
    SendBulk,
    /// `POST /api/delivery/tracemail/dashboard`
    TracemailDashboard,
    /// `GET /api/delivery/tracemail/daily/{account}`
    TracemailDaily,
    /// `GET /api/migrations/{migration_code}/stats`
    MigrationStats,
    /// `GET /api/domains/{domain_code}/email_accounts/{email_account_code}`
    EmailAccountGet,
}

impl Route {
    pub const ALL: [Route; 11] = [
        Route::DeliveryAccountGet,
        Route::DeliveryAccountPut,
        Route::DeliveryAccountStatus,
        Route::DeliveryApiTokenPut,
        Route::SuppressionListPost,
        Route::Send,
        Route::SendBulk,
        Route::TracemailDashboard,
        Route::TracemailDaily,
        Route::MigrationStats,
        Route::EmailAccountGet,
    ];

    /// The stable snake_case name used by `/_sim/faults/{route}`.
    pub fn name(&self) -> &'static str {
        match self {
            Route::DeliveryAccountGet => "delivery_account_get",
            Route::DeliveryAccountPut => "delivery_account_put",
            Route::DeliveryAccountStatus => "delivery_account_status",
            Route::DeliveryApiTokenPut => "delivery_api_token_put",
            Route::SuppressionListPost => "suppression_list_post",
            Route::Send => "send",
            Route::SendBulk => "send_bulk",
            Route::TracemailDashboard => "tracemail_dashboard",
            Route::TracemailDaily => "tracemail_daily",
            Route::MigrationStats => "migration_stats",
            Route::EmailAccountGet => "email_account_get",
        }
    }

    pub fn method(&self) -> Method {
        match self {
            Route::DeliveryAccountGet
            | Route::TracemailDaily
            | Route::MigrationStats
            | Route::EmailAccountGet => Method::GET,
            Route::DeliveryAccountPut
            | Route::DeliveryAccountStatus
            | Route::DeliveryApiTokenPut => Method::PUT,
            Route::SuppressionListPost
            | Route::Send
            | Route::SendBulk
            | Route::TracemailDashboard => Method::POST,
        }
    }

    /// The path template, in axum's `{param}` syntax.
    pub fn path(&self) -> &'static str {
        match self {
            Route::DeliveryAccountGet | Route::DeliveryAccountPut => "/api/delivery/accounts/{id}",
            Route::DeliveryAccountStatus => "/api/delivery/accounts/{id}/status",
            Route::DeliveryApiTokenPut => "/api/delivery/accounts/{id}/api_tokens/{token_id}",
            Route::SuppressionListPost => "/api/delivery/suppression_lists",
            Route::Send => "/v1/send",
            Route::SendBulk => "/v1/send/bulk",
            Route::TracemailDashboard => "/api/delivery/tracemail/dashboard",
            Route::TracemailDaily => "/api/delivery/tracemail/daily/{account}",
            Route::MigrationStats => "/api/migrations/{migration_code}/stats",
            Route::EmailAccountGet => {
                "/api/domains/{domain_code}/email_accounts/{email_account_code}"
            }
        }
    }
}

/// The handler of each route, registered for [`Route::method`] (a router test checks they agree).
fn handler(route: Route) -> MethodRouter<Simulator> {
    match route {
        Route::DeliveryAccountGet => get(management::get_account),
        Route::DeliveryAccountPut => put(management::put_account),
        Route::DeliveryAccountStatus => put(management::put_account_status),
        Route::DeliveryApiTokenPut => put(management::put_api_token),
        Route::SuppressionListPost => post(management::post_suppression),
        Route::Send => post(send::send),
        Route::SendBulk => post(send::send_bulk),
        Route::TracemailDashboard => post(tracemail::dashboard),
        Route::TracemailDaily => get(tracemail::daily),
        Route::MigrationStats => get(migrations::get_stats),
        Route::EmailAccountGet => get(mailboxes::get_mailbox),
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A route name that is not one of [`Route::ALL`].
#[derive(Debug, thiserror::Error)]
#[error("unknown route {0:?}; known routes: {names}", names = known_names())]
pub struct UnknownRoute(pub String);

fn known_names() -> String {
    Route::ALL
        .iter()
        .map(Route::name)
        .collect::<Vec<_>>()
        .join(", ")
}

impl FromStr for Route {
    type Err = UnknownRoute;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Route::ALL
            .into_iter()
            .find(|route| route.name() == s)
            .ok_or_else(|| UnknownRoute(s.to_owned()))
    }
}

/// The whole application: every route behind its fault layer, the control plane, and JSON
/// answers for unknown paths and methods.
pub(crate) fn build(sim: &Simulator) -> Router {
    let mut router = Router::new();
    for route in Route::ALL {
        let layer = from_fn_with_state(
            FaultLayerState {
                faults: sim.faults(),
                route,
                clock: sim.clock().clone(),
            },
            faults::inject,
        );
        router = router.route(route.path(), handler(route).route_layer(layer));
    }
    router
        .merge(control::router())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(sim.clone())
}

async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::NotFound(format!("no route for {method} {}", uri.path()))
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_names_round_trip_and_match_serde() {
        for route in Route::ALL {
            assert_eq!(route.name().parse::<Route>().ok(), Some(route));
            assert_eq!(
                serde_json::to_value(route).ok(),
                Some(serde_json::Value::String(route.name().to_owned()))
            );
        }
        assert!("nope".parse::<Route>().is_err());
    }
}
