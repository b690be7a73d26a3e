//! The scraper loop: each collector on its own interval (first run at start), never
//! overlapping itself, each run bounded by its deadline, results applied whole to the store.
//!
//! The exporter polls on its own schedule rather than on each Prometheus scrape: the provider
//! rate-limits the token, and two Prometheus servers of an HA pair would double the calls.

use std::sync::Arc;
use std::time::Instant;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::collector::{self, CollectorSpec, Context, Target, TargetData};
use crate::labels::FailureReason;
use crate::snapshot::Store;
use crate::upstream::UpstreamError;

/// Slack given to a collector past its deadline before its work is abandoned.
const DEADLINE_GRACE: std::time::Duration = std::time::Duration::from_millis(100);

/// Runs every collector until `shutdown` is cancelled.
pub async fn run(
    ctx: Context,
    specs: Vec<CollectorSpec>,
    store: Arc<Store>,
    shutdown: CancellationToken,
) {
    let mut tasks = JoinSet::new();
    for spec in specs {
        tasks.spawn(run_collector(
            ctx.clone(),
            spec,
            store.clone(),
            shutdown.clone(),
        ));
    }
    while tasks.join_next().await.is_some() {}
}

async fn run_collector(
    ctx: Context,
    spec: CollectorSpec,
    store: Arc<Store>,
    shutdown: CancellationToken,
) {
    let mut ticker = tokio::time::interval(spec.schedule.interval);
    // A run that overran (it cannot: the deadline is shorter) would not cause a burst.
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let started = Instant::now();
        let results = tokio::select! {
            // A run cut short by shutdown is dropped whole: never a half-built snapshot.
            _ = shutdown.cancelled() => return,
            r = run_once(&ctx, &spec) => r,
        };
        let failed = results.iter().filter(|(_, r)| r.is_err()).count();
        tracing::debug!(
            collector = spec.name.as_str(),
            targets = results.len(),
            failed,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "collector run finished"
        );
        for (target, result) in &results {
            if let Err(e) = result {
                tracing::warn!(collector = spec.name.as_str(), target = %target, reason = e.reason.as_str(), detail = %e.detail, "target failed");
            }
        }
        store.apply_run(&spec, results, started.elapsed());
    }
}

/// One run: every target concurrently (the client bounds requests in flight), each cut at
/// the collector's deadline.
pub async fn run_once(
    ctx: &Context,
    spec: &CollectorSpec,
) -> Vec<(Target, Result<TargetData, UpstreamError>)> {
    let deadline = spec.schedule.deadline;
    let ctx = Context {
        client: ctx.client.until(tokio::time::Instant::now() + deadline),
        clock: ctx.clock.clone(),
    };
    let mut set = JoinSet::new();
    for (i, target) in spec.targets.iter().cloned().enumerate() {
        let ctx = ctx.clone();
        let settings = spec.settings.clone();
        set.spawn(async move {
            // The client stops its calls at the deadline; this only guards against a
            // collector that would keep working after it.
            let result = match tokio::time::timeout(
                deadline + DEADLINE_GRACE,
                collector::collect(&ctx, &settings, &target),
            )
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
            (i, target, result)
        });
    }
    let mut results: Vec<Option<Result<TargetData, UpstreamError>>> =
        vec![None; spec.targets.len()];
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((i, _, r)) => results[i] = Some(r),
            Err(e) => {
                tracing::error!(collector = spec.name.as_str(), error = %e, "collector task panicked")
            }
        }
    }
    // A target whose task died still gets a result, so it is reported failed, not forgotten.
    spec.targets
        .iter()
        .cloned()
        .zip(results)
        .map(|(t, r)| {
            (
                t,
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
