//! The target tasks of one collector run that have not had their first turn at the pacer yet:
//! what the run counts so that it keeps a few of them ahead of the calls in flight, and not a
//! whole window of them waiting, each with its fetch built (`engine::poller::run`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::Notify;

/// How many of a run's target tasks wait for their first turn, and a bell rung when one of them
/// stops waiting.
#[derive(Debug, Default)]
pub struct FirstTurns(Arc<Shared>);

#[derive(Debug, Default)]
struct Shared {
    waiting: AtomicUsize,
    turned: Notify,
}

impl FirstTurns {
    /// Tasks counted and still waiting for their first turn.
    pub fn waiting(&self) -> usize {
        self.0.waiting.load(Ordering::Acquire)
    }

    /// One more task waiting: its place, given up at its first turn (see [`FirstTurn`]).
    pub fn enter(&self) -> FirstTurn {
        self.0.waiting.fetch_add(1, Ordering::AcqRel);
        FirstTurn(Arc::new(Place {
            run: self.0.clone(),
            left: AtomicBool::new(false),
        }))
    }

    /// Waits until a counted task stops waiting. One that stopped while nobody listened wakes
    /// the next listener at once: nothing is missed, and a listener may wake once for nothing.
    pub async fn turned(&self) {
        self.0.turned.notified().await;
    }
}

/// One task's place among its run's tasks waiting for a first turn. The clones of a task's
/// client share it: the first of its calls to be given its turn, or refused one, gives it up,
/// and so does the end of the task, whichever comes first; the place is given up once.
#[derive(Clone, Debug)]
pub struct FirstTurn(Arc<Place>);

#[derive(Debug)]
struct Place {
    run: Arc<Shared>,
    left: AtomicBool,
}

impl FirstTurn {
    /// The task had its turn (or was refused one): it no longer waits.
    pub fn had(&self) {
        self.0.leave();
    }
}

impl Place {
    fn leave(&self) {
        if !self.left.swap(true, Ordering::AcqRel) {
            self.run.waiting.fetch_sub(1, Ordering::AcqRel);
            self.run.turned.notify_one();
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.leave();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_place_is_given_up_once_at_the_first_turn_or_at_the_end_and_rings_the_bell() {
        let turns = FirstTurns::default();
        let rung = || async {
            tokio::time::timeout(std::time::Duration::from_secs(1), turns.turned())
                .await
                .is_ok()
        };
        let (a, b) = (turns.enter(), turns.enter());
        assert_eq!(turns.waiting(), 2);
        assert!(!rung().await, "nobody had a turn");
        let a_clone = a.clone();
        a.had();
        assert_eq!(turns.waiting(), 1);
        // It rang while nobody listened: the next listener goes at once, and once.
        assert!(rung().await);
        a_clone.had();
        drop(a);
        drop(a_clone);
        assert_eq!(turns.waiting(), 1, "given up once, by its turn or its end");
        assert!(!rung().await);
        drop(b);
        assert_eq!(
            turns.waiting(),
            0,
            "a task that ends without a turn waits no more"
        );
        assert!(rung().await);
    }
}
