//! The layers of both crates, as each `lib.rs` writes them in its table, held against the code:
//! every file belongs to a layer, imports nothing from a layer above its own, and no files
//! import each other in a circle (a module and its own children excepted: that is how Rust
//! declares and re-exports modules). Imports are read from the text: `crate::` and `super::`
//! paths, `use crate::{...}` groups, comments left out. `LAYERS_ROOT` points the test at another
//! checkout (to see it fail on one with an upward import).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path, `["upstream", "pacer"]`; the crate root is `[]`.
type Module = Vec<String>;

struct Crate {
    /// Module -> its file, relative to `src/`.
    files: BTreeMap<Module, String>,
    /// Module prefix -> (layer number, layer name), from the table in `lib.rs`.
    layers: Vec<(Module, u32, String)>,
}

fn root() -> PathBuf {
    std::env::var_os("LAYERS_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

fn module_of(rel: &Path) -> Module {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

fn walk(dir: &Path, src: &Path, out: &mut BTreeMap<Module, String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let rel = path.strip_prefix(src).unwrap().to_owned();
        if path.is_dir() {
            // Binaries are crate roots of their own.
            if rel != Path::new("bin") {
                walk(&path, src, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") && rel != Path::new("main.rs") {
            out.insert(module_of(&rel), rel.to_string_lossy().into_owned());
        }
    }
}

/// The rows of the layer table in `lib.rs`: `//! | 3 series | `metrics::family`, ... | ... |`.
fn layer_table(lib: &str) -> Vec<(Module, u32, String)> {
    let mut out = Vec::new();
    for line in lib.lines() {
        let Some(row) = line.strip_prefix("//! |") else {
            continue;
        };
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let Some((number, name)) = cells[0].split_once(' ') else {
            continue;
        };
        let Ok(number) = number.parse::<u32>() else {
            continue;
        };
        for module in cells[1].split(',') {
            let module = module.trim().trim_matches('`');
            let path: Module = if module == "lib" {
                Vec::new()
            } else {
                module.split("::").map(str::to_owned).collect()
            };
            out.push((path, number, name.to_owned()));
        }
    }
    out
}

fn read_crate(src: &Path) -> Crate {
    let mut files = BTreeMap::new();
    walk(src, src, &mut files);
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let layers = layer_table(&lib);
    assert!(
        layers.len() >= 3,
        "{}: no layer table in lib.rs",
        src.display()
    );
    Crate { files, layers }
}

impl Crate {
    /// The layer of a module: its longest prefix in the table.
    fn layer(&self, module: &Module) -> Option<(u32, &str)> {
        self.layers
            .iter()
            // `lib` is the crate root alone, not a prefix of every module.
            .filter(|(prefix, _, _)| {
                module.starts_with(prefix) && (!prefix.is_empty() || module.is_empty())
            })
            .max_by_key(|(prefix, _, _)| prefix.len())
            .map(|(_, n, name)| (*n, name.as_str()))
    }

    /// The module file a path names: its longest prefix that is a file of the crate.
    fn resolve(&self, path: &[String]) -> Option<Module> {
        (1..=path.len())
            .rev()
            .map(|k| path[..k].to_vec())
            .find(|m| self.files.contains_key(m))
    }

    /// The modules `module`'s file imports.
    fn imports(&self, module: &Module, text: &str) -> BTreeSet<Module> {
        let text: String = text
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        // An inline module (`mod tests { ... }`, at the end of a file) is one level down: its
        // `super` is the file's own module.
        let inline = text
            .match_indices('\n')
            .map(|(i, _)| i + 1)
            .find(|&i| {
                let line = text[i..].lines().next().unwrap_or("").trim();
                let line = ["pub(super) ", "pub(crate) ", "pub "]
                    .iter()
                    .find_map(|p| line.strip_prefix(p))
                    .unwrap_or(line);
                line.starts_with("mod ") && line.ends_with('{')
            })
            .unwrap_or(text.len());
        // `super` of a file `a/b.rs` is `a`; of `a/b/mod.rs`, also `a`.
        let mut parent = module.clone();
        parent.pop();
        let mut paths = paths_in(&text[..inline], &parent);
        paths.extend(paths_in(&text[inline..], module));
        // A child module named by a `use` relative to this one (`use pacer::Standing;`).
        for child in self
            .files
            .keys()
            .filter(|c| c.len() == module.len() + 1 && c.starts_with(module))
        {
            let name = &child[module.len()];
            let named = text.lines().any(|l| {
                let l = l.trim_start();
                let l = ["pub(crate) ", "pub(super) ", "pub "]
                    .iter()
                    .find_map(|p| l.strip_prefix(p))
                    .unwrap_or(l);
                l.strip_prefix("use ")
                    .and_then(|rest| rest.strip_prefix(name.as_str()))
                    .is_some_and(|rest| rest.starts_with("::"))
            });
            if named {
                paths.push(child.clone());
            }
        }
        paths
            .iter()
            .filter_map(|p| self.resolve(p))
            .filter(|m| m != module)
            .collect()
    }
}

/// The `crate::` and `super::` paths of `text`, `super` being `super_of`.
fn paths_in(text: &str, super_of: &Module) -> Vec<Module> {
    let mut paths: Vec<Module> = Vec::new();
    let bytes = text.as_bytes();
    for (kind, base) in [("crate::", Vec::new()), ("super::", super_of.clone())] {
        let mut from = 0;
        while let Some(i) = text[from..].find(kind) {
            let at = from + i;
            from = at + kind.len();
            // Not the tail of another word.
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
                continue;
            }
            let rest = &text[from..];
            if let Some(group) = rest.strip_prefix('{') {
                // `use crate::{a::X, b}`: each item's first segments.
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let segs = segments(item.trim());
                    if !segs.is_empty() {
                        paths.push(base.iter().cloned().chain(segs).collect());
                    }
                }
                continue;
            }
            // `crate::a::b::X`, or `crate::a::{X, Y}`: the path before the group.
            paths.push(base.iter().cloned().chain(segments(rest)).collect());
        }
    }
    paths
}

/// The leading `a::b::c` of `s`, as segments.
fn segments(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    loop {
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        out.push(rest[..end].to_owned());
        match rest[end..].strip_prefix("::") {
            Some(r) if !r.starts_with('{') => rest = r,
            _ => break,
        }
    }
    out
}

/// The circles of the import graph (strongly connected groups of two or more files), less
/// those made only of one module and its own children.
fn circles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    // Kosaraju: order by finish time, then walk the reversed graph.
    fn visit(
        v: &Module,
        g: &BTreeMap<Module, BTreeSet<Module>>,
        seen: &mut BTreeSet<Module>,
        out: &mut Vec<Module>,
    ) {
        // Iterative, so a deep graph never overflows the stack.
        let mut stack = vec![(v.clone(), false)];
        while let Some((v, done)) = stack.pop() {
            if done {
                out.push(v);
                continue;
            }
            if !seen.insert(v.clone()) {
                continue;
            }
            stack.push((v.clone(), true));
            for w in g.get(&v).into_iter().flatten() {
                if !seen.contains(w) {
                    stack.push((w.clone(), false));
                }
            }
        }
    }
    let mut order = Vec::new();
    let mut seen = BTreeSet::new();
    for v in graph.keys() {
        visit(v, graph, &mut seen, &mut order);
    }
    let mut reversed: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (v, ws) in graph {
        for w in ws {
            reversed.entry(w.clone()).or_default().insert(v.clone());
        }
    }
    let mut assigned = BTreeSet::new();
    let mut out = Vec::new();
    for v in order.iter().rev() {
        if assigned.contains(v) {
            continue;
        }
        let mut group = Vec::new();
        visit(v, &reversed, &mut assigned, &mut group);
        let family = group.iter().any(|p| {
            group
                .iter()
                .all(|c| c == p || c.split_last().is_some_and(|(_, up)| up == &p[..]))
        });
        if group.len() > 1 && !family {
            group.sort();
            out.push(group);
        }
    }
    out
}

/// What is wrong with the crate under `src`: upward imports, files in no layer, circles.
fn findings(src: &Path) -> Vec<String> {
    let krate = read_crate(src);
    let mut problems = Vec::new();
    let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, file) in &krate.files {
        let text = std::fs::read_to_string(src.join(file)).unwrap();
        let Some((layer, name)) = krate.layer(module) else {
            problems.push(format!("{file}: in no layer of lib.rs's table"));
            continue;
        };
        let imports = krate.imports(module, &text);
        for target in &imports {
            if let Some((to, to_name)) = krate.layer(target)
                && to > layer
            {
                problems.push(format!(
                    "{file} (layer {layer} {name}) imports {} (layer {to} {to_name}): move what it needs down to where both can see it",
                    krate.files[target]
                ));
            }
        }
        graph.insert(module.clone(), imports);
    }
    for circle in circles(&graph) {
        let names: Vec<&str> = circle.iter().map(|m| krate.files[m].as_str()).collect();
        problems.push(format!("a circle: {}", names.join(" <-> ")));
    }
    problems
}

