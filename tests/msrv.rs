//! The minimum Rust version the workspace declares (`rust-version` in `Cargo.toml`, which the
//! README repeats) against what the code needs. clippy's `incompatible_msrv` reads the same
//! field and holds every item of the standard library the code calls to it (CI runs clippy with
//! `-D warnings`); it does not see the language's own features, so this test reads the code for
//! the one that sets the minimum today: let chains (`if let ... && ...`), stable since 1.88
//! (edition 2024).

use std::path::{Path, PathBuf};

use crate::helpers::repo_root;

/// The version let chains are stable from.
const LET_CHAINS: (u32, u32) = (1, 88);

/// `rust-version` of `[workspace.package]`, as (major, minor).
fn declared(manifest: &str) -> (u32, u32) {
    let mut in_section = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_section = line == "[workspace.package]";
        } else if in_section && let Some(value) = line.strip_prefix("rust-version") {
            let value = value
                .trim_start()
                .trim_start_matches('=')
                .trim()
                .trim_matches('"');
            let mut parts = value.split('.').map(|p| p.parse::<u32>().unwrap());
            return (parts.next().unwrap(), parts.next().unwrap_or(0));
        }
    }
    panic!("no rust-version in [workspace.package]");
}

/// The line (from 1) of the first let chain in `source`: an `if` or `while` whose condition,
/// up to the `{` that opens its block, holds both a `let` and a `&&` outside any brackets.
/// Comment lines are left out; a `{` inside brackets (a closure's body), a string or a
/// character is not the block's. Text in a string that reads as a let chain counts too: a false
/// find only asks for the minimum that the code's own chains ask for anyway.
fn first_let_chain(source: &str) -> Option<usize> {
    let code: Vec<&str> = source
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("//") {
                ""
            } else {
                l
            }
        })
        .collect();
    let code = code.join("\n");
    let bytes = code.as_bytes();
    let word_at = |i: usize, word: &str| {
        bytes[i..].starts_with(word.as_bytes())
            && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_'))
            && bytes
                .get(i + word.len())
                .is_some_and(|b| b.is_ascii_whitespace() || *b == b'(')
    };
    for i in 0..bytes.len() {
        if !(word_at(i, "if") || word_at(i, "while")) {
            continue;
        }
        let (mut depth, mut has_let, mut has_and) = (0i32, false, false);
        let mut j = i;
        while j < bytes.len() {
            match bytes[j] {
                // A string or a character holds no bracket of the code.
                b'"' => {
                    j += 1;
                    while j < bytes.len() && bytes[j] != b'"' {
                        j += if bytes[j] == b'\\' { 2 } else { 1 };
                    }
                }
                b'\'' if bytes.get(j + 2) == Some(&b'\'') => j += 2,
                b'\'' if bytes.get(j + 1) == Some(&b'\\') && bytes.get(j + 3) == Some(&b'\'') => {
                    j += 3
                }
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b'{' | b';' if depth <= 0 => break,
                b'&' if depth == 0 && bytes.get(j + 1) == Some(&b'&') => has_and = true,
                b'l' if depth == 0 && word_at(j, "let") => has_let = true,
                _ => {}
            }
            j += 1;
        }
        if has_let && has_and {
            return Some(code[..i].matches('\n').count() + 1);
        }
    }
    None
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn let_chains_are_found_across_lines_and_nothing_else_is() {
    let chains = [
        ("fn f() {\n    if let Some(x) = a && x > 1 {\n    }\n}", 2),
        (
            "fn f() {\n    if let Some(old) = &self.pacer\n        && !old.same(pacer)\n    {\n    }\n}",
            2,
        ),
        (
            "fn f() {\n    if ready && let Ok(v) = rx.try_recv() {}\n}",
            2,
        ),
        (
            "fn f() {\n    while let Some(x) = it.next() && x.ok() {}\n}",
            2,
        ),
        (
            "fn f() {\n    let y = 1;\n    x = if let Some(v) = m.get(&k) && v.is_empty() { 1 } else { 2 };\n}",
            3,
        ),
        ("fn f() {\n    if s == \"(\" && let Some(c) = d {}\n}", 2),
    ];
    for (source, line) in chains {
        assert_eq!(first_let_chain(source), Some(line), "{source}");
    }
    let none = [
        "fn f() {\n    if let Some(x) = a {\n    }\n}",
        "fn f() {\n    if a && b {\n    }\n}",
        "fn f() {\n    if let Some(x) = f(a && b) {}\n}",
        "fn f() {\n    if v.iter().any(|x| { let y = x; y && z }) {}\n}",
        "fn f() {\n    let ok = a && b;\n    if ok {}\n}",
        "fn f() {\n    // if let Some(x) = a && b {}\n}",
        "fn f() {\n    let verify = a && b;\n    modified(x);\n}",
        // A bracket in a string or a character is not one of the code's.
        "fn f() {\n    if s == \"(\" {\n        let x = a && b;\n    }\n}",
        "fn f() {\n    if c == '(' {\n        let x = a && b;\n    }\n}",
        "fn f() {\n    if c == '\\'' {\n        let x = a && b;\n    }\n}",
    ];
    for source in none {
        assert_eq!(first_let_chain(source), None, "{source}");
    }
    assert_eq!(
        declared(
            "[package]\nrust-version.workspace = true\n[workspace.package]\nedition = \"2024\"\nrust-version = \"1.88\"\n"
        ),
        (1, 88)
    );
}

#[test]
fn the_declared_rust_version_is_at_least_what_the_language_features_in_use_need() {
    let root = repo_root();
    let declared = declared(&std::fs::read_to_string(root.join("Cargo.toml")).unwrap());
    let mut files = vec![root.join("build.rs")];
    for dir in ["src", "tests", "crates"] {
        rust_files(&root.join(dir), &mut files);
    }
    files.sort();
    let chains: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let line = first_let_chain(&std::fs::read_to_string(f).unwrap())?;
            Some(format!(
                "{}:{line}",
                f.strip_prefix(&root).unwrap().display()
            ))
        })
        .collect();
    if !chains.is_empty() {
        assert!(
            declared >= LET_CHAINS,
            "rust-version {}.{} in Cargo.toml, but let chains (stable since {}.{}) are used: {}",
            declared.0,
            declared.1,
            LET_CHAINS.0,
            LET_CHAINS.1,
            chains.join(", ")
        );
    }
    // The README tells a builder the same minimum.
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let said = format!("Rust {}.{} or later", declared.0, declared.1);
    assert!(readme.contains(&said), "README.md should say {said:?}");
}
