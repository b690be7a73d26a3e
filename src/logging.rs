//! Logging setup: logfmt or JSON lines on standard error, at the chosen level.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::cli::{LogFormat, LogLevel};

/// Sets up logging, and a panic hook that logs a panic as one error line (`msg=panic`) before
/// the default report: a panic in a background task is otherwise only a line of text that a log
/// pipeline may not catch, and tests of hostile input fail on it.
pub fn init(level: LogLevel, format: LogFormat) {
    install_panic_hook();
    // The flag's values (`error` ... `trace`) are the filter's names of the levels.
    let level = clap::ValueEnum::to_possible_value(&level).expect("no level is skipped");
    let filter = EnvFilter::new(level.get_name());
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        LogFormat::Logfmt => registry
            .with(
                tracing_logfmt::builder()
                    .layer()
                    .with_writer(std::io::stderr),
            )
            .init(),
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(std::io::stderr),
            )
            .init(),
    }
}

/// The marker of the log line written for a panic; tests of hostile input look for it.
pub const PANIC_MESSAGE: &str = "panic";

fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let payload = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        // The payload is our own assertion text, never upstream data or a secret; cut anyway.
        let payload: String = payload.chars().take(200).collect();
        tracing::error!(%location, detail = %payload, "{PANIC_MESSAGE}");
        default(info);
    }));
}
