//! Building blocks of the series every collector writes: tables of plain gauges, one gauge or
//! counter family of const samples, a help text with its refresh interval, and the label set of
//! a target.

use std::fmt;
use std::time::Duration;

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric as _};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

pub type Getter<T> = fn(&T) -> Option<f64>;

/// A table of plain gauges: name (the unit is added by the encoder), help naming the source
/// field, unit, value.
pub type GaugeTable<T> = [(&'static str, &'static str, Option<Unit>, Getter<T>)];

/// One family per row of `table`, one sample per item that has the row's value.
pub fn table<T, S: EncodeLabelSet>(
    enc: &mut DescriptorEncoder,
    table: &GaugeTable<T>,
    interval: Duration,
    items: &[(S, &T)],
) -> fmt::Result {
    for (name, help, unit, get) in table {
        gauges(
            enc,
            name,
            &refreshed(help, interval),
            unit.as_ref(),
            items.iter().filter_map(|(l, x)| get(x).map(|v| (l, v))),
        )?;
    }
    Ok(())
}

/// One gauge family of const samples, or nothing at all when it has none. A value that is not
/// finite is left out: readers never yield one, and the encoder would write it as `inf`, which
/// no parser takes.
pub fn gauges<'a, S: EncodeLabelSet + 'a>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    samples: impl IntoIterator<Item = (&'a S, f64)>,
) -> fmt::Result {
    let mut samples = samples
        .into_iter()
        .filter(|(_, v)| v.is_finite())
        .peekable();
    if samples.peek().is_none() {
        return Ok(());
    }
    let mut metric = enc.encode_descriptor(name, help, unit, MetricType::Gauge)?;
    for (labels, v) in samples {
        ConstGauge::new(v).encode(metric.encode_family(labels)?)?;
    }
    Ok(())
}

/// A collector's gauge family without unit, its help followed by the refresh interval.
pub fn refreshed_gauges<S: EncodeLabelSet>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    interval: Duration,
    samples: &[(S, f64)],
) -> fmt::Result {
    let samples = samples.iter().map(|(l, v)| (l, *v));
    gauges(enc, name, &refreshed(help, interval), None, samples)
}

/// [`refreshed_gauges`] of an info family or a state set's current state: each sample is 1.
pub fn refreshed_ones<S: EncodeLabelSet>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    interval: Duration,
    labels: &[S],
) -> fmt::Result {
    let samples = labels.iter().map(|l| (l, 1.0));
    gauges(enc, name, &refreshed(help, interval), None, samples)
}

/// One counter family of const samples (the encoder adds `_total`), or nothing at all when it
/// has none.
pub fn counters<'a, S: EncodeLabelSet + 'a>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (&'a S, u64)>,
) -> fmt::Result {
    let mut samples = samples.into_iter().peekable();
    if samples.peek().is_none() {
        return Ok(());
    }
    let mut metric = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in samples {
        ConstCounter::new(v).encode(metric.encode_family(labels)?)?;
    }
    Ok(())
}

/// A gauge family of one sample without labels.
pub fn single(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    value: f64,
) -> fmt::Result {
    if !value.is_finite() {
        return Ok(());
    }
    let metric = enc.encode_descriptor(name, help, unit, MetricType::Gauge)?;
    ConstGauge::new(value).encode(metric)
}

/// A business metric's help: what it is, then how often it is refreshed.
pub fn refreshed(help: &str, interval: Duration) -> String {
    format!(
        "{help} Refreshed in the background every {}.",
        humantime::format_duration(interval)
    )
}

pub fn flag(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}
