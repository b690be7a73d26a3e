//! Series of the mail-tracing collectors: the dashboard (per view) and the daily statistics
//! (per account and per sending domain).

use std::fmt;
use std::time::Duration;

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;

use super::labels::{
    AccountDomainStatusLabels, AccountStatusLabels, Owner, TenantLabel, Value, ViewAccountLabels,
    ViewGroupLabels, ViewLabels, ViewStatusLabels,
};
use super::{gauges, refreshed, single};
use crate::collector::tracemail_daily::DailyData;
use crate::collector::tracemail_dashboard::DashboardData;
use crate::config::View;
use crate::upstream::model::{Counts, Dashboard};

/// One sample per name of the counts that `pick` finds in each view's dashboard.
fn by_status(
    views: &[((TenantLabel, ViewLabels), &DashboardData)],
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

pub fn encode_dashboard(
    enc: &mut DescriptorEncoder,
    interval: Duration,
    views: &[(TenantLabel, &View, &DashboardData)],
) -> fmt::Result {
    let views: Vec<((TenantLabel, ViewLabels), &DashboardData)> = views
        .iter()
        .map(|(t, v, d)| ((t.clone(), ViewLabels::from(*v)), *d))
        .collect();
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
        let samples = by_status(&views, pick);
        gauges(
            enc,
            name,
            &refreshed(help, interval),
            None,
            samples.iter().map(|(l, v)| (l, *v)),
        )?;
    }
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
    gauges(
        enc,
        "mailhost_tracemail_status_group_messages",
        &refreshed(
            "Messages of today by status group, from the dashboard's status_groups.",
            interval,
        ),
        None,
        groups.iter().map(|(l, v)| (l, *v)),
    )?;
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
    gauges(
        enc,
        "mailhost_tracemail_top_account_messages",
        &refreshed(
            "Messages of today of the top sending Delivery accounts, from the dashboard's top lists.",
            interval,
        ),
        None,
        top.iter().map(|(l, v)| (l, *v)),
    )?;
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

pub fn encode_daily(
    enc: &mut DescriptorEncoder,
    interval: Duration,
    accounts: &[(Owner, &DailyData)],
) -> fmt::Result {
    for (name, help, pick) in [
        (
            "mailhost_delivery_current_day_messages",
            "Messages of the Delivery account today (in the configured time zone) by outcome, from the daily statistics (type=account).",
            (|d: &DailyData| d.stats.current_day.as_ref()) as fn(&DailyData) -> Option<&Counts>,
        ),
        (
            "mailhost_delivery_previous_day_messages",
            "Messages of the Delivery account yesterday by outcome, from the daily statistics (type=account).",
            |d: &DailyData| d.stats.previous_day.as_ref(),
        ),
    ] {
        let samples: Vec<(AccountStatusLabels, f64)> = accounts
            .iter()
            .flat_map(|(id, d)| {
                pick(d).into_iter().flatten().map(|(name, n)| {
                    let labels = AccountStatusLabels {
                        tenant: id.tenant.clone(),
                        account_id: id.id.clone(),
                        status: Value::from(name),
                    };
                    (labels, *n)
                })
            })
            .collect();
        gauges(
            enc,
            name,
            &refreshed(help, interval),
            None,
            samples.iter().map(|(l, v)| (l, *v)),
        )?;
    }
    let domains: Vec<(AccountDomainStatusLabels, f64)> = accounts
        .iter()
        .flat_map(|(id, d)| {
            d.domains.iter().flat_map(move |dc| {
                dc.counts.iter().map(move |(name, n)| {
                    let labels = AccountDomainStatusLabels {
                        tenant: id.tenant.clone(),
                        account_id: id.id.clone(),
                        domain: Value::from(&dc.domain),
                        status: Value::from(name),
                    };
                    (labels, *n)
                })
            })
        })
        .collect();
    gauges(
        enc,
        "mailhost_delivery_domain_current_day_messages",
        &refreshed(
            "Messages of today per sending domain and outcome, for the account's top domains by volume (type=domains-rank).",
            interval,
        ),
        None,
        domains.iter().map(|(l, v)| (l, *v)),
    )
}
