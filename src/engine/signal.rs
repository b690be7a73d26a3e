//! Small stand-ins for tokio's `watch` channel where there is one per tenant: a [`Bell`] (a
//! count that moves on, with whoever waits for it woken) and a [`channel`] of one value built on
//! it. A `watch` channel keeps nine lists of waiters beside its value (about 300 bytes, 690 with a
//! collector's plan); ten thousand tenants had two each. What is woken here is a collector's own
//! task, one waiter or a few, so one list does.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

/// A count that moves on whenever something happened, and wakes those waiting for it to move.
#[derive(Debug, Default)]
pub struct Bell {
    rung: AtomicU64,
    waiting: Notify,
}

impl Bell {
    /// Moves the count on and wakes every waiter.
    pub fn ring(&self) {
        self.rung.fetch_add(1, Ordering::SeqCst);
        self.waiting.notify_waiters();
    }

    /// How often it has rung so far.
    pub fn rung(&self) -> u64 {
        self.rung.load(Ordering::SeqCst)
    }

    /// Waits until the count is not `seen` (at once if it is not already), then takes the count
    /// now as seen.
    pub async fn rung_since(&self, seen: &mut u64) {
        loop {
            // Made before the count is read: a ring after the read wakes it.
            let woken = self.waiting.notified();
            let now = self.rung();
            if now != *seen {
                *seen = now;
                return;
            }
            woken.await;
        }
    }
}

/// The value and its bell, shared by the sender and its receivers.
#[derive(Debug)]
struct Shared<T> {
    value: Mutex<T>,
    bell: Bell,
    /// The sender is gone: no value will come.
    closed: AtomicBool,
}

impl<T> Shared<T> {
    /// Nothing panics while holding the lock; if something did, the value is still a whole one.
    fn lock(&self) -> MutexGuard<'_, T> {
        self.value.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Where a new value is sent from; dropping it closes the channel.
#[derive(Debug)]
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

/// Reads the latest value, and waits for the next one.
#[derive(Debug)]
pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
    /// The count of the bell when the value was last seen.
    seen: u64,
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        Receiver {
            shared: self.shared.clone(),
            seen: self.seen,
        }
    }
}

/// The channel was closed (its sender dropped) with no value unseen.
#[derive(Debug, PartialEq, Eq)]
pub struct Closed;

/// A channel holding `value`, as `tokio::sync::watch::channel` makes one: the receiver has seen
/// it.
pub fn channel<T>(value: T) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        value: Mutex::new(value),
        bell: Bell::default(),
        closed: AtomicBool::new(false),
    });
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver { shared, seen: 0 },
    )
}

impl<T> Sender<T> {
    /// Replaces the value; every receiver's [`Receiver::changed`] then returns.
    pub fn send(&self, value: T) {
        {
            let mut held = self.shared.lock();
            *held = value;
            // Counted under the lock: a receiver that reads the value and the count together
            // never takes this value as unseen.
            self.shared.bell.rung.fetch_add(1, Ordering::SeqCst);
        }
        self.shared.bell.waiting.notify_waiters();
    }

    /// The latest value.
    pub fn borrow(&self) -> MutexGuard<'_, T> {
        self.shared.lock()
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.bell.waiting.notify_waiters();
    }
}

impl<T> Receiver<T> {
    /// The latest value, not marked seen.
    pub fn borrow(&self) -> MutexGuard<'_, T> {
        self.shared.lock()
    }

    /// The latest value, marked seen.
    pub fn borrow_and_update(&mut self) -> MutexGuard<'_, T> {
        let held = self.shared.lock();
        self.seen = self.shared.bell.rung();
        held
    }

    /// Waits for a value not seen yet and marks it seen; `Closed` once the sender is dropped
    /// and every value was seen.
    pub async fn changed(&mut self) -> Result<(), Closed> {
        let bell = &self.shared.bell;
        loop {
            let woken = bell.waiting.notified();
            let now = bell.rung();
            if now != self.seen {
                self.seen = now;
                return Ok(());
            }
            if self.shared.closed.load(Ordering::SeqCst) {
                return Err(Closed);
            }
            woken.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::time::Duration;

    // The tests run on one thread: `yield_now` lets the spawned task run until it waits, so the
    // order of waiting and sending is the one written, without a sleep.

    #[tokio::test]
    async fn a_receiver_sees_each_new_value_once_and_stops_when_the_sender_is_gone() {
        let (tx, mut rx) = channel(1);
        assert_eq!(*rx.borrow(), 1);
        let waiting = tokio::spawn(async move {
            rx.changed().await.unwrap();
            let seen = *rx.borrow_and_update();
            let closed = rx.changed().await;
            (seen, closed)
        });
        tokio::task::yield_now().await;
        tx.send(2);
        tokio::task::yield_now().await;
        drop(tx);
        assert_eq!(waiting.await.unwrap(), (2, Err(Closed)));
    }

    #[tokio::test]
    async fn a_value_sent_before_the_wait_is_not_missed_and_one_seen_does_not_wake() {
        let (tx, mut rx) = channel("a");
        tx.send("b");
        // Sent before anyone waited: changed returns at once.
        tokio::time::timeout(Duration::from_secs(1), rx.changed())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(*rx.borrow_and_update(), "b");
        // Seen: nothing new until the next send.
        assert!(
            tokio::time::timeout(Duration::from_millis(20), rx.changed())
                .await
                .is_err()
        );
        let mut late = rx.clone();
        tx.send("c");
        late.changed().await.unwrap();
        assert_eq!(*late.borrow(), "c");
    }

    #[tokio::test]
    async fn a_bell_wakes_a_waiter_rung_after_it_read_the_count() {
        let bell = Arc::new(Bell::default());
        let mut seen = bell.rung();
        let ringer = {
            let bell = bell.clone();
            tokio::spawn(async move {
                tokio::task::yield_now().await;
                bell.ring();
            })
        };
        tokio::time::timeout(Duration::from_secs(1), bell.rung_since(&mut seen))
            .await
            .unwrap();
        assert_eq!(seen, 1);
        ringer.await.unwrap();
    }

    #[test]
    fn a_channel_costs_its_value_and_one_list_of_waiters() {
        // A tokio watch channel of the same value: its value and about 300 bytes more.
        let shared = std::mem::size_of::<Shared<[u8; 344]>>();
        assert!(shared <= 344 + 64, "{shared} bytes");
    }
}
