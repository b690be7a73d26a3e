//! mailhost_exporter: a Prometheus exporter for an email provider's Management API.
//!
//! Data flows one way, up this table: a module imports only from its own layer or the layers
//! below it, and no files import each other in a circle (`tests/layers.rs` reads every file's
//! `crate::` paths and holds both to this table; the simulator's `lib.rs` has its own).
//!
//! | layer | modules | what they hold |
//! |---|---|---|
//! | 1 primitives | `descriptors`, `files`, `redact`, `settings`, `shard`, `shutdown`, `storage`, `tenant` | the settings' parts (field parsers, defaults, the API and HTTP client settings), bounds, the descriptor plan, file reading, redaction, sharding, shutdown, the storage directory (its files, their formats and versions, the records kept of targets and paces), tenant names |
//! | 2 upstream | `upstream` | the provider's client: transport, pacer, circuit breakers, retries, errors |
//! | 3 series | `metrics::classic`, `metrics::family`, `metrics::format`, `metrics::labels` | how a series is named, labelled and written |
//! | 4 collectors | `collectors` | one folder per collector: its config block, its calls, its model, its series |
//! | 5 config file | `config` | the whole `--config.file`, with the collectors' blocks and the tenants |
//! | 6 engine | `engine`, `metrics` | polling the provider on its schedule, the snapshot of what is known, its rendering and publication |
//! | 7 web | `web` | serving: `/metrics`, `/probe`, `/sd`, the landing page, TLS and auth |
//! | 8 assembly | `app`, `cli`, `demo`, `lib`, `logging` | the flags, the logs and the process put together |
//!
//! The simulator of the provider is a peer crate, `mailhost_sim`, used by [`demo`] mode, the
//! tests and the benchmarks.

pub mod app;
pub mod cli;
pub mod collectors;
pub mod config;
pub mod demo;
pub mod descriptors;
pub mod engine;
pub mod files;
pub mod logging;
pub mod metrics;
pub mod redact;
pub mod settings;
pub mod shard;
pub mod shutdown;
pub mod storage;
pub mod tenant;
pub mod upstream;
pub mod web;

pub use app::{App, AppError, StorageOptions, WebOptions};

/// `--version` output: version, revision and compiler.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (revision ",
    env!("MAILHOST_BUILD_REVISION"),
    ", ",
    env!("MAILHOST_RUSTC_VERSION"),
    ")"
);
