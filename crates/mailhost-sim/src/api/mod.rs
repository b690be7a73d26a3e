//! The simulated service on the wire: each [`Route`] served by its handler, wrapped in its own
//! fault layer (and, for the Management API, the rate limiter: per token and per route), beside
//! the `/_sim/` control plane. Handlers check requests and answer in the provider's envelope; the
//! state they read and change, and its rules, are in `crate::world`.

mod control;
mod envelope;
mod error;
mod extract;
mod faults;
mod mailboxes;
mod management;
mod migrations;
mod rate_limit;
mod send;
mod team_members;
mod tracemail;

use std::sync::Arc;

use axum::Router;
use axum::http::{Method, Uri};
use axum::middleware::from_fn_with_state;
use axum::routing::{MethodRouter, get, post, put};
use tokio_util::sync::CancellationToken;

pub use crate::route::{Route, UnknownRoute};
pub use error::ApiError;
pub use extract::MANAGEMENT_TOKEN_HEADER;
pub(crate) use faults::Faults;
pub use faults::{BodyFault, DEFAULT_OVERSIZED_BYTES, FaultSpec, MAX_FAULT_WINDOW, NO_ANSWER_HOLD};
pub use management::PAYMENT_METHODS;
pub use send::{SEND_BULK_MAX_MESSAGES, SEND_MAX_MESSAGES};
pub use tracemail::{
    DASHBOARD_MAX_DAYS, DASHBOARD_MAX_LIMIT, TOP_ACCOUNTS_DEFAULT_LIMIT, TOP5_MAX,
};

use crate::Simulator;
use faults::FaultLayerState;
use rate_limit::RateLimitLayerState;

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
        Route::TeamMemberGet => get(team_members::get_team_member),
        Route::TeamMemberPut => put(team_members::put_team_member),
    }
}

/// The whole application: every route behind its layers, the control plane, and JSON answers
/// for unknown paths and methods.
///
/// The layers of a route, outermost first: the hit counter (every request counted once, whoever
/// answers it), the rate limiter (Management routes only, like a gateway in front of the
/// service), the fault layer, the handler. Cancelling `shutdown` ends the requests the fault
/// layer holds unanswered.
pub(crate) fn build(sim: &Simulator, shutdown: &CancellationToken) -> Router {
    let limiter = sim.rate_limiter();
    let mut router = Router::new();
    for route in Route::ALL {
        let faulted = from_fn_with_state(
            FaultLayerState {
                faults: sim.faults(),
                route,
                clock: sim.clock().clone(),
                shutdown: shutdown.clone(),
            },
            faults::inject,
        );
        // Each `route_layer` wraps what is already there, so the last one is the outermost.
        let mut method_router = handler(route).route_layer(faulted);
        if route.is_management() {
            let limited = RateLimitLayerState {
                limiter: Arc::clone(&limiter),
                route,
                clock: sim.clock().clone(),
            };
            method_router =
                method_router.route_layer(from_fn_with_state(limited, rate_limit::limit));
        }
        method_router = method_router.route_layer(from_fn_with_state(sim.faults(), faults::count));
        router = router.route(route.path(), method_router);
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
