//! Every collector at once: any bodies of every collector's targets render from one snapshot as
//! valid, finite exposition, promtool accepts hundreds of them, and any body is unwrapped from its
//! envelope as the client does.

use mailhost_exporter::upstream::error::FailureReason;
use mailhost_exporter::upstream::{Fields, first_resource, resources};
use proptest::prelude::*;
use proptest::strategy::ValueTree as _;
use proptest::test_runner::TestRunner;
use serde_json::Value;

use super::json::{envelope, value};
use super::self_metrics::{event, render_self};
use super::{Specs, bytes, check, config, one_each, render};
use super::{delivery_account, mailbox, migration, tracemail_daily, tracemail_dashboard};
use crate::helpers::{promtool, promtool_check_metrics};

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_body_is_unwrapped_from_its_envelope_without_panicking(body in value()) {
        let all = resources(&bytes(&body), Fields::All);
        let first = first_resource(&bytes(&body), Fields::All);
        match (all, first) {
            (Ok(items), Ok(r)) => prop_assert_eq!(&items[0], &r),
            (Ok(items), Err(e)) => {
                prop_assert!(items.is_empty());
                prop_assert_eq!(e.reason, FailureReason::Decode);
            }
            (Err(a), Err(b)) => {
                prop_assert_eq!(a.reason, FailureReason::Decode);
                prop_assert_eq!(b.reason, FailureReason::Decode);
            }
            (Err(_), Ok(_)) => prop_assert!(false, "first_resource read what resources refused"),
        }
    }
}

/// Bodies for every collector's targets, for one exposition holding them all.
#[derive(Debug, Clone)]
struct Batch {
    delivery: Vec<Value>,
    dashboard: Vec<Value>,
    daily: Vec<(Value, Value)>,
    migration: Vec<Value>,
    mailbox: Vec<Value>,
}

fn batch(n: usize) -> impl Strategy<Value = Batch> {
    let vec = |s| prop::collection::vec(s, n);
    (
        vec(envelope(delivery_account::DELIVERY).boxed()),
        prop::collection::vec(envelope(tracemail_dashboard::DASHBOARD), 3),
        prop::collection::vec(
            (
                envelope(tracemail_daily::DAY),
                envelope(tracemail_daily::DAY),
            ),
            n,
        ),
        vec(migration::stats_body().boxed()),
        vec(envelope(mailbox::MAILBOX).boxed()),
    )
        .prop_map(|(delivery, dashboard, daily, migration, mailbox)| Batch {
            delivery,
            dashboard,
            daily,
            migration,
            mailbox,
        })
}

fn render_batch(specs: &Specs, b: Batch) -> (String, String) {
    let daily = b.daily.into_iter().map(|(d, r)| vec![d, r]).collect();
    render(&[
        (&specs.delivery, one_each(b.delivery)),
        (&specs.dashboard, one_each(b.dashboard)),
        (&specs.daily, daily),
        (&specs.migration, one_each(b.migration)),
        (&specs.mailbox, one_each(b.mailbox)),
    ])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..config() })]

    #[test]
    fn every_collector_in_one_snapshot_renders_as_valid_finite_exposition(b in batch(4)) {
        let specs = Specs::new(4);
        let (classic, openmetrics) = render_batch(&specs, b);
        check(&classic, &openmetrics)?;
    }
}

/// Samples of a strategy from a fixed seed, so that a promtool complaint can be replayed.
fn samples<S: Strategy>(strategy: S, n: usize) -> Vec<S::Value> {
    let mut runner = TestRunner::deterministic();
    (0..n)
        .map(|_| strategy.new_tree(&mut runner).unwrap().current())
        .collect()
}

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn promtool_accepts_the_exposition_of_hundreds_of_generated_bodies() {
    let Some(promtool) = promtool() else { return };
    // 16 expositions of 20 targets per collector: 320 bodies per collector, 16 promtool runs.
    let per = 20;
    let specs = Specs::new(per);
    let mut failures = Vec::new();
    for (i, b) in samples(batch(per), 16).into_iter().enumerate() {
        let (classic, _) = render_batch(&specs, b);
        // promtool lints names and help too, not only syntax: any remark is a failure.
        if let Err(report) = promtool_check_metrics(promtool, &classic) {
            failures.push(format!("batch {i}: {report}"));
        }
    }
    for (i, events) in samples(prop::collection::vec(event(), 0..60), 4)
        .into_iter()
        .enumerate()
    {
        let (classic, _) = render_self(&events);
        if let Err(report) = promtool_check_metrics(promtool, &classic) {
            failures.push(format!("self-metrics {i}: {report}"));
        }
    }
    assert!(
        failures.is_empty(),
        "promtool check metrics:\n{}",
        failures.join("\n")
    );
}
