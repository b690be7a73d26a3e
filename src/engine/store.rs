//! The one writer of the published exposition: applies what runs hand over (each result as it
//! lands, then the run's end) to the snapshot, renders the sections that changed through
//! [`metrics::stream_section`], gzips each once and swaps the result in, so a scrape only hands
//! out shared prepared bytes.

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

use crate::engine::snapshot::{CollectorState, Snapshot, TargetState};
use crate::engine::spec::{CollectorKey, CollectorName, CollectorSpec, Target, TargetData};
use crate::engine::unpoisoned;
use crate::metrics::{self, Format, Section};
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
/// as it is sent (about 6 ms for 4 MiB). A fleet of a hundred thousand accounts makes bodies of
/// over 100 MB per format, and keeping them as is, old and new side by side while a refresh
/// renders, would double the exporter's memory; Prometheus and vmagent ask for gzip anyway. 4 MiB
/// rather than more because a run hands its values over as they come: a section grows through
/// every size on its way, and each rendering below the bound keeps both formats as is beside the
/// next one growing (at 16 MiB, 80 MB more at the peak of a first run of 100,000 accounts).
pub const MAX_KEPT_IDENTITY_BYTES: usize = 4 * 1024 * 1024;

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
struct Encoding {
    classic: Output,
    openmetrics: Output,
}

