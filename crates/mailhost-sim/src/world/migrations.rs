//! Migrations: runs that copy email accounts into the service. Their statistics are a pure
//! function of the simulator clock, so a test can freeze the clock and watch a run progress.
//!
//! Model: the run's accounts share its messages evenly and are worked on `parallel` at a time
//! (account `i` in lane `i % parallel`, each lane migrating `rate / parallel` messages a minute,
//! one account after another). The first `failed_accounts` accounts fail half-way through their
//! messages, adding 1 to 5 errors each.

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::clock::{format_datetime, shift};
use super::codes::is_migration_code;
use super::config::MigrationSeed;
use super::error::SimConfigError;

/// A migration known to the simulator: its plan and when it started.
#[derive(Clone, Debug)]
pub(crate) struct MigrationState {
    pub seed: MigrationSeed,
    pub start: Timestamp,
}

/// Where one account of the run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AccountPhase {
    Pending,
    Running,
    Completed,
    Failed,
}

impl MigrationState {
    pub(crate) fn from_seed(seed: &MigrationSeed, now: Timestamp) -> Result<Self, SimConfigError> {
        let bad = |reason: &str| SimConfigError::BadMigration {
            code: seed.code.clone(),
            reason: reason.to_owned(),
        };
        if !is_migration_code(&seed.code) {
            return Err(bad("the code must be `MG` followed by 8 digits"));
        }
        if seed.failed_accounts > seed.accounts {
            return Err(bad("failed_accounts must not exceed accounts"));
        }
        if seed.messages < 0 || seed.bytes < 0 {
            return Err(bad("messages and bytes must not be negative"));
        }
        if seed.rate < 0 {
            return Err(bad("rate must not be negative"));
        }
        let offset = SignedDuration::try_from(seed.start_in)
            .ok()
            .zip(SignedDuration::try_from(seed.started_ago).ok())
            .and_then(|(ahead, ago)| ahead.checked_sub(ago))
            .ok_or_else(|| bad("start_in or started_ago is too large"))?;
        let start = now
            .checked_add(offset)
            .map_err(|_| bad("start_in or started_ago is too large"))?;
        Ok(Self {
            seed: seed.clone(),
            start,
        })
    }

    /// The body of `GET /api/migrations/{code}/stats` at instant `now`.
    pub(crate) fn stats(&self, now: Timestamp) -> Value {
        let seed = &self.seed;
        let n = i64::from(seed.accounts);
        let lanes = i64::from(seed.parallel.max(1)).min(n.max(1));
        let lane_rate = seed.rate as f64 / lanes as f64;
        let elapsed = now.duration_since(self.start).as_secs_f64() / 60.0;

        let progress = self.progress(lanes, lane_rate, elapsed);
        let phases = &progress.phases;
        let migrated = progress.migrated;
        let count = |p: AccountPhase| phases.iter().filter(|x| **x == p).count();
        let done = count(AccountPhase::Completed) + count(AccountPhase::Failed);
        let started = elapsed >= 0.0;
        let finished = started && done == phases.len();
        let status = run_status(
            started,
            finished,
            n > 0 && count(AccountPhase::Failed) == phases.len(),
        );
        let finished_at = finished.then(|| {
            shift(
                self.start,
                SignedDuration::try_from_secs_f64(progress.all_done_at * 60.0)
                    .unwrap_or(SignedDuration::ZERO),
            )
        });
        let bytes_migrated = bytes_migrated(seed, migrated, finished);
        let updated_at = if finished {
            finished_at
        } else {
            started.then_some(now)
        };
        let throughput = if status == "running" {
            (progress.active_lanes as f64 * lane_rate).round() as i64
        } else {
            0
        };
        json!({
            "aggregate": {
                "status": status,
                "accounts": {
                    "total": phases.len(),
                    "pending": count(AccountPhase::Pending),
                    "running": count(AccountPhase::Running),
                    "completed": count(AccountPhase::Completed),
                    "failed": count(AccountPhase::Failed),
                },
                "messages": {"total": seed.messages, "migrated": migrated},
                "bytes": {"total": seed.bytes, "migrated": bytes_migrated},
                "errors": progress.errors,
                "started_at": started.then(|| format_datetime(self.start)),
                "updated_at": updated_at.map(format_datetime),
                "finished_at": finished_at.map(format_datetime),
                "throughput": {"messages_per_minute": throughput},
            }
        })
    }

