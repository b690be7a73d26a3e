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

/// The families of a view's figures by name: the family's name and help, the label that names
/// a figure, and where the figures are in the view's dashboard.
type Figures = (
    &'static str,
    &'static str,
    &'static str,
    fn(&Dashboard) -> Option<&Counts>,
);

const FIGURES: &[Figures] = &[
    (
        "mailhost_tracemail_current_day_messages",
        "Messages of today (in the configured time zone) by outcome, from the dashboard's daily_activity; views filtered by account or domain carry that label.",
        "status",
        |d| d.current_day.as_ref(),
    ),
    (
        "mailhost_tracemail_previous_day_messages",
        "Messages of yesterday (in the configured time zone) by outcome, from the dashboard's daily_activity.",
        "status",
        |d| d.previous_day.as_ref(),
    ),
    (
        "mailhost_tracemail_overview_messages",
        "Messages of today by outcome, from the dashboard's overview.",
        "status",
        |d| d.overview.as_ref(),
    ),
    (
        "mailhost_tracemail_status_group_messages",
        "Messages of today by status group, from the dashboard's status_groups.",
        "group",
        |d| d.status_groups.as_ref(),
    ),
    (
        "mailhost_tracemail_top_account_messages",
        "Messages of today of the top sending Delivery accounts, from the dashboard's top lists.",
        "account_id",
        |d| Some(&d.top_accounts),
    ),
];

pub fn encode(
    enc: &mut DescriptorEncoder,
    interval: Duration,
    views: &[(Owner, &View, &DashboardData)],
) -> fmt::Result {
    let views: Vec<(&TenantLabel, ViewLabels, &DashboardData)> = views
        .iter()
        .map(|(o, v, d)| (&o.tenant, ViewLabels::from(*v), *d))
        .collect();
    for (name, help, key, pick) in FIGURES {
        let samples: Vec<(FigureLabels, f64)> = views
            .iter()
            .flat_map(|(tenant, view, d)| {
                pick(&d.dashboard).into_iter().flatten().map(|(figure, n)| {
                    let labels = FigureLabels {
                        tenant,
                        view,
                        key,
                        figure: Value::from(figure),
                    };
                    (labels, *n)
                })
            })
            .collect();
        refreshed_gauges(enc, name, help, interval, &samples)?;
    }
    // Every view shares the collector's zone: one series of the start of today.
    if let Some((_, _, d)) = views.first() {
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

/// The labels of one figure of a view: the view's, and the figure's name under `key`
/// (`status`, `group` or `account_id`), borrowed from the views.
#[derive(Debug)]
struct FigureLabels<'a> {
    tenant: &'a TenantLabel,
    view: &'a ViewLabels,
    key: &'static str,
    figure: Value,
}

impl EncodeLabelSet for FigureLabels<'_> {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> fmt::Result {
        self.tenant.encode(encoder)?;
        self.view.encode(encoder)?;
        write_label(encoder, self.key, &self.figure)
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode_registry;
    use prometheus_client::registry::Registry;

    use super::*;

    /// The series of one figure, `sent`, of the whole customer's view and a domain's.
    #[derive(Debug)]
    struct TwoViews;

    impl prometheus_client::collector::Collector for TwoViews {
        fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
            let data = DashboardData {
                dashboard: Dashboard {
                    current_day: Some(vec![("sent".to_owned(), 1.0)]),
                    ..Dashboard::default()
                },
                day_start: 0.0,
            };
            let (all, domain) = (View::All, View::Domain("shop.example".into()));
            let owner = Owner {
                tenant: TenantLabel::default(),
                id: Value::from("all"),
            };
            let views = [(owner.clone(), &all, &data), (owner, &domain, &data)];
            encode(&mut enc, Duration::from_secs(60), &views)
        }
    }

    #[test]
    fn a_view_adds_no_label_for_the_whole_customer_and_its_filter_otherwise() {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(TwoViews));
        let mut out = String::new();
        encode_registry(&mut out, &registry).unwrap();
        let x = "mailhost_tracemail_current_day_messages";
        assert!(out.contains(&format!("{x}{{status=\"sent\"}} 1")), "{out}");
        assert!(
            out.contains(&format!("{x}{{domain=\"shop.example\",status=\"sent\"}} 1")),
            "{out}"
        );
    }
}
