//! The source tree is grouped by stage and every dependency points one way: a top-level module
//! uses only the stages listed before it in `STAGES`, and inside a folder the files that refer
//! to each other (`super::name`) form no cycle. Read from the source text (`crate::` and
//! `super::` paths, `use` groups included), tests and all.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The stages, lowest first. `geometry` (image → world mapping: homography, lens undistortion)
/// needs nothing but errors, and the pipeline applies it to positions.
const STAGES: &[&str] = &[
    "error", "frame", "geometry", "ccl", "fiducial", "source", "track", "pipeline", "output", "cli", "ui",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source without comments and string literals (so that prose naming a path is not a use).
fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '"' => {
                let mut escaped = false;
                for c in chars.by_ref() {
                    if escaped {
                        escaped = false;
                    } else if c == '\\' {
                        escaped = true;
                    } else if c == '"' {
                        break;
                    }
                }
                out.push_str("\"\"");
            }
            c => out.push(c),
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The first path segment after each `prefix` (`crate::` or `super::`), with `prefix{a, b::c}`
/// groups giving each of their items.
fn first_segments(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| is_ident(c) || c == ':') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => item_start = true,
                    c if item_start && depth == 1 && is_ident(c) => {
                        let name: String =
                            group[i..].chars().take_while(|&c| is_ident(c)).collect();
                        found.insert(name);
                        item_start = false;
                    }
                    c if !c.is_whitespace() => item_start = false,
                    _ => {}
                }
            }
        } else {
            let name: String = rest.chars().take_while(|&c| is_ident(c)).collect();
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

/// The module path of a file under `src/`: `src/ccl/cuda/ha4.rs` → ["ccl", "cuda", "ha4"].
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file
        .strip_prefix(src)
        .expect("under src")
        .with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_string(), 1);
        stack.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            match state.get(next.as_str()) {
                Some(1) => {
                    let from = stack.iter().position(|n| n == next).unwrap_or(0);
                    let mut cycle = stack[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(next, edges, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(node.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in edges.keys() {
        if !state.contains_key(node) {
            if let Some(c) = visit(node, edges, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn stages_depend_only_on_the_stages_below_them() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let rank = |m: &str| STAGES.iter().position(|s| *s == m);
    let mut wrong = Vec::new();
    // Sibling references inside each folder: folder → (file → files it names).
    let mut siblings: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in &files {
        let path = module_path(&src, file);
        if path == ["lib"] || path == ["main"] {
            continue;
        }
        let stage = &path[0];
        let Some(own) = rank(stage) else {
            wrong.push(format!(
                "{}: module '{stage}' is not a stage",
                file.display()
            ));
            continue;
        };
        let code = code_only(&std::fs::read_to_string(file).expect("read source"));
        for used in first_segments(&code, "crate::") {
            match rank(&used) {
                Some(r) if r > own => wrong.push(format!(
                    "{}: stage '{stage}' uses '{used}', a stage above it",
                    file.display()
                )),
                Some(_) => {}
                // Re-exports at the crate root (`crate::Result`) are the error stage's.
                None if used == "Error" || used == "Result" => {}
                None => wrong.push(format!("{}: unknown module crate::{used}", file.display())),
            }
        }
        // `super::x` from a file names a sibling x in the parent folder (a file's own `mod
        // tests` uses `super::` for the file itself, which is no edge).
        if path.len() >= 2 {
            let folder = path[..path.len() - 1].to_vec();
            let me = path[path.len() - 1].clone();
            let names = first_segments(&code, "super::");
            let entry = siblings.entry(folder).or_default();
            let set = entry.entry(me.clone()).or_default();
            set.extend(names.into_iter().filter(|n| *n != me));
        }
    }
    for (folder, edges) in &siblings {
        // Keep only names that are files of the folder.
        let files: BTreeSet<&String> = edges.keys().collect();
        let edges: BTreeMap<String, BTreeSet<String>> = edges
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.iter().filter(|n| files.contains(n)).cloned().collect(),
                )
            })
            .collect();
        if let Some(cycle) = find_cycle(&edges) {
            wrong.push(format!(
                "src/{}: the files refer to each other in a cycle: {}",
                folder.join("/"),
                cycle.join(" → ")
            ));
        }
    }
    assert!(wrong.is_empty(), "layering:\n{}", wrong.join("\n"));
}

#[test]
fn the_checker_sees_groups_and_ignores_comments() {
    let code = code_only("use crate::{ccl::stats, frame::{image, threshold}};\n// crate::ui\nlet s = \"crate::cli\";");
    let found: Vec<String> = first_segments(&code, "crate::").into_iter().collect();
    assert_eq!(found, ["ccl", "frame"]);
    let edges: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["a".to_string()])),
    ]
    .into();
    assert!(find_cycle(&edges).is_some());
}
