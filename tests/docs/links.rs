//! Every relative link of the pages resolves: the file exists, and a `#anchor` names one of
//! its headings.

use std::path::{Component, Path, PathBuf};

use crate::markdown::{self, anchors, links, split};

/// What is wrong with the link to `target` from `page` (both relative to the root), if anything.
fn broken(page: &Path, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
    let file = if path.is_empty() { page.to_owned() } else { normalise(&page.parent().unwrap().join(path)) };
    let on_disk = markdown::root().join(&file);
    if !on_disk.exists() {
        return Some(format!("{} does not exist", file.display()));
    }
    if anchor.is_empty() || on_disk.is_dir() || on_disk.extension().is_none_or(|e| e != "md") {
        return None;
    }
    let (_, prose) = split(&std::fs::read_to_string(&on_disk).unwrap());
    let known = anchors(&prose);
    (!known.iter().any(|a| a == anchor))
        .then(|| format!("{} has no heading #{anchor} (it has: {})", file.display(), known.join(", ")))
}

/// `path` with its `.` and `..` parts resolved, without touching the disk.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[test]
fn every_relative_link_resolves() {
    let mut failures = Vec::new();
    for page in markdown::pages() {
        let (_, prose) = split(&std::fs::read_to_string(markdown::root().join(&page)).unwrap());
        for (line, target) in links(&prose) {
            if let Some(why) = broken(&page, &target) {
                failures.push(format!("{}:{line}: link to {target}: {why}", page.display()));
            }
        }
    }
    assert!(failures.is_empty(), "broken links:\n{}", failures.join("\n"));
}
