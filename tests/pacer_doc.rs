//! `docs/pacer.md` lists the pacer's knobs, each once with the value the code gives it, and
//! every other constant of the pacer is explained where it is defined: this holds both to
//! `src/upstream/pacer/`.

use std::collections::BTreeMap;
use std::path::Path;

use mailhost_exporter::upstream::pacer::control::{Control, Event, MAX_RATE};
use tokio::time::Instant;

/// `NAME -> (value, file)` from the doc's table of knobs.
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

/// The rows of "Knobs" at most: past this it is a dump of internals again, which is what a
/// reader could not find their way through.
const MAX_KNOBS: usize = 24;

/// The numeric constants of `text` (outside its tests) with no `///` line right above them
/// (attributes between allowed): an internal must say where it is defined why it has its value.
fn without_reason(text: &str) -> Vec<String> {
    let lines: Vec<&str> = before_tests(text).lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let item = [
            "const ",
            "pub const ",
            "pub(crate) const ",
            "pub(super) const ",
        ]
        .iter()
        .find_map(|p| line.strip_prefix(p));
        let Some(rest) = item else { continue };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if name.is_empty() || !rest[name.len()..].starts_with(':') {
            continue;
        }
        let above = lines[..i]
            .iter()
            .rev()
            .find(|l| !l.trim_start().starts_with("#["));
        if !above.is_some_and(|l| l.trim_start().starts_with("///")) {
            out.push(name);
        }
    }
    out
}

#[test]
fn every_knob_is_in_docs_pacer_md_with_its_value_and_every_other_constant_says_why_where_it_is() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/pacer.md")).unwrap();
    let table = documented(section(&doc, "Knobs"));
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
    let mut found = 0;
    for path in files {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let consts = declared(&text);
        seen += consts.len();
        for (name, value) in &consts {
            match table.get(name) {
                Some((v, f)) if f != &file || v != value => problems.push(format!(
                    "{name}: docs/pacer.md says `{v}` in {f}, the code `{value}` in {file}"
                )),
                Some(_) => found += 1,
                None => {}
            }
        }
        for name in without_reason(&text) {
            problems.push(format!(
                "{file}: {name} has no `///` line saying why it has its value"
            ));
        }
        for (name, (_, f)) in &table {
            if f == &file && !consts.contains_key(name) {
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
    assert!(
        found == table.len(),
        "docs/pacer.md's knobs name {} constants, {found} of them found in src/upstream/pacer/",
        table.len()
    );
    assert!(
        table.len() <= MAX_KNOBS,
        "docs/pacer.md lists {} constants as knobs, at most {MAX_KNOBS}: an internal belongs where it is defined",
        table.len()
    );
}

#[test]
fn a_constant_without_its_reason_is_found() {
    let text = "/// Why.\npub const A: u32 = 1;\n/// Why.\n#[allow(dead_code)]\nconst B: u32 = 2;\n// A plain comment.\nconst C: u32 = 3;\nconst D: f64 = 4.0;\n#[cfg(test)]\nmod tests {\n    const E: u32 = 5;\n}\n";
    assert_eq!(without_reason(text), ["C", "D"]);
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

/// The doc's text.
fn pacer_doc() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(root.join("docs/pacer.md")).unwrap()
}

/// The section of `doc` under the level-two heading `title`, up to the next one.
fn section<'a>(doc: &'a str, title: &str) -> &'a str {
    let start = doc
        .find(&format!("\n## {title}\n"))
        .unwrap_or_else(|| panic!("docs/pacer.md has no section `{title}`"));
    let body = &doc[start + 1..];
    let end = body[3..].find("\n## ").map_or(body.len(), |i| i + 3);
    &body[..end]
}

/// The anchor a heading gets where the doc is read (GitHub's rule: lower case; letters, digits,
/// `-` and `_` kept; spaces become `-`; the rest dropped).
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[test]
fn every_link_within_docs_pacer_md_names_one_of_its_headings() {
    let doc = pacer_doc();
    let mut fenced = false;
    let mut anchors = std::collections::BTreeSet::new();
    for line in doc.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            anchors.insert(anchor(line.trim_start_matches('#')));
        }
    }
    assert!(anchors.contains("the-life-of-one-call"), "{anchors:?}");
    let mut links = 0;
    let mut broken = Vec::new();
    for (i, _) in doc.match_indices("](#") {
        let rest = &doc[i + 3..];
        let target = &rest[..rest.find(')').expect("a link is closed")];
        links += 1;
        if !anchors.contains(target) {
            broken.push(target.to_owned());
        }
    }
    assert!(links >= 20, "only {links} links read: the reader is broken");
    assert!(
        broken.is_empty(),
        "docs/pacer.md links to headings it does not have: {broken:?}"
    );
}

#[test]
fn every_file_of_the_pacer_has_a_row_in_how_it_is_built() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = pacer_doc();
    let built = section(&doc, "How it is built");
    let missing: Vec<_> = std::fs::read_dir(root.join("src/upstream/pacer"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".rs"))
        .filter(|f| !built.contains(&format!("| `{f}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/pacer.md's `How it is built` has no row for {missing:?}"
    );
}

#[test]
fn the_life_of_one_call_names_only_files_and_functions_the_code_has() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = pacer_doc();
    let life = section(&doc, "The life of one call");
    assert!(life.contains("```mermaid\nsequenceDiagram\n"), "{life}");
    let upstream = root.join("src/upstream");
    let code: String = [upstream.clone(), upstream.join("pacer")]
        .iter()
        .flat_map(|dir| std::fs::read_dir(dir).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '/' || c == '.';
    let mut problems = Vec::new();
    // Each file named: as written from the root, or in `src/upstream/` or its pacer.
    for name in life
        .split(|c: char| !word(c))
        .filter(|w| w.ends_with(".rs"))
    {
        let base = name.rsplit('/').next().unwrap_or(name);
        let found = [
            root.join(name),
            upstream.join(name),
            upstream.join(base),
            upstream.join("pacer").join(base),
        ]
        .iter()
        .any(|p| p.is_file());
        if !found {
            problems.push(format!("no file {name}"));
        }
    }
    // Each function named: `Type::name` in the prose, `name(` in the picture.
    let mut functions = Vec::new();
    for span in life.split('`').skip(1).step_by(2) {
        if let Some((_, f)) = span.rsplit_once("::") {
            functions.push(f.to_owned());
        }
    }
    for (i, _) in life.match_indices('(') {
        let before = &life[..i];
        let start = before
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(0, |j| j + 1);
        let name = &before[start..];
        if !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
            functions.push(name.to_owned());
        }
    }
    assert!(functions.len() >= 4, "{functions:?}");
    for f in functions {
        if !code.contains(&format!("fn {f}(")) && !code.contains(&format!("fn {f}<")) {
            problems.push(format!("no fn {f} in src/upstream/"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
