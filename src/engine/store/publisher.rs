//! The way runs reach the store, batched once. A run puts each target's result in its [`Tray`]
//! as it lands, and hands its end over when it ends; one task, the publisher, waits as long as
//! its cadence says ([`Cadence`]), then empties every tray and takes every end that arrived,
//! applies them together and publishes them with one rendering, on one blocking thread, whatever
//! the number of collectors. Nothing else gathers results on their way: a run keeps no timer of
//! its own, and what it fetched is the store's from the moment it lands.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::{Notify, mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Finished, Handoff, RunPart, Store};
use crate::engine::spec::{CollectorSpec, Target, TargetData};
use crate::upstream::error::UpstreamError;

/// Runs' ends waiting for the publisher, at most. A run's end that does not fit waits, and its
/// collector with it; a run's results are never held back (they wait in its tray, at most one
/// per target of the run). The publisher takes every end waiting into the batch it gathers, so
/// that the runs of one tick (ten thousand tenants start together) cost one rendering, not one
/// per [`QUEUE`] ends: a batch gathers for at most [`MAX_GAP`], and a collector hands over at
/// most one end per run and runs at most once a second (`settings::limits::MIN_INTERVAL`), so a
/// batch holds at most five ends per collector configured.
const QUEUE: usize = 1024;

/// The longest wait between a run's results and their publication, however long the last
/// rendering took.
pub const MAX_GAP: Duration = Duration::from_secs(5);

/// The longest wait between a run of first fetches and its publication, so that a probe waiting
/// for one is answered within its scrape timeout.
pub const URGENT_GAP: Duration = Duration::from_secs(1);

/// How long a refresh's results are gathered at least before they are published: values that
/// replace values are a second late at most (plus the rest below), and a medium fleet, whose
/// results land one after another all interval long, is not rendered more than once a second
/// for them. First values (a first start, a restart without storage) are not held: they wait
/// only as long as a rendering takes.
const REFRESH_GATHER: Duration = Duration::from_secs(1);

/// How many times its own length the publisher rests after a publication before the next. The
/// exposition of a large fleet takes long to render (about 0.6 s for ten thousand tenants), and
/// results landing one after another over seconds would otherwise render it again and again,
/// using a core for nothing. Rendering then takes at most a tenth of a core however the results
/// arrive, and a small fleet, rendered in a millisecond, sees no wait.
const REST_PER_RENDER: u32 = 10;

/// Where runs hand their results and ends to the store. A batch is published once the publisher
/// has rested after the last publication ([`REST_PER_RENDER`]) and, unless it is urgent, once
/// the first of its results has waited as long as a rendering takes ([`REFRESH_GATHER`] at least
/// for a refresh's), so that what lands together (the runs of one tick: all tenants of a fleet
/// start together) is gathered rather than the first rendered alone. When no run is under way,
/// a batch is published without waiting longer.
#[derive(Clone)]
pub struct Publisher {
    ends: mpsc::Sender<Handed>,
    inbox: Arc<Inbox>,
}

/// A run's end as the publisher receives it: with the sender to tell its collector it is
/// published, and its place among the runs under way, given up once received.
type Handed = (Finished, oneshot::Sender<()>, UnderWay);

/// What the runs have put down for the publisher besides their ends.
#[derive(Default)]
struct Inbox {
    trays: Mutex<Listed>,
    /// Rung when a tray gets its first result since the publisher last emptied it.
    landed: Notify,
    /// Runs begun and not yet ended.
    under_way: AtomicUsize,
}

/// The trays with results in them, each listed once until the publisher empties it.
#[derive(Default)]
struct Listed {
    trays: Vec<Arc<Shelf>>,
    /// How soon the most pressing of them is to be published.
    haste: Option<Haste>,
}

impl Inbox {
    fn trays(&self) -> MutexGuard<'_, Listed> {
        self.trays.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a listed tray holds a result: a run's end may have taken what its tray held
    /// since it was listed.
    fn holds_results(&self) -> bool {
        let mut listed = self.trays();
        if listed
            .trays
            .iter()
            .any(|shelf| !shelf.waiting().results.is_empty())
        {
            return true;
        }
        *listed = Listed::default();
        false
    }

    /// Empties every tray listed: what each holds, as a part of its run.
    fn take_parts(&self) -> Vec<Handoff> {
        let trays = std::mem::take(&mut *self.trays()).trays;
        trays
            .into_iter()
            .filter_map(|shelf| {
                let results = shelf.take();
                let home = shelf.home.as_ref()?;
                (!results.is_empty()).then(|| {
                    Handoff::Part(RunPart {
                        spec: (home.polled)(),
                        results,
                    })
                })
            })
            .collect()
    }
}

