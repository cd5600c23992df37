//! Just enough Markdown for the doc tests: the pages, their fenced blocks, links and headings.

use std::path::{Path, PathBuf};

/// The repository's root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every page the doc tests read, relative to the root: the top-level guides and docs/, sorted.
pub fn pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = ["README.md", "CONTRIBUTING.md", "CHANGELOG.md", "BENCHMARKS.md"]
        .iter()
        .map(PathBuf::from)
        .filter(|p| root().join(p).is_file())
        .collect();
    let mut dirs = vec![root().join("docs")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path.strip_prefix(root()).unwrap().to_owned());
            }
        }
    }
    pages.sort();
    pages
}

/// A fenced code block: its info string's first word, the line its first line of content is
/// on (1-based), its lines, and the file it stands for when a `<!-- file: NAME -->` line comes
/// just before it (the doc tests write it there before the examples after it run).
pub struct Block {
    pub lang: String,
    pub line: usize,
    pub lines: Vec<String>,
    pub file: Option<String>,
}

/// The fenced blocks of `text` (``` or ~~~ fences), and the text outside them with each
/// block's lines blanked (so line numbers stay right).
pub fn split(text: &str) -> (Vec<Block>, Vec<String>) {
    let mut blocks = Vec::new();
    let mut prose = Vec::new();
    let mut open: Option<(String, Block)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match &mut open {
            Some((fence, block)) => {
                if trimmed.starts_with(fence.as_str()) && trimmed.trim_end().chars().all(|c| c == '`' || c == '~') {
                    blocks.push(open.take().unwrap().1);
                } else {
                    block.lines.push(line.to_owned());
                }
                prose.push(String::new());
            }
            None => {
                let fence: String = trimmed.chars().take_while(|&c| c == '`' || c == '~').collect();
                if fence.len() >= 3 && fence.chars().all(|c| c == fence.chars().next().unwrap()) {
                    let lang = trimmed[fence.len()..].split([' ', ',', '{']).next().unwrap_or("").to_owned();
                    let file = prose.last().and_then(|l: &String| {
                        l.trim().strip_prefix("<!-- file: ")?.strip_suffix(" -->").map(str::to_owned)
                    });
                    open = Some((fence, Block { lang, line: i + 2, lines: Vec::new(), file }));
                    prose.push(String::new());
                } else {
                    prose.push(line.to_owned());
                }
            }
        }
    }
    (blocks, prose)
}

/// The targets of the inline links (`[text](target)`, `![alt](target)`) and reference
/// definitions (`[name]: target`) in prose lines, with their line numbers; code spans are
/// left out.
pub fn links(prose: &[String]) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (i, line) in prose.iter().enumerate() {
        let line = without_code_spans(line);
        if let Some(rest) = line.trim_start().strip_prefix('[')
            && let Some((_, target)) = rest.split_once("]: ")
        {
            found.push((i + 1, target.split_whitespace().next().unwrap_or("").to_owned()));
            continue;
        }
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            let target = after[..end].split_whitespace().next().unwrap_or("");
            found.push((i + 1, target.trim_matches(['<', '>']).to_owned()));
            rest = &after[end..];
        }
    }
    found
}

fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code {
            out.push(c);
        }
    }
    out
}

/// The anchors GitHub gives the headings of `prose` (`## How it works` → `how-it-works`).
pub fn anchors(prose: &[String]) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    let mut anchors = Vec::new();
    for line in prose {
        let Some(title) = line.strip_prefix('#').map(|t| t.trim_start_matches('#')) else { continue };
        if !title.starts_with(' ') {
            continue;
        }
        let slug: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let n = seen.iter().filter(|s| **s == slug).count();
        anchors.push(if n == 0 { slug.clone() } else { format!("{slug}-{n}") });
        seen.push(slug);
    }
    anchors
}

#[test]
fn blocks_links_and_anchors_are_found() {
    let text = "# Top\n\nSee [a](a.md#x) and `[no](code.md)`.\n<!-- file: x.toml -->\n```console\n$ agentctl list\n```\n\n[ref]: b.md\n## How it *works*?\n## Top\n";
    let (blocks, prose) = split(text);
    assert_eq!(blocks.len(), 1);
    assert_eq!((blocks[0].lang.as_str(), blocks[0].line, blocks[0].lines.len()), ("console", 6, 1));
    assert_eq!(blocks[0].file.as_deref(), Some("x.toml"));
    assert_eq!(links(&prose), [(3, "a.md#x".to_owned()), (9, "b.md".to_owned())]);
    assert_eq!(anchors(&prose), ["top", "how-it-works", "top-1"]);
}
