//! The files of a directory module import each other one way only: each module in `LAYERED`
//! forms layers, no circle among its files, so a reader can take each file on what is below
//! it. Read from the source text (comments and strings left out): `use super::…`,
//! `super::x::…` and `crate::ops::…` paths, a name the module's `mod.rs` re-exports counting
//! as the file it comes from, a child directory's files as their parent's.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The directory modules whose files must not import each other in a circle.
const LAYERED: &[&str] = &["ops", "store", "agent", "summary"];

#[test]
fn the_files_of_each_layered_module_import_each_other_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut circles = Vec::new();
    for &dir in LAYERED {
        let graph = imports(&src, dir);
        assert!(graph.len() > 1, "src/{dir} has fewer than two files: is the list above out of date?");
        circles.extend(find_circles(&graph).into_iter().map(|c| format!("src/{dir}: {}", describe(&c))));
    }
    assert!(
        circles.is_empty(),
        "files that import each other in a circle (move what both need into a file below them):\n{}",
        circles.join("\n")
    );
}

#[test]
fn a_circle_is_found_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m");
    fs::create_dir_all(m.join("a")).unwrap();
    let files = [
        ("mod.rs", "mod a;\nmod b;\nmod c;\npub use c::{Thing, other};\n"),
        // A child of `a` reaches `b` through two `super`s; the comment and the string are not imports.
        ("a.rs", "mod inner;\n// use super::c;\nconst S: &str = \"super::c::x\";\n"),
        ("a/inner.rs", "use super::super::b::f;\n"),
        ("b.rs", "pub fn f() { crate::m::Thing::new(); }\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n"),
        ("c.rs", "use super::{a::{self, x}, d};\n"),
    ];
    for (name, text) in files {
        fs::write(m.join(name), text).unwrap();
    }
    let graph = imports(dir.path(), "m");
    assert_eq!(graph["a"], BTreeSet::from(["b".to_owned()]));
    assert_eq!(graph["b"], BTreeSet::from(["c".to_owned()]));
    assert_eq!(graph["c"], BTreeSet::from(["a".to_owned()]));
    assert_eq!(describe(&find_circles(&graph)[0]), "a -> b -> c -> a");
    // Broken one way, no circle is left.
    fs::write(m.join("c.rs"), "use super::d;\n").unwrap();
    assert!(find_circles(&imports(dir.path(), "m")).is_empty());
}

/// Each file of `root/dir` (a child directory's files counting as their parent's) and the
/// files beside it that it names.
fn imports(root: &Path, dir: &str) -> BTreeMap<String, BTreeSet<String>> {
    let base = root.join(dir);
    // The module's own file: `dir/mod.rs`, or `dir.rs` beside the directory.
    let mod_rs = fs::read_to_string(base.join("mod.rs"))
        .or_else(|_| fs::read_to_string(root.join(format!("{dir}.rs"))))
        .unwrap_or_else(|e| panic!("{}: {e}", base.display()));
    let units: BTreeSet<String> = fs::read_dir(&base)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs") && !p.ends_with("mod.rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    let reexports = reexports(&mod_rs);
    let resolve = |name: &str| -> Option<String> {
        if units.contains(name) { Some(name.to_owned()) } else { reexports.get(name).cloned() }
    };
    let mut graph = BTreeMap::new();
    for unit in &units {
        let mut names = BTreeSet::new();
        for (file, depth) in unit_files(&base, unit) {
            let text = strip(&fs::read_to_string(&file).unwrap());
            names.extend(sibling_names(&tokens(&text), depth, dir));
        }
        let used: BTreeSet<String> = names.iter().filter_map(|n| resolve(n)).filter(|u| u != unit).collect();
        graph.insert(unit.clone(), used);
    }
    graph
}

