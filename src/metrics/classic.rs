//! The classic Prometheus text format (0.0.4) rewritten from the OpenMetrics text of the same
//! model, as `prometheus-client` has no classic encoder. The two differ only in comments and
//! names: a classic counter family is named with its `_total`, classic text has no `# UNIT`,
//! no `_created` samples and no `# EOF`, and its HELP escapes no quote. Sample lines are the
//! same in both and are copied as they are.

/// The classic text of an OpenMetrics text (with or without its `# EOF`).
pub fn from_openmetrics(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut rewriter = Rewriter::default();
    rewriter.push(openmetrics, &mut |s| out.push_str(s));
    rewriter.finish(&mut |s| out.push_str(s));
    out
}

/// The rewriting as a stream: OpenMetrics text goes in by pieces of any size (a line may be
/// split between two), classic text comes out line by line, so a body of a hundred megabytes is
/// rewritten without being held whole.
#[derive(Debug, Default)]
pub struct Rewriter {
    /// The start of a line whose end has not come yet.
    partial: String,
    /// HELP comes before TYPE, and only TYPE says whether the name needs its `_total`.
    help: Option<String>,
    /// The family being copied, when it is a counter: its `_created` samples are dropped.
    counter: Option<String>,
}

impl Rewriter {
    /// Takes the next piece of OpenMetrics text; `out` receives the classic text of every line
    /// it completes.
    pub fn push(&mut self, piece: &str, out: &mut dyn FnMut(&str)) {
        let mut rest = piece;
        if !self.partial.is_empty() {
            let Some(i) = rest.find('\n') else {
                self.partial.push_str(rest);
                return;
            };
            let mut line = std::mem::take(&mut self.partial);
            line.push_str(&rest[..=i]);
            self.line(&line, out);
            rest = &rest[i + 1..];
        }
        for line in rest.split_inclusive('\n') {
            if line.ends_with('\n') {
                self.line(line, out);
            } else {
                self.partial.push_str(line);
            }
        }
    }

    /// Ends the text: a last line without its newline is rewritten as it is.
    pub fn finish(&mut self, out: &mut dyn FnMut(&str)) {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line(&line, out);
        }
    }

    fn line(&mut self, line: &str, out: &mut dyn FnMut(&str)) {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            self.help = Some(rest.to_owned());
            return;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest
                .trim_end()
                .split_once(' ')
                .unwrap_or((rest.trim_end(), ""));
            let (suffix, kind) = match kind {
                "counter" => ("_total", "counter"),
                "gauge" | "histogram" | "summary" => ("", kind),
                // OpenMetrics-only types (info, stateset, unknown, ...) have no classic peer.
                _ => ("", "untyped"),
            };
            let help = self.help.take();
            if let Some((_, text)) = help.as_deref().and_then(|h| h.split_once(' ')) {
                let text = classic_help(text.trim_end_matches('\n'));
                out(&format!("# HELP {name}{suffix} {text}\n"));
            }
            out(&format!("# TYPE {name}{suffix} {kind}\n"));
            self.counter = (kind == "counter").then(|| name.to_owned());
            return;
        }
        if line.starts_with("# UNIT ") || line.starts_with("# EOF") {
            return;
        }
        if let Some(name) = &self.counter
            && line
                .strip_prefix(name.as_str())
                .is_some_and(|rest| rest.starts_with("_created{") || rest.starts_with("_created "))
        {
            return;
        }
        out(line);
    }
}

/// An OpenMetrics HELP text (`\\`, `\n` and `\"` escaped) as classic HELP text (`\\` and `\n`
/// escaped, a quote as it is).
fn classic_help(escaped: &str) -> String {
    let mut out = String::with_capacity(escaped.len());
    let mut chars = escaped.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('"') => out.push('"'),
            Some('n') => out.push_str("\\n"),
            Some('\\') => out.push_str("\\\\"),
            // Not an escape OpenMetrics writes: keep the backslash, escaped as classic wants it.
            Some(other) => {
                out.push_str("\\\\");
                out.push(other);
            }
            None => out.push_str("\\\\"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPENMETRICS: &str = "# HELP demo_remaining Messages left.\n# TYPE demo_remaining gauge\n\
        demo_remaining{account_id=\"1\"} 42.0\n\
        # HELP demo_requests Requests \\\"made\\\".\n# TYPE demo_requests counter\n\
        demo_requests_total{code=\"200\"} 3\ndemo_requests_created{code=\"200\"} 1700000000.0\n\
        # HELP demo_duration_seconds How long.\n# TYPE demo_duration_seconds histogram\n\
        # UNIT demo_duration_seconds seconds\n\
        demo_duration_seconds_sum{endpoint=\"x\"} 0.55\ndemo_duration_seconds_count{endpoint=\"x\"} 3\n\
        demo_duration_seconds_bucket{le=\"0.1\",endpoint=\"x\"} 1\n\
        demo_duration_seconds_bucket{le=\"+Inf\",endpoint=\"x\"} 3\n\
        # EOF\n";

    #[test]
    fn classic_text_names_counters_with_total_and_has_no_unit_created_or_eof() {
        assert_eq!(
            from_openmetrics(OPENMETRICS),
            "# HELP demo_remaining Messages left.\n# TYPE demo_remaining gauge\n\
             demo_remaining{account_id=\"1\"} 42.0\n\
             # HELP demo_requests_total Requests \"made\".\n# TYPE demo_requests_total counter\n\
             demo_requests_total{code=\"200\"} 3\n\
             # HELP demo_duration_seconds How long.\n# TYPE demo_duration_seconds histogram\n\
             demo_duration_seconds_sum{endpoint=\"x\"} 0.55\ndemo_duration_seconds_count{endpoint=\"x\"} 3\n\
             demo_duration_seconds_bucket{le=\"0.1\",endpoint=\"x\"} 1\n\
             demo_duration_seconds_bucket{le=\"+Inf\",endpoint=\"x\"} 3\n"
        );
    }

    #[test]
    fn help_escapes_are_those_of_each_format() {
        // A backslash, a newline and a quote in the help text, as OpenMetrics escapes them.
        let om = "# HELP x A \\\\ b\\n c \\\"d\\\" \\\\\\\" e.\n# TYPE x gauge\nx 1\n";
        assert_eq!(
            from_openmetrics(om),
            "# HELP x A \\\\ b\\n c \"d\" \\\\\" e.\n# TYPE x gauge\nx 1\n"
        );
    }

    #[test]
    fn the_stream_gives_the_same_text_however_the_input_is_cut() {
        let whole = from_openmetrics(OPENMETRICS);
        for size in [1, 2, 3, 7, 16, 64, 1000] {
            let mut out = String::new();
            let mut rewriter = Rewriter::default();
            let bytes = OPENMETRICS.as_bytes();
            for piece in bytes.chunks(size) {
                // The text is ASCII: every cut is a char boundary.
                rewriter.push(std::str::from_utf8(piece).unwrap(), &mut |s| {
                    out.push_str(s)
                });
            }
            rewriter.finish(&mut |s| out.push_str(s));
            assert_eq!(out, whole, "pieces of {size}");
        }
    }

    #[test]
    fn types_without_a_classic_peer_become_untyped() {
        let om = "# HELP x Something.\n# TYPE x unknown\nx{v=\"1\"} 1\n";
        assert_eq!(
            from_openmetrics(om),
            "# HELP x Something.\n# TYPE x untyped\nx{v=\"1\"} 1\n"
        );
    }
}