/// One run's results that the store has not taken yet: emptied by each publication, and by the
/// run's end for what is left. It holds at most one result per target of the run (each lands
/// once), moved here as it lands: the run keeps only the outcome.
pub struct Tray(Arc<Shelf>);

#[derive(Default)]
struct Shelf {
    waiting: Mutex<Waiting>,
    /// `None` for a tray only its run empties.
    home: Option<Home>,
}

/// Where a tray lists itself when it gets a result, and what the store is told of its run.
struct Home {
    /// [`Haste::Refresh`] for a refresh's results, [`Haste::Soon`] for first values.
    haste: Haste,
    /// Weak: the inbox lists the tray, and a tray listed when the publisher has stopped is
    /// dropped with it.
    inbox: Weak<Inbox>,
    /// The collector as its latest plan has it, when the tray is emptied.
    polled: Box<dyn Fn() -> CollectorSpec + Send + Sync>,
}

#[derive(Default)]
struct Waiting {
    results: Vec<(Target, Result<TargetData, UpstreamError>)>,
    /// Listed in the inbox (and not emptied since).
    listed: bool,
}

impl Shelf {
    fn waiting(&self) -> MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn take(&self) -> Vec<(Target, Result<TargetData, UpstreamError>)> {
        let mut waiting = self.waiting();
        waiting.listed = false;
        std::mem::take(&mut waiting.results)
    }
}

impl Tray {
    /// A tray that no publisher empties: its run takes everything at its end.
    pub fn own() -> Tray {
        Tray(Arc::default())
    }

    /// A target's result landed: the store's from now on.
    pub fn put(&self, target: Target, result: Result<TargetData, UpstreamError>) {
        let list = {
            let mut waiting = self.0.waiting();
            waiting.results.push((target, result));
            !std::mem::replace(&mut waiting.listed, true)
        };
        // Listed with the tray's lock let go: the publisher looks into trays while it holds the
        // list's lock, never the other way round.
        if list
            && let Some(home) = &self.0.home
            && let Some(inbox) = home.inbox.upgrade()
        {
            let mut listed = inbox.trays();
            listed.trays.push(self.0.clone());
            listed.haste = listed.haste.max(Some(home.haste));
            drop(listed);
            inbox.landed.notify_one();
        }
    }

    /// What no publication took: the results that go with the run's end.
    pub fn rest(&self) -> Vec<(Target, Result<TargetData, UpstreamError>)> {
        self.0.take()
    }
}

impl Publisher {
    /// Starts the publishing task of `store`; it ends when every `Publisher` is dropped or
    /// `shutdown` is cancelled.
    pub fn start(store: Arc<Store>, shutdown: CancellationToken) -> (Publisher, JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let inbox = Arc::new(Inbox::default());
        let task = tokio::spawn(publish(store, rx, inbox.clone(), shutdown));
        (Publisher { ends: tx, inbox }, task)
    }

    /// A run starts: the publisher counts it as under way until its end is handed over (or
    /// dropped).
    pub fn begin(&self) -> UnderWay {
        self.inbox.under_way.fetch_add(1, Ordering::Relaxed);
        UnderWay(self.inbox.clone())
    }

    /// The tray of a run of the collector whose latest plan `polled` reads; `refresh`: a run
    /// whose targets have values already (see [`REFRESH_GATHER`]).
    pub fn tray(
        &self,
        polled: impl Fn() -> CollectorSpec + Send + Sync + 'static,
        refresh: bool,
    ) -> Tray {
        Tray(Arc::new(Shelf {
            waiting: Mutex::default(),
            home: Some(Home {
                haste: if refresh { Haste::Refresh } else { Haste::Soon },
                inbox: Arc::downgrade(&self.inbox),
                polled: Box::new(polled),
            }),
        }))
    }

    /// Hands a finished run to the store; returns once it is published (or the publisher
    /// stopped).
    #[cfg(test)]
    pub async fn apply_run(&self, run: Finished, under_way: UnderWay) {
        let (done, published) = oneshot::channel();
        if self.ends.send((run, done, under_way)).await.is_ok() {
            let _ = published.await;
        }
    }

    /// Hands a finished run to the store; returns once the publisher has taken it (at once,
    /// unless [`QUEUE`] ends are waiting already), not when it is published, so that the
    /// collector can go on with the targets added meanwhile.
    pub async fn hand_over(&self, run: Finished, under_way: UnderWay) {
        let (done, _) = oneshot::channel();
        let _ = self.ends.send((run, done, under_way)).await;
    }
}

