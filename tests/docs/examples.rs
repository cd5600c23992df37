//! The pages' `console` blocks run as tests: each `$ ` line (continued on the next while it
//! ends with `\\`) is run by bash against the built binary, and what it prints (stdout and stderr together) and
//! its exit code (`? N` under the command; 0 when absent) must be what the page shows.
//!
//! Each page runs in one bash, so a variable one example sets (`tok=$(agentctl run -q …)`) is
//! there for the next, with a fresh HOME (so the default home, `~/.local/state/agentctl`) and
//! a fresh working directory holding the demo agent as `fixtures/`. A block just after a
//! `<!-- file: NAME -->` line is written to NAME there when the examples reach it (an
//! `agents.toml` the next examples use, say). In the output shown, a `[..]` stands for any
//! text within a line and a line `...` for any number of lines.

use std::fmt::Write as _;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::markdown::{self, Block};

/// The built binary the examples run.
const BIN: &str = env!("CARGO_BIN_EXE_agentctl");

/// How long one page's examples may take together before they count as hung.
const HANG_GUARD: Duration = Duration::from_secs(300);

/// What a page does, in order: write a file, or run an example.
#[derive(Debug)]
pub enum Step {
    Write { name: String, text: String },
    Run(Example),
}

/// The steps of a page's blocks.
pub fn steps(blocks: &[Block]) -> Result<Vec<Step>, String> {
    let mut steps = Vec::new();
    for block in blocks {
        if let Some(name) = &block.file {
            steps.push(Step::Write { name: name.clone(), text: block.lines.join("\n") + "\n" });
        } else if block.lang == "console" {
            steps.extend(parse(block)?.into_iter().map(Step::Run));
        }
    }
    Ok(steps)
}

/// One command of a page and what the page says it prints.
#[derive(Debug)]
pub struct Example {
    /// The line of its `$ `, 1-based.
    pub line: usize,
    pub command: String,
    pub code: i32,
    pub output: Vec<String>,
}

/// The examples of one `console` block, starting at line `block.line`.
pub fn parse(block: &Block) -> Result<Vec<Example>, String> {
    let mut examples: Vec<Example> = Vec::new();
    for (i, line) in block.lines.iter().enumerate() {
        let at = block.line + i;
        if let Some(command) = line.strip_prefix("$ ") {
            examples.push(Example { line: at, command: command.to_owned(), code: 0, output: Vec::new() });
            continue;
        }
        let Some(last) = examples.last_mut() else {
            return Err(format!("line {at}: a console block starts with `$ `"));
        };
        if last.command.ends_with('\\') && last.output.is_empty() {
            last.command.push('\n');
            last.command.push_str(line);
        } else if let Some(code) = line.strip_prefix("? ").filter(|_| last.output.is_empty()) {
            last.code = code.trim().parse().map_err(|_| format!("line {at}: `? {code}` is no exit code"))?;
        } else {
            last.output.push(line.to_owned());
        }
    }
    Ok(examples)
}

/// What one example printed and how it exited.
struct Ran {
    code: i32,
    output: String,
}

/// Run the examples of `page` (relative to the root); a description of each that did not do
/// what the page says.
pub fn check_page(page: &Path, steps: &[Step]) -> Vec<String> {
    let dir = tempfile::Builder::new().prefix("agentctl-doc").tempdir().unwrap();
    let (home, work, out) = (dir.path().join("home"), dir.path().join("work"), dir.path().join("out"));
    for d in [&home, &work.join("fixtures"), &out] {
        std::fs::create_dir_all(d).unwrap();
    }
    for f in ["demo-agent", "demo-agents.toml"] {
        std::fs::copy(markdown::root().join("fixtures").join(f), work.join("fixtures").join(f)).unwrap();
    }
    let mut script = String::from("set +e\n");
    let mut examples = Vec::new();
    for step in steps {
        match step {
            Step::Write { name, text } => {
                let _ = writeln!(script, "cat >'{name}' <<'__END_OF_DOC_FILE__'\n{text}__END_OF_DOC_FILE__");
            }
            Step::Run(e) => {
                let o = out.join(examples.len().to_string());
                let _ = writeln!(
                    script,
                    "{{ {}\n}} </dev/null >'{}.out' 2>&1; echo $? >'{}.rc'",
                    e.command,
                    o.display(),
                    o.display()
                );
                examples.push(e);
            }
        }
    }
    let ran = run_script(&script, &home, &work);
    halt_what_is_left(&home, &work);
    let mut failures = Vec::new();
    if let Err(e) = ran {
        failures.push(format!("{}: {e}", page.display()));
    }
    for (i, e) in examples.iter().enumerate() {
        let o = out.join(i.to_string());
        let got =
            match (std::fs::read_to_string(o.with_extension("rc")), std::fs::read_to_string(o.with_extension("out"))) {
                (Ok(rc), Ok(output)) => Ran { code: rc.trim().parse().unwrap_or(-1), output },
                _ => Ran { code: -1, output: "(did not run: an example before it ended the page's shell)".into() },
            };
        if got.code != e.code || !matches(&e.output, &got.output) {
            failures.push(describe(page, e, &got));
        }
    }
    failures
}

