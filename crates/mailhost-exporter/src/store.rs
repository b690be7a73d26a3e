//! The one writer of the published exposition: applies each finished run to the snapshot,
//! renders the sections that changed through [`metrics::render_section`], gzips each once and
//! swaps the result in, so a scrape only hands out shared prepared bytes.

use std::collections::BTreeSet;
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

/// A section body larger than this is kept only gzipped: a scrape without gzip has it inflated
/// as it is sent. A fleet of a hundred thousand accounts makes bodies of over 100 MB per
/// format, and keeping them as is, old and new side by side while a refresh renders, would
/// double the exporter's memory; Prometheus and vmagent ask for gzip anyway.
pub const MAX_KEPT_IDENTITY_BYTES: usize = 16 * 1024 * 1024;

/// One format's body, as a complete gzip member, and as is unless it is larger than
/// [`MAX_KEPT_IDENTITY_BYTES`].
#[derive(Debug, Default)]
pub struct Encoded {
    pub identity: Option<Bytes>,
    /// The length of the body as is, kept or not.
    pub identity_len: u64,
    pub gzip: Bytes,
}

/// Both formats of a section as its text comes: gzipped as it comes, and kept as is while it
/// stays within [`MAX_KEPT_IDENTITY_BYTES`].
#[derive(Default)]
struct Encoding {
    classic: Output,
    openmetrics: Output,
}

impl metrics::Sink for Encoding {
    fn write(&mut self, format: Format, text: &str) {
        match format {
            Format::Classic => self.classic.write(text),
            Format::OpenMetrics => self.openmetrics.write(text),
        }
    }
}

/// One format on its way to an [`Encoded`].
struct Output {
    gzip: GzEncoder<Vec<u8>>,
    /// The text as is, until it grows past the bound; then only the gzip is made.
    kept: Option<String>,
    len: u64,
}

impl Default for Output {
    fn default() -> Self {
        Output {
            // Level 6 (the default): paid once per refresh, and the smaller body per scrape.
            gzip: GzEncoder::new(Vec::new(), Compression::default()),
            kept: Some(String::new()),
            len: 0,
        }
    }
}

impl Output {
    fn write(&mut self, text: &str) {
        // Writing into a Vec cannot fail.
        let _ = self.gzip.write_all(text.as_bytes());
        self.len += text.len() as u64;
        if let Some(kept) = &mut self.kept {
            if kept.len() + text.len() > MAX_KEPT_IDENTITY_BYTES {
                self.kept = None;
            } else {
                kept.push_str(text);
            }
        }
    }

    fn finish(self) -> Encoded {
        let mut gz = self.gzip.finish().unwrap_or_default();
        gz.shrink_to_fit();
        Encoded {
            identity: self.kept.map(|mut k| {
                // The body lives until the next refresh: return the growth slack.
                k.shrink_to_fit();
                Bytes::from(k.into_bytes())
            }),
            identity_len: self.len,
            gzip: Bytes::from(gz),
        }
    }
}

