//! The one writer of the published exposition: applies each finished run to the snapshot,
//! renders the sections that changed through [`metrics::render_section`], gzips each once and
//! swaps the result in, so a scrape only hands out shared prepared bytes.

use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use jiff::Timestamp;
use tokio::sync::watch;

use crate::collector::{CollectorKey, CollectorName, CollectorSpec, Target, TargetData};
use crate::metrics::{self, Format, Section};
use crate::snapshot::{CollectorState, Snapshot};
use crate::upstream::error::UpstreamError;

/// The exposition of a snapshot, rendered and gzipped once per change in both formats, in
/// sections ([`Section`]): the exporter's health, then each collector's series. The bodies are
/// shared `Bytes`: a scrape hands out references to them, never a copy, so concurrent scrapes
/// of a large body cost no memory each, gzip is paid once per refresh instead of once per scrape,
/// and a collector's run renders only its own section and the health one.
#[derive(Debug, Default)]
pub struct Prepared {
    sections: Vec<(Section, Arc<Formats>)>,
    pub snapshot: Arc<Snapshot>,
}

/// One section in both formats.
#[derive(Debug, Default)]
struct Formats {
    classic: Encoded,
    openmetrics: Encoded,
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
/// reader reads a stream of them as the concatenation of their contents, which lets a scrape
/// send the sections and the self-metrics as members one after another.
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
    /// Renders every section of `snapshot`.
    pub fn render(snapshot: Snapshot) -> Self {
        Self::render_changed(snapshot, None, None)
    }

    /// Renders the sections of `snapshot` that may differ from `previous`: the health section,
    /// and `changed` (every section when `changed` is `None`); the others are shared with
    /// `previous`.
    fn render_changed(
        snapshot: Snapshot,
        previous: Option<&Prepared>,
        changed: Option<CollectorName>,
    ) -> Self {
        let snapshot = Arc::new(snapshot);
        let sections = metrics::sections(&snapshot)
            .into_iter()
            .map(|section| {
                let reuse = match (section, changed) {
                    (Section::Collector(name), Some(c)) if name != c => previous
                        .and_then(|p| p.sections.iter().find(|(s, _)| *s == section))
                        .map(|(_, f)| f.clone()),
                    _ => None,
                };
                let formats = reuse.unwrap_or_else(|| {
                    let text = metrics::render_section(&snapshot, section);
                    Arc::new(Formats {
                        classic: Encoded::new(text.classic),
                        openmetrics: Encoded::new(text.openmetrics),
                    })
                });
                (section, formats)
            })
            .collect();
        Prepared { sections, snapshot }
    }

    /// The sections in the order they are served, each as one format's body and gzip member;
    /// `wanted` selects sections (all when it says so).
    pub fn parts(
        &self,
        format: Format,
        wanted: impl Fn(Section) -> bool,
    ) -> impl Iterator<Item = &Encoded> {
        self.sections
            .iter()
            .filter(move |(s, _)| wanted(*s))
            .map(move |(_, f)| match format {
                Format::Classic => &f.classic,
                Format::OpenMetrics => &f.openmetrics,
            })
    }

    /// The whole prepared body of `format`, without self-metrics and without `# EOF` (a copy:
    /// for tests and tools, never for scrapes).
    pub fn body(&self, format: Format) -> Bytes {
        let mut out = Vec::new();
        for part in self.parts(format, |_| true) {
            out.extend_from_slice(&part.identity);
        }
        Bytes::from(out)
    }

    /// [`Prepared::body`] as a gzip stream of one member per section.
    pub fn gzip(&self, format: Format) -> Bytes {
        let mut out = Vec::new();
        for part in self.parts(format, |_| true) {
            out.extend_from_slice(&part.gzip);
        }
        Bytes::from(out)
    }
}

/// The one writer (the scraper) and the many readers (HTTP) of the snapshot.
pub struct Store {
    snapshot: Mutex<Snapshot>,
    prepared: ArcSwap<Prepared>,
    /// Moves on at every publication, for `/probe` waiting for a target's first fetch.
    published: watch::Sender<u64>,
}

