//! Logging setup: logfmt or JSON lines on standard error, at the chosen level.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::cli::{LogFormat, LogLevel};

pub fn init(level: LogLevel, format: LogFormat) {
    let filter = EnvFilter::new(level.as_str());
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
