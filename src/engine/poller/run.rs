//! One run of a collector: its targets fetched concurrently, each cut at the run's deadline, and
//! what lands handed to the publisher in parts as the run goes ([`Parts`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::{Fetched, Landed, Plan, unhanded};
use crate::engine::few::FewMap;
use crate::engine::signal;
use crate::engine::spec::{CollectorSpec, Context, Fetch, Job, Target, TargetData};
use crate::engine::store::{Publisher, RunPart};
use crate::upstream::error::{FailureReason, UpstreamError};
use crate::upstream::trail::Recorder;

/// Slack given to a collector past its deadline before its work is abandoned.
const DEADLINE_GRACE: Duration = Duration::from_millis(100);

/// Target tasks a run keeps in flight at least; see [`run_targets`].
const MIN_TASK_WINDOW: usize = 1024;

/// How often a run under way hands what it has fetched to the publisher (see [`Parts`]), once
/// its targets have values: a refresh's values are a second late at most. A large fleet is not
/// rendered more often for it: the publisher rests ten renderings between publications (at most
/// 5 s), and a run hands its next part only once the last is published, so its parts grow
/// rather than multiply.
pub const HANDOFF_EVERY: Duration = Duration::from_secs(1);

/// The same in a collector's first run, whose targets have no values yet (a first start, or a
/// restart without storage). The goal for a first start (accounts shown 10 s after the
/// start within 1.2 times what the provider's pace allowed by then) leaves the pacer's cold
/// start and the handoff 1.7 s together; the cold start takes about 1.5 s of it, so a value
/// goes to the publisher within a quarter of a second of its fetch. A small fleet's rendering
/// takes milliseconds; a large one's still sets the publisher's rest, as above.
pub const FIRST_HANDOFF_EVERY: Duration = Duration::from_millis(250);

/// What a run under way has fetched and not yet handed to the publisher. The results that land
/// are handed over together, as one [`RunPart`], a period (`every`) after the first of them
/// landed, once the run's last part is published (one part of a run at the publisher at a
/// time) and when the publisher's queue has room (else a period later: a run never waits for
/// the publisher halfway). A part holds what landed since the last, nothing more; what is not
/// handed over by the run's end goes with its end.
pub(super) struct Parts {
    pub(super) publisher: Publisher,
    /// The collector's latest plan: which targets it polls when a part is handed over.
    pub(super) plan: signal::Receiver<Plan>,
    /// The results landed since the last part, by their place in the run.
    pub(super) fresh: Vec<usize>,
    /// Whether each result of the run went with a part.
    pub(super) handed: Vec<bool>,
    /// When the fresh results are to be handed over.
    pub(super) due: Option<Instant>,
    /// How long after the first of them: [`HANDOFF_EVERY`], or [`FIRST_HANDOFF_EVERY`].
    pub(super) every: Duration,
    /// The last part handed over, until it is published.
    pub(super) last: Option<oneshot::Receiver<()>>,
}

impl Parts {
    /// The parts of a run; `first`: of the collector's first run.
    pub(super) fn new(publisher: Publisher, plan: signal::Receiver<Plan>, first: bool) -> Parts {
        let every = if first {
            FIRST_HANDOFF_EVERY
        } else {
            HANDOFF_EVERY
        };
        Parts {
            publisher,
            plan,
            fresh: Vec::new(),
            handed: Vec::new(),
            due: None,
            every,
            last: None,
        }
    }

    /// The result at `i` of a run of `count` targets landed.
    pub(super) fn landed(&mut self, i: usize, count: usize) {
        if self.handed.len() != count {
            self.handed = vec![false; count];
        }
        if self.fresh.is_empty() {
            self.due = Some(Instant::now() + self.every);
        }
        self.fresh.push(i);
    }

    /// Waits until the fresh results are to be handed over: never while there are none.
    pub(super) async fn due(&mut self) {
        let Some(due) = self.due else {
            return std::future::pending().await;
        };
        if let Some(last) = &mut self.last {
            // Published, or the publisher stopped: either way the last part is gone.
            let _ = last.await;
            self.last = None;
        }
        tokio::time::sleep_until(due).await;
    }

    /// Hands the fresh results of the run of `jobs` over as one part, in the run's order, if the
    /// publisher's queue has room for it; else tries again a period later.
    pub(super) fn hand_over(
        &mut self,
        jobs: &[Job],
        results: &mut [Option<Result<Fetched, UpstreamError>>],
    ) {
        self.fresh.sort_unstable();
        let (fresh, plan) = (&self.fresh, &self.plan);
        // Called only when the publisher has room for the part: the data moves to it, and the
        // run keeps the outcome (and, of a failure, a copy) to learn from at its end.
        let part = || {
            let latest = plan.borrow();
            let now = Instant::now();
            let results = fresh
                .iter()
                .filter_map(|&i| {
                    let result = match results[i].as_mut()? {
                        Ok(held) => match std::mem::replace(held, Fetched::Handed) {
                            Fetched::Here(data) => {
                                latest.discover(&data, now);
                                Ok(*data)
                            }
                            Fetched::Handed => return None,
                        },
                        Err(e) => Err(e.clone()),
                    };
                    Some((jobs[i].target.clone(), result))
                })
                .collect();
            RunPart {
                spec: latest.polled(now),
                results,
            }
        };
        match self.publisher.try_hand_part(part) {
            Some(published) => {
                for &i in &self.fresh {
                    self.handed[i] = true;
                }
                self.fresh.clear();
                self.due = None;
                self.last = Some(published);
            }
            None => self.due = Some(Instant::now() + self.every),
        }
    }

