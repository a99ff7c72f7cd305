//! The source tree is grouped by stage and every dependency points one way: a top-level module
//! uses only the stages listed before it in `STAGES`, and inside each folder its files and
//! subfolders refer to each other without a cycle.
//!
//! Read from the source text, tests and all: every path a file names (`crate::`, `super::`,
//! `self::`, names brought in by `use`, `use` groups nested or not, `pub use`, paths in
//! expressions such as `crate::a::b::f()`) is resolved to the file it leads into. That gives
//! the module graph: a node per file (a folder's `mod.rs` is the folder's own node), an edge
//! a → b when a's code names a path into b. A `pub use` forwards a name: a path through it
//! leads into the file that defines the name, and the `pub use` itself makes no cycle.
//! Inside a folder a subfolder counts as one unit; the folder's `mod.rs` declares and assembles
//! its files, so its own paths into them are no edge, and neither are a unit test's (a
//! `#[cfg(test)]` module checking a file against another of its folder). The stage order is
//! checked on every path, tests included.

use crate::util::repo;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The stages, lowest first: a stage may use only the stages above it in this list. One per
/// line, so that adding a stage is adding a line where it belongs.
const STAGES: &[&str] = &[
    "error",     // the one Error type
    "tuning",    // the MARKERSCOPE_* environment variables, read once into plain data
    "frame",     // images, masks, drawing, the papers' random images
    "gpu",       // the CUDA device: context, kernel files, staging, launches (feature cuda)
    "threshold", // grey → mask on the host and the device, the levels, the packing
    "geometry",  // image → world (homography, lens undistortion); needs errors only
    "ccl",       // labeling and per-component analysis
    "fiducial",  // square markers: dictionaries, detection, pose
    "source",    // cameras, video files, image folders, the synthetic scenes
    "track",     // the multi-object tracker
    "pipeline",  // capture thread and worker
    "output",    // exports, recordings, live streams
    "analysis",  // a whole source analysed into result files
    "cli",       // the subcommands
    "ui",        // the window
];

/// Names the crate root re-exports from a stage (`crate::Result` is the error stage's).
const ROOT_REEXPORTS: &[(&str, &str)] = &[("Error", "error"), ("Result", "error")];

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

// ---------------------------------------------------------------------------------------------
// Reading the code

/// The source without comments, string and character literals (so that prose naming a path is
/// not a use); line breaks are kept, so lines still count.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let Some((kind, end)) = not_code_at(&chars, i) else {
            out.push(chars[i]);
            i += 1;
            continue;
        };
        let end = end.min(chars.len());
        out.extend(chars[i..end].iter().filter(|&&c| c == '\n'));
        out.push_str(match kind {
            NotCode::Comment => " ",
            NotCode::Str => "\"\"",
            NotCode::Char => "' '",
        });
        i = end;
    }
    out
}

enum NotCode {
    Comment,
    Str,
    Char,
}