impl Encoding {
    fn sized_like(last: Option<&Formats>) -> Self {
        Encoding {
            classic: Output::sized_like(last.map(|f| &f.classic)),
            openmetrics: Output::sized_like(last.map(|f| &f.openmetrics)),
        }
    }
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

impl Output {
    /// Sized after the section's last rendering, if there was one: a body that grows from
    /// nothing doubles its buffer again and again, holding the old and the new copy at each
    /// step (6 MiB for a body passing 4 MiB), and a section past
    /// [`MAX_KEPT_IDENTITY_BYTES`] last time is not kept at all this time.
    fn sized_like(last: Option<&Encoded>) -> Self {
        let room = |n: u64| {
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            n.saturating_add(n / 8).saturating_add(4096)
        };
        let kept = match last {
            Some(l) if l.identity_len > MAX_KEPT_IDENTITY_BYTES as u64 => None,
            Some(l) => Some(String::with_capacity(
                room(l.identity_len).min(MAX_KEPT_IDENTITY_BYTES),
            )),
            None => Some(String::new()),
        };
        let gzip = last.map_or(0, |l| room(l.gzip.len() as u64));
        Output {
            // Level 1 (`GZIP_LEVEL`): paid once per refresh.
            gzip: GzEncoder::new(Vec::with_capacity(gzip), Compression::new(GZIP_LEVEL)),
            kept,
            len: 0,
        }
    }

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

/// The gzip level of the prepared bodies: 1, the fastest. On an exposition (long runs of the
/// same names and labels) it compresses within about 5 % of level 6 at a third of the CPU: the
/// 72 MB body of 100,000 accounts is 2.68 MB at level 1 and 2.56 MB at level 6, in 0.14 s
/// against 0.46 s (docs/performance.md). A rendering of a large fleet is mostly its gzip, so
/// level 1 is what lets a restart serve 100,000 restored accounts within seconds.
pub const GZIP_LEVEL: u32 = 1;

/// `data` as one complete gzip member (RFC 1952). Members can follow one another: a gzip
/// reader reads a stream of them as the concatenation of their contents, which lets a scrape
/// send the sections and the self-metrics as members one after another.
pub fn gzip_member(data: &[u8]) -> Bytes {
    let mut out = GzEncoder::new(
        Vec::with_capacity(data.len() / 8 + 64),
        Compression::new(GZIP_LEVEL),
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
                let last = previous
                    .and_then(|p| p.sections.iter().find(|(s, _)| *s == section))
                    .map(|(_, f)| f);
                let reuse = match (section, changed) {
                    (Section::Collector(name), Some(c)) if !c.contains(&name) => last.cloned(),
                    _ => None,
                };
                let formats = reuse.unwrap_or_else(|| {
                    let mut sink = Encoding::sized_like(last.map(|f| &**f));
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
        let parts: Vec<Bytes> = self.parts(format, |_| true).map(Encoded::plain).collect();
        Bytes::from(parts.concat())
    }

    /// [`Prepared::body`] as a gzip stream of one member per section.
    pub fn gzip(&self, format: Format) -> Bytes {
        let parts: Vec<&[u8]> = self.parts(format, |_| true).map(|p| &p.gzip[..]).collect();
        Bytes::from(parts.concat())
    }
}

/// The one writer (the poller) and the many readers (HTTP) of the snapshot.
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
    collectors: BTreeSet<CollectorName>,
}

impl Pending {
    fn collector(&mut self, name: CollectorName) {
        self.any = true;
        self.collectors.insert(name);
    }

    fn everything(&mut self) {
        self.any = true;
        self.all = true;
    }

    /// The health section only (rendered at every publication).
    fn health(&mut self) {
        self.any = true;
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

    /// Applies the parts and ends of runs handed over, in the order they came, expires old data
    /// once and publishes the new exposition once.
    fn apply(&self, handoffs: Vec<Handoff>) {
        let now = Timestamp::now();
        {
            let mut snapshot = self.lock();
            let mut pending = self.pending();
            for handoff in handoffs {
                let spec = match &handoff {
                    Handoff::Part(part) => &part.spec,
                    Handoff::End(run) => &run.spec,
                };
                // A run (or a part of one) of a collector a reload removed (its tenant left)
                // that was handed over before the collector was stopped, and waited for the
                // publisher meanwhile: applied, it would bring the tenant's series back for good.
                // Every configured collector has its state from the start or the reload on.
                if !snapshot.collectors.contains_key(&spec.key()) {
                    continue;
                }
                pending.collector(spec.name);
                match handoff {
                    Handoff::Part(part) => snapshot.apply_part(&part.spec, part.results, now),
                    Handoff::End(run) => {
                        snapshot.apply_run(&run.spec, run.results, run.duration, now);
                    }
                }
            }
            // Expiry may touch any collector; a run alone touches its own.
            let (expired, _) = snapshot.expire(now);
            if expired {
                pending.everything();
            }
        }
        self.publish_pending();
    }

    /// Renders and publishes what is pending, if anything is: the latest snapshot, with the
    /// sections that changed rendered again and the others shared. When this returns, every
    /// change made before the call is published (by this call, or by the one it waited for).
    fn publish_pending(&self) {
        let _turn = unpoisoned(self.publishing.lock());
        let pending = std::mem::take(&mut *self.pending());
        if !pending.any {
            return;
        }
        // Cloned after the pending changes were taken: it holds all of them (and perhaps a
        // newer one, whose caller publishes it again after this turn).
        let snapshot = self.lock().clone();
        let previous = self.prepared.load_full();
        let changed = (!pending.all).then_some(&pending.collectors);
        self.publish(Prepared::render_changed(snapshot, Some(&previous), changed));
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        unpoisoned(self.pending.lock())
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
    /// (each target's result is applied to it whole): keep serving it rather than failing every
    /// later run.
    fn lock(&self) -> std::sync::MutexGuard<'_, Snapshot> {
        unpoisoned(self.snapshot.lock())
    }

    /// Takes the targets an earlier process kept (see [`Snapshot::restore`]), expires what is
    /// older than its `max_age` now, and publishes them; returns how many were taken.
    pub fn restore(&self, restored: Vec<(CollectorKey, Vec<TargetState>)>) -> usize {
        let mut taken = 0;
        {
            let mut snapshot = self.lock();
            for (key, targets) in restored {
                taken += snapshot.restore(&key, targets);
            }
            snapshot.expire(Timestamp::now());
            self.pending().everything();
        }
        self.publish_pending();
        taken
    }

    /// A copy of what is known now (a pointer per collector: see [`Snapshot`]).
    pub fn snapshot(&self) -> Snapshot {
        self.lock().clone()
    }

    /// The targets of a collector restored from the storage directory that this process has not
    /// attempted yet, with when they were last fetched successfully.
    pub fn restored(&self, key: &CollectorKey) -> Vec<(Target, Timestamp)> {
        self.fetched(key, |t| t.restored)
    }

    /// The targets of a collector that were fetched successfully, with when: what its loop,
    /// started again after a panic, starts from (see [`crate::engine::restart`]).
    pub fn last_fetched(&self, key: &CollectorKey) -> Vec<(Target, Timestamp)> {
        self.fetched(key, |_| true)
    }

    fn fetched(
        &self,
        key: &CollectorKey,
        which: impl Fn(&TargetState) -> bool,
    ) -> Vec<(Target, Timestamp)> {
        self.lock().collectors.get(key).map_or_else(Vec::new, |c| {
            c.targets
                .iter()
                .filter(|t| which(t))
                .filter_map(|t| t.last_success.map(|at| (t.target.clone(), at)))
                .collect()
        })
    }

    /// Counts a restart of a collector's loop after a panic (`mailhost_collector_restarts_total`)
    /// and publishes it, unless the collector is no longer configured.
    pub fn restarted(&self, key: &CollectorKey) {
        {
            let mut snapshot = self.lock();
            if !snapshot.restarted(key, Timestamp::now()) {
                return;
            }
            self.pending().health();
        }
        self.publish_pending();
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

    /// The published body in the classic format, as text (without self-metrics).
    #[cfg(test)]
    pub fn classic_text(&self) -> String {
        String::from_utf8(self.prepared().body(Format::Classic).to_vec()).unwrap()
    }
}

/// A collector's finished run, on its way to the store, with the results of its targets that no
/// publication took from its [`Tray`] before.
pub struct Finished {
    pub spec: CollectorSpec,
    pub results: Vec<(Target, Result<TargetData, UpstreamError>)>,
    pub duration: Duration,
    /// First fetches (of targets a probe, discovery or a reload added), which a probe may be
    /// waiting for: published within [`URGENT_GAP`].
    pub urgent: bool,
}

/// What a run still under way has fetched since the last publication: its targets' results,
/// applied as they are (see [`Snapshot::apply_part`]); the run's own series wait for its end.
pub struct RunPart {
    /// The collector as its latest plan has it when the part is taken (a target a reload
    /// removed meanwhile is not brought back).
    pub spec: CollectorSpec,
    pub results: Vec<(Target, Result<TargetData, UpstreamError>)>,
}

/// What reaches the store: a part of a run under way, or a run's end.
enum Handoff {
    Part(RunPart),
    End(Finished),
}

mod publisher;

pub use publisher::{MAX_GAP, Publisher, Tray, URGENT_GAP, UnderWay};

#[cfg(test)]
mod tests;
