//! Team members: the customer's users of the panel and the Management API, with their second
//! factor, API access, allowed networks and permission keys; the rules of a password and of a
//! permission list; and how a team member is rendered as a record.

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::World;
use super::accounts::{CUSTOMER_CODE, Missing, render_net};
use super::clock::{format_datetime, shift};
use super::codes::{is_email_address, is_team_member_code};
use super::config::TeamMember;
use super::error::SimConfigError;

/// Every member of a team member record (section 2.4 of the interface document).
pub const TEAM_MEMBER_RECORD_FIELDS: [&str; 34] = [
    "code",
    "type",
    "status",
    "status_detail",
    "firstname",
    "lastname",
    "fullname",
    "email_address",
    "linked_email_account",
    "language",
    "timezone",
    "otp",
    "allow_nets",
    "api_access_blocked",
    "permissions",
    "ordered_domains",
    "type_label",
    "catch_all",
    "customer_code",
    "created_at",
    "updated_at",
    "customization_logo",
    "customization_help_desk_url",
    "customization_company",
    // customer flags
    "is_customer_wholesale",
    "is_customer_disabled",
    "is_customer_reseller",
    "is_customer_trial",
    "is_partner_customer",
    "basic_plan_available",
    "basic_plan_available_for_non_reseller_order",
    "can_access_delivery",
    "requires_delivery_business_email",
    "can_edit_outbound_limits",
];

/// The shortest team member password (section 8 of the interface document).
pub const TEAM_MEMBER_PASSWORD_MIN_CHARS: usize = 8;
/// The longest team member password the simulator accepts (chosen; the interface names none).
pub const TEAM_MEMBER_PASSWORD_MAX_CHARS: usize = 128;
/// Most permission keys one team member may hold (chosen).
pub const TEAM_MEMBER_MAX_PERMISSIONS: usize = 64;
/// Longest permission key (chosen; the interface does not name the keys).
pub const PERMISSION_KEY_MAX_CHARS: usize = 64;

/// How long before the clock at start a seeded team member was created.
const SEEDED_MEMBER_AGE: SignedDuration = SignedDuration::from_hours(200 * 24);

/// One team member as the simulator holds it: its [`TeamMember`] (read and written through
/// `Deref`) and its dates. The password itself is never kept: only when it was last changed.
#[derive(Clone, Debug)]
pub struct TeamMemberState {
    pub member: TeamMember,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// When a `PUT /api/team_members/{code}` last set the password; `None` since the seed.
    pub password_changed_at: Option<Timestamp>,
}

super::embeds!(TeamMemberState => member: TeamMember);

impl TeamMemberState {
    pub(crate) fn from_seed(seed: &TeamMember, now: Timestamp) -> Result<Self, SimConfigError> {
        let bad = |reason: String| SimConfigError::BadTeamMember {
            code: seed.code.clone(),
            reason,
        };
        if !is_team_member_code(&seed.code) {
            return Err(bad("the code must be `T` followed by 9 digits".to_owned()));
        }
        if !is_email_address(&seed.email_address) {
            return Err(bad(format!(
                "email_address {:?} is not an email address",
                seed.email_address
            )));
        }
        if seed.language.trim().is_empty() {
            return Err(bad("language must not be empty".to_owned()));
        }
        if TimeZone::get(&seed.timezone).is_err() {
            return Err(bad(format!(
                "timezone {:?} is not an IANA time zone name (e.g. \"Europe/Rome\")",
                seed.timezone
            )));
        }
        let permissions = check_permissions(seed.permissions.iter().map(String::as_str))
            .map_err(|reason| bad(format!("permissions: {reason}")))?;
        let created_at = shift(now, -SEEDED_MEMBER_AGE);
        Ok(Self {
            member: TeamMember {
                permissions,
                ..seed.clone()
            },
            created_at,
            updated_at: shift(created_at, SignedDuration::from_hours(24)),
            password_changed_at: None,
        })
    }

    /// `firstname lastname`, without stray spaces when one of them is empty.
    pub fn fullname(&self) -> String {
        format!("{} {}", self.firstname.trim(), self.lastname.trim())
            .trim()
            .to_owned()
    }

