//! mailhost_exporter: a Prometheus exporter for an email provider's Management API.
//!
//! Data flows one way: [`config`] (the field parsers and settings every area and the client
//! use) -> [`upstream`] client -> [`area`]s -> [`config_file`] (the whole file, with the areas'
//! blocks) -> [`collector`]s (run by the [`scraper`]) -> [`snapshot`] -> [`metrics`] (rendered
//! once per refresh and published by the [`store`]) -> [`web`]. The simulator of the provider is a peer crate, `mailhost_sim`, used
//! by [`demo`] mode, the tests and the benchmarks.

pub mod app;
pub mod area;
pub mod cli;
pub mod collector;
pub mod config;
pub mod config_file;
pub mod demo;
pub mod descriptors;
pub mod files;
pub mod logging;
pub mod metrics;
pub mod poll_set;
pub mod redact;
pub mod replay;
pub mod scraper;
pub mod shard;
pub mod shutdown;
pub mod snapshot;
pub mod store;
pub mod tenant;
pub mod upstream;
pub mod web;

pub use app::{App, AppError, WebOptions};

/// `--version` output: version, revision and compiler.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (revision ",
    env!("MAILHOST_BUILD_REVISION"),
    ", ",
    env!("MAILHOST_RUSTC_VERSION"),
    ")"
);