/// The files of unit `unit` of `base`, each with how many `super`s reach `base` from it.
fn unit_files(base: &Path, unit: &str) -> Vec<(PathBuf, usize)> {
    let mut files = vec![(base.join(format!("{unit}.rs")), 1)];
    let mut dirs = vec![(base.join(unit), 2)];
    while let Some((d, depth)) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&d) else { continue };
        for p in entries.map(|e| e.unwrap().path()) {
            if p.is_dir() {
                dirs.push((p, depth + 1));
            } else if p.extension().is_some_and(|x| x == "rs") {
                // A child's `mod.rs` is its directory's module itself.
                files.push((p.clone(), if p.ends_with("mod.rs") { depth - 1 } else { depth }));
            }
        }
    }
    files
}

/// The item names `mod.rs` re-exports (`pub use file::{A, b}`), each with its file.
fn reexports(mod_rs: &str) -> BTreeMap<String, String> {
    let toks = tokens(&strip(mod_rs));
    let mut out = BTreeMap::new();
    for i in 0..toks.len() {
        if toks[i] != "use" || !matches!(toks.get(i.wrapping_sub(1)).map(String::as_str), Some("pub" | ")")) {
            continue;
        }
        let Some(file) = toks.get(i + 1) else { continue };
        if toks.get(i + 2).map(String::as_str) != Some("::") {
            continue;
        }
        for path in use_tree(&toks, i + 3) {
            if let Some(last) = path.last() {
                out.insert(last.clone(), file.clone());
            }
        }
    }
    out
}

/// The first names of the paths that reach the directory module from a file `depth` levels
/// below it (`super::…` that many times, or `crate::dir::…`).
fn sibling_names(toks: &[String], depth: usize, dir: &str) -> Vec<String> {
    let mut names = Vec::new();
    // Inline modules (`mod tests { … }`) add a level each; their braces are counted to know
    // where they end.
    let (mut braces, mut inline): (usize, Vec<usize>) = (0, Vec::new());
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i].as_str();
        match t {
            "{" => braces += 1,
            "}" => {
                braces = braces.saturating_sub(1);
                if inline.last() == Some(&braces) {
                    inline.pop();
                }
            }
            "mod" if toks.get(i + 2).map(String::as_str) == Some("{") => {
                inline.push(braces);
                braces += 1;
                i += 3;
                continue;
            }
            _ => {}
        }
        let starts = i == 0 || toks[i - 1] != "::";
        let mut j = i;
        let reached = if starts && t == "super" {
            let mut n = 0;
            while toks.get(j).map(String::as_str) == Some("super") && toks.get(j + 1).map(String::as_str) == Some("::")
            {
                n += 1;
                j += 2;
            }
            n == depth + inline.len()
        } else if starts
            && t == "crate"
            && toks.get(i + 1).map(String::as_str) == Some("::")
            && toks.get(i + 2).map(String::as_str) == Some(dir)
            && toks.get(i + 3).map(String::as_str) == Some("::")
        {
            j = i + 4;
            true
        } else {
            false
        };
        if reached {
            names.extend(use_tree(toks, j).into_iter().filter_map(|p| p.into_iter().next()));
        }
        i = j.max(i + 1);
    }
    names
}

/// The paths of the use tree (or plain path) starting at `toks[at]`: `a::b`, `{a, b::{c, d}}`.
fn use_tree(toks: &[String], at: usize) -> Vec<Vec<String>> {
    fn tree(toks: &[String], at: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let mut path = prefix.to_vec();
        loop {
            match toks.get(*at).map(String::as_str) {
                Some("{") => {
                    *at += 1;
                    while toks.get(*at).is_some_and(|t| t != "}") {
                        tree(toks, at, &path, out);
                        if toks.get(*at).map(String::as_str) == Some(",") {
                            *at += 1;
                        }
                    }
                    *at += 1;
                    return;
                }
                Some(t) if t.chars().next().is_some_and(|c| c.is_alphanumeric() || c == '_') => {
                    if t != "self" {
                        path.push(t.to_owned());
                    }
                    *at += 1;
                    if toks.get(*at).map(String::as_str) == Some("::") {
                        *at += 1;
                        continue;
                    }
                    if toks.get(*at).map(String::as_str) == Some("as") {
                        *at += 2;
                    }
                    break;
                }
                // `*`, or the end of the path.
                _ => {
                    if toks.get(*at).map(String::as_str) == Some("*") {
                        *at += 1;
                    }
                    break;
                }
            }
        }
        if !path.is_empty() {
            out.push(path);
        }
    }
    let mut out = Vec::new();
    tree(toks, &mut { at }, &[], &mut out);
    out
}

