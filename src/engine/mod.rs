//! The engine: what polls the provider on its own schedule and keeps what it learned, between
//! the config file and the web side. The [`poller`] runs each tenant's [`collector`]s on their
//! intervals over their targets (the configured ones and those of the [`poll_set`]: probed and
//! discovered), hands each run's results to the [`store`]'s publisher, which applies them to the
//! [`snapshot`] and renders it once per refresh; a collector's loop that panics is started again
//! after a back-off by [`restart`]; [`replay`] is the test seam that runs one set of
//! upstream bodies through the same reading and rendering; [`checkpoint`] keeps the snapshot
//! under `--storage.path` and restores it at start, and [`paces`] the pacers' learned state
//! beside it; [`signal`] holds the small channels there is one of per tenant, [`few`] the small maps.

pub mod checkpoint;
pub mod few;
pub mod paces;
pub mod poll_set;
pub mod poller;
pub mod replay;
pub mod restart;
pub mod signal;
pub mod snapshot;
pub mod spec;
pub mod store;

use std::sync::{Arc, LockResult, PoisonError};

use arc_swap::ArcSwap;

/// What a lock guards, whether or not a panic poisoned it: nothing in the engine panics while it
/// holds a lock, and what each lock guards is still whole if something did (each says why).
pub(crate) fn unpoisoned<G>(locked: LockResult<G>) -> G {
    locked.unwrap_or_else(PoisonError::into_inner)
}

/// A value a reload replaces whole, read as a pointer to the latest (an `ArcSwap`, as the
/// store's prepared bodies and the app's upstream are): what the checkpoints are made under
/// ([`checkpoint::Current`]), the configured tenants' pacers ([`paces::Pacers`]).
#[derive(Clone, Debug, Default)]
pub struct Latest<T>(Arc<ArcSwap<T>>);

impl<T> Latest<T> {
    pub fn new(value: T) -> Self {
        Latest(Arc::new(ArcSwap::from_pointee(value)))
    }

    pub fn set(&self, value: T) {
        self.0.store(Arc::new(value));
    }

    pub(crate) fn get(&self) -> Arc<T> {
        self.0.load_full()
    }
}