    /// Where each account of the run stands `elapsed` minutes after the start, with the
    /// messages migrated, the errors left, the lanes at work and when the last lane finishes.
    fn progress(&self, lanes: i64, lane_rate: f64, elapsed: f64) -> Progress {
        let seed = &self.seed;
        let n = i64::from(seed.accounts);
        let mut phases = Vec::with_capacity(seed.accounts as usize);
        let mut lane_clock = vec![0.0f64; lanes as usize];
        let mut migrated: i64 = 0;
        let mut errors: i64 = 0;
        let mut active_lanes = 0i64;
        let mut all_done_at: f64 = 0.0;
        for i in 0..n {
            let share = seed.messages / n.max(1) + i64::from(i < seed.messages % n.max(1));
            let fails = i < i64::from(seed.failed_accounts);
            let work = if fails { share / 2 } else { share };
            let lane = (i % lanes) as usize;
            let begins = lane_clock[lane];
            let minutes = if work == 0 {
                0.0
            } else if lane_rate > 0.0 {
                work as f64 / lane_rate
            } else {
                f64::INFINITY
            };
            let ends = begins + minutes;
            lane_clock[lane] = ends;
            all_done_at = all_done_at.max(ends);
            let phase = if elapsed < begins || elapsed < 0.0 {
                AccountPhase::Pending
            } else if elapsed < ends {
                active_lanes += 1;
                migrated += (((elapsed - begins) * lane_rate).floor() as i64).min(work);
                AccountPhase::Running
            } else {
                migrated += work;
                if fails {
                    errors += errors_of(&seed.code, i);
                    AccountPhase::Failed
                } else {
                    AccountPhase::Completed
                }
            };
            phases.push(phase);
        }
        Progress {
            phases,
            migrated,
            errors,
            active_lanes,
            all_done_at,
        }
    }
}

/// Where a run stands at one instant, account by account.
struct Progress {
    /// The phase of each account, in order.
    phases: Vec<AccountPhase>,
    /// Messages migrated so far, over all accounts.
    migrated: i64,
    /// Errors left by the failed accounts so far.
    errors: i64,
    /// Lanes working on an account now.
    active_lanes: i64,
    /// Minutes from the start until the last lane finishes.
    all_done_at: f64,
}

/// The run's status: pending before it starts, running until every account is done, then
/// failed when every account failed (`all_failed`), completed otherwise.
fn run_status(started: bool, finished: bool, all_failed: bool) -> &'static str {
    if !started {
        "pending"
    } else if !finished {
        "running"
    } else if all_failed {
        "failed"
    } else {
        "completed"
    }
}

/// The bytes migrated with `migrated` messages, in proportion to the run's messages; a run of
/// no messages has migrated all its bytes once finished and none before.
fn bytes_migrated(seed: &MigrationSeed, migrated: i64, finished: bool) -> i64 {
    if seed.messages > 0 {
        i64::try_from(i128::from(seed.bytes) * i128::from(migrated) / i128::from(seed.messages))
            .unwrap_or(seed.bytes)
    } else if finished {
        seed.bytes
    } else {
        0
    }
}

