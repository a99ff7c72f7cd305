//! The documentation's links point at files that exist: README.md, CHANGELOG.md and every
//! docs/*.md are read, each markdown link or image `[text](target)` / `![alt](target)` outside
//! code is resolved against the file's folder, and every missing target is listed in one failure.
//! Web links (http, https, mailto) and pure `#anchor` links are not checked; a `#anchor` suffix is
//! dropped before the file is looked up. The README also stays short and keeps its quick start.

use crate::util::repo;
use std::path::{Path, PathBuf};

/// The markdown files whose links are checked.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md"), root.join("CHANGELOG.md")];
    let docs = root.join("docs");
    let mut in_docs: Vec<PathBuf> = std::fs::read_dir(&docs)
        .unwrap_or_else(|e| panic!("read {}: {e}", docs.display()))
        .map(|entry| entry.expect("docs entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    in_docs.sort();
    files.extend(in_docs);
    files
}

/// The text with fenced code blocks and inline code spans blanked out (so that code that looks
/// like a link is not taken for one). Line breaks are kept, so line numbers stay right.
fn prose_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            out.push('\n');
            continue;
        }
        if fenced {
            out.push('\n');
            continue;
        }
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
                out.push(' ');
            } else if in_code {
                out.push(' ');
            } else {
                out.push(c);
            }
        }
        out.push('\n');
    }
    out
}

/// Every link target with its 1-based line number: the text between `](` and the matching `)`,
/// its first word (a link may carry a title after a space), angle brackets removed.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (index, line) in prose_only(text).lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let mut depth = 1;
            let mut end = None;
            for (i, c) in after.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            end = Some(i);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let Some(end) = end else { break };
            let inside = after[..end].trim();
            let target = inside.split_whitespace().next().unwrap_or("");
            let target = target.trim_start_matches('<').trim_end_matches('>');
            found.push((index + 1, target.to_string()));
            rest = &after[end + 1..];
        }
    }
    found
}

/// The file path a target names, or None when it is not checked (web link, mail, anchor only).
fn local_path(target: &str) -> Option<&str> {
    let lower = target.to_ascii_lowercase();
    if lower.starts_with("http://")
        || lower.starts_with("https://")
        || lower.starts_with("mailto:")
        || target.starts_with('#')
        || target.is_empty()
    {
        return None;
    }
    Some(target.split('#').next().unwrap_or(target))
}

#[test]
fn every_documentation_link_points_at_an_existing_file() {
    let root = &repo();
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in documents(root) {
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
        let folder = file.parent().expect("a file has a folder");
        for (line, target) in link_targets(&text) {
            let Some(path) = local_path(&target) else {
                continue;
            };
            checked += 1;
            if !folder.join(path).exists() {
                let shown = file.strip_prefix(root).unwrap_or(&file);
                broken.push(format!("{}:{line}: {target}", shown.display()));
            }
        }
    }
    assert!(
        checked > 0,
        "no local links found: is the link scanner broken?"
    );
    assert!(
        broken.is_empty(),
        "{} broken documentation link(s):\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn readme_is_short_and_keeps_its_quick_start() {
    let path = repo().join("README.md");
    let text = std::fs::read_to_string(&path).expect("read README.md");
    assert!(
        text.len() <= 13_000,
        "README.md is {} bytes; keep it at most 13,000 and move detail into docs/",
        text.len()
    );
    assert!(
        text.contains("Quick start"),
        "README.md has no \"Quick start\" section"
    );
}

#[test]
fn the_scanner_finds_links_and_images_and_skips_code() {
    let text = "See [a](docs/a.md#x) and ![pic](assets/p.png \"title\").\n\
                `[not](a link)` and [web](https://example.com) [here](#top)\n\
                ```\n[also not](inside/a/fence)\n```\n\
                [paren](dir/file_(1).md)";
    let targets: Vec<String> = link_targets(text).into_iter().map(|(_, t)| t).collect();
    assert_eq!(
        targets,
        [
            "docs/a.md#x",
            "assets/p.png",
            "https://example.com",
            "#top",
            "dir/file_(1).md"
        ]
    );
    let local: Vec<&str> = targets.iter().filter_map(|t| local_path(t)).collect();
    assert_eq!(local, ["docs/a.md", "assets/p.png", "dir/file_(1).md"]);
}