/// Rust source without its comments, string and character literals (each left as a space).
fn strip(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == '/' && b.get(i + 1).copied() == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if b[i] == '/' && b.get(i + 1).copied() == Some('*') {
            let mut level = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1).copied() == Some('*') {
                    level += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1).copied() == Some('/') {
                    level -= 1;
                    i += 2;
                    if level == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if b[i] == 'r' && matches!(b.get(i + 1).copied(), Some('"' | '#')) && (i == 0 || !is_ident(b[i - 1])) {
            // A raw string: r"…", r#"…"#.
            let mut j = i + 1;
            while b.get(j) == Some(&'#') {
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(b[i]);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            j += 1;
            while j < b.len() && !(b[j] == '"' && (1..=hashes).all(|k| b.get(j + k) == Some(&'#'))) {
                j += 1;
            }
            i = j + 1 + hashes;
            out.push(' ');
        } else if b[i] == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push(' ');
        } else if b[i] == '\'' && (b.get(i + 2).copied() == Some('\'') || b.get(i + 1).copied() == Some('\\')) {
            // A character ('x', '\n', '\u{1F600}'), not a lifetime.
            i += 2;
            while i < b.len() && b[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push(' ');
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Identifiers, `::`, and single punctuation characters.
fn tokens(text: &str) -> Vec<String> {
    let b: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_whitespace() {
            i += 1;
        } else if is_ident(b[i]) {
            let start = i;
            while i < b.len() && is_ident(b[i]) {
                i += 1;
            }
            out.push(b[start..i].iter().collect());
        } else if b[i] == ':' && b.get(i + 1) == Some(&':') {
            out.push("::".to_owned());
            i += 2;
        } else {
            out.push(b[i].to_string());
            i += 1;
        }
    }
    out
}

/// Files that import each other in a circle: a shortest way round, and the others caught in it.
struct Circle {
    round: Vec<String>,
    others: Vec<String>,
}

/// The circles of `graph`, one for each set of files that all reach each other.
fn find_circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Circle> {
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_owned()];
        while let Some(n) = todo.pop() {
            for m in graph.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    todo.push(m.clone());
                }
            }
        }
        seen
    };
    let mut done = BTreeSet::new();
    let mut circles = Vec::new();
    for n in graph.keys() {
        if done.contains(n) || !reach(n).contains(n) {
            continue;
        }
        let set: BTreeSet<String> = reach(n).into_iter().filter(|m| reach(m).contains(n)).collect();
        done.extend(set.iter().cloned());
        // The shortest way from `n` back to itself, found breadth first.
        let mut back: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([n.clone()]);
        'search: while let Some(m) = queue.pop_front() {
            for next in &graph[&m] {
                if next == n {
                    back.insert(n.clone(), m.clone());
                    break 'search;
                }
                if !back.contains_key(next) {
                    back.insert(next.clone(), m.clone());
                    queue.push_back(next.clone());
                }
            }
        }
        let mut circle = vec![n.clone()];
        let mut at = back[n].clone();
        while at != *n {
            circle.push(at.clone());
            at = back[&at].clone();
        }
        circle[1..].reverse();
        let others = set.into_iter().filter(|m| !circle.contains(m)).collect();
        circles.push(Circle { round: circle, others });
    }
    circles
}

/// `a -> b -> a`, and the others.
fn describe(c: &Circle) -> String {
    let mut text = c.round.join(" -> ") + " -> " + &c.round[0];
    if !c.others.is_empty() {
        text += &format!(" (with {} in it too)", c.others.join(", "));
    }
    text
}
