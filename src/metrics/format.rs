//! The two text formats an exposition is written in, and the OpenMetrics terminator.

/// Which text format a scrape gets; chosen by the web layer from `Accept`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text 0.0.4: the default, and what `promtool check metrics` reads.
    Classic,
    /// OpenMetrics 1.0.0, when a scraper asks for it.
    OpenMetrics,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Classic => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// The OpenMetrics terminator, written once at the very end of a response (after the
/// self-metrics), never in a prepared body.
pub const EOF: &str = "# EOF\n";
