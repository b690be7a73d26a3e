//! Answers replayed through the path a run takes, with no network: one run's upstream bodies in,
//! read as the collector's fetch reads them, applied to a snapshot and rendered in both formats.
//! The one seam of the golden, property and fuzz tests.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use crate::engine::snapshot::Snapshot;
use crate::engine::spec::{CollectorSpec, Target};
use crate::metrics::{self, Exposition};
use crate::upstream::model::ParseProblem;

/// How long every replayed run took, as the `mailhost_collector_duration_seconds` it renders.
const RUN: Duration = Duration::from_millis(125);

/// A snapshot built from replayed runs, and the parse problems their answers had.
#[derive(Debug, Default)]
pub struct Replay {
    snapshot: Snapshot,
    problems: Vec<ParseProblem>,
}

impl Replay {
    /// Applies one run of `spec` finished at `now`: for each target, the bodies of its answers, one
    /// per endpoint of its collector. An answer that cannot be read fails its target with reason
    /// `decode`, as a fetch would.
    pub fn run(
        &mut self,
        spec: &CollectorSpec,
        answers: Vec<(Target, Vec<Vec<u8>>)>,
        now: Timestamp,
    ) -> &mut Self {
        let mut results = Vec::with_capacity(answers.len());
        for (target, bodies) in answers {
            let bodies: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
            let result = spec
                .collector
                .read(&target, &bodies, now)
                .map(|(data, problems)| {
                    self.problems.extend(problems);
                    data
                });
            results.push((target, result));
        }
        self.snapshot.apply_run(spec, results, RUN, now);
        self
    }

    /// Every parse problem of the answers replayed so far, in order.
    pub fn problems(&self) -> &[ParseProblem] {
        &self.problems
    }

    /// Both formats, without `# EOF`, as [`metrics::render`] gives them.
    pub fn render(self) -> Exposition {
        metrics::render(&Arc::new(self.snapshot))
    }
}