/// The comment, string or character literal that starts at `i`, and the index after it.
fn not_code_at(chars: &[char], i: usize) -> Option<(NotCode, usize)> {
    let next = chars.get(i + 1).copied();
    let find = |from: usize, end: &[char]| {
        (from..chars.len())
            .find(|&j| chars[j..].starts_with(end))
            .unwrap_or(chars.len())
    };
    match chars[i] {
        '/' if next == Some('/') => Some((NotCode::Comment, find(i, &['\n']))),
        '/' if next == Some('*') => {
            // Block comments nest.
            let (mut depth, mut j) = (1, i + 2);
            while j < chars.len() && depth > 0 {
                if chars[j..].starts_with(&['/', '*']) {
                    depth += 1;
                    j += 1;
                } else if chars[j..].starts_with(&['*', '/']) {
                    depth -= 1;
                    j += 1;
                }
                j += 1;
            }
            Some((NotCode::Comment, j))
        }
        '"' => {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '"' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            Some((NotCode::Str, j + 1))
        }
        // A raw string r"…" or r#"…"#; not a raw identifier r#name, nor the end of a name.
        'r' if i == 0 || !is_ident(chars[i - 1]) => {
            let hashes = chars[i + 1..].iter().take_while(|&&c| c == '#').count();
            if chars.get(i + 1 + hashes) != Some(&'"') {
                return None;
            }
            let close: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            Some((NotCode::Str, find(i + 2 + hashes, &close) + close.len()))
        }
        // A character literal ('x', '\n', '\'', '"'); a lifetime ('a) is code.
        '\'' if next == Some('\\') => Some((NotCode::Char, find(i + 3, &['\'']) + 1)),
        '\'' if chars.get(i + 2) == Some(&'\'') => Some((NotCode::Char, i + 3)),
        _ => None,
    }
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// A word, `::` or one other character of the code, with its line.
#[derive(Clone, Debug)]
struct Token {
    text: String,
    line: usize,
}

impl Token {
    fn is_name(&self) -> bool {
        self.text
            .starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
    }
}

/// The tokens of code already passed through `code_only`.
fn tokens(code: &str) -> Vec<Token> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if is_ident(c) || (c == '$' && chars.get(i + 1).is_some_and(|&c| is_ident(c))) {
            // `$crate` in a macro is `crate`; `r#name` is `name`.
            let start = if c == '$' { i + 1 } else { i };
            let mut j = start;
            while j < chars.len() && is_ident(chars[j]) {
                j += 1;
            }
            let mut text: String = chars[start..j].iter().collect();
            if text == "r" && chars.get(j) == Some(&'#') {
                let k = (j + 1..chars.len())
                    .find(|&k| !is_ident(chars[k]))
                    .unwrap_or(chars.len());
                text = chars[j + 1..k].iter().collect();
                j = k;
            }
            out.push(Token { text, line });
            i = j;
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push(Token {
                text: "::".into(),
                line,
            });
            i += 2;
        } else {
            out.push(Token {
                text: c.to_string(),
                line,
            });
            i += 1;
        }
    }
    out
}

/// One path the code names: as written, where, in which module (the file's, or an inline
/// `mod` inside it), and whether it is a `pub use` (a re-export) or brings a name in (`use`).
#[derive(Clone, Debug)]
struct Named {
    segments: Vec<String>,
    line: usize,
    module: Vec<String>,
    /// The name a `use` binds (its last segment or its `as` name); None for other paths.
    binds: Option<String>,
    reexport: bool,
    /// Inside a `#[cfg(test)]` module.
    test: bool,
}

/// The modules a file declares: (module path, declared `#[cfg(test)]`).
type Declared = BTreeSet<(Vec<String>, bool)>;

/// Every path in `code` of the file whose module path is `file_module`, with the child modules
/// each module declares (`mod name;` or `mod name { … }`).
fn named_paths(code: &str, file_module: &[String]) -> (Vec<Named>, Declared) {
    let toks = tokens(code);
    let mut found = Vec::new();
    let mut children = BTreeSet::new();
    // Inline modules open: (name, brace depth inside it, test only).
    let mut inline: Vec<(String, usize, bool)> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    let module = |inline: &[(String, usize, bool)]| -> Vec<String> {
        file_module
            .iter()
            .cloned()
            .chain(inline.iter().map(|(n, _, _)| n.clone()))
            .collect()
    };
    let in_test = |inline: &[(String, usize, bool)]| inline.iter().any(|(_, _, t)| *t);
    let texts: Vec<&str> = toks.iter().map(|t| t.text.as_str()).collect();
    while i < toks.len() {
        let t = &toks[i].text;
        let prev = if i > 0 { toks[i - 1].text.as_str() } else { "" };
        if t == "mod" && toks.get(i + 1).is_some_and(Token::is_name) {
            let name = toks[i + 1].text.clone();
            let mut child = module(&inline);
            child.push(name.clone());
            // `#[cfg(test)]` (`pub` or not) right before `mod`.
            let attr = &texts[..i];
            let attr = attr.strip_suffix(&["pub"]).unwrap_or(attr);
            let test =
                in_test(&inline) || attr.ends_with(&["#", "[", "cfg", "(", "test", ")", "]"]);
            children.insert((child, test));
            if toks.get(i + 2).is_some_and(|t| t.text == "{") {
                depth += 1;
                inline.push((name, depth, test));
                i += 3;
                continue;
            }
            i += 2;
        } else if t == "{" {
            depth += 1;
            i += 1;
        } else if t == "}" {
            if inline.last().is_some_and(|(_, d, _)| *d == depth) {
                inline.pop();
            }
            depth = depth.saturating_sub(1);
            i += 1;
        } else if t == "use" && prev != "::" {
            // `pub use`, `pub(crate) use`, `pub(super) use`: only plain `pub` re-exports to
            // other modules' paths in this check.
            let reexport = prev == "pub";
            let mut entries = Vec::new();
            let end = use_tree(&toks, i + 1, &[], &mut entries);
            let (here, test) = (module(&inline), in_test(&inline));
            for (segments, binds, line) in entries {
                found.push(Named {
                    segments,
                    line,
                    module: here.clone(),
                    binds,
                    reexport,
                    test,
                });
            }
            i = end;
        } else if let Some((segments, end)) = path_at(&toks, i) {
            found.push(Named {
                segments,
                line: toks[i].line,
                module: module(&inline),
                binds: None,
                reexport: false,
                test: in_test(&inline),
            });
            i = end;
        } else {
            i += 1;
        }
    }
    (found, children)
}