impl Store {
    /// A store that knows the configured collectors before any of them has run, so that
    /// readiness and `mailhost_up` are right from the start.
    pub fn new(specs: &[CollectorSpec]) -> Arc<Self> {
        let mut snapshot = Snapshot::default();
        for spec in specs {
            snapshot
                .collectors
                .insert(spec.key(), CollectorState::new(spec));
        }
        Arc::new(Store {
            prepared: ArcSwap::from_pointee(Prepared::render(snapshot.clone())),
            snapshot: Mutex::new(snapshot),
            published: watch::Sender::new(0),
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
        let (expired, _) = snapshot.expire(now);
        // Rendering under the lock keeps publications in the order of the runs. Expiry may
        // touch any collector; a run alone touches its own.
        let changed = (!expired).then_some(spec.name);
        let previous = self.prepared.load();
        self.publish(Prepared::render_changed(
            snapshot.clone(),
            Some(&previous),
            changed,
        ));
    }

    /// Expires what is older than `max_age` now and publishes if anything went; returns when
    /// the next value expires, if any does.
    pub fn expire(&self) -> Option<Timestamp> {
        let now = Timestamp::now();
        let mut snapshot = self.lock();
        let (changed, next) = snapshot.expire(now);
        if changed {
            self.publish(Prepared::render(snapshot.clone()));
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
        let wanted: std::collections::HashSet<CollectorKey> =
            specs.iter().map(|s| s.key()).collect();
        snapshot.collectors.retain(|key, _| wanted.contains(key));
        for spec in specs {
            let entry = snapshot
                .collectors
                .entry(spec.key())
                .or_insert_with(|| CollectorState::new(spec));
            entry.schedule = spec.schedule;
            entry.retain_configured(spec);
        }
        self.publish(Prepared::render(snapshot.clone()));
    }

    fn publish(&self, prepared: Prepared) {
        self.prepared.store(Arc::new(prepared));
        self.published.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Wakes at every publication.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.published.subscribe()
    }

    pub fn prepared(&self) -> Arc<Prepared> {
        self.prepared.load_full()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> CollectorSpec {
        CollectorSpec::delivery_accounts(vec![1, 2], Duration::from_secs(10))
    }

    fn data(remaining: f64) -> TargetData {
        TargetData::delivery_remaining(remaining)
    }

    #[test]
    fn the_prepared_gzip_of_each_format_holds_its_body_as_one_member_per_section() {
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
            flate2::read::MultiGzDecoder::new(&prepared.gzip(format)[..])
                .read_to_end(&mut out)
                .unwrap();
            assert_eq!(&out[..], &body[..]);
        }
        assert_ne!(
            prepared.body(Format::Classic),
            prepared.body(Format::OpenMetrics)
        );
    }

    #[test]
    fn a_run_renders_its_own_section_and_the_health_one_and_shares_the_rest() {
        let delivery = spec();
        // Any second collector will do: only its name keys its section.
        let migration = CollectorSpec::new(
            crate::tenant::TenantName::default(),
            crate::collector::Collector::Migration(Arc::new(crate::config::MigrationConfig {
                schedule: delivery.schedule,
                migrations: vec!["MG1".into()],
            })),
        );
        let store = Store::new(&[delivery.clone(), migration.clone()]);
        let section = |p: &Prepared, s: Section| {
            p.sections
                .iter()
                .find(|(x, _)| *x == s)
                .map(|(_, f)| f.clone())
                .unwrap()
        };
        let before = store.prepared();
        store.apply_run(
            &delivery,
            vec![(Target::DeliveryAccount(1), Ok(data(5.0)))],
            Duration::ZERO,
        );
        let after = store.prepared();
        let other = Section::Collector(migration.name);
        assert!(Arc::ptr_eq(
            &section(&before, other),
            &section(&after, other)
        ));
        let own = Section::Collector(delivery.name);
        assert!(!Arc::ptr_eq(&section(&before, own), &section(&after, own)));
        assert!(!Arc::ptr_eq(
            &section(&before, Section::Health),
            &section(&after, Section::Health)
        ));
        // What is shared is what a full render gives.
        let fresh = Prepared::render((*after.snapshot).clone());
        assert_eq!(after.body(Format::Classic), fresh.body(Format::Classic));
        assert_eq!(
            after.body(Format::OpenMetrics),
            fresh.body(Format::OpenMetrics)
        );
    }
}
