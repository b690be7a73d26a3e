//! Self-metrics: counters, a histogram and gauges, rendered from the same model in both formats.

use std::time::Duration;

use mailhost_exporter::engine::spec::CollectorName;
use mailhost_exporter::metrics::format::Format;
use mailhost_exporter::metrics::self_metrics::Telemetry;
use mailhost_exporter::tenant::TenantName;
use mailhost_exporter::upstream::endpoint::Endpoint;
use mailhost_exporter::upstream::error::FailureReason;
use mailhost_exporter::upstream::observe::Observer as _;
use proptest::prelude::*;

use super::{check, config};

/// Every endpoint of every collector.
fn endpoints() -> Vec<Endpoint> {
    CollectorName::ALL
        .iter()
        .flat_map(|c| c.endpoints())
        .copied()
        .collect()
}

/// One thing the exporter accounts for.
#[derive(Clone, Debug)]
pub enum Event {
    Request(Endpoint, Option<u16>, Duration),
    Failure(Endpoint, FailureReason),
    Retry(Endpoint, FailureReason),
    OpenCircuits(Endpoint, usize),
    ParseProblem(Endpoint, String),
    Reload(bool),
}

pub fn event() -> impl Strategy<Value = Event> {
    let endpoint = prop::sample::select(endpoints());
    let reason = prop::sample::select(&FailureReason::ALL[..]);
    prop_oneof![
        (
            endpoint.clone(),
            prop::option::of(100u16..600),
            (0u64..30_000).prop_map(Duration::from_millis)
        )
            .prop_map(|(e, c, d)| Event::Request(e, c, d)),
        (endpoint.clone(), reason.clone()).prop_map(|(e, r)| Event::Failure(e, r)),
        (endpoint.clone(), reason).prop_map(|(e, r)| Event::Retry(e, r)),
        (endpoint.clone(), 0usize..50).prop_map(|(e, n)| Event::OpenCircuits(e, n)),
        (endpoint, "[a-z_.\\[\\]0-9]{0,20}").prop_map(|(e, p)| Event::ParseProblem(e, p)),
        any::<bool>().prop_map(Event::Reload),
    ]
}

/// The self-metrics after `events`, in both formats as a scrape ends them.
pub fn render_self(events: &[Event]) -> (String, String) {
    let t = Telemetry::new(&endpoints()[..2]);
    for e in events.iter().cloned() {
        match e {
            Event::Request(e, code, d) => t.observe_request(e, code, d),
            Event::Failure(e, r) => t.observe_failure(&TenantName::default(), e, r),
            Event::Retry(e, r) => t.observe_retry(&TenantName::default(), e, r),
            Event::OpenCircuits(e, n) => t.set_open_circuits(&TenantName::default(), e, n),
            Event::ParseProblem(e, path) => t.parse_problem(e, &path, "string"),
            Event::Reload(ok) => t.observe_reload(ok),
        }
    }
    (
        t.metrics().render(Format::Classic),
        t.metrics().render(Format::OpenMetrics),
    )
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_self_metrics_carry_the_same_samples_in_both_formats(
        events in prop::collection::vec(event(), 0..40)
    ) {
        let (classic, openmetrics) = render_self(&events);
        check(&classic, &openmetrics)?;
        let counters = classic.lines().filter(|l| l.starts_with("# TYPE ") && l.ends_with(" counter"));
        for line in counters {
            prop_assert!(line.split(' ').nth(2).is_some_and(|n| n.ends_with("_total")), "{line}");
        }
    }
}