/// Run `script` in bash with a clean environment: HOME `home`, in `work`, the built binary
/// first on PATH.
fn run_script(script: &str, home: &Path, work: &Path) -> Result<(), String> {
    let mut child = Command::new("bash")
        .args(["-c", script])
        .current_dir(work)
        .env_clear()
        .envs(environment(home))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return Ok(());
        }
        if started.elapsed() > HANG_GUARD {
            // SAFETY: the process group of our own child, which we have not reaped.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            return Err(format!("its examples hung for {HANG_GUARD:?} and were killed"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The whole environment of an example: nothing of the caller's but PATH.
fn environment(home: &Path) -> Vec<(String, String)> {
    let bin_dir = Path::new(BIN).parent().unwrap().display().to_string();
    // git commits in the examples' repositories need a name.
    let who = [("NAME", "Doc Example"), ("EMAIL", "doc@example.com")];
    let git = who.iter().flat_map(|(k, v)| ["AUTHOR", "COMMITTER"].map(|r| (format!("GIT_{r}_{k}"), v.to_string())));
    [
        ("PATH".to_owned(), format!("{bin_dir}:{}", std::env::var("PATH").unwrap_or_default())),
        ("HOME".to_owned(), home.display().to_string()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
    ]
    .into_iter()
    .chain(git)
    .collect()
}

/// Halt every task a page's examples left running, so none outlives the test.
fn halt_what_is_left(home: &Path, work: &Path) {
    let agentctl = |args: &[&str]| {
        Command::new(BIN).args(args).current_dir(work).env_clear().envs(environment(home)).stdin(Stdio::null()).output()
    };
    let Ok(listed) = agentctl(&["--json", "list"]) else { return };
    let Ok(listed) = serde_json::from_slice::<serde_json::Value>(&listed.stdout) else { return };
    for task in listed["tasks"].as_array().into_iter().flatten() {
        if let Some(token) = task["token"].as_str() {
            let _ = agentctl(&["halt", token, "--grace", "0s"]);
        }
    }
}

/// Whether `got` is what `expected` shows, `[..]` and `...` standing for what varies.
pub fn matches(expected: &[String], got: &str) -> bool {
    let got: Vec<&str> = got.lines().map(str::trim_end).collect();
    let expected: Vec<&str> = expected.iter().map(|l| l.trim_end()).collect();
    lines_match(&expected, &got)
}

fn lines_match(expected: &[&str], got: &[&str]) -> bool {
    match expected.split_first() {
        None => got.is_empty(),
        Some((&"...", rest)) => (0..=got.len()).any(|skip| lines_match(rest, &got[skip..])),
        Some((first, rest)) => {
            got.split_first().is_some_and(|(g, more)| line_matches(first, g) && lines_match(rest, more))
        }
    }
}

fn line_matches(expected: &str, got: &str) -> bool {
    let pieces: Vec<&str> = expected.split("[..]").collect();
    if pieces.len() == 1 {
        return expected == got;
    }
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if !got.starts_with(first) || !got[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &got[first.len()..got.len() - last.len()];
    for piece in &pieces[1..pieces.len() - 1] {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    true
}

fn describe(page: &Path, e: &Example, got: &Ran) -> String {
    let indent = |lines: &mut dyn Iterator<Item = &str>| lines.map(|l| format!("    {l}\n")).collect::<String>();
    format!(
        "{}:{}: `{}`\n  the page shows (exit {}):\n{}  it printed (exit {}):\n{}",
        page.display(),
        e.line,
        e.command.replace('\n', "\n  > "),
        e.code,
        indent(&mut e.output.iter().map(String::as_str)),
        got.code,
        indent(&mut got.output.lines()),
    )
}

#[test]
fn wildcards_match_what_varies_and_nothing_else() {
    let page = |s: &str| s.lines().map(str::to_owned).collect::<Vec<_>>();
    assert!(matches(
        &page("task [..] (run) completed in [..]s\nlog: [..]"),
        "task 3fa9c1 (run) completed in 0.1s\nlog: x\n"
    ));
    assert!(matches(&page("a\n...\nz"), "a\nb\nc\nz\n"));
    assert!(matches(&page("a\n...\nz"), "a\nz\n"));
    assert!(!matches(&page("task [..] (run) completed"), "task 3fa9c1 (run) failed"));
    assert!(!matches(&page("a\nz"), "a\nb\nz"));
    assert!(!matches(&page("ab[..]ba"), "aba"));
    let block =
        Block { lang: "console".into(), line: 10, lines: page("$ echo hi \\\nthere\n? 1\n> hi there"), file: None };
    let examples = parse(&block).unwrap();
    assert_eq!((examples[0].line, examples[0].code, examples[0].output.len()), (10, 1, 1));
    assert_eq!(examples[0].command, "echo hi \\\nthere");
    assert_eq!(examples[0].output, ["> hi there"]);
}
