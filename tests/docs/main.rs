//! The documentation as tests: every `console` example of the README and docs/ runs against
//! the built binary, every relative link resolves, and the reference pages are what the code
//! generates (`UPDATE_DOCS=1 cargo test --test docs` writes them anew).

mod examples;
mod links;
mod markdown;
mod reference;

use std::path::PathBuf;

/// Every page's `console` examples, each page in a thread of its own: they wait on agents
/// far more than they compute. `DOCS_PAGE=docs/tasks.md` runs one page's alone.
#[test]
fn every_console_example_prints_what_its_page_shows() {
    let only = std::env::var_os("DOCS_PAGE").map(PathBuf::from);
    let mut pages: Vec<(PathBuf, Vec<examples::Step>)> = Vec::new();
    let mut failures = Vec::new();
    for page in markdown::pages().into_iter().filter(|p| only.as_ref().is_none_or(|o| o == p)) {
        let (blocks, _) = markdown::split(&std::fs::read_to_string(markdown::root().join(&page)).unwrap());
        match examples::steps(&blocks) {
            Ok(steps) if steps.iter().any(|s| matches!(s, examples::Step::Run(_))) => pages.push((page, steps)),
            Ok(_) => {}
            Err(e) => failures.push(format!("{}: {e}", page.display())),
        }
    }
    if only.is_none() {
        assert!(pages.iter().any(|(p, _)| p.as_os_str() == "README.md"), "README.md has no console example");
    }
    let threads: Vec<_> = pages
        .into_iter()
        .map(|(page, found)| std::thread::spawn(move || examples::check_page(&page, &found)))
        .collect();
    for t in threads {
        failures.extend(t.join().unwrap());
    }
    assert!(failures.is_empty(), "{} documented example(s) failed:\n\n{}", failures.len(), failures.join("\n"));
}

/// A block that shows a shell session (`$ ` lines) is a `console` block, so it runs: one that
/// cannot run here is written without the `$ ` (a `text` or `sh` block saying why).
#[test]
fn every_shell_session_shown_is_run() {
    let mut failures = Vec::new();
    for page in markdown::pages() {
        let (blocks, _) = markdown::split(&std::fs::read_to_string(markdown::root().join(&page)).unwrap());
        for block in blocks.iter().filter(|b| b.lang != "console") {
            if let Some(i) = block.lines.iter().position(|l| l.starts_with("$ ")) {
                let lang = if block.lang.is_empty() { "unlabelled" } else { &block.lang };
                failures.push(format!("{}:{}: a `$ ` line in a {lang} block", page.display(), block.line + i));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "shell sessions that would not run (make them `console` blocks):\n{}",
        failures.join("\n")
    );
}