#[test]
fn every_file_of_both_crates_imports_only_from_its_layer_or_below_and_none_in_a_circle() {
    let root = root();
    let mut problems = Vec::new();
    for src in [root.join("src"), root.join("crates/mailhost-sim/src")] {
        for p in findings(&src) {
            problems.push(format!("{}: {p}", src.display()));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_reader_finds_an_upward_import_a_circle_and_a_file_in_no_layer() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |rel: &str, text: &str| {
        let path = src.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "lib.rs",
        "//! | layer | modules | what |\n//! |---|---|---|\n//! | 1 low | `low`, `other` | x |\n//! | 2 mid | `mid` | y |\n//! | 3 top | `lib`, `top` | z |\n",
    );
    write("low.rs", "use crate::mid::Thing; // an upward import\n");
    write("mid/mod.rs", "mod child;\nuse super::low;\n");
    write(
        "mid/child.rs",
        "use super::Thing; use crate::{other::A, top};\n",
    );
    write("other.rs", "use crate::low::B;\n");
    write(
        "top.rs",
        "// use crate::stray is a comment\npub fn f() {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
    );
    write("stray.rs", "");
    // `low` uses its child relatively (`use deep::X`), the child imports `other`, which imports
    // `low`: a circle through a relative path.
    write("low/deep.rs", "use crate::other::C;\n");
    std::fs::write(
        src.join("low.rs"),
        "use crate::mid::Thing; // an upward import\nuse deep::X;\n",
    )
    .unwrap();
    let found = findings(src).join("\n");
    assert!(
        found.contains("low.rs (layer 1 low) imports mid/mod.rs (layer 2 mid)"),
        "{found}"
    );
    assert!(
        found.contains("mid/child.rs (layer 2 mid) imports top.rs (layer 3 top)"),
        "{found}"
    );
    assert!(found.contains("stray.rs: in no layer"), "{found}");
    assert!(
        found.contains("a circle: low.rs <-> low/deep.rs <-> mid/mod.rs <-> other.rs"),
        "{found}"
    );
    assert!(
        !found.lines().any(|l| l.starts_with("top.rs")),
        "neither a comment nor a test module's super is an import: {found}"
    );
    // A module and its own child import each other: not a circle.
    assert!(!found.contains("mid/child.rs <->"), "{found}");
    assert_eq!(found.lines().count(), 4, "{found}");
}

#[test]
fn the_readme_layout_names_every_file_of_the_exporter_a_newcomer_meets() {
    let root = root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let start = readme
        .find("## Layout")
        .expect("README.md has a Layout section");
    let rest = &readme[start + 1..];
    let layout = &rest[..rest.find("\n## ").unwrap_or(rest.len())];
    let mut files = BTreeMap::new();
    let src = root.join("src");
    walk(&src, &src, &mut files);
    let missing: Vec<&String> = files
        .values()
        .filter(|f| {
            // A collector's own files are described once for all collectors; `mod.rs` by its
            // folder.
            let in_collector = f.starts_with("collectors/") && f.matches('/').count() >= 2;
            let name = f.rsplit('/').next().unwrap();
            // Named by its file name, or by a tail of its path (`model/names.rs`).
            let named = f
                .match_indices('/')
                .map(|(i, _)| &f[i + 1..])
                .chain([f.as_str()])
                .any(|tail| {
                    layout.contains(&format!("`{tail}`"))
                        || layout.contains(&format!("`src/{tail}`"))
                });
            !in_collector && name != "mod.rs" && !named
        })
        .collect();
    assert!(
        missing.is_empty(),
        "README.md's Layout section does not name: {missing:?}"
    );
}

/// Lines a source file of either crate may have: past it a file holds more than one thing a
/// newcomer reads at once, and is split (tests into a `tests.rs` beside it, a part of its work
/// into a child module).
const MAX_FILE_LINES: usize = 1_000;

#[test]
fn no_source_file_of_either_crate_is_over_a_thousand_lines() {
    let root = root();
    let mut long = Vec::new();
    for src in [root.join("src"), root.join("crates/mailhost-sim/src")] {
        let mut files = BTreeMap::new();
        walk(&src, &src, &mut files);
        if src.join("main.rs").exists() {
            files.insert(vec!["main".to_owned()], "main.rs".to_owned());
        }
        for file in files.values() {
            let lines = std::fs::read_to_string(src.join(file))
                .unwrap()
                .lines()
                .count();
            if lines > MAX_FILE_LINES {
                long.push(format!("{}: {lines} lines", src.join(file).display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines; split each (its tests into a `tests.rs` beside it, a part of its work into a child module):\n{}",
        long.join("\n")
    );
}
