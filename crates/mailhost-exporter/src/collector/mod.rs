//! Collectors: one per API area. A collector knows which upstream calls to make for its
//! targets and turns the answers into plain data for the snapshot; it knows nothing of the
//! exposition format. The scheduler that runs them lives in [`crate::scraper`].

pub mod delivery_account;
pub mod mailbox;
pub mod migration;
pub mod tracemail_daily;
pub mod tracemail_dashboard;

use std::fmt;
use std::sync::Arc;

use jiff::Timestamp;

use crate::config::{Config, DailyConfig, DashboardConfig, MailboxTarget, Schedule, View};
use crate::labels::{CollectorName, Endpoint, FailureReason};
use crate::upstream::model::ParseProblem;
use crate::upstream::{Client, UpstreamError};

/// One thing a collector fetches on each run.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    DeliveryAccount(i32),
    DashboardView(View),
    DailyAccount(i32),
    Migration(String),
    Mailbox(MailboxTarget),
}

impl fmt::Display for Target {
    /// The value of the `target` label.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::DeliveryAccount(id) | Target::DailyAccount(id) => write!(f, "{id}"),
            Target::DashboardView(View::All) => f.write_str("all"),
            Target::DashboardView(View::Account(id)) => write!(f, "account:{id}"),
            Target::DashboardView(View::Domain(d)) => write!(f, "domain:{d}"),
            Target::Migration(code) => f.write_str(code),
            Target::Mailbox(m) => f.write_str(&m.mailbox),
        }
    }
}

/// What one target's successful collection produced.
#[derive(Clone, Debug, PartialEq)]
pub enum TargetData {
    DeliveryAccount(delivery_account::AccountData),
    Dashboard(tracemail_dashboard::DashboardData),
    Daily(tracemail_daily::DailyData),
    Migration(migration::MigrationData),
    Mailbox(mailbox::MailboxData),
}

/// Settings a collector needs beyond its targets.
#[derive(Clone, Debug)]
pub enum Settings {
    None,
    Dashboard(Arc<DashboardConfig>),
    Daily(Arc<DailyConfig>),
}

impl Settings {
    /// Whether a collector running with `self` would fetch its targets exactly as with `other`
    /// (the target lists themselves are not compared).
    pub fn same_as(&self, other: &Settings) -> bool {
        match (self, other) {
            (Settings::None, Settings::None) => true,
            (Settings::Dashboard(a), Settings::Dashboard(b)) => {
                a.timezone_name == b.timezone_name
                    && a.date_format == b.date_format
                    && a.limit == b.limit
            }
            (Settings::Daily(a), Settings::Daily(b)) => {
                a.timezone == b.timezone
                    && a.date_format == b.date_format
                    && a.top_domains == b.top_domains
            }
            _ => false,
        }
    }
}

/// A collector as configured: its schedule, targets and settings.
#[derive(Clone, Debug)]
pub struct CollectorSpec {
    pub name: CollectorName,
    pub schedule: Schedule,
    pub targets: Vec<Target>,
    pub settings: Settings,
}

impl CollectorSpec {
    /// The enabled collectors of a config, in a stable order.
    pub fn from_config(config: &Config) -> Vec<CollectorSpec> {
        let c = &config.collectors;
        let mut specs = Vec::new();
        if let Some(d) = &c.delivery_account {
            specs.push(CollectorSpec {
                name: CollectorName::DeliveryAccount,
                schedule: d.schedule,
                targets: d
                    .accounts
                    .iter()
                    .map(|id| Target::DeliveryAccount(*id))
                    .collect(),
                settings: Settings::None,
            });
        }
        if let Some(d) = &c.tracemail_dashboard {
            specs.push(CollectorSpec {
                name: CollectorName::TracemailDashboard,
                schedule: d.schedule,
                targets: d.views.iter().cloned().map(Target::DashboardView).collect(),
                settings: Settings::Dashboard(Arc::new(d.clone())),
            });
        }
        if let Some(d) = &c.tracemail_daily {
            specs.push(CollectorSpec {
                name: CollectorName::TracemailDaily,
                schedule: d.schedule,
                targets: d
                    .accounts
                    .iter()
                    .map(|id| Target::DailyAccount(*id))
                    .collect(),
                settings: Settings::Daily(Arc::new(d.clone())),
            });
        }
        if let Some(m) = &c.migration {
            specs.push(CollectorSpec {
                name: CollectorName::Migration,
                schedule: m.schedule,
                targets: m
                    .migrations
                    .iter()
                    .cloned()
                    .map(Target::Migration)
                    .collect(),
                settings: Settings::None,
            });
        }
        if let Some(m) = &c.mailbox {
            specs.push(CollectorSpec {
                name: CollectorName::Mailbox,
                schedule: m.schedule,
                targets: m.mailboxes.iter().cloned().map(Target::Mailbox).collect(),
                settings: Settings::None,
            });
        }
        specs
    }