/// Errors a failed account leaves behind: 1 to 5, fixed per run and account.
fn errors_of(code: &str, account: i64) -> i64 {
    let hash = code.bytes().fold(account as u64 ^ 0x9e37_79b9, |h, b| {
        h.wrapping_mul(31).wrapping_add(u64::from(b))
    });
    1 + (hash % 5) as i64
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    fn run(seed: MigrationSeed) -> MigrationState {
        MigrationState::from_seed(&seed, ts("2026-11-22T07:00:00Z")).expect("valid seed")
    }

    fn at(state: &MigrationState, minutes: i64) -> Value {
        state.stats(shift(state.start, SignedDuration::from_mins(minutes)))["aggregate"].clone()
    }

    #[test]
    fn a_run_is_pending_then_running_then_completed() {
        let state = run(MigrationSeed {
            code: "MG00000042".into(),
            start_in: Duration::from_secs(600),
            accounts: 4,
            messages: 4000,
            bytes: 4_000_000,
            rate: 100,
            parallel: 2,
            ..MigrationSeed::default()
        });
        let before = at(&state, -1);
        assert_eq!(before["status"], "pending");
        assert_eq!(before["accounts"]["pending"], 4);
        assert_eq!(before["started_at"], Value::Null);

        let running = at(&state, 10);
        assert_eq!(running["status"], "running");
        assert_eq!(running["messages"]["migrated"], 1000);
        assert_eq!(running["bytes"]["migrated"], 1_000_000);
        assert_eq!(running["accounts"]["running"], 2);
        assert_eq!(running["accounts"]["pending"], 2);
        assert_eq!(running["throughput"]["messages_per_minute"], 100);
        assert_eq!(running["started_at"], "2026-11-22 07:10:00");

        let later = at(&state, 25);
        assert_eq!(later["accounts"]["completed"], 2);
        assert_eq!(later["accounts"]["running"], 2);

        let done = at(&state, 40);
        assert_eq!(done["status"], "completed");
        assert_eq!(done["messages"]["migrated"], 4000);
        assert_eq!(done["accounts"]["completed"], 4);
        assert_eq!(done["finished_at"], "2026-11-22 07:50:00");
        assert_eq!(done["updated_at"], done["finished_at"]);
        assert_eq!(done["throughput"]["messages_per_minute"], 0);
        assert_eq!(at(&state, 400), done, "a finished run no longer changes");
    }

    #[test]
    fn failed_accounts_stop_half_way_and_add_errors() {
        let state = run(MigrationSeed {
            code: "MG00000043".into(),
            accounts: 2,
            messages: 2000,
            rate: 10,
            parallel: 2,
            failed_accounts: 1,
            ..MigrationSeed::default()
        });
        let middle = at(&state, 150);
        assert_eq!(middle["accounts"]["failed"], 1);
        assert_eq!(middle["accounts"]["running"], 1);
        let errors = middle["errors"].as_i64().expect("errors");
        assert!((1..=5).contains(&errors), "{errors}");
        let done = at(&state, 1000);
        assert_eq!(done["status"], "completed");
        assert_eq!(done["messages"]["migrated"], 1500);

        let all_failed = run(MigrationSeed {
            code: "MG00000044".into(),
            accounts: 1,
            failed_accounts: 1,
            ..MigrationSeed::default()
        });
        assert_eq!(at(&all_failed, 100_000)["status"], "failed");
    }

    #[test]
    fn account_states_always_add_up() {
        let state = run(MigrationSeed {
            code: "MG00000045".into(),
            accounts: 7,
            messages: 7001,
            rate: 33,
            parallel: 3,
            failed_accounts: 2,
            ..MigrationSeed::default()
        });
        for minutes in (0..400).step_by(7) {
            let a = at(&state, minutes);
            let accounts = &a["accounts"];
            let sum: i64 = ["pending", "running", "completed", "failed"]
                .iter()
                .map(|k| accounts[*k].as_i64().expect("count"))
                .sum();
            assert_eq!(accounts["total"], sum);
            assert!(a["messages"]["migrated"].as_i64() <= a["messages"]["total"].as_i64());
        }
    }

    #[test]
    fn bad_seeds_are_refused() {
        for seed in [
            MigrationSeed {
                code: "MG123".into(),
                ..MigrationSeed::default()
            },
            MigrationSeed {
                failed_accounts: 9,
                ..MigrationSeed::default()
            },
            MigrationSeed {
                rate: -1,
                ..MigrationSeed::default()
            },
        ] {
            assert!(MigrationState::from_seed(&seed, Timestamp::UNIX_EPOCH).is_err());
        }
    }
}
