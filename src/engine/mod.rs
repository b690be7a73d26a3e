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
