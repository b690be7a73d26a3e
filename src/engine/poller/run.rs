//! One run of a collector: its targets fetched concurrently, each cut at the run's deadline, and
//! each result handed on as it lands (to the run's [`crate::engine::store::Tray`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use super::Outcome;
use crate::engine::few::FewMap;
use crate::engine::spec::{CollectorSpec, Context, Fetch, Job, Target, TargetData};
use crate::engine::store::Tray;
use crate::upstream::error::{FailureReason, UpstreamError};
use crate::upstream::first_turn::FirstTurns;
use crate::upstream::trail::Recorder;

/// Slack given to a collector past its deadline before its work is abandoned.
const DEADLINE_GRACE: Duration = Duration::from_millis(100);

/// Target tasks a run keeps in flight at least; see [`run_targets`].
const MIN_TASK_WINDOW: usize = 1024;

/// Target tasks a run keeps waiting for their first turn, per call its client lets through at
/// once (`api.concurrency`): a call ready for each slot that frees, twice over. See
/// [`run_targets`].
const WAITING_PER_SLOT: usize = 2;

/// One run of every configured target; see [`run_targets`].
pub async fn run_once(
    ctx: &Context,
    spec: &CollectorSpec,
) -> Vec<(Target, Result<TargetData, UpstreamError>)> {
    let tray = Tray::own();
    run_targets(
        ctx,
        spec,
        spec.targets.clone(),
        &FewMap::default(),
        &mut |t, r| tray.put(t, r),
    )
    .await;
    tray.rest()
}

/// What a run does with each result as it lands: hands it on (its data moves).
pub(super) type Land<'a> = dyn FnMut(Target, Result<TargetData, UpstreamError>) + Send + 'a;

/// One run: targets concurrently, started in the order given, each cut at the collector's
/// deadline. A target's task starts while fewer than [`WAITING_PER_SLOT`] times the client's
/// concurrency wait for their first turn (the client bounds requests in flight) and fewer than
/// [`MIN_TASK_WINDOW`] (or four times the concurrency, if more) are under way. Every target gets
/// a result, `timeout` for one that did not finish in time, given to `land` as it lands; the run
/// keeps each target's outcome.
pub(super) async fn run_targets(
    ctx: &Context,
    spec: &CollectorSpec,
    targets: Vec<Target>,
    fetched: &FewMap<Target, Instant>,
    land: &mut Land<'_>,
) -> Vec<Outcome> {
    let deadline = spec.schedule.deadline;
    let now = Instant::now();
    // The config bounds the deadline; saturate anyway rather than panic.
    let until = crate::upstream::instant_after(now, deadline);
    let ctx = Context {
        client: ctx.client.until(until).holding(spec.schedule.max_age),
        clock: ctx.clock.clone(),
    };
    let jobs = spec.jobs_for(&targets);
    let room = Room::new(ctx.client.concurrency());
    let turns = FirstTurns::default();
    let mut set = JoinSet::new();
    let mut outcomes: Vec<Option<Result<(), UpstreamError>>> = vec![None; jobs.len()];
    for (i, job) in jobs.iter().enumerate() {
        loop {
            // Past the deadline a task ends at once, refused a turn or cut: none waits for one.
            let waiting = if Instant::now() < until {
                turns.waiting()
            } else {
                0
            };
            if room.for_one_more(set.len(), waiting) {
                break;
            }
            collect(&mut set, &mut outcomes, spec, &jobs, land, Some(&turns)).await;
        }
        // The token's calls wait oldest data first, across the tenant's collectors.
        let rank = fetched.get(&job.target).copied();
        // Each poll's steps, kept with its error when it fails: what `/probe?debug=true` prints.
        let trail = Recorder::start(ctx.clock.now());
        let fetch = job.run(Context {
            client: ctx.client.for_task(rank, trail.clone(), turns.enter()),
            ..ctx.clone()
        });
        set.spawn(fetch_by_deadline(i, fetch, until, deadline, trail));
    }
    while !set.is_empty() {
        collect(&mut set, &mut outcomes, spec, &jobs, land, None).await;
    }
    every_target_answered(jobs, outcomes, land)
}

