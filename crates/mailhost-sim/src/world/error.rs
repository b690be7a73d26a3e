//! Why a configuration (or a seed added later) cannot become simulated state.

/// A [`crate::SimConfig`] that cannot be turned into a simulator.
#[derive(Debug, thiserror::Error)]
pub enum SimConfigError {
    #[error("account {0} is configured twice")]
    DuplicateAccount(i32),
    #[error("account {account}: allow_nets entry {value:?} is not an IP address or CIDR network")]
    BadAccountNet { account: i32, value: String },
    #[error(
        "account {account}, token {token}: allow_nets entry {value:?} is not an IP address or CIDR network"
    )]
    BadTokenNet {
        account: i32,
        token: i32,
        value: String,
    },
    #[error("account {account}: token id {token} is configured twice")]
    DuplicateTokenId { account: i32, token: i32 },
    #[error("account {account}: a send token is used by more than one token entry")]
    DuplicateToken { account: i32 },
    #[error("account {account}: a send token must not be empty")]
    EmptyToken { account: i32 },
    #[error("account {0}: plan_expires_in or delete_in is too large")]
    DateOutOfRange(i32),
    #[error(
        "account {account}: timezone {value:?} is not an IANA time zone name (e.g. \"Europe/Rome\")"
    )]
    BadTimeZone { account: i32, value: String },
    #[error("migration {code:?}: {reason}")]
    BadMigration { code: String, reason: String },
    #[error("mailbox {code:?}: {reason}")]
    BadMailbox { code: String, reason: String },
    #[error("team member {code:?}: {reason}")]
    BadTeamMember { code: String, reason: String },
    /// The reason never contains the token.
    #[error("rate_limits entry {index}: {reason}")]
    BadRateLimit { index: usize, reason: String },
    /// The reason never contains the token.
    #[error("route_rate_limits entry {index}: {reason}")]
    BadRouteRateLimit { index: usize, reason: String },
}
