//! The docs cite tests by path (`tests/<file>.rs::<test>`, `src/<module>.rs::tests::<test>`,
//! `...::<test>` for another test of the file just named): every cited test exists, so a moved
//! or renamed test cannot leave a promise without its proof.

use crate::helpers::repo_root;

/// One citation: the file (relative to the workspace root) and the test function's name.
fn citations(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        // `...::name` refers to the last file named on the same line.
        let mut last_file: Option<String> = None;
        for span in line.split('`').skip(1).step_by(2) {
            let Some((path, name)) = span.rsplit_once("::") else {
                continue;
            };
            if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || name.is_empty() {
                continue;
            }
            let path = path.strip_suffix("::tests").unwrap_or(path);
            let file = if path == "..." {
                match &last_file {
                    Some(f) => f.clone(),
                    None => continue,
                }
            } else if !path.ends_with(".rs") {
                continue;
            } else if ["crates/", "src/", "tests/"]
                .iter()
                .any(|root| path.starts_with(root))
            {
                path.to_owned()
            } else {
                continue;
            };
            last_file = Some(file.clone());
            out.push((file, name.to_owned()));
        }
    }
    out
}

#[test]
fn every_test_the_docs_cite_exists() {
    let root = repo_root();
    let mut docs: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.push(root.join("README.md"));
    let mut checked = 0;
    let mut missing = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        for (file, name) in citations(&text) {
            checked += 1;
            let found = std::fs::read_to_string(root.join(&file))
                .is_ok_and(|source| source.contains(&format!("fn {name}(")));
            if !found {
                missing.push(format!("{}: {file}::{name}", doc.display()));
            }
        }
    }
    assert!(
        checked > 50,
        "expected the docs to cite many tests, found {checked}"
    );
    assert!(
        missing.is_empty(),
        "cited tests that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn a_citation_is_read_with_its_file_and_continuations() {
    let line = "| x | `tests/a.rs::one`, `...::two`, `src/b.rs::tests::three`, `crates/mailhost-sim/tests/c.rs::four` |";
    assert_eq!(
        citations(line),
        [
            ("tests/a.rs", "one"),
            ("tests/a.rs", "two"),
            ("src/b.rs", "three"),
            ("crates/mailhost-sim/tests/c.rs", "four"),
        ]
        .map(|(f, n)| (f.to_owned(), n.to_owned()))
    );
}
