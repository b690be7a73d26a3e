//! `docs/pacer.md` states every constant of the pacer once, with the value the code gives it:
//! this holds the table to `src/upstream/pacer/`.

use std::collections::BTreeMap;
use std::path::Path;

use mailhost_exporter::upstream::pacer::control::{Control, Event, MAX_RATE};
use tokio::time::Instant;

/// `NAME -> (value, file)` from the doc's constants table.
fn documented(doc: &str) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    for line in doc.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // | `NAME` | `value` | `file` | why |
        if cells.len() < 5 || !cells[1].starts_with('`') || !cells[3].ends_with(".rs`") {
            continue;
        }
        let name = cells[1].trim_matches('`').to_owned();
        let value = cells[2].trim_matches('`').to_owned();
        let file = cells[3].trim_matches('`').to_owned();
        assert!(
            out.insert(name.clone(), (value, file)).is_none(),
            "docs/pacer.md states {name} twice"
        );
    }
    out
}

/// The types of the constants the table holds (numbers and durations: what a reader tunes).
const TYPES: [&str; 7] = [
    "f64",
    "u32",
    "u64",
    "usize",
    "i64",
    "Duration",
    "std::time::Duration",
];

/// The code of a file before its test module.
fn before_tests(text: &str) -> &str {
    let mut at = 0;
    while let Some(i) = text[at..].find("#[cfg(test)]\n") {
        let start = at + i;
        let next = &text[start + "#[cfg(test)]\n".len()..];
        if next.lines().next().is_some_and(|l| l.contains("mod tests")) {
            return &text[..start];
        }
        at = start + 1;
    }
    text
}

/// `NAME -> value` of every numeric or duration `const` of a file, outside its tests.
fn declared(text: &str) -> BTreeMap<String, String> {
    let code = before_tests(text);
    let mut out = BTreeMap::new();
    let mut rest = code;
    while let Some(i) = rest.find("const ") {
        let before = &rest[..i];
        rest = &rest[i + "const ".len()..];
        // Only items: `const`, `pub const` or `pub(crate) const` at the start of a line.
        let line_start = before.rsplit('\n').next().unwrap_or("");
        if !matches!(line_start.trim(), "" | "pub" | "pub(crate)" | "pub(super)") {
            continue;
        }
        let Some(colon) = rest.find(':') else { break };
        let name = rest[..colon].trim().to_owned();
        let Some(eq) = rest.find('=') else { break };
        let Some(end) = rest.find(';') else { break };
        if eq < colon || end < eq {
            continue;
        }
        let ty = rest[colon + 1..eq].trim();
        let value = rest[eq + 1..end]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let is_name = name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if is_name && TYPES.contains(&ty) {
            out.insert(name, value);
        }
    }
    out
}