    /// The record exactly as `GET /api/team_members/{code}` returns it.
    pub(crate) fn record(&self) -> Value {
        let allow_nets: Vec<String> = self.allow_nets.iter().map(render_net).collect();
        json!({
            "code": self.code,
            "type": "TeamMember",
            "status": if self.enabled { "enabled" } else { "disabled" },
            "status_detail": "customer",
            "firstname": self.firstname,
            "lastname": self.lastname,
            "fullname": self.fullname(),
            "email_address": self.email_address,
            "linked_email_account": Value::Null,
            "language": self.language,
            "timezone": self.timezone,
            "otp": self.otp,
            "allow_nets": allow_nets,
            "api_access_blocked": self.api_access_blocked,
            "permissions": self.permissions,
            "ordered_domains": [],
            "type_label": "Team member",
            "catch_all": false,
            "customer_code": CUSTOMER_CODE,
            "created_at": format_datetime(self.created_at),
            "updated_at": format_datetime(self.updated_at),
            "customization_logo": Value::Null,
            "customization_help_desk_url": Value::Null,
            "customization_company": Value::Null,
            "is_customer_wholesale": false,
            "is_customer_disabled": self.is_customer_disabled,
            "is_customer_reseller": self.is_customer_reseller,
            "is_customer_trial": self.is_customer_trial,
            "is_partner_customer": false,
            "basic_plan_available": true,
            "basic_plan_available_for_non_reseller_order": true,
            "can_access_delivery": true,
            "requires_delivery_business_email": false,
            "can_edit_outbound_limits": true,
        })
    }
}

/// Whether `key` has the shape of a permission key: 1 to [`PERMISSION_KEY_MAX_CHARS`] ASCII
/// letters, digits, `_`, `.`, `:` or `-`. The interface does not name the keys, so any key of
/// that shape is accepted.
pub(crate) fn is_permission_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= PERMISSION_KEY_MAX_CHARS
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
}

/// The permission list `keys` as it is stored: each key once, in the order first given. Refused
/// (with a reason that names the position, never the value): a key of the wrong shape, more
/// than [`TEAM_MEMBER_MAX_PERMISSIONS`] distinct keys.
pub(crate) fn check_permissions<'a>(
    keys: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<String>, String> {
    let mut kept: Vec<String> = Vec::new();
    for (index, key) in keys.into_iter().enumerate() {
        if !is_permission_key(key) {
            return Err(format!(
                "item {index} is not a permission key (1 to {PERMISSION_KEY_MAX_CHARS} ASCII \
                 letters, digits, `_`, `.`, `:` or `-`)"
            ));
        }
        if !kept.iter().any(|known| known == key) {
            if kept.len() == TEAM_MEMBER_MAX_PERMISSIONS {
                return Err(format!(
                    "at most {TEAM_MEMBER_MAX_PERMISSIONS} permission keys"
                ));
            }
            kept.push(key.to_owned());
        }
    }
    Ok(kept)
}

/// Why a password change is refused; the message names the members, never their values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PasswordProblem {
    TooShort,
    TooLong,
    NoLetter,
    NoDigit,
    ConfirmationMissing,
    ConfirmationDiffers,
    ConfirmationAlone,
}

impl PasswordProblem {
    pub(crate) fn message(self) -> String {
        match self {
            Self::TooShort => {
                format!("`password` must have at least {TEAM_MEMBER_PASSWORD_MIN_CHARS} characters")
            }
            Self::TooLong => {
                format!("`password` must have at most {TEAM_MEMBER_PASSWORD_MAX_CHARS} characters")
            }
            Self::NoLetter => "`password` must contain at least one letter".to_owned(),
            Self::NoDigit => "`password` must contain at least one number".to_owned(),
            Self::ConfirmationMissing => {
                "`password_confirmation` is required with `password`".to_owned()
            }
            Self::ConfirmationDiffers => {
                "`password_confirmation` does not match `password`".to_owned()
            }
            Self::ConfirmationAlone => {
                "`password_confirmation` is only accepted with `password`".to_owned()
            }
        }
    }
}