/// The path starting at token `i` (`a::b::c`: two names at least, not the tail of another path
/// nor a method's name), and the index after it.
fn path_at(toks: &[Token], i: usize) -> Option<(Vec<String>, usize)> {
    let prev = if i > 0 { toks[i - 1].text.as_str() } else { "" };
    let more = |j: usize| {
        toks.get(j).is_some_and(|t| t.text == "::") && toks.get(j + 1).is_some_and(Token::is_name)
    };
    if !toks[i].is_name() || prev == "::" || prev == "." || !more(i + 1) {
        return None;
    }
    let mut segments = vec![toks[i].text.clone()];
    let mut j = i + 1;
    while more(j) {
        segments.push(toks[j + 1].text.clone());
        j += 2;
    }
    Some((segments, j))
}

/// Reads the use tree starting at token `i` under `prefix`, adding (path, bound name, line)
/// per leaf (`a::b`, `a::b as c`, `a::{self, b::{c, d}}`, `a::*`); returns the index after it.
fn use_tree(
    toks: &[Token],
    mut i: usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, Option<String>, usize)>,
) -> usize {
    let mut path = prefix.to_vec();
    if toks.get(i).is_some_and(|t| t.text == "::") {
        i += 1;
    }
    while let Some(t) = toks.get(i) {
        match t.text.as_str() {
            "{" => {
                i += 1;
                loop {
                    match toks.get(i).map(|t| t.text.as_str()) {
                        None => return i,
                        Some("}") => return i + 1,
                        Some(",") => i += 1,
                        Some(_) => i = use_tree(toks, i, &path, out),
                    }
                }
            }
            "*" => {
                path.push("*".into());
                out.push((path, None, t.line));
                return i + 1;
            }
            "self" if toks.get(i + 1).is_none_or(|t| t.text != "::") && !path.is_empty() => {
                // `a::{self}` binds `a`.
                let name = path.last().cloned();
                i += 1;
                let binds = alias(toks, &mut i).or(name);
                out.push((path, binds, t.line));
                return i;
            }
            _ if t.is_name() => {
                path.push(t.text.clone());
                i += 1;
                if toks.get(i).is_some_and(|t| t.text == "::") {
                    i += 1;
                    continue;
                }
                let binds = alias(toks, &mut i).or_else(|| path.last().cloned());
                out.push((path, binds, t.line));
                return i;
            }
            // `;`, `,` or `}` end an empty tree.
            _ => return i,
        }
    }
    i
}

/// An `as name` at token `i` (moved past it): the name bound instead.
fn alias(toks: &[Token], i: &mut usize) -> Option<String> {
    if toks.get(*i).is_some_and(|t| t.text == "as") {
        let name = toks.get(*i + 1).map(|t| t.text.clone());
        *i += 2;
        return name.filter(|n| n != "_");
    }
    None
}