/// A run under way, counted by the publisher until this is dropped.
pub struct UnderWay(Arc<Inbox>);

impl Drop for UnderWay {
    fn drop(&mut self) {
        self.0.under_way.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How soon what a batch holds is to be published, the least pressing first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Haste {
    /// A refresh's results: gathered for [`REFRESH_GATHER`] at least.
    Refresh,
    /// First values and runs' ends: gathered as long as a rendering takes.
    Soon,
    /// First fetches a probe may be waiting for: within [`URGENT_GAP`].
    Urgent,
}

/// When a batch is published: see [`Publisher`].
#[derive(Clone, Copy, Debug)]
struct Cadence {
    /// When the last publication ended, and how long its rendering took.
    ended: Instant,
    took: Duration,
}

impl Cadence {
    /// When a batch whose first result or end arrived at `first` is published.
    fn publish_at(&self, first: Instant, haste: Haste) -> Instant {
        let rest = self.took.saturating_mul(REST_PER_RENDER);
        let gather = match haste {
            Haste::Urgent => return (self.ended + rest.min(URGENT_GAP)).max(first),
            Haste::Soon => self.took,
            Haste::Refresh => self.took.max(REFRESH_GATHER),
        };
        (self.ended + rest.min(MAX_GAP)).max(first + gather.min(MAX_GAP))
    }
}

/// The runs' ends of one publication (their trays are emptied when it is made).
#[derive(Default)]
struct Batch {
    ends: Vec<(Finished, oneshot::Sender<()>)>,
    haste: Option<Haste>,
}

impl Batch {
    /// Takes a run's end: the run is no longer under way.
    fn take(&mut self, (run, done, under_way): Handed) {
        drop(under_way);
        let haste = if run.urgent {
            Haste::Urgent
        } else {
            Haste::Soon
        };
        self.haste = self.haste.max(Some(haste));
        self.ends.push((run, done));
    }

    /// How soon it is to be published, with the trays listed now.
    fn haste(&self, inbox: &Inbox) -> Haste {
        self.haste
            .max(inbox.trays().haste)
            .unwrap_or(Haste::Refresh)
    }
}

async fn publish(
    store: Arc<Store>,
    mut rx: mpsc::Receiver<Handed>,
    inbox: Arc<Inbox>,
    shutdown: CancellationToken,
) {
    let mut cadence = Cadence {
        ended: Instant::now(),
        took: Duration::ZERO,
    };
    loop {
        let mut batch = Batch::default();
        tokio::select! {
            _ = shutdown.cancelled() => return,
            run = rx.recv() => match run {
                Some(run) => batch.take(run),
                None => return,
            },
            () = inbox.landed.notified() => {
                // Trays whose runs' ends took what they held: nothing to publish.
                if !inbox.holds_results() {
                    continue;
                }
            }
        }
        let arrived = Instant::now();
        // Everything that arrives until then goes into this publication.
        loop {
            while let Ok(run) = rx.try_recv() {
                batch.take(run);
            }
            let haste = batch.haste(&inbox);
            // With no run under way nothing else is coming soon: the rest after the last
            // publication is enough.
            let idle = inbox.under_way.load(Ordering::Relaxed) == 0;
            let at = cadence.publish_at(if idle { cadence.ended } else { arrived }, haste);
            if Instant::now() >= at {
                break;
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                () = tokio::time::sleep_until(at) => {}
                () = inbox.landed.notified() => {}
                run = rx.recv() => match run {
                    Some(run) => batch.take(run),
                    None => break,
                },
            }
        }
        let (ends, done): (Vec<Finished>, Vec<oneshot::Sender<()>>) =
            batch.ends.into_iter().unzip();
        // Ends first, in the order they came, then what the trays hold: landed later than any
        // end already handed over by its run (an end takes what its tray held).
        let mut handoffs: Vec<Handoff> = ends.into_iter().map(Handoff::End).collect();
        handoffs.extend(inbox.take_parts());
        if handoffs.is_empty() {
            // Only trays that their runs' ends emptied: no rendering, and the rest still runs
            // from the last one.
            continue;
        }
        let (ends, parts) = (done.len(), handoffs.len() - done.len());
        let store = store.clone();
        let took = tokio::task::spawn_blocking(move || {
            let started = std::time::Instant::now();
            store.apply(handoffs);
            started.elapsed()
        })
        .await
        .unwrap_or_else(|e| {
            tracing::error!(error = %e, "publishing the snapshot failed");
            Duration::ZERO
        });
        for d in done {
            let _ = d.send(());
        }
        tracing::debug!(
            ends,
            parts,
            took_ms = took.as_millis() as u64,
            "published the runs' ends and the trays' results that arrived together"
        );
        cadence = Cadence {
            ended: Instant::now(),
            took,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collectors::delivery_account::fixtures::remaining as data;
    use crate::engine::spec::fixtures::accounts;
    use crate::tenant::TenantName;

    #[tokio::test]
    async fn runs_that_finish_together_are_published_together() {
        let specs: Vec<CollectorSpec> = (0..200)
            .map(|i| CollectorSpec {
                tenant: TenantName::parse(&format!("t{i}")).unwrap(),
                ..accounts(&[i], Duration::from_secs(10))
            })
            .collect();
        let store = Store::new(&specs);
        let before = *store.subscribe().borrow();
        let shutdown = CancellationToken::new();
        let (publisher, task) = Publisher::start(store.clone(), shutdown.clone());
        let mut runs = tokio::task::JoinSet::new();
        for spec in specs {
            let publisher = publisher.clone();
            let under_way = publisher.begin();
            runs.spawn(async move {
                let id = spec.targets[0].clone();
                let run = on_schedule(spec, vec![(id, Ok(data(7.0)))]);
                publisher.apply_run(run, under_way).await
            });
        }
        runs.join_all().await;
        // Every run is published by the time its collector is told...
        let body = store.classic_text();
        let shown = body
            .lines()
            .filter(|l| l.starts_with("mailhost_delivery_remaining_messages{"))
            .count();
        assert_eq!(shown, 200);
        // ...with far fewer renderings than runs (the first alone, the rest together).
        let publications = store.subscribe().borrow().wrapping_sub(before);
        assert!(
            (1..=10).contains(&publications),
            "{publications} publications"
        );
        drop(publisher);
        task.await.unwrap();
        let _ = shutdown;
    }

    /// A run on schedule's end, with `results`.
    fn on_schedule(
        spec: CollectorSpec,
        results: Vec<(Target, Result<TargetData, UpstreamError>)>,
    ) -> Finished {
        Finished {
            spec,
            results,
            duration: Duration::ZERO,
            urgent: false,
        }
    }

    /// Whether the published snapshot holds account `id`, and whether the collector has ended
    /// a run.
    fn shown(store: &Store, id: i32) -> (bool, bool) {
        let prepared = store.prepared();
        let c = prepared.snapshot.collectors.values().next().unwrap();
        (
            c.target(&Target::DeliveryAccount(id)).is_some(),
            c.last_run.is_some(),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_result_is_published_as_it_lands_and_the_runs_end_takes_what_no_publication_took() {
        let spec = accounts(&[1, 2, 3], Duration::from_secs(10));
        let store = Store::new(std::slice::from_ref(&spec));
        let shutdown = CancellationToken::new();
        let (publisher, task) = Publisher::start(store.clone(), shutdown.clone());
        let mut published = store.subscribe();
        let under_way = publisher.begin();
        let polled = spec.clone();
        let tray = publisher.tray(move || polled.clone(), false);
        // The run goes on: the result is published without waiting for its end, and the
        // run's own series wait for it.
        tray.put(Target::DeliveryAccount(1), Ok(data(5.0)));
        published.changed().await.unwrap();
        assert_eq!(shown(&store, 1), (true, false));
        // A result lands and the run ends before the next publication: it goes with the end,
        // once, and the tray is left empty.
        tray.put(Target::DeliveryAccount(2), Ok(data(6.0)));
        let rest = tray.rest();
        assert_eq!(rest.len(), 1);
        assert!(tray.rest().is_empty());
        publisher
            .apply_run(on_schedule(spec, rest), under_way)
            .await;
        assert_eq!(shown(&store, 2), (true, true));
        assert!(!shown(&store, 3).0);
        shutdown.cancel();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn results_landing_one_after_another_are_published_at_the_cadence_not_one_by_one() {
        let ids: Vec<i32> = (0..100).collect();
        let spec = accounts(&ids, Duration::from_secs(10));
        let store = Store::new(std::slice::from_ref(&spec));
        let before = *store.subscribe().borrow();
        let shutdown = CancellationToken::new();
        let (publisher, task) = Publisher::start(store.clone(), shutdown.clone());
        let _under_way = publisher.begin();
        let polled = spec.clone();
        let tray = publisher.tray(move || polled.clone(), false);
        // A result every 10 ms for a second, while the publisher rests ten renderings after each
        // publication: at most one publication for each result, and every result published.
        for &id in &ids {
            tray.put(Target::DeliveryAccount(id), Ok(data(1.0)));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(MAX_GAP).await;
        let publications = store.subscribe().borrow().wrapping_sub(before);
        assert!((1..=100).contains(&publications), "{publications}");
        assert!(ids.iter().all(|&id| shown(&store, id).0));
        assert!(tray.rest().is_empty(), "every result went to the store");
        shutdown.cancel();
        task.await.unwrap();
    }

    #[test]
    fn a_tray_of_its_own_has_no_publisher_and_gives_everything_back() {
        let tray = Tray::own();
        tray.put(Target::DeliveryAccount(1), Ok(data(1.0)));
        tray.put(Target::DeliveryAccount(2), Ok(data(2.0)));
        assert!(tray.0.home.is_none());
        assert_eq!(tray.rest().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_tray_its_runs_end_emptied_costs_no_publication() {
        // Ten thousand tenants of one account each: each run's one result lands in its tray
        // and its end takes it at once. Publishing the emptied trays would render for nothing
        // and cut the rest short (its length is the last rendering's).
        let spec = accounts(&[1], Duration::from_secs(10));
        let store = Store::new(std::slice::from_ref(&spec));
        let before = *store.subscribe().borrow();
        let shutdown = CancellationToken::new();
        let (publisher, task) = Publisher::start(store.clone(), shutdown.clone());
        let under_way = publisher.begin();
        let polled = spec.clone();
        let tray = publisher.tray(move || polled.clone(), true);
        tray.put(Target::DeliveryAccount(1), Ok(data(5.0)));
        let rest = tray.rest();
        publisher
            .apply_run(on_schedule(spec, rest), under_way)
            .await;
        tokio::time::sleep(MAX_GAP * 2).await;
        assert_eq!(store.subscribe().borrow().wrapping_sub(before), 1);
        assert!(shown(&store, 1).0);
        assert!(
            publisher.inbox.trays().trays.is_empty(),
            "the emptied tray is let go"
        );
        // A tray listed and emptied by its run's end before the publisher looks: nothing to
        // publish, and the list is let go.
        tray.put(Target::DeliveryAccount(1), Ok(data(6.0)));
        assert_eq!(publisher.inbox.trays().trays.len(), 1);
        assert_eq!(tray.rest().len(), 1);
        assert!(!publisher.inbox.holds_results());
        assert!(publisher.inbox.trays().trays.is_empty());
        shutdown.cancel();
        task.await.unwrap();
    }

    #[test]
    fn a_publication_rests_ten_times_its_rendering_within_the_gaps() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        let cadence = |took| Cadence { ended: now, took };
        use Haste::{Refresh, Soon, Urgent};
        // A small fleet renders in a millisecond: its first values wait 10 ms at most, a
        // refresh's a second.
        assert_eq!(cadence(ms(1)).publish_at(now, Soon), now + ms(10));
        assert_eq!(cadence(ms(1)).publish_at(now + ms(50), Soon), now + ms(51));
        assert_eq!(
            cadence(ms(1)).publish_at(now, Refresh),
            now + REFRESH_GATHER
        );
        // A large one rests ten renderings, within MAX_GAP; first fetches within URGENT_GAP.
        assert_eq!(cadence(ms(200)).publish_at(now, Soon), now + ms(2000));
        assert_eq!(cadence(ms(200)).publish_at(now, Refresh), now + ms(2000));
        assert_eq!(cadence(ms(900)).publish_at(now, Soon), now + MAX_GAP);
        assert_eq!(cadence(ms(900)).publish_at(now, Urgent), now + URGENT_GAP);
        // A batch's first result waits as long as a rendering, to gather those of its tick.
        let later = now + Duration::from_secs(60);
        assert_eq!(cadence(ms(600)).publish_at(later, Soon), later + ms(600));
        assert_eq!(
            cadence(ms(1500)).publish_at(later, Refresh),
            later + ms(1500)
        );
        assert_eq!(cadence(ms(600)).publish_at(later, Urgent), later);
        assert!(Refresh < Soon && Soon < Urgent);
    }

    #[tokio::test]
    async fn a_run_handed_over_after_shutdown_returns_at_once() {
        let spec = accounts(&[1], Duration::from_secs(10));
        let store = Store::new(std::slice::from_ref(&spec));
        let shutdown = CancellationToken::new();
        let (publisher, task) = Publisher::start(store, shutdown.clone());
        shutdown.cancel();
        task.await.unwrap();
        let under_way = publisher.begin();
        publisher
            .apply_run(on_schedule(spec, Vec::new()), under_way)
            .await;
    }
}
