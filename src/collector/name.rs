//! The names of the collectors, as the `collector` label and the logs show them.

use std::fmt;

/// A collector: one API area, with its own switch, interval and health series.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CollectorName {
    DeliveryAccount,
    TracemailDashboard,
    TracemailDaily,
    Migration,
    Mailbox,
}

impl CollectorName {
    pub const ALL: [CollectorName; 5] = [
        CollectorName::DeliveryAccount,
        CollectorName::TracemailDashboard,
        CollectorName::TracemailDaily,
        CollectorName::Migration,
        CollectorName::Mailbox,
    ];

    /// The collectors whose targets are Delivery accounts, which `/probe` may add to.
    pub fn polls_accounts(self) -> bool {
        matches!(
            self,
            CollectorName::DeliveryAccount | CollectorName::TracemailDaily
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CollectorName::DeliveryAccount => "delivery_account",
            CollectorName::TracemailDashboard => "tracemail_dashboard",
            CollectorName::TracemailDaily => "tracemail_daily",
            CollectorName::Migration => "migration",
            CollectorName::Mailbox => "mailbox",
        }
    }
}

impl fmt::Display for CollectorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