/// The password rule of section 8: at least 8 characters (at most 128, chosen), at least one
/// letter and one digit, and a confirmation equal to it. Either both are given or neither.
pub(crate) fn check_password(
    password: Option<&str>,
    confirmation: Option<&str>,
) -> Result<(), PasswordProblem> {
    let Some(password) = password else {
        return match confirmation {
            Some(_) => Err(PasswordProblem::ConfirmationAlone),
            None => Ok(()),
        };
    };
    let chars = password.chars().count();
    if chars < TEAM_MEMBER_PASSWORD_MIN_CHARS {
        return Err(PasswordProblem::TooShort);
    }
    if chars > TEAM_MEMBER_PASSWORD_MAX_CHARS {
        return Err(PasswordProblem::TooLong);
    }
    if !password.chars().any(char::is_alphabetic) {
        return Err(PasswordProblem::NoLetter);
    }
    if !password.chars().any(|c| c.is_ascii_digit()) {
        return Err(PasswordProblem::NoDigit);
    }
    match confirmation {
        None => Err(PasswordProblem::ConfirmationMissing),
        Some(confirmation) if confirmation != password => Err(PasswordProblem::ConfirmationDiffers),
        Some(_) => Ok(()),
    }
}

/// A checked change of a team member, the body of `PUT /api/team_members/{code}`.
#[derive(Debug, Default)]
pub(crate) struct TeamMemberChange {
    /// A new (checked) password was given; only the moment is kept.
    pub password: bool,
    /// Replaces the permission keys (already checked and deduplicated).
    pub permissions: Option<Vec<String>>,
}

impl World {
    /// Adds a team member; its code must be new.
    pub(crate) fn insert_team_member(
        &mut self,
        seed: &TeamMember,
        now: Timestamp,
    ) -> Result<(), SimConfigError> {
        let state = TeamMemberState::from_seed(seed, now)?;
        if self.team_members.contains_key(&seed.code) {
            return Err(SimConfigError::BadTeamMember {
                code: seed.code.clone(),
                reason: "configured twice".to_owned(),
            });
        }
        self.team_members.insert(seed.code.clone(), state);
        Ok(())
    }

    /// The team member `code`, or why not.
    pub(crate) fn team_member(&self, code: &str) -> Result<&TeamMemberState, Missing> {
        self.team_members
            .get(code)
            .ok_or_else(|| Missing::TeamMember(code.to_owned()))
    }

