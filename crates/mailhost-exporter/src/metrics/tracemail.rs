//! Series of the mail-tracing collectors: the dashboard (per view) and the daily statistics
//! (per account and per sending domain).

use std::time::Duration;

use super::gauge;
use crate::collector::tracemail_daily::DailyData;
use crate::collector::tracemail_dashboard::DashboardData;
use crate::config::View;
use crate::exposition::{Family, Label, Unit};
use crate::upstream::model::Counts;

/// The labels a view adds: none for the whole customer, `account` or `domain` for a filter.
fn view_labels(view: &View) -> Vec<Label> {
    match view {
        View::All => vec![],
        View::Account(id) => vec![("account", id.to_string())],
        View::Domain(d) => vec![("domain", d.clone())],
    }
}

/// One sample per name of `counts`, labelled `base` plus `name_label`.
fn push_counts(f: &mut Family, base: &[Label], name_label: &'static str, counts: &Counts) {
    for (name, n) in counts {
        let mut labels = base.to_vec();
        labels.push((name_label, name.clone()));
        f.push(labels, *n);
    }
}

pub fn dashboard_families(interval: Duration, views: &[(&View, &DashboardData)]) -> Vec<Family> {
    let mut current = gauge(
        "mailhost_tracemail_current_day_messages",
        "Messages of today (in the configured time zone) by outcome, from the dashboard's daily_activity; views filtered by account or domain carry that label.",
        interval,
    );
    let mut previous = gauge(
        "mailhost_tracemail_previous_day_messages",
        "Messages of yesterday (in the configured time zone) by outcome, from the dashboard's daily_activity.",
        interval,
    );
    let mut overview = gauge(
        "mailhost_tracemail_overview_messages",
        "Messages of today by outcome, from the dashboard's overview.",
        interval,
    );
    let mut groups = gauge(
        "mailhost_tracemail_status_group_messages",
        "Messages of today by status group, from the dashboard's status_groups.",
        interval,
    );
    let mut top = gauge(
        "mailhost_tracemail_top_account_messages",
        "Messages of today of the top sending Delivery accounts, from the dashboard's top lists.",
        interval,
    );
    let mut day_start = gauge(
        "mailhost_tracemail_day_start_timestamp",
        "Start of today in the dashboard collector's time zone: the day the current_day series count.",
        interval,
    )
    .unit(Unit::Seconds);
    for (view, d) in views {
        let base = view_labels(view);
        let dash = &d.dashboard;
        if let Some(c) = &dash.current_day {
            push_counts(&mut current, &base, "status", c);
        }
        if let Some(c) = &dash.previous_day {
            push_counts(&mut previous, &base, "status", c);
        }
        if let Some(c) = &dash.overview {
            push_counts(&mut overview, &base, "status", c);
        }
        if let Some(c) = &dash.status_groups {
            push_counts(&mut groups, &base, "group", c);
        }
        for (account, n) in &dash.top_accounts {
            let mut labels = base.clone();
            labels.push(("account_id", account.clone()));
            top.push(labels, *n);
        }
        // Every view shares the collector's zone: one series.
        if day_start.is_empty() {
            day_start.push(vec![], d.day_start);
        }
    }
    vec![current, previous, overview, groups, top, day_start]
}

pub fn daily_families(interval: Duration, accounts: &[(String, &DailyData)]) -> Vec<Family> {
    let mut current = gauge(
        "mailhost_delivery_current_day_messages",
        "Messages of the Delivery account today (in the configured time zone) by outcome, from the daily statistics (type=account).",
        interval,
    );
    let mut previous = gauge(
        "mailhost_delivery_previous_day_messages",
        "Messages of the Delivery account yesterday by outcome, from the daily statistics (type=account).",
        interval,
    );
    let mut domains = gauge(
        "mailhost_delivery_domain_current_day_messages",
        "Messages of today per sending domain and outcome, for the account's top domains by volume (type=domains-rank).",
        interval,
    );
    for (id, d) in accounts {
        let base = vec![("account_id", id.clone())];
        if let Some(c) = &d.stats.current_day {
            push_counts(&mut current, &base, "status", c);
        }
        if let Some(c) = &d.stats.previous_day {
            push_counts(&mut previous, &base, "status", c);
        }
        for dc in &d.domains {
            let labels = vec![("account_id", id.clone()), ("domain", dc.domain.clone())];
            push_counts(&mut domains, &labels, "status", &dc.counts);
        }
    }
    vec![current, previous, domains]
}