/// The first path segment after each `prefix` (`crate::` or `super::`), use groups included.
fn first_segments(code: &str, prefix: &str) -> BTreeSet<String> {
    let head = prefix.trim_end_matches("::");
    named_paths(code, &[])
        .0
        .into_iter()
        .filter(|n| n.segments.first().is_some_and(|s| s == head))
        .filter_map(|n| n.segments.get(1).cloned())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The module graph

/// What the `use` items of each module bind: (module, name) → the absolute path it stands for.
type Bound = BTreeMap<(Vec<String>, String), Vec<String>>;

/// A source file: where it is, its module path (`src/ccl/cuda/ha4.rs` → ccl::cuda::ha4, a
/// `mod.rs` the folder's path) and what it names.
struct SourceFile {
    shown: String,
    module: Vec<String>,
    named: Vec<Named>,
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
    if parts == ["lib"] || parts == ["main"] {
        parts.clear();
    }
    parts
}

/// An edge of the module graph: `from` names `path` (as written, on `line`) leading into
/// the file of module `to`.
#[derive(Clone, Debug)]
struct Edge {
    from: usize,
    to: Vec<String>,
    line: usize,
    path: String,
    /// Named by test code only (a `#[cfg(test)]` module).
    test: bool,
    /// A `pub use`: forwards the name, followed by whoever names it through here.
    forwards: bool,
}

struct Graph {
    files: Vec<SourceFile>,
    edges: Vec<Edge>,
    /// Paths that lead nowhere known from the crate root (`crate::nothing`).
    unknown: Vec<Edge>,
}

impl Graph {
    fn new(files: Vec<SourceFile>, declared: Declared) -> Graph {
        let modules: BTreeSet<Vec<String>> = files
            .iter()
            .map(|f| f.module.clone())
            .chain(declared.iter().map(|(m, _)| m.clone()))
            .collect();
        let test_modules: Vec<&Vec<String>> = declared
            .iter()
            .filter(|(_, test)| *test)
            .map(|(m, _)| m)
            .collect();
        // What each module's `use` binds, resolved: (module, name) → absolute path.
        let mut bound = Bound::new();
        // Two rounds, so that a `use` through a name another `use` binds resolves too.
        for _ in 0..2 {
            for f in &files {
                for n in f.named.iter().filter(|n| n.binds.is_some()) {
                    if let Some(abs) = absolute(&n.segments, &n.module, &bound, &modules) {
                        bound.insert((n.module.clone(), n.binds.clone().unwrap()), abs);
                    }
                }
            }
        }
        // The names each module re-exports (`pub use`): (module, name) → absolute path.
        let reexports: Bound = bound
            .iter()
            .filter(|((m, name), _)| {
                files.iter().any(|f| {
                    f.named
                        .iter()
                        .any(|n| n.reexport && n.module == *m && n.binds.as_ref() == Some(name))
                })
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut edges = Vec::new();
        let mut unknown = Vec::new();
        for (index, f) in files.iter().enumerate() {
            let test_file = test_modules.iter().any(|m| f.module.starts_with(m));
            for n in &f.named {
                let Some(abs) = absolute(&n.segments, &n.module, &bound, &modules) else {
                    continue;
                };
                let edge = |to: Vec<String>| Edge {
                    from: index,
                    to,
                    line: n.line,
                    path: n.segments.join("::"),
                    test: test_file || n.test,
                    forwards: n.reexport,
                };
                match target(&abs, &modules, &reexports) {
                    Some(to) if to != f.module => edges.push(edge(to)),
                    Some(_) => {}
                    None => unknown.push(edge(abs)),
                }
            }
        }
        Graph {
            files,
            edges,
            unknown,
        }
    }
}

/// `segments` as an absolute module path (without `crate`), when it starts at the crate:
/// `crate::`, `self::`, `super::`, a child module's name, or a name a `use` binds.
fn absolute(
    segments: &[String],
    module: &[String],
    bound: &Bound,
    modules: &BTreeSet<Vec<String>>,
) -> Option<Vec<String>> {
    let (first, rest) = segments.split_first()?;
    let mut base = match first.as_str() {
        "crate" => Vec::new(),
        "self" => module.to_vec(),
        "super" => {
            let mut base = module.to_vec();
            base.pop()?;
            let mut rest = rest;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
            return Some(base.into_iter().chain(rest.iter().cloned()).collect());
        }
        name => {
            if let Some(abs) = bound.get(&(module.to_vec(), name.to_string())) {
                abs.clone()
            } else {
                let child: Vec<String> = module.iter().cloned().chain([name.to_string()]).collect();
                if !modules.contains(&child) {
                    return None;
                }
                child
            }
        }
    };
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The module whose file `abs` leads into: its longest prefix that is a module, following a
/// folder's re-exports to the file that defines the name. None when it is not under a module.
fn target(
    abs: &[String],
    modules: &BTreeSet<Vec<String>>,
    reexports: &Bound,
) -> Option<Vec<String>> {
    let mut abs = abs.to_vec();
    // Re-exports of re-exports, a few deep at most.
    for _ in 0..8 {
        let len = (0..=abs.len())
            .rev()
            .find(|&n| modules.contains(&abs[..n]) || n == 0)?;
        if len == 0 {
            // At the crate root: only the root's re-exports are known names.
            let name = abs.first()?;
            let (_, stage) = ROOT_REEXPORTS.iter().find(|(n, _)| n == name)?;
            return Some(vec![stage.to_string()]);
        }
        let module = abs[..len].to_vec();
        match abs
            .get(len)
            .and_then(|name| reexports.get(&(module.clone(), name.clone())))
        {
            Some(real) if !real.starts_with(&abs[..len + 1]) => {
                abs = real.iter().chain(&abs[len + 1..]).cloned().collect();
            }
            _ => return Some(module),
        }
    }
    None
}

/// One cycle in `edges` (a → b), as the nodes along it with the first repeated at the end.
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

/// Everything wrong with the layering of `files`, one line per problem.
fn problems(files: Vec<SourceFile>, declared: Declared) -> Vec<String> {
    let graph = Graph::new(files, declared);
    let mut wrong = stage_problems(&graph);
    wrong.extend(folder_cycles(&graph));
    wrong
}

fn rank(stage: &str) -> Option<usize> {
    STAGES.iter().position(|s| *s == stage)
}

/// Top-level modules that are no stage, paths that lead nowhere, uses of a stage above.
fn stage_problems(graph: &Graph) -> Vec<String> {
    let mut wrong = Vec::new();
    for f in &graph.files {
        if let Some(stage) = f.module.first() {
            if rank(stage).is_none() {
                wrong.push(format!("{}: module '{stage}' is not a stage", f.shown));
            }
        }
    }
    for e in &graph.unknown {
        let f = &graph.files[e.from];
        wrong.push(format!(
            "{}:{}: {} leads to no module",
            f.shown, e.line, e.path
        ));
    }
    for e in &graph.edges {
        let f = &graph.files[e.from];
        let (Some(own), Some(used)) = (f.module.first(), e.to.first()) else {
            continue;
        };
        if let (Some(r), Some(u)) = (rank(own), rank(used)) {
            if u > r {
                wrong.push(format!(
                    "{}:{}: stage '{own}' uses '{used}' ({}), a stage above it",
                    f.shown, e.line, e.path
                ));
            }
        }
    }
    wrong
}

/// Cycles inside each folder, between its files, its subfolders (each all that is inside it)
/// and its own mod.rs, each step named by the first path that makes it.
fn folder_cycles(graph: &Graph) -> Vec<String> {
    // Per folder: (unit → unit) → the first edge that makes it.
    let mut folders: BTreeMap<Vec<String>, BTreeMap<(String, String), &Edge>> = BTreeMap::new();
    for e in &graph.edges {
        let f = &graph.files[e.from];
        // A folder's mod.rs stands for the folder: it declares, assembles and re-exports its
        // files, so its paths into them are no edge (theirs to it are). A unit test may check
        // a file against another of its folder (descriptors against lsl): no edge either. A
        // `pub use` is followed by the paths through it.
        if e.to.starts_with(&f.module) || e.test || e.forwards {
            continue;
        }
        let common = f
            .module
            .iter()
            .zip(&e.to)
            .take_while(|(a, b)| a == b)
            .count();
        if common == 0 {
            // Between stages: the stage order rules out a cycle there.
            continue;
        }
        let unit = |m: &[String]| -> String {
            let folder = graph
                .files
                .iter()
                .any(|g| g.module.len() > m.len() && g.module.starts_with(m));
            match m.get(common) {
                None => "mod.rs".to_string(),
                Some(name) if m.len() == common + 1 && !folder => format!("{name}.rs"),
                Some(name) => format!("{name}/"),
            }
        };
        let key = (unit(&f.module), unit(&e.to));
        folders
            .entry(e.to[..common].to_vec())
            .or_default()
            .entry(key)
            .or_insert(e);
    }
    let mut wrong = Vec::new();
    for (folder, links) in &folders {
        for cycle in cycles(links.keys()) {
            let steps: Vec<String> = cycle
                .windows(2)
                .map(|ab| {
                    let e = links[&(ab[0].clone(), ab[1].clone())];
                    let f = &graph.files[e.from];
                    format!(
                        "  {} → {}: {}:{} names {}",
                        ab[0], ab[1], f.shown, e.line, e.path
                    )
                })
                .collect();
            wrong.push(format!(
                "src/{}: files refer to each other in a cycle: {}\n{}",
                folder.join("/"),
                cycle.join(" → "),
                steps.join("\n")
            ));
        }
    }
    wrong
}

/// One cycle per group of nodes that reach each other (a strongly connected component).
fn cycles<'a>(links: impl Iterator<Item = &'a (String, String)>) -> Vec<Vec<String>> {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, b) in links {
        edges.entry(a.clone()).or_default().insert(b.clone());
    }
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for next in edges.get(&n).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        edges.keys().map(|n| (n, reach(n))).collect();
    let mut groups: BTreeSet<BTreeSet<String>> = BTreeSet::new();
    for (n, from_n) in &reached {
        let group: BTreeSet<String> = from_n
            .iter()
            .filter(|m| reached.get(m).is_some_and(|r| r.contains(*n)))
            .cloned()
            .collect();
        if !group.is_empty() {
            groups.insert(group);
        }
    }
    groups
        .iter()
        .filter_map(|group| {
            let inside: BTreeMap<String, BTreeSet<String>> = group
                .iter()
                .map(|n| (n.clone(), edges[n].intersection(group).cloned().collect()))
                .collect();
            find_cycle(&inside)
        })
        .collect()
}

/// The files under `src` (read from disk) or given as (path under src, code) pairs.
fn source_files(src: &Path, texts: &[(PathBuf, String)]) -> (Vec<SourceFile>, Declared) {
    let mut files = Vec::new();
    let mut declared = BTreeSet::new();
    for (path, text) in texts {
        let module = module_path(src, path);
        let (named, children) = named_paths(&code_only(text), &module);
        declared.extend(children);
        let shown = format!(
            "src/{}",
            path.strip_prefix(src).expect("under src").display()
        );
        files.push(SourceFile {
            shown,
            module,
            named,
        });
    }
    (files, declared)
}

#[test]
fn stages_depend_only_on_the_stages_below_them() {
    let src = repo().join("src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    paths.sort();
    let texts: Vec<(PathBuf, String)> = paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read source");
            (p, text)
        })
        .collect();
    let (files, declared) = source_files(&src, &texts);
    let wrong = problems(files, declared);
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

/// The problems `problems` finds in a small tree of (path under src, code).
fn problems_in(tree: &[(&str, &str)]) -> Vec<String> {
    let src = Path::new("src");
    let texts: Vec<(PathBuf, String)> = tree
        .iter()
        .map(|(p, code)| (src.join(p), code.to_string()))
        .collect();
    let (files, declared) = source_files(src, &texts);
    problems(files, declared)
}

#[test]
fn the_checker_reads_every_path_form() {
    let code = code_only(
        "pub use self::a::b;\nuse super::{x::{self, y as z}, w::*};\nfn f() { crate::ccl::f(); \
         let c = '\"'; let q = '\\''; let r = r#\"crate::ui\"#; /* crate::cli /* nested */ */ \
         markerscope::x(); }\nfn g<'a>(s: &'a str) -> &'a str { \"\\\" crate::output\" }",
    );
    let (named, _) = named_paths(&code, &["frame".to_string(), "mask".to_string()]);
    let paths: Vec<(String, Option<String>)> = named
        .iter()
        .map(|n| (n.segments.join("::"), n.binds.clone()))
        .collect();
    let expect = [
        ("self::a::b", Some("b")),
        ("super::x", Some("x")),
        ("super::x::y", Some("z")),
        ("super::w::*", None),
        ("crate::ccl::f", None),
        ("markerscope::x", None),
    ];
    let expect: Vec<(String, Option<String>)> = expect
        .iter()
        .map(|(p, b)| (p.to_string(), b.map(String::from)))
        .collect();
    assert_eq!(paths, expect);
    assert!(named[0].reexport && !named[1].reexport);
}

#[test]
fn the_checker_finds_upward_uses_and_cycles_by_any_path_form() {
    // Upward, through a name bound by `use` and in an expression.
    let wrong = problems_in(&[
        ("frame/mod.rs", "pub mod a;"),
        ("frame/a.rs", "use crate::ccl; fn f() { ccl::x(); }"),
        ("ccl/mod.rs", "pub fn x() {}"),
    ]);
    assert_eq!(
        wrong,
        [
            "src/frame/a.rs:1: stage 'frame' uses 'ccl' (crate::ccl), a stage above it",
            "src/frame/a.rs:1: stage 'frame' uses 'ccl' (ccl::x), a stage above it",
        ]
    );
    // A cycle between a file and a subfolder, one side by `crate::`, the other by `super::`;
    // an inline test module's `super::` is the file itself, no edge.
    let wrong = problems_in(&[
        ("ccl/mod.rs", "pub mod cuda; pub mod registry;"),
        (
            "ccl/registry.rs",
            "fn f() { super::cuda::ha4::make(); }\nmod tests { use super::*; }",
        ),
        ("ccl/cuda/mod.rs", "pub mod ha4;"),
        (
            "ccl/cuda/ha4.rs",
            "fn g() {\n crate::ccl::registry::unsupported(); }",
        ),
    ]);
    assert_eq!(wrong.len(), 1, "{wrong:?}");
    assert!(
        wrong[0].contains("src/ccl: files refer to each other in a cycle"),
        "{wrong:?}"
    );
    assert!(wrong[0].contains("src/ccl/cuda/ha4.rs:2 names crate::ccl::registry::unsupported"));
    assert!(wrong[0].contains("src/ccl/registry.rs:1 names super::cuda::ha4::make"));
    // A folder's `pub use` forwards: naming `crate::frame::Spec` leads into threshold.rs.
    let wrong = problems_in(&[
        (
            "frame/mod.rs",
            "pub mod binarize; pub mod threshold; pub use threshold::Spec;",
        ),
        (
            "frame/threshold.rs",
            "use crate::frame::binarize::histogram;",
        ),
        ("frame/binarize.rs", "fn f(s: crate::frame::Spec) {}"),
    ]);
    assert_eq!(wrong.len(), 1, "{wrong:?}");
    assert!(wrong[0].contains("binarize.rs → threshold.rs"), "{wrong:?}");
    // No cycle: files using their folder's mod.rs, which only re-exports them.
    let wrong = problems_in(&[
        (
            "frame/mod.rs",
            "pub mod a; pub mod b; pub use a::A; pub struct Size;",
        ),
        ("frame/a.rs", "use super::Size; pub struct A;"),
        ("frame/b.rs", "use super::{A, Size};"),
    ]);
    assert!(wrong.is_empty(), "{wrong:?}");
}