#[test]
fn every_constant_of_the_pacer_is_in_docs_pacer_md_once_with_its_value() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/pacer.md")).unwrap();
    let table = documented(&doc);
    let dir = root.join("src/upstream/pacer");
    let mut problems = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        // The pacer's tests, a file of their own: their constants are the tests' settings.
        .filter(|p| !p.ends_with("tests.rs"))
        .collect();
    files.sort();
    let mut seen = 0;
    for path in files {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        for (name, value) in declared(&text) {
            seen += 1;
            match table.get(&name) {
                None => problems.push(format!("{file}: {name} is not in docs/pacer.md's table")),
                Some((v, f)) if f != &file || v != &value => problems.push(format!(
                    "{name}: docs/pacer.md says `{v}` in {f}, the code `{value}` in {file}"
                )),
                Some(_) => {}
            }
        }
        for (name, (_, f)) in &table {
            if f == &file && !declared(&text).contains_key(name) {
                problems.push(format!(
                    "docs/pacer.md names {name} in {file}, which has no such constant"
                ));
            }
        }
    }
    assert!(
        seen >= 40,
        "only {seen} constants read: the reader is broken"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_reader_sees_items_and_skips_tests_and_locals() {
    let text = "pub const A: f64 = 0.5;\nconst B: Duration =\n    Duration::from_secs(2);\nfn f() { let x = 1; }\n    const C: u32 = 3;\nconst fn g() {}\nconst S: Slot = Slot { a: 1 };\n#[cfg(test)]\npub(super) mod tests {\n    const D: u32 = 4;\n}\n";
    let d = declared(text);
    assert_eq!(d.get("A").map(String::as_str), Some("0.5"));
    assert_eq!(
        d.get("B").map(String::as_str),
        Some("Duration::from_secs(2)")
    );
    assert_eq!(d.get("C").map(String::as_str), Some("3"));
    assert!(!d.contains_key("D"));
    assert_eq!(d.len(), 3, "{d:?}");
}

/// The row of `state` in docs/pacer.md's table of a pace's states.
fn pace_row<'a>(doc: &'a str, state: &str) -> &'a str {
    let table = doc
        .split("\n### A pace ")
        .nth(1)
        .and_then(|rest| rest.split("\n### ").next())
        .expect("docs/pacer.md has a section on a pace's states");
    table
        .lines()
        .find(|l| l.starts_with(&format!("| {state} |")))
        .unwrap_or_else(|| panic!("docs/pacer.md has no row for the pace's state `{state}`"))
}

/// A pace cut at a cold start by a thin first refusal (4 successes, then a 429 50 ms later),
/// and taken to 300 ms after that, `successes` of them answered there, with the calls waiting
/// for the pace throughout.
fn cold_doubling_with(ceiling: Option<f64>, successes: u32) -> (Control, Instant) {
    use std::time::Duration;
    let t0 = Instant::now();
    let mut c = Control::new(t0, ceiling);
    c.tick(t0, true, true);
    for _ in 0..4 {
        c.succeeded(t0);
    }
    let t1 = t0 + Duration::from_millis(50);
    c.tick(t1, true, true);
    assert!(matches!(c.throttled(t1, t0, None, false), Event::Cut(_)));
    assert!(c.cold_doubling(), "a thin first estimate doubles");
    let t2 = t1 + Duration::from_millis(300);
    c.tick(t2, true, true);
    for _ in 0..successes {
        c.succeeded(t2);
    }
    let t3 = t2 + Duration::from_millis(300);
    c.tick(t3, true, true);
    (c, t3)
}

#[test]
fn a_cold_doubling_cut_by_a_thin_refusal_stays_cold_as_docs_pacer_md_says() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/pacer.md")).unwrap();
    let row = pace_row(&doc, "cold doubling");
    for says in [
        "**cubic** when the new estimate rests on",
        "or when the pace had climbed past the last estimate while calls went through",
        "otherwise it stays **cold doubling**",
    ] {
        assert!(
            row.contains(says),
            "docs/pacer.md's cold doubling row: {says:?}\n{row}"
        );
    }
    let refused = |c: &mut Control, now: Instant| {
        let sent = now - std::time::Duration::from_millis(50);
        assert!(matches!(c.throttled(now, sent, None, false), Event::Cut(_)));
    };
    // Two successes, the pace not past the last estimate: cut, and still cold.
    let (mut c, now) = cold_doubling_with(None, 2);
    refused(&mut c, now);
    assert!(c.cold_doubling(), "{:?}", c.curve());
    assert_eq!(c.curve().map(|k| k.known), Some(MAX_RATE));
    // Five successes let the pace double past the last estimate: cubic.
    let (mut c, now) = cold_doubling_with(None, 5);
    refused(&mut c, now);
    assert!(!c.cold_doubling() && c.settled(), "{:?}", c.curve());
    // Twelve, the pace held at the estimate by a ceiling: a confident estimate, cubic.
    let (mut c, now) = cold_doubling_with(Some(8.0), 12);
    refused(&mut c, now);
    assert!(!c.cold_doubling() && c.settled(), "{:?}", c.curve());
}
