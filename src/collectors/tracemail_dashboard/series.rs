//! Series of the mail-tracing dashboard, per view.

use std::fmt;
use std::time::Duration;

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, LabelSetEncoder};
use prometheus_client::registry::Unit;

use super::model::Dashboard;
use super::{DashboardData, View};
use crate::metrics::family::{refreshed, refreshed_gauges, single};
use crate::metrics::labels::{Owner, TenantLabel, Value, write_label};
use crate::upstream::model::counts::Counts;

/// One sample per name of the counts that `pick` finds in each view's dashboard.
fn by_status(
    views: &LabelledViews<'_>,
    pick: impl Fn(&Dashboard) -> Option<&Counts>,
) -> Vec<(ViewStatusLabels, f64)> {
    views
        .iter()
        .flat_map(|((tenant, view), d)| {
            pick(&d.dashboard).into_iter().flatten().map(|(name, n)| {
                let labels = ViewStatusLabels {
                    tenant: tenant.clone(),
                    view: view.clone(),
                    status: Value::from(name),
                };
                (labels, *n)
            })
        })
        .collect()
}

/// Each view with its labels.
type LabelledViews<'a> = [((TenantLabel, ViewLabels), &'a DashboardData)];

pub fn encode(
    enc: &mut DescriptorEncoder,
    interval: Duration,
    views: &[(Owner, &View, &DashboardData)],
) -> fmt::Result {
    let views: Vec<((TenantLabel, ViewLabels), &DashboardData)> = views
        .iter()
        .map(|(o, v, d)| ((o.tenant.clone(), ViewLabels::from(*v)), *d))
        .collect();
    encode_by_status(enc, interval, &views)?;
    encode_status_groups(enc, interval, &views)?;
    encode_top_accounts(enc, interval, &views)?;
    encode_day_start(enc, interval, &views)
}

/// The day's messages by outcome: today, yesterday and the overview.
fn encode_by_status(
    enc: &mut DescriptorEncoder,
    interval: Duration,
    views: &LabelledViews<'_>,
) -> fmt::Result {
    for (name, help, pick) in [
        (
            "mailhost_tracemail_current_day_messages",
            "Messages of today (in the configured time zone) by outcome, from the dashboard's daily_activity; views filtered by account or domain carry that label.",
            (|d: &Dashboard| d.current_day.as_ref()) as fn(&Dashboard) -> Option<&Counts>,
        ),
        (
            "mailhost_tracemail_previous_day_messages",
            "Messages of yesterday (in the configured time zone) by outcome, from the dashboard's daily_activity.",
            |d: &Dashboard| d.previous_day.as_ref(),
        ),
        (
            "mailhost_tracemail_overview_messages",
            "Messages of today by outcome, from the dashboard's overview.",
            |d: &Dashboard| d.overview.as_ref(),
        ),
    ] {
        let samples = by_status(views, pick);
        refreshed_gauges(enc, name, help, interval, &samples)?;
    }
    Ok(())
}

/// The day's messages by status group.
fn encode_status_groups(
    enc: &mut DescriptorEncoder,
    interval: Duration,
    views: &LabelledViews<'_>,
) -> fmt::Result {
    let groups: Vec<(ViewGroupLabels, f64)> = views
        .iter()
        .flat_map(|((tenant, view), d)| {
            d.dashboard.status_groups.iter().flatten().map(|(name, n)| {
                let labels = ViewGroupLabels {
                    tenant: tenant.clone(),
                    view: view.clone(),
                    group: Value::from(name),
                };
                (labels, *n)
            })
        })
        .collect();
    refreshed_gauges(
        enc,
        "mailhost_tracemail_status_group_messages",
        "Messages of today by status group, from the dashboard's status_groups.",
        interval,
        &groups,
    )
}

/// The day's messages of the top sending accounts.
fn encode_top_accounts(
    enc: &mut DescriptorEncoder,
    interval: Duration,
    views: &LabelledViews<'_>,
) -> fmt::Result {
    let top: Vec<(ViewAccountLabels, f64)> = views
        .iter()
        .flat_map(|((tenant, view), d)| {
            d.dashboard.top_accounts.iter().map(|(account, n)| {
                let labels = ViewAccountLabels {
                    tenant: tenant.clone(),
                    view: view.clone(),
                    account_id: Value::from(account),
                };
                (labels, *n)
            })
        })
        .collect();
    refreshed_gauges(
        enc,
        "mailhost_tracemail_top_account_messages",
        "Messages of today of the top sending Delivery accounts, from the dashboard's top lists.",
        interval,
        &top,
    )
}

/// The start of today in the collector's zone.
fn encode_day_start(
    enc: &mut DescriptorEncoder,
    interval: Duration,
    views: &LabelledViews<'_>,
) -> fmt::Result {
    // Every view shares the collector's zone: one series.
    if let Some((_, d)) = views.first() {
        single(
            enc,
            "mailhost_tracemail_day_start_timestamp",
            &refreshed(
                "Start of today in the dashboard collector's time zone: the day the current_day series count.",
                interval,
            ),
            Some(&Unit::Seconds),
            d.day_start,
        )?;
    }
    Ok(())
}

/// The labels a dashboard view adds: none for the whole customer, `account` or `domain` for a
/// filter.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ViewLabels {
    All,
    Account(Value),
    Domain(Value),
}

impl From<&View> for ViewLabels {
    fn from(view: &View) -> Self {
        match view {
            View::All => ViewLabels::All,
            View::Account(id) => ViewLabels::Account(Value::from(id.to_string())),
            View::Domain(d) => ViewLabels::Domain(Value::from(d)),
        }
    }
}

impl EncodeLabelSet for ViewLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        let (name, value) = match self {
            ViewLabels::All => return Ok(()),
            ViewLabels::Account(v) => ("account", v),
            ViewLabels::Domain(v) => ("domain", v),
        };
        write_label(encoder, name, value)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ViewStatusLabels {
    #[prometheus(flatten)]
    pub tenant: TenantLabel,
    #[prometheus(flatten)]
    pub view: ViewLabels,
    pub status: Value,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ViewGroupLabels {
    #[prometheus(flatten)]
    pub tenant: TenantLabel,
    #[prometheus(flatten)]
    pub view: ViewLabels,
    pub group: Value,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ViewAccountLabels {
    #[prometheus(flatten)]
    pub tenant: TenantLabel,
    #[prometheus(flatten)]
    pub view: ViewLabels,
    pub account_id: Value,
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode_registry;
    use prometheus_client::metrics::family::Family;
    use prometheus_client::metrics::gauge::Gauge;
    use prometheus_client::registry::Registry;

    use super::*;

    #[test]
    fn a_view_adds_no_label_for_the_whole_customer_and_its_filter_otherwise() {
        let family = Family::<ViewStatusLabels, Gauge>::default();
        for view in [View::All, View::Domain("shop.example".into())] {
            let labels = ViewStatusLabels {
                tenant: TenantLabel::default(),
                view: ViewLabels::from(&view),
                status: Value::from("sent"),
            };
            family.get_or_create(&labels).set(1);
        }
        let mut registry = Registry::default();
        registry.register("x", "h", family);
        let mut out = String::new();
        encode_registry(&mut out, &registry).unwrap();
        assert!(out.contains("x{status=\"sent\"} 1"), "{out}");
        assert!(
            out.contains("x{domain=\"shop.example\",status=\"sent\"} 1"),
            "{out}"
        );
    }
}