    /// The upstream endpoints this collector calls (for zero-initialised counters).
    pub fn endpoints(&self) -> &'static [Endpoint] {
        match self.name {
            CollectorName::DeliveryAccount => &[Endpoint::DeliveryAccount],
            CollectorName::TracemailDashboard => &[Endpoint::TracemailDashboard],
            CollectorName::TracemailDaily => {
                &[Endpoint::TracemailDaily, Endpoint::TracemailDomainsRank]
            }
            CollectorName::Migration => &[Endpoint::MigrationStats],
            CollectorName::Mailbox => &[Endpoint::EmailAccount],
        }
    }
}

/// Where "now" comes from: the system clock, or in tests the simulator's, so that a midnight
/// rollover can be driven without waiting for one.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> Timestamp + Send + Sync>);

impl Clock {
    pub fn system() -> Self {
        Clock(Arc::new(Timestamp::now))
    }

    pub fn from_fn(f: impl Fn() -> Timestamp + Send + Sync + 'static) -> Self {
        Clock(Arc::new(f))
    }

    pub fn now(&self) -> Timestamp {
        (self.0)()
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Clock")
    }
}

/// What a collector run works with.
#[derive(Clone)]
pub struct Context {
    pub client: Client,
    pub clock: Clock,
}

impl Context {
    /// Counts and logs the problems of a readable answer.
    pub fn report(&self, endpoint: Endpoint, problems: Vec<ParseProblem>) {
        for p in problems {
            self.client
                .telemetry()
                .parse_problem(endpoint, &p.path, &p.found);
        }
    }

    /// An answer that is not even the object we expected: a parse problem and a decode failure.
    pub fn unreadable(
        &self,
        endpoint: Endpoint,
        problem: ParseProblem,
        what: &str,
    ) -> UpstreamError {
        let telemetry = self.client.telemetry();
        telemetry.parse_problem(endpoint, &problem.path, &problem.found);
        telemetry.observe_failure(endpoint, FailureReason::Decode);
        UpstreamError::new(
            FailureReason::Decode,
            format!("{what} is not a JSON object"),
        )
    }
}

/// Fetches one target.
pub async fn collect(
    ctx: &Context,
    settings: &Settings,
    target: &Target,
) -> Result<TargetData, UpstreamError> {
    match (target, settings) {
        (Target::DeliveryAccount(id), _) => delivery_account::collect(ctx, *id)
            .await
            .map(TargetData::DeliveryAccount),
        (Target::DashboardView(view), Settings::Dashboard(cfg)) => {
            tracemail_dashboard::collect(ctx, cfg, view)
                .await
                .map(TargetData::Dashboard)
        }
        (Target::DailyAccount(id), Settings::Daily(cfg)) => tracemail_daily::collect(ctx, cfg, *id)
            .await
            .map(TargetData::Daily),
        (Target::Migration(code), _) => migration::collect(ctx, code)
            .await
            .map(TargetData::Migration),
        (Target::Mailbox(m), _) => mailbox::collect(ctx, m).await.map(TargetData::Mailbox),
        (target, _) => unreachable!("target {target} built without its settings"),
    }
}
