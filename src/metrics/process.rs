//! The `process_*` series every exporter built on exporter-toolkit serves (CPU time, memory,
//! file descriptors, threads, start time), read from `/proc/self` as client_golang's process
//! collector reads them, for `/metrics` at most once a second (`web::scrape::TailCache`). Off
//! with `--web.disable-exporter-metrics`.
//! Elsewhere than on Linux, or when `/proc` cannot be read, the series that cannot be read are
//! left out; a scrape never fails for them.

use std::fmt::Write as _;

use crate::metrics::Format;

/// Clock ticks per second in `/proc/<pid>/stat`: Linux reports CPU times in USER_HZ, which is
/// 100 on every architecture it supports, whatever the kernel's own tick rate.
const USER_HZ: f64 = 100.0;

/// Entries of `/proc/self/fd` counted at most: the soft limit of open files is far below on
/// any real system, and a count past it would only say "very many".
const MAX_FDS_COUNTED: usize = 1 << 20;

/// What one read of `/proc/self` found; `None` where a file could not be read or parsed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcessFigures {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<f64>,
    pub virtual_bytes: Option<f64>,
    pub open_fds: Option<f64>,
    pub max_fds: Option<f64>,
    pub start_time_seconds: Option<f64>,
    pub threads: Option<f64>,
}

impl ProcessFigures {
    /// Reads the figures of this process now.
    pub fn read() -> ProcessFigures {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        let stat = read("/proc/self/stat").and_then(|s| parse_stat(&s));
        let boot_time = read("/proc/stat").and_then(|s| parse_boot_time(&s));
        let (resident_bytes, virtual_bytes, threads) = read("/proc/self/status")
            .map(|s| parse_status(&s))
            .unwrap_or_default();
        ProcessFigures {
            cpu_seconds: stat.map(|s| s.cpu_ticks / USER_HZ),
            resident_bytes,
            virtual_bytes,
            open_fds: std::fs::read_dir("/proc/self/fd")
                .ok()
                .map(|d| d.take(MAX_FDS_COUNTED).count() as f64),
            max_fds: read("/proc/self/limits").and_then(|s| parse_max_fds(&s)),
            start_time_seconds: stat
                .zip(boot_time)
                .map(|(s, boot)| boot + s.start_ticks / USER_HZ),
            threads,
        }
    }

    /// The series in `format`: counters as OpenMetrics declares them (family without
    /// `_total`), gauges alike in both.
    pub fn render(&self, format: Format) -> String {
        let mut out = String::with_capacity(1024);
        let families: [(&str, &str, &str, Option<f64>); 7] = [
            (
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                "counter",
                self.cpu_seconds,
            ),
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                "gauge",
                self.resident_bytes,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                "gauge",
                self.virtual_bytes,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors.",
                "gauge",
                self.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors.",
                "gauge",
                self.max_fds,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                "gauge",
                self.start_time_seconds,
            ),
            (
                "process_threads",
                "Number of OS threads in the process.",
                "gauge",
                self.threads,
            ),
        ];
        for (name, help, kind, value) in families {
            let Some(value) = value.filter(|v| v.is_finite()) else {
                continue;
            };
            let total = if kind == "counter" { "_total" } else { "" };
            // Classic text names a counter family with its `_total`, OpenMetrics without.
            let family = if format == Format::Classic { total } else { "" };
            // Writing into a String cannot fail.
            let _ = write!(
                out,
                "# HELP {name}{family} {help}\n# TYPE {name}{family} {kind}\n{name}{total} {value:?}\n"
            );
        }
        out
    }
}

/// The fields of `/proc/<pid>/stat` this module uses.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Stat {
    /// utime + stime, in clock ticks.
    cpu_ticks: f64,
    /// When the process started, in clock ticks since boot.
    start_ticks: f64,
}

