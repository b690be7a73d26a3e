//! Counter families written as text: `prometheus-client` has no `_created` sample, and the
//! derived daily counters need theirs (a restart starts them from zero, and `_created` says
//! when). The text is OpenMetrics; the classic rewriting names the family with its `_total`
//! and drops the `_created` samples, as for every counter.

use super::TracemailDaily;
use crate::collectors::Item;

/// `mailhost_delivery_messages_total{account_id,status}` of every account of `items` that has
/// counters, with `_created`, as one family (nothing when there is none).
pub fn delivery_messages(
    items: &[Item<'_, TracemailDaily>],
    out: &mut dyn std::fmt::Write,
) -> std::fmt::Result {
    let mut head = false;
    for (owner, account, d) in items {
        let Some(counters) = &d.counters else {
            continue;
        };
        if !head {
            out.write_str(
                "# HELP mailhost_delivery_messages Messages of the Delivery account by outcome, counted from the daily statistics: derived by the exporter from each day's figures (today so far, and yesterday's final one at the rollover), starting at zero when the account is first fetched; use increase() over any range, a day included.\n# TYPE mailhost_delivery_messages counter\n",
            )?;
            head = true;
        }
        let mut labels = String::with_capacity(64);
        if !owner.tenant.0.is_default() {
            labels.push_str("tenant=\"");
            escape(&mut labels, owner.tenant.0.as_str());
            labels.push_str("\",");
        }
        labels.push_str("account_id=\"");
        escape(&mut labels, &account.to_string());
        labels.push_str("\",status=\"");
        let created = counters.created.as_millisecond() as f64 / 1000.0;
        for (status, value) in &counters.totals {
            if !value.is_finite() {
                continue;
            }
            let mut l = labels.clone();
            escape(&mut l, status);
            l.push('"');
            writeln!(
                out,
                "mailhost_delivery_messages_total{{{l}}} {}",
                number(*value)
            )?;
            writeln!(
                out,
                "mailhost_delivery_messages_created{{{l}}} {}",
                number(created)
            )?;
        }
    }
    Ok(())
}

/// A label value as both formats escape it: backslash, quote and newline.
fn escape(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// A number as the text formats read it: an integer without a fraction, else Rust's shortest
/// round-trip form.
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}