impl Encoded {
    /// The body as is: the kept one, or the gzip member inflated (a copy).
    pub fn plain(&self) -> Bytes {
        if let Some(b) = &self.identity {
            return b.clone();
        }
        let mut out = Vec::with_capacity(usize::try_from(self.identity_len).unwrap_or(0));
        // Our own gzip member: reading it back cannot fail.
        let _ =
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&self.gzip[..]), &mut out);
        Bytes::from(out)
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
        changed: Option<&BTreeSet<CollectorName>>,
    ) -> Self {
        let snapshot = Arc::new(snapshot);
        let sections = metrics::sections(&snapshot)
            .into_iter()
            .map(|section| {
                let reuse = match (section, changed) {
                    (Section::Collector(name), Some(c)) if !c.contains(&name) => previous
                        .and_then(|p| p.sections.iter().find(|(s, _)| *s == section))
                        .map(|(_, f)| f.clone()),
                    _ => None,
                };
                let formats = reuse.unwrap_or_else(|| {
                    let mut sink = Encoding::default();
                    metrics::stream_section(&snapshot, section, &mut sink);
                    Arc::new(Formats {
                        classic: sink.classic.finish(),
                        openmetrics: sink.openmetrics.finish(),
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
            out.extend_from_slice(&part.plain());
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
    /// What changed in the snapshot since the last publication.
    pending: Mutex<Pending>,
    /// One publication at a time. Whoever holds it publishes every change pending, so runs
    /// that finish together (the tenants of a large fleet) cost one rendering, not one each.
    publishing: Mutex<()>,
    prepared: ArcSwap<Prepared>,
    /// Moves on at every publication, for `/probe` waiting for a target's first fetch.
    published: watch::Sender<u64>,
}

/// Sections to render again.
#[derive(Debug, Default)]
struct Pending {
    any: bool,
    /// Every section (expiry or a reload may touch any collector).
    all: bool,
    areas: BTreeSet<CollectorName>,
}

impl Pending {
    fn area(&mut self, name: CollectorName) {
        self.any = true;
        self.areas.insert(name);
    }

    fn everything(&mut self) {
        self.any = true;
        self.all = true;
    }
}

impl Store {
    /// A store that knows the configured collectors before any of them has run, so that
    /// readiness and `mailhost_up` are right from the start.
    pub fn new(specs: &[CollectorSpec]) -> Arc<Self> {
        let mut snapshot = Snapshot::default();
        for spec in specs {
            snapshot
                .collectors
                .insert(spec.key(), Arc::new(CollectorState::new(spec)));
        }
        Arc::new(Store {
            prepared: ArcSwap::from_pointee(Prepared::render(snapshot.clone())),
            snapshot: Mutex::new(snapshot),
            pending: Mutex::default(),
            publishing: Mutex::default(),
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
        {
            let mut snapshot = self.lock();
            snapshot.apply_run(spec, results, duration, now);
            let (expired, _) = snapshot.expire(now);
            // Expiry may touch any collector; a run alone touches its own.
            let mut pending = self.pending();
            if expired {
                pending.everything();
            } else {
                pending.area(spec.name);
            }
        }
        self.publish_pending();
    }

    /// Renders and publishes what is pending, if anything is: the latest snapshot, with the
    /// sections that changed rendered again and the others shared. When this returns, every
    /// change made before the call is published (by this call, or by the one it waited for).
    fn publish_pending(&self) {
        let _turn = self
            .publishing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let pending = std::mem::take(&mut *self.pending());
        if !pending.any {
            return;
        }
        // Cloned after the pending changes were taken: it holds all of them (and perhaps a
        // newer one, whose caller publishes it again after this turn).
        let snapshot = self.lock().clone();
        let previous = self.prepared.load_full();
        let changed = (!pending.all).then_some(&pending.areas);
        self.publish(Prepared::render_changed(snapshot, Some(&previous), changed));
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Expires what is older than `max_age` now and publishes if anything went; returns when
    /// the next value expires, if any does.
    pub fn expire(&self) -> Option<Timestamp> {
        let now = Timestamp::now();
        let next = {
            let mut snapshot = self.lock();
            let (changed, next) = snapshot.expire(now);
            if changed {
                self.pending().everything();
            }
            next
        };
        self.publish_pending();
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
        {
            let mut snapshot = self.lock();
            let wanted: std::collections::HashSet<CollectorKey> =
                specs.iter().map(|s| s.key()).collect();
            snapshot.collectors.retain(|key, _| wanted.contains(key));
            for spec in specs {
                let entry = Arc::make_mut(
                    snapshot
                        .collectors
                        .entry(spec.key())
                        .or_insert_with(|| Arc::new(CollectorState::new(spec))),
                );
                entry.schedule = spec.schedule;
                entry.retain_configured(spec);
            }
            self.pending().everything();
        }
        self.publish_pending();
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
    fn a_body_past_the_kept_size_is_kept_only_gzipped_and_reads_back_whole() {
        let encode = |pieces: &[&str]| {
            let mut out = Output::default();
            for p in pieces {
                out.write(p);
            }
            out.finish()
        };
        let small = encode(&["x 1\n"]);
        assert_eq!(small.identity.as_deref(), Some(&b"x 1\n"[..]));
        let line = "mailhost_delivery_remaining_messages{account_id=\"100001\"} 5.0\n";
        let lines = MAX_KEPT_IDENTITY_BYTES / line.len() + 1;
        let big: String = line.repeat(lines);
        let encoded = encode(&vec![line; lines]);
        assert!(encoded.identity.is_none());
        assert_eq!(encoded.identity_len, big.len() as u64);
        assert!(encoded.gzip.len() < big.len() / 10);
        assert_eq!(encoded.plain(), big.as_bytes());
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
