//! Command-line flags, named after the Prometheus exporter conventions.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

pub const DEFAULT_LISTEN_ADDRESS: &str = ":19587";
/// Concurrent scrapes served at most, as Prometheus' own default.
pub const DEFAULT_MAX_REQUESTS: usize = 40;

#[derive(Debug, Parser)]
#[command(
    name = "mailhost_exporter",
    version,
    long_version = crate::LONG_VERSION,
    about = "Prometheus exporter for an email provider's Management API: Delivery quota, sending statistics, migrations and mailboxes.",
    after_help = "Start with a config file (--config.file, see examples/config.yml) or try it with --demo."
)]
pub struct Cli {
    /// Path to the YAML configuration file.
    #[arg(long = "config.file", value_name = "FILE")]
    pub config_file: Option<PathBuf>,

    /// Validate the configuration file, print what is wrong or `ok`, and exit (0 ok, 1 not).
    #[arg(long = "config.check", requires = "config_file")]
    pub config_check: bool,

    /// Address to listen on for the metrics and landing pages (`:PORT` means every interface).
    #[arg(long = "web.listen-address", value_name = "ADDR", default_value = DEFAULT_LISTEN_ADDRESS)]
    pub listen_address: String,

    /// Path under which to expose metrics.
    #[arg(
        long = "web.telemetry-path",
        value_name = "PATH",
        default_value = "/metrics"
    )]
    pub telemetry_path: String,

    /// TLS and basic authentication for the web endpoints, in the Prometheus exporter-toolkit
    /// format (tls_server_config, basic_auth_users, http_server_config).
    #[arg(long = "web.config.file", value_name = "FILE")]
    pub web_config_file: Option<PathBuf>,

    /// Serve `POST /-/reload` (the config is also reloaded on SIGHUP).
    #[arg(long = "web.enable-lifecycle")]
    pub enable_lifecycle: bool,

    /// Scrapes served at once at most; more get 503. 0 means no limit.
    #[arg(long = "web.max-requests", value_name = "N", default_value_t = DEFAULT_MAX_REQUESTS)]
    pub max_requests: usize,

    /// Only log messages with the given severity or above.
    #[arg(long = "log.level", value_enum, default_value_t = LogLevel::Info)]
    pub log_level: LogLevel,

    /// Output format of log messages.
    #[arg(long = "log.format", value_enum, default_value_t = LogFormat::Logfmt)]
    pub log_format: LogFormat,

    /// Run against a built-in simulator of the provider with a demo fleet; needs no token.
    #[arg(long, conflicts_with = "config_file")]
    pub demo: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl LogLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Logfmt,
    Json,
}