/// Waits for a target task of a run of `jobs` to end, or, given `turns`, for one of its tasks
/// to stop waiting for its first turn, whichever comes first; hands the result of every task
/// that ended to `land` and keeps its outcome.
async fn collect(
    set: &mut JoinSet<(usize, Result<TargetData, UpstreamError>)>,
    outcomes: &mut [Option<Result<(), UpstreamError>>],
    spec: &CollectorSpec,
    jobs: &[Job],
    land: &mut Land<'_>,
    turns: Option<&FirstTurns>,
) {
    let mut joined = match turns {
        Some(turns) => tokio::select! {
            joined = set.join_next() => joined,
            () = turns.turned() => None,
        },
        None => set.join_next().await,
    };
    // And those that ended meanwhile: a run woken by a turn does not leave them in the set.
    while let Some(ended) = joined.take().or_else(|| set.try_join_next()) {
        match ended {
            Ok((i, r)) => {
                outcomes[i] = Some(r.as_ref().map(|_| ()).map_err(UpstreamError::clone));
                land(jobs[i].target.clone(), r);
            }
            Err(e) => {
                tracing::error!(collector = spec.name.as_str(), error = %e, "collector task panicked")
            }
        }
    }
}

/// How many target tasks a run keeps under way, and how many of them waiting for their first
/// turn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Room {
    /// Tasks under way at once: never one per target (a run over a hundred thousand accounts
    /// would hold a hundred thousand pending requests in memory), but far more than the requests
    /// the client lets through, because a task keeps its place while it waits to retry: with a
    /// small window, a few accounts that never answer would hold every place and starve the
    /// healthy ones behind them.
    pub(super) window: usize,
    /// Tasks waiting for their first turn at once: a task holds its fetch, built, while it
    /// waits (3.8 KB, and its task and request about 0.6 KB more), and a window of them per run
    /// held 39 MB of fetches for ten tenants of 10,000 accounts against 3.9 MB for one token of
    /// 100,000 (heaptrack; issue 50). A task waiting to retry, or with its call in flight, is
    /// not waiting for a first turn: the healthy ones behind a few that never answer still
    /// start, up to the window.
    pub(super) waiting: usize,
}

impl Room {
    /// The room of a run whose client lets `concurrency` calls through at once.
    pub(super) fn new(concurrency: usize) -> Room {
        let concurrency = concurrency.max(1);
        Room {
            window: concurrency.saturating_mul(4).max(MIN_TASK_WINDOW),
            waiting: concurrency.saturating_mul(WAITING_PER_SLOT),
        }
    }

    /// Whether a run with `tasks` under way, `waiting` of them for their first turn, starts
    /// another: always when none is under way, so that a run never waits for nothing.
    pub(super) fn for_one_more(&self, tasks: usize, waiting: usize) -> bool {
        tasks == 0 || (tasks < self.window && waiting < self.waiting)
    }
}

/// The task of the `i`th target: its fetch, cut a grace after `until`, with the steps of its
/// poll kept in its error when it fails.
async fn fetch_by_deadline(
    i: usize,
    fetch: Fetch,
    until: Instant,
    deadline: Duration,
    trail: Recorder,
) -> (usize, Result<TargetData, UpstreamError>) {
    // The client stops its calls at the deadline; this only guards against a collector that
    // would keep working after it.
    let cut_at = until.checked_add(DEADLINE_GRACE).unwrap_or(until);
    let result = tokio::time::timeout_at(cut_at, fetch)
        .await
        .unwrap_or_else(|_| {
            Err(UpstreamError::new(
                FailureReason::Timeout,
                format!(
                    "collector deadline of {} reached",
                    humantime::format_duration(deadline)
                ),
            ))
        });
    let result = result.map_err(|e| UpstreamError {
        trail: Some(Arc::new(trail.finish())),
        ..e
    });
    (i, result)
}

/// Each job's target with its outcome. A target whose task died still gets a result, so it is
/// reported failed, not forgotten.
fn every_target_answered(
    jobs: Vec<Job>,
    outcomes: Vec<Option<Result<(), UpstreamError>>>,
    land: &mut Land<'_>,
) -> Vec<Outcome> {
    jobs.into_iter()
        .zip(outcomes)
        .map(|(job, r)| {
            let outcome = r.unwrap_or_else(|| {
                let e = UpstreamError::new(
                    FailureReason::Decode,
                    "internal error while reading the answer",
                );
                land(job.target.clone(), Err(e.clone()));
                Err(e)
            });
            (job.target, outcome)
        })
        .collect()
}
