//! Handlers of the team members (`/api/team_members/{team_member_code}`). Team members are the
//! customer's, not a Delivery account's: any valid management token reads them, and only an
//! unrestricted one changes them (a token limited to some accounts must not change passwords or
//! grant permissions). The rules of a password and of a permission list are the world's.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Map, Value};

use super::envelope::envelope;
use super::error::ApiError;
use super::extract::{Fields, Management, OptionalJsonObject, TeamMemberCode};
use crate::Simulator;
use crate::world::accounts::Missing;
use crate::world::team_members::{TeamMemberChange, check_password, check_permissions};

/// `GET /api/team_members/{team_member_code}`.
pub(crate) async fn get_team_member(
    State(sim): State<Simulator>,
    _auth: Management,
    TeamMemberCode(code): TeamMemberCode,
) -> Result<Json<Value>, ApiError> {
    let record = sim
        .team_member_record(&code)
        .ok_or(Missing::TeamMember(code))?;
    Ok(envelope(vec![record]))
}

/// The body of `PUT /api/team_members/{team_member_code}`, checked whole before anything is
/// applied. Messages name the members, never the password.
fn parse_change(body: &Map<String, Value>) -> Result<TeamMemberChange, ApiError> {
    let fields = Fields(body);
    let password = fields.string("password")?;
    let confirmation = fields.string("password_confirmation")?;
    check_password(password, confirmation)
        .map_err(|problem| ApiError::BadRequest(problem.message()))?;
    let permissions = fields
        .strings("permissions")?
        .map(|keys| {
            check_permissions(keys)
                .map_err(|reason| ApiError::BadRequest(format!("`permissions`: {reason}")))
        })
        .transpose()?;
    Ok(TeamMemberChange {
        password: password.is_some(),
        permissions,
    })
}

/// `PUT /api/team_members/{team_member_code}`: 204 with an empty body. Every member is optional
/// and so is the body.
pub(crate) async fn put_team_member(
    State(sim): State<Simulator>,
    auth: Management,
    TeamMemberCode(code): TeamMemberCode,
    OptionalJsonObject(body): OptionalJsonObject,
) -> Result<StatusCode, ApiError> {
    auth.check_unscoped("changing a team member")?;
    let now = sim.clock().now();
    let mut world = sim.world();
    world.team_member(&code)?;
    let change = parse_change(&body)?;
    world.change_team_member(&code, change, now)?;
    Ok(StatusCode::NO_CONTENT)
}