    /// Applies `change` to team member `code` at `now`.
    pub(crate) fn change_team_member(
        &mut self,
        code: &str,
        change: TeamMemberChange,
        now: Timestamp,
    ) -> Result<(), Missing> {
        let member = self
            .team_members
            .get_mut(code)
            .ok_or_else(|| Missing::TeamMember(code.to_owned()))?;
        if change.password {
            member.password_changed_at = Some(now);
        }
        if let Some(permissions) = change.permissions {
            member.permissions = permissions;
        }
        member.updated_at = now;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(seed: TeamMember) -> TeamMemberState {
        TeamMemberState::from_seed(&seed, Timestamp::UNIX_EPOCH).expect("valid seed")
    }

    #[test]
    fn the_record_has_exactly_the_documented_fields() {
        let record = member(TeamMember::default()).record();
        let members = record.as_object().expect("object");
        for field in TEAM_MEMBER_RECORD_FIELDS {
            assert!(members.contains_key(field), "missing {field}");
        }
        assert_eq!(members.len(), TEAM_MEMBER_RECORD_FIELDS.len());
        assert_eq!(record["type"], "TeamMember");
        assert_eq!(record["status_detail"], "customer");
    }

    #[test]
    fn security_fields_render_as_booleans_and_string_arrays() {
        let record = member(TeamMember {
            otp: true,
            api_access_blocked: true,
            enabled: false,
            allow_nets: vec![
                "192.0.2.7/32".parse().expect("net"),
                "10.0.0.0/8".parse().expect("net"),
            ],
            permissions: vec!["api".into(), "delivery".into()],
            ..TeamMember::default()
        })
        .record();
        assert_eq!(record["otp"], true);
        assert_eq!(record["api_access_blocked"], true);
        assert_eq!(record["status"], "disabled");
        assert_eq!(record["allow_nets"], json!(["192.0.2.7", "10.0.0.0/8"]));
        assert_eq!(record["permissions"], json!(["api", "delivery"]));
    }

    #[test]
    fn the_fullname_joins_the_names_without_stray_spaces() {
        let mut m = member(TeamMember::default());
        m.firstname = "Laura".into();
        m.lastname = "Verdi".into();
        assert_eq!(m.fullname(), "Laura Verdi");
        m.lastname = String::new();
        assert_eq!(m.fullname(), "Laura");
    }

    #[test]
    fn passwords_need_eight_characters_a_letter_a_digit_and_the_same_confirmation() {
        let ok = |p: &str| check_password(Some(p), Some(p));
        assert_eq!(ok("abcdefg1"), Ok(()));
        assert_eq!(ok("àbcdefg1"), Ok(()), "any letter counts");
        assert_eq!(ok("abcdef1"), Err(PasswordProblem::TooShort));
        assert_eq!(ok("abcdefgh"), Err(PasswordProblem::NoDigit));
        assert_eq!(ok("12345678"), Err(PasswordProblem::NoLetter));
        assert_eq!(
            ok(&format!("a1{}", "x".repeat(TEAM_MEMBER_PASSWORD_MAX_CHARS))),
            Err(PasswordProblem::TooLong)
        );
        assert_eq!(
            check_password(Some("abcdefg1"), Some("abcdefg2")),
            Err(PasswordProblem::ConfirmationDiffers)
        );
        assert_eq!(
            check_password(Some("abcdefg1"), None),
            Err(PasswordProblem::ConfirmationMissing)
        );
        assert_eq!(
            check_password(None, Some("abcdefg1")),
            Err(PasswordProblem::ConfirmationAlone)
        );
        assert_eq!(check_password(None, None), Ok(()));
    }

    #[test]
    fn password_messages_never_contain_the_password() {
        for problem in [
            PasswordProblem::TooShort,
            PasswordProblem::TooLong,
            PasswordProblem::NoLetter,
            PasswordProblem::NoDigit,
            PasswordProblem::ConfirmationMissing,
            PasswordProblem::ConfirmationDiffers,
            PasswordProblem::ConfirmationAlone,
        ] {
            assert!(problem.message().contains("`password"), "{problem:?}");
        }
    }

    #[test]
    fn permission_lists_are_deduplicated_and_bounded() {
        assert_eq!(
            check_permissions(["api", "delivery", "api"]),
            Ok(vec!["api".to_owned(), "delivery".to_owned()])
        );
        assert_eq!(check_permissions([]), Ok(vec![]));
        let error = check_permissions(["api", "no spaces"]).expect_err("bad key");
        assert!(error.contains("item 1"), "{error}");
        assert!(check_permissions([""]).is_err());
        let long = "k".repeat(PERMISSION_KEY_MAX_CHARS + 1);
        assert!(check_permissions([long.as_str()]).is_err());
        let many: Vec<String> = (0..=TEAM_MEMBER_MAX_PERMISSIONS)
            .map(|i| format!("p{i}"))
            .collect();
        assert!(check_permissions(many.iter().map(String::as_str)).is_err());
        assert!(check_permissions(many[1..].iter().map(String::as_str)).is_ok());
    }

    #[test]
    fn bad_seeds_are_refused_with_a_reason() {
        for (seed, needle) in [
            (
                TeamMember {
                    code: "T12".into(),
                    ..TeamMember::default()
                },
                "`T` followed by 9 digits",
            ),
            (
                TeamMember {
                    email_address: "nobody".into(),
                    ..TeamMember::default()
                },
                "email_address",
            ),
            (
                TeamMember {
                    timezone: "Europe/Atlantis".into(),
                    ..TeamMember::default()
                },
                "Europe/Atlantis",
            ),
            (
                TeamMember {
                    permissions: vec!["ok".into(), "not ok".into()],
                    ..TeamMember::default()
                },
                "permissions",
            ),
        ] {
            let error = TeamMemberState::from_seed(&seed, Timestamp::UNIX_EPOCH)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(error.contains(needle), "{error}");
        }
    }

    #[test]
    fn a_change_sets_the_permissions_and_dates_the_password() {
        let mut world = World::default();
        world
            .insert_team_member(&TeamMember::default(), Timestamp::UNIX_EPOCH)
            .expect("insert");
        assert!(
            world
                .insert_team_member(&TeamMember::default(), Timestamp::UNIX_EPOCH)
                .is_err(),
            "a code is configured once"
        );
        let later = shift(Timestamp::UNIX_EPOCH, SignedDuration::from_hours(1));
        let code = TeamMember::default().code;
        world
            .change_team_member(
                &code,
                TeamMemberChange {
                    password: true,
                    permissions: Some(vec!["api".into()]),
                },
                later,
            )
            .expect("change");
        let m = world.team_member(&code).expect("member");
        assert_eq!(m.permissions, ["api"]);
        assert_eq!(m.password_changed_at, Some(later));
        assert_eq!(m.updated_at, later);
        assert_eq!(
            world.change_team_member("T999999999", TeamMemberChange::default(), later),
            Err(Missing::TeamMember("T999999999".into()))
        );
    }
}