/// Reads `/proc/<pid>/stat`. The command name (field 2) is in parentheses and may hold spaces
/// and parentheses of its own: the fields are counted from the last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let after = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the name, field 3 (state) is index 0: utime is field 14, stime 15, starttime 22.
    let field = |n: usize| fields.get(n - 3)?.parse::<f64>().ok();
    Some(Stat {
        cpu_ticks: field(14)? + field(15)?,
        start_ticks: field(22)?,
    })
}

/// The boot time (`btime`, seconds since the epoch) from `/proc/stat`.
fn parse_boot_time(text: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// Resident and virtual memory in bytes and the thread count from `/proc/<pid>/status`.
fn parse_status(text: &str) -> (Option<f64>, Option<f64>, Option<f64>) {
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
    };
    (
        field("VmRSS").map(|kib| kib * 1024.0),
        field("VmSize").map(|kib| kib * 1024.0),
        field("Threads"),
    )
}

/// The soft limit of open files from `/proc/<pid>/limits`; `unlimited` is left out.
fn parse_max_fds(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::assert_holds;

    #[test]
    fn stat_is_read_from_after_the_last_parenthesis_of_the_name() {
        let stat = "4242 (mailhost (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 130 0 0 20 0 9 0 12345 1234567 890 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n";
        assert_eq!(
            parse_stat(stat),
            Some(Stat {
                cpu_ticks: 380.0,
                start_ticks: 12345.0
            })
        );
        assert_eq!(parse_stat("4242 (short) S 1 2"), None);
        assert_eq!(parse_stat("no parenthesis"), None);
    }

    #[test]
    fn status_limits_and_boot_time_give_bytes_threads_fds_and_seconds() {
        let status = "Name:\tmailhost\nVmSize:\t  204800 kB\nVmRSS:\t    10240 kB\nThreads:\t9\n";
        assert_eq!(
            parse_status(status),
            (Some(10_485_760.0), Some(209_715_200.0), Some(9.0))
        );
        assert_eq!(parse_status("Name:\tx\n"), (None, None, None));
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \nMax processes             63704                63704                processes \nMax open files            1024                 524288               files     \n";
        assert_eq!(parse_max_fds(limits), Some(1024.0));
        assert_eq!(
            parse_max_fds(
                "Max open files            unlimited            unlimited            files\n"
            ),
            None
        );
        assert_eq!(
            parse_boot_time("cpu  1 2 3\nbtime 1795300000\nprocesses 9\n"),
            Some(1_795_300_000.0)
        );
    }

    #[test]
    fn a_counter_is_declared_as_each_format_wants_and_unknown_figures_are_left_out() {
        let figures = ProcessFigures {
            cpu_seconds: Some(1.5),
            threads: Some(9.0),
            ..ProcessFigures::default()
        };
        let classic = figures.render(Format::Classic);
        assert_holds(
            &classic,
            &[
                "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.5\n",
                "# TYPE process_threads gauge\nprocess_threads 9.0\n",
            ],
        );
        assert!(!classic.contains("process_max_fds"));
        let om = figures.render(Format::OpenMetrics);
        assert!(om.contains("# TYPE process_cpu_seconds counter\nprocess_cpu_seconds_total 1.5\n"));
        assert_eq!(ProcessFigures::default().render(Format::Classic), "");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_every_figure_and_they_are_plausible() {
        let f = ProcessFigures::read();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(f.cpu_seconds.is_some_and(|s| s >= 0.0));
        assert!(f.resident_bytes.is_some_and(|b| b > 1024.0 * 1024.0));
        assert!(
            f.virtual_bytes
                .is_some_and(|v| v >= f.resident_bytes.unwrap())
        );
        assert!(f.open_fds.is_some_and(|n| n >= 3.0));
        assert!(f.max_fds.is_some_and(|n| n >= f.open_fds.unwrap()));
        assert!(f.threads.is_some_and(|n| n >= 1.0));
        // Started within the last day and not in the future (a second of rounding either way).
        let start = f.start_time_seconds.unwrap();
        assert!(
            start <= now + 1.0 && start > now - 86_400.0,
            "{start} vs {now}"
        );
    }
}