    /// The results of the run (all of them, in the run's order) that no part took, with their
    /// data: what goes with its end.
    pub(super) fn rest(
        &self,
        results: Vec<Landed>,
    ) -> Vec<(Target, Result<TargetData, UpstreamError>)> {
        if !self.handed.contains(&true) {
            return unhanded(results);
        }
        unhanded(
            results
                .into_iter()
                .zip(&self.handed)
                .filter(|(_, handed)| !**handed)
                .map(|(r, _)| r)
                .collect(),
        )
    }
}

/// Waits for one target task of a run of `jobs` and files its result; meanwhile hands what the
/// run fetched to the publisher when it is due, if the run does so.
async fn collect_one(
    set: &mut JoinSet<(usize, Result<TargetData, UpstreamError>)>,
    results: &mut [Option<Result<Fetched, UpstreamError>>],
    spec: &CollectorSpec,
    jobs: &[Job],
    parts: &mut Option<&mut Parts>,
) {
    let joined = loop {
        let Some(parts) = parts.as_deref_mut() else {
            break set.join_next().await;
        };
        tokio::select! {
            joined = set.join_next() => break joined,
            () = parts.due() => parts.hand_over(jobs, results),
        }
    };
    match joined {
        Some(Ok((i, r))) => {
            results[i] = Some(r.map(|data| Fetched::Here(Box::new(data))));
            if let Some(parts) = parts {
                parts.landed(i, results.len());
            }
        }
        Some(Err(e)) => {
            tracing::error!(collector = spec.name.as_str(), error = %e, "collector task panicked")
        }
        None => {}
    }
}

/// One run of every configured target; see [`run_targets`].
pub async fn run_once(
    ctx: &Context,
    spec: &CollectorSpec,
) -> Vec<(Target, Result<TargetData, UpstreamError>)> {
    unhanded(run_targets(ctx, spec, spec.targets.clone(), &FewMap::default(), None).await)
}

/// One run: targets concurrently, started in the order given and at most
/// [`MIN_TASK_WINDOW`] (or four times the client's concurrency, if more) at a time (the client
/// bounds requests in flight), each cut at the collector's deadline. Every target gets a result,
/// `timeout` for one that did not finish in time; with `parts`, what lands is also handed to the
/// publisher as the run goes.
pub(super) async fn run_targets(
    ctx: &Context,
    spec: &CollectorSpec,
    targets: Vec<Target>,
    fetched: &FewMap<Target, Instant>,
    mut parts: Option<&mut Parts>,
) -> Vec<Landed> {
    let deadline = spec.schedule.deadline;
    let now = Instant::now();
    // The config bounds the deadline; saturate anyway rather than panic.
    let until = crate::upstream::instant_after(now, deadline);
    let ctx = Context {
        client: ctx.client.until(until).holding(spec.schedule.max_age),
        clock: ctx.clock.clone(),
    };
    let jobs = spec.jobs_for(&targets);
    let window = task_window(&ctx);
    let mut set = JoinSet::new();
    let mut results: Vec<Option<Result<Fetched, UpstreamError>>> =
        std::iter::repeat_with(|| None).take(jobs.len()).collect();
    for (i, job) in jobs.iter().enumerate() {
        if set.len() >= window {
            collect_one(&mut set, &mut results, spec, &jobs, &mut parts).await;
        }
        // The token's calls wait oldest data first, across the tenant's collectors.
        let rank = fetched.get(&job.target).copied();
        // Each poll's steps, kept with its error when it fails: what `/probe?debug=true` prints.
        let trail = Recorder::start(ctx.clock.now());
        let fetch = job.run(Context {
            client: ctx.client.ranked(rank).traced(trail.clone()),
            ..ctx.clone()
        });
        set.spawn(fetch_by_deadline(i, fetch, until, deadline, trail));
    }
    while !set.is_empty() {
        collect_one(&mut set, &mut results, spec, &jobs, &mut parts).await;
    }
    every_target_answered(jobs, results)
}

/// Tasks in flight at once: never one per target (a run over a hundred thousand accounts would
/// hold a hundred thousand pending requests in memory), but far more than the requests the
/// client lets through, because a task keeps its place while it waits to retry: with a small
/// window, a few accounts that never answer would hold every place and starve the healthy ones
/// behind them.
fn task_window(ctx: &Context) -> usize {
    ctx.client
        .concurrency()
        .saturating_mul(4)
        .max(MIN_TASK_WINDOW)
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
    let result =
        match tokio::time::timeout_at(until.checked_add(DEADLINE_GRACE).unwrap_or(until), fetch)
            .await
        {
            Ok(r) => r,
            Err(_) => Err(UpstreamError::new(
                FailureReason::Timeout,
                format!(
                    "collector deadline of {} reached",
                    humantime::format_duration(deadline)
                ),
            )),
        };
    let result = result.map_err(|e| UpstreamError {
        trail: Some(Arc::new(trail.finish())),
        ..e
    });
    (i, result)
}

/// Each job's target with its result. A target whose task died still gets a result, so it is
/// reported failed, not forgotten.
pub(super) fn every_target_answered(
    jobs: Vec<Job>,
    results: Vec<Option<Result<Fetched, UpstreamError>>>,
) -> Vec<Landed> {
    jobs.into_iter()
        .zip(results)
        .map(|(job, r)| {
            (
                job.target,
                r.unwrap_or_else(|| {
                    Err(UpstreamError::new(
                        FailureReason::Decode,
                        "internal error while reading the answer",
                    ))
                }),
            )
        })
        .collect()
}
