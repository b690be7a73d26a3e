//! The one writer of the published exposition: applies each finished run to the snapshot,
//! renders it once through [`metrics::render`], gzips each format once and swaps the result
//! in, so a scrape only hands out shared prepared bytes.

use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use jiff::Timestamp;

use crate::collector::{CollectorSpec, Target, TargetData};
use crate::metrics::{self, Format};
use crate::snapshot::{CollectorState, Snapshot};
use crate::upstream::error::UpstreamError;

/// The exposition of a snapshot, rendered and gzipped once per change in both formats. The
/// bodies are shared `Bytes`: a scrape hands out a reference to them, never a copy, so
/// concurrent scrapes of a large body cost no memory each, and gzip is paid once per refresh
/// instead of once per scrape.
#[derive(Debug, Default)]
pub struct Prepared {
    classic: Encoded,
    openmetrics: Encoded,
    pub snapshot: Arc<Snapshot>,
}

/// One format's body, as is and as a complete gzip member of it.
#[derive(Debug, Default)]
pub struct Encoded {
    pub identity: Bytes,
    pub gzip: Bytes,
}

impl Encoded {
    fn new(text: String) -> Self {
        let gzip = gzip_member(text.as_bytes());
        let mut raw = text.into_bytes();
        // The body lives until the next refresh: return the growth slack of rendering.
        raw.shrink_to_fit();
        Encoded {
            identity: Bytes::from(raw),
            gzip,
        }
    }
}

/// `data` as one complete gzip member (RFC 1952). Members can follow one another: a gzip
/// reader reads a stream of them as the concatenation of their contents, which lets a
/// scrape append a small member for the self-metrics behind the prepared one.
pub fn gzip_member(data: &[u8]) -> Bytes {
    // Level 6 (the default): paid once per refresh, and the smaller body is paid per scrape.
    let mut out = GzEncoder::new(
        Vec::with_capacity(data.len() / 8 + 64),
        Compression::default(),
    );
    // Writing into a Vec cannot fail.
    let _ = out.write_all(data);
    let mut gz = out.finish().unwrap_or_default();
    gz.shrink_to_fit();
    Bytes::from(gz)
}

impl Prepared {
    pub fn render(snapshot: Snapshot) -> Self {
        let snapshot = Arc::new(snapshot);
        let exposition = metrics::render(&snapshot);
        Prepared {
            classic: Encoded::new(exposition.classic),
            openmetrics: Encoded::new(exposition.openmetrics),
            snapshot,
        }
    }

    /// The prepared body of `format`, without self-metrics and without `# EOF`.
    pub fn body(&self, format: Format) -> &Bytes {
        &self.encoded(format).identity
    }

    /// [`Prepared::body`] as one gzip member.
    pub fn gzip(&self, format: Format) -> &Bytes {
        &self.encoded(format).gzip
    }

    fn encoded(&self, format: Format) -> &Encoded {
        match format {
            Format::Classic => &self.classic,
            Format::OpenMetrics => &self.openmetrics,
        }
    }
}

/// The one writer (the scraper) and the many readers (HTTP) of the snapshot.
pub struct Store {
    snapshot: Mutex<Snapshot>,
    prepared: ArcSwap<Prepared>,
}

impl Store {
    /// A store that knows the configured collectors before any of them has run, so that
    /// readiness and `mailhost_up` are right from the start.
    pub fn new(specs: &[CollectorSpec]) -> Arc<Self> {
        let mut snapshot = Snapshot::default();
        for spec in specs {
            snapshot
                .collectors
                .insert(spec.name, CollectorState::new(spec));
        }
        Arc::new(Store {
            prepared: ArcSwap::from_pointee(Prepared::render(snapshot.clone())),
            snapshot: Mutex::new(snapshot),
        })
    }

    /// Applies a finished run, expires old data and publishes the new exposition.
    pub fn apply_run(
        &self,
        spec: &CollectorSpec,
        results: Vec<(Target, Result<TargetData, UpstreamError>)>,
        duration: Duration,
    ) {
        let now = Timestamp::now();
        let mut snapshot = self.lock();
        snapshot.apply_run(spec, results, duration, now);
        snapshot.expire(now);
        // Rendering under the lock keeps publications in the order of the runs.
        self.prepared
            .store(Arc::new(Prepared::render(snapshot.clone())));
    }

    /// Expires what is older than `max_age` now and publishes if anything went; returns when
    /// the next value expires, if any does.
    pub fn expire(&self) -> Option<Timestamp> {
        let now = Timestamp::now();
        let mut snapshot = self.lock();
        let (changed, next) = snapshot.expire(now);
        if changed {
            self.prepared
                .store(Arc::new(Prepared::render(snapshot.clone())));
        }
        next
    }

    /// Nothing panics under this lock, but if something did, the snapshot is still a valid one
    /// (runs are applied to it whole): keep serving it rather than failing every later run.
    fn lock(&self) -> std::sync::MutexGuard<'_, Snapshot> {
        self.snapshot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes a reloaded set of collectors: removed collectors and targets vanish at once (with
    /// their series), new ones appear as not yet run, schedules follow the new config.
    pub fn reconfigure(&self, specs: &[CollectorSpec]) {
        let mut snapshot = self.lock();
        snapshot
            .collectors
            .retain(|name, _| specs.iter().any(|s| s.name == *name));
        for spec in specs {
            let entry = snapshot
                .collectors
                .entry(spec.name)
                .or_insert_with(|| CollectorState::new(spec));
            entry.schedule = spec.schedule;
            entry.retain_configured(spec);
        }
        self.prepared
            .store(Arc::new(Prepared::render(snapshot.clone())));
    }

    pub fn prepared(&self) -> Arc<Prepared> {
        self.prepared.load_full()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::model::DeliveryAccount;

    fn spec() -> CollectorSpec {
        CollectorSpec::delivery_accounts(vec![1, 2], Duration::from_secs(10))
    }

    fn data(remaining: f64) -> TargetData {
        TargetData::DeliveryAccount(DeliveryAccount {
            remaining_messages: Some(remaining),
            ..Default::default()
        })
    }

    #[test]
    fn the_prepared_gzip_of_each_format_is_one_member_holding_its_body() {
        use std::io::Read as _;
        let mut s = Snapshot::default();
        let t0 = Timestamp::from_second(1_000_000).unwrap();
        s.apply_run(
            &spec(),
            vec![
                (Target::DeliveryAccount(1), Ok(data(5.0))),
                (Target::DeliveryAccount(2), Ok(data(6.0))),
            ],
            Duration::ZERO,
            t0,
        );
        let prepared = Prepared::render(s);
        for format in [Format::Classic, Format::OpenMetrics] {
            let body = prepared.body(format);
            assert!(body.len() > 100);
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&prepared.gzip(format)[..])
                .read_to_end(&mut out)
                .unwrap();
            assert_eq!(&out[..], &body[..]);
        }
        assert_ne!(
            prepared.body(Format::Classic),
            prepared.body(Format::OpenMetrics)
        );
    }
}
