//! The `mailhost_exporter` binary: parses flags, sets up logging, runs, maps errors to an
//! exit code.

use std::process::ExitCode;

use anyhow::Context as _;
use mailhost_exporter::cli::Cli;
use mailhost_exporter::config::{CollectorSwitches, Config};
use mailhost_exporter::settings::TOKEN_ENV;
use mailhost_exporter::web::listen::Inherited;
use mailhost_exporter::web::serve::ServeOptions;
use mailhost_exporter::web::web_config::WebConfig;
use mailhost_exporter::{App, StorageOptions, WebOptions, demo, descriptors, logging, shutdown};
use tokio_util::sync::CancellationToken;

/// The allocator, chosen by measurement (docs/performance.md, "The allocator"): jemalloc keeps a
/// large fleet's peak memory a sixth lower than glibc's per-thread arenas, in every install.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, built in: pages freed go back to the system at once rather than after
/// ten seconds. A refresh of a large fleet frees its buffers (run results, the bodies it
/// rendered, the old snapshot) within a few seconds of making the next ones; kept for ten
/// seconds, they were a third of the peak (100,000 accounts over 10 tenants: VmHWM 337 MiB with
/// jemalloc's defaults, 202 MiB with these; scrape throughput unchanged; docs/performance.md,
/// "The allocator"). `_RJEM_MALLOC_CONF` in the environment is read after these and overrides
/// them.
// SAFETY: a static that jemalloc reads by this name once, when it starts; nothing else in the
// program defines the symbol (tikv-jemalloc-sys declares it for this use), and the value is a
// NUL-terminated string that lives as long as the program.
#[cfg(feature = "jemalloc")]
#[allow(non_upper_case_globals, unsafe_code)]
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static malloc_conf: Option<&'static u8> = Some(&JEMALLOC_CONF[0]);

#[cfg(feature = "jemalloc")]
const JEMALLOC_CONF: &[u8] = b"dirty_decay_ms:0,muzzy_decay_ms:0\0";

#[cfg(all(feature = "mimalloc", not(feature = "jemalloc")))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let (cli, switches) = mailhost_exporter::cli::parse();
    if cli.config_check {
        let path = cli
            .config_file
            .as_deref()
            .expect("clap requires --config.file with --config.check");
        let checked = if cli.config_syntax_only {
            Config::check_syntax(path, &switches).map(|c| (c.asked_upstream, c.unread_line()))
        } else {
            Config::load_switched(path, &switches).map(|c| (c.asked_upstream(), None))
        };
        return match checked {
            Ok((asked_upstream, unread)) => {
                let plan = descriptors::Plan::at_start(cli.max_connections, asked_upstream);
                if let Some(told) = plan.shortfall() {
                    eprintln!("{}: warning: {told}", path.display());
                }
                if let Some(unread) = unread {
                    eprintln!("{}: {unread}", path.display());
                }
                println!("ok");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                ExitCode::FAILURE
            }
        };
    }

    if cli.demo && switches != CollectorSwitches::default() {
        eprintln!(
            "mailhost_exporter: --collector.NAME and --no-collector.NAME switch the collectors of a config file; demo mode runs every collector (drop them, or give --config.file)"
        );
        return ExitCode::from(2);
    }
    if cli.config_file.is_none() && !cli.demo {
        eprintln!(
            "mailhost_exporter: nothing to do. Start it with a config file (--config.file=config.yml; see examples/config.yml and \
             set the token with api.token_file or {TOKEN_ENV}), or try it with --demo."
        );
        return ExitCode::from(2);
    }

    logging::init(cli.log_level, cli.log_format);
    raise_open_file_limit();
    match run(cli, switches) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Logging is set up by now: one line, in the format the operator chose.
            tracing::error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Threads for blocking work at most (publishing the snapshot, expiry, reading files on a
/// reload, name lookups of new upstream connections): the process's threads do not grow with the
/// number of tenants or of calls in flight; work beyond waits for a thread.
const MAX_BLOCKING_THREADS: usize = 16;

fn run(cli: Cli, switches: CollectorSwitches) -> anyhow::Result<()> {
    let web_config = match &cli.web_config_file {
        Some(path) => WebConfig::load(path).with_context(|| {
            format!("invalid web config {} (--web.config.file)", path.display())
        })?,
        None => WebConfig::default(),
    };
    // Taken before the runtime starts: the protocol clears two environment variables.
    let systemd_sockets = cli
        .systemd_socket
        .then(Inherited::from_systemd)
        .transpose()?;
    let web = WebOptions {
        listen_addresses: cli.listen_addresses,
        systemd_sockets,
        telemetry_path: cli.telemetry_path,
        enable_lifecycle: cli.enable_lifecycle,
        exporter_metrics: !cli.disable_exporter_metrics,
        max_requests: cli.max_requests,
        web_config,
        serve: ServeOptions {
            header_read_timeout: cli.header_read_timeout,
            idle_timeout: cli.idle_timeout,
            max_connections: cli.max_connections,
        },
    };
    // Read and validate the config before starting anything, so a bad file exits at once.
    let config = cli.config_file.as_ref().map(|path| {
        Config::load_switched(path, &switches)
            .map(|config| Config {
                shard: cli.shard,
                target_failures: cli.target_failures,
                ..config
            })
            .with_context(|| format!("invalid config {}", path.display()))
    });
    let config = config.transpose()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .build()?;
    runtime.block_on(async move {
        let token = CancellationToken::new();
        shutdown::cancel_on_signal(token.clone());
        match config {
            Some(config) => {
                let path = cli.config_file.clone().expect("a config came from a file");
                let mut app = App::build(config, web).await?.with_config_file(path);
                if let Some(path) = cli.storage_path.clone() {
                    app = app
                        .with_storage(StorageOptions {
                            path,
                            checkpoint_interval: cli.checkpoint_interval,
                        })
                        .await?;
                }
                let addresses: Vec<String> =
                    app.local_addrs().iter().map(ToString::to_string).collect();
                tracing::info!(address = %addresses.join(","), version = env!("CARGO_PKG_VERSION"), "mailhost_exporter listening");
                app.run(token).await?;
            }
            None => demo::run(web, cli.demo_rate_limit, token).await?,
        }
        Ok(())
    })
}

/// Raises the soft open-file limit to the hard one, as Go programs do at start, so the
/// connection cap (which stays below the soft limit) can be as large as the system allows.
fn raise_open_file_limit() {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => tracing::debug!(limit, "open-file limit"),
        Err(e) => {
            tracing::warn!(error = %e, "cannot raise the open-file limit; the connection cap follows the current one")
        }
    }
}
