//! The operations of the simulated service, by name: the vocabulary that fault injection, the
//! control plane and the router share.

use std::fmt;
use std::str::FromStr;

use axum::http::Method;
use serde::{Deserialize, Serialize};

/// One operation of the simulated service, named for fault injection.
///
/// To add an operation: add a variant here, its name/method/path below, its handler in
/// `handler` (`api/mod.rs`), and it is served and fault-injectable.
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
    /// `GET /api/team_members/{team_member_code}`
    TeamMemberGet,
    /// `PUT /api/team_members/{team_member_code}`
    TeamMemberPut,
}

impl Route {
    pub const ALL: [Route; 13] = [
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
        Route::TeamMemberGet,
        Route::TeamMemberPut,
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
            Route::TeamMemberGet => "team_member_get",
            Route::TeamMemberPut => "team_member_put",
        }
    }

    pub fn method(&self) -> Method {
        match self {
            Route::DeliveryAccountGet
            | Route::TracemailDaily
            | Route::MigrationStats
            | Route::EmailAccountGet
            | Route::TeamMemberGet => Method::GET,
            Route::DeliveryAccountPut
            | Route::DeliveryAccountStatus
            | Route::DeliveryApiTokenPut
            | Route::TeamMemberPut => Method::PUT,
            Route::SuppressionListPost
            | Route::Send
            | Route::SendBulk
            | Route::TracemailDashboard => Method::POST,
        }
    }

    /// Whether the route is part of the Management API (`/api/*`, authenticated by
    /// `X-Api-Token`), and so subject to per-token rate limits; the Send API is not.
    pub fn is_management(&self) -> bool {
        self.path().starts_with("/api/")
    }

    /// The Management API routes, in the order of [`Route::ALL`]: those a rate limit may be
    /// scoped to.
    pub fn management() -> impl Iterator<Item = Route> {
        Route::ALL.into_iter().filter(Route::is_management)
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
            Route::TeamMemberGet | Route::TeamMemberPut => "/api/team_members/{team_member_code}",
        }
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A route name that is not one of [`Route::ALL`].
#[derive(Debug, thiserror::Error)]
#[error("unknown route {0:?}; known routes: {names}", names = names(Route::ALL))]
pub struct UnknownRoute(pub String);

fn names(routes: impl IntoIterator<Item = Route>) -> String {
    routes
        .into_iter()
        .map(|route| route.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why `name` cannot scope a rate limit (an unknown name, or a Send API route), naming the
/// accepted names: one message for the library, the configuration and the control plane.
pub(crate) fn not_a_limited_route(name: &str) -> String {
    format!(
        "`route` {name:?} is not a Management API route: name one of {}",
        names(Route::management())
    )
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

    #[test]
    fn every_route_but_the_send_api_is_a_management_route() {
        let send: Vec<Route> = Route::ALL
            .into_iter()
            .filter(|r| !r.is_management())
            .collect();
        assert_eq!(send, [Route::Send, Route::SendBulk]);
        assert_eq!(Route::management().count(), Route::ALL.len() - 2);
        let message = not_a_limited_route("send");
        assert!(message.starts_with("`route` \"send\" is not"), "{message}");
        assert!(message.contains("delivery_account_get, "), "{message}");
        assert!(message.ends_with("team_member_put"), "{message}");
        assert!(!message.contains("send_bulk"), "{message}");
    }
}
