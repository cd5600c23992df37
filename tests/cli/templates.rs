//! Roles and templates: the built-in kiro-cli default and the built-in role of each agent kind,
//! agents.toml overrides, missing commands, questions as one argv element, long questions, and
//! the summary of a kiro-style log.

use std::time::{Duration, Instant};

use crate::common::{Home, fake_agent, fixtures};

#[test]
fn the_builtin_template_runs_kiro_cli_and_the_summary_is_its_last_response() {
    let h = Home::new();
    let v = h.run(&["--json", "ask", "reviewer", "Check the diff"], 0).json();
    assert_eq!(v["status"], "completed");
    assert_eq!(v["summary"], "Final answer: [reviewer] Check the diff\nSecond line of the final answer.");
    let on_disk = std::fs::read_to_string(v["summary_path"].as_str().unwrap()).unwrap();
    assert_eq!(on_disk, v["summary"].as_str().unwrap());
    let log = std::fs::read(v["log_path"].as_str().unwrap()).unwrap();
    assert!(log.contains(&0x1b), "the log keeps the raw output");
}

#[test]
fn without_a_marker_the_summary_is_the_whole_stripped_output() {
    let h = Home::new();
    let v = h.run(&["--json", "run", "--", "sh", "-c", "printf '\\033[31mred\\033[0m\\nplain\\rover\\n'"], 0).json();
    assert_eq!(v["summary"], "red\nover");
}

#[test]
fn an_agents_toml_entry_overrides_the_default() {
    let h = Home::new();
    let toml =
        format!("[agents.reviewer]\ncommand = [\"{}\", \"env\", \"{{role}}\", \"{{question}}\"]\n", fake_agent());
    std::fs::write(h.path().join("agents.toml"), toml).unwrap();
    let v = h.run(&["--json", "ask", "reviewer", "it's \"quoted\"; $(rm -rf /) `x` && echo hi"], 0).json();
    let log = std::fs::read_to_string(v["log_path"].as_str().unwrap()).unwrap();
    assert!(log.contains("arg: reviewer\narg: it's \"quoted\"; $(rm -rf /) `x` && echo hi\n"), "{log}");
    // Other roles still use the built-in kiro-cli default.
    let v = h.run(&["--json", "ask", "tester", "hello"], 0).json();
    assert!(v["summary"].as_str().unwrap().contains("[tester] hello"), "{v}");
    // --agents names another file.
    let other = h.path().join("other.toml");
    std::fs::write(&other, "[default]\ncommand = [\"sh\", \"-c\", \"echo '> from other'\"]\n").unwrap();
    let v = h.run(&["--json", "--agents", other.to_str().unwrap(), "ask", "tester", "x"], 0).json();
    assert_eq!(v["summary"], "from other");
}

/// A stand-in `claude` in a directory of its own that prints its arguments, one a line, then
/// the first line of its stdin, if it has one.
fn argv_printer(h: &Home) -> String {
    use std::os::unix::fs::PermissionsExt;
    let bin = h.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    std::fs::write(&claude, "#!/bin/sh\nfor a; do printf 'arg: %s\\n' \"$a\"; done\nIFS= read -r l && printf 'stdin: %s\\n' \"$l\"\nexit 0\n").unwrap();
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap())
}

#[test]
fn a_kinds_name_runs_its_builtin_template_unless_the_file_has_an_entry_of_that_name() {
    let h = Home::new();
    let path = argv_printer(&h);
    let ask = |h: &Home| {
        let out = h.cmd().env("PATH", &path).args(["--json", "ask", "--sync", "claude", "--", "-v fix it"]).output();
        let v = crate::common::check(&["ask", "claude"], out.unwrap(), 0).json();
        std::fs::read_to_string(v["log_path"].as_str().unwrap()).unwrap()
    };
    // No agents.toml: the built-in claude template, its question on its stdin (where no `-` in
    // it can be read as an option), as Claude Code reads a user message.
    let args = "-p --input-format stream-json --output-format stream-json --verbose --replay-user-messages \
                --permission-mode acceptEdits --allowedTools Bash";
    let message = r#"{"type":"user","message":{"role":"user","content":"-v fix it"}}"#;
    let args: String = args.split_whitespace().map(|a| format!("arg: {a}\n")).collect();
    assert_eq!(ask(&h), format!("{args}stdin: {message}\n"));
    // A [default] does not take a kind's name from its built-in role.
    std::fs::write(h.path().join("agents.toml"), "[default]\ncommand = [\"false\"]\n").unwrap();
    assert!(ask(&h).starts_with("arg: -p\narg: --input-format\narg: stream-json\n"));
    // An entry of that name does: a reviewer-like claude that may not edit.
    std::fs::write(
        h.path().join("agents.toml"),
        "[agents.claude]\ncommand = [\"claude\", \"--permission-mode\", \"plan\", \"{question}\"]\n",
    )
    .unwrap();
    assert_eq!(ask(&h), "arg: --permission-mode\narg: plan\narg: -v fix it\n");
    let r = h.run(&["roles"], 0);
    assert!(r.stdout.lines().any(|l| l.starts_with("claude ") && l.contains("plan")), "{}", r.stdout);
    assert!(!r.stdout.contains("claude (built-in)") && r.stdout.contains("codex (built-in)"), "{}", r.stdout);
}

#[test]
fn a_misspelled_role_is_refused_with_the_one_meant_and_roles_lists_them() {
    let h = Home::new();
    let toml = format!(
        "[agents.reviewer]\ncommand = [\"{fake}\", \"sleep\", \"0\", \"{{question}}\"]\n\
         [agents.planner]\ncommand = [\"{fake}\", \"sleep\", \"0\", \"plan\"]\npool = \"p\"\n[pools.p]\nparallel = 1\n",
        fake = fake_agent()
    );
    std::fs::create_dir_all(h.path()).unwrap();
    std::fs::write(h.path().join("agents.toml"), toml).unwrap();
    let r = h.run(&["ask", "reviwer", "hi"], 2);
    assert!(r.stderr.contains("role `reviwer` is not defined (did you mean `reviewer`?)"), "{}", r.stderr);
    assert!(r.stderr.contains("are planner, reviewer") && r.stderr.contains("`agentctl roles`"), "{}", r.stderr);
    assert_eq!(h.run(&["--json", "ask", "Reviewer", "hi"], 2).json()["kind"], "unknown_role");
    // Nothing ran.
    assert!(!h.path().join("tasks").exists());
    // A role far from every defined one still runs the default template (kiro-cli here).
    let v = h.run(&["--json", "ask", "tester", "hi"], 0).json();
    assert!(v["summary"].as_str().unwrap().contains("[tester] hi"), "{v}");

    let r = h.run(&["roles"], 0);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(lines[0].contains("agents.toml"), "{}", r.stdout);
    assert!(lines[2].starts_with("planner") && lines[2].contains(" p "), "{}", r.stdout);
    assert!(lines[3].starts_with("reviewer") && lines[3].contains("sleep 0"), "{}", r.stdout);
    // Then the built-in roles, marked so.
    assert!(lines[4].starts_with("claude (built-in)") && lines[4].contains("stream-json"), "{}", r.stdout);
    assert!(lines[10].starts_with('*') && lines[10].contains("kiro-cli"), "{}", r.stdout);
    let v = h.run(&["--json", "roles"], 0).json();
    let names: Vec<&str> = v["roles"].as_array().unwrap().iter().map(|r| r["role"].as_str().unwrap()).collect();
    assert_eq!(names, ["planner", "reviewer"]);
    let builtin: Vec<&str> = v["builtin"].as_array().unwrap().iter().map(|r| r["role"].as_str().unwrap()).collect();
    assert_eq!(builtin, ["claude", "codex", "gemini", "copilot", "opencode", "kiro"]);
    assert_eq!(
        (v["builtin"][1]["agent"].as_str(), v["builtin"][1]["source"].as_str()),
        (Some("codex"), Some("built-in"))
    );
    assert_eq!(v["other_roles"]["source"], "the built-in default template");
}

#[test]
fn a_missing_agent_command_fails_at_once_with_how_to_configure_one() {
    let h = Home::new();
    let t0 = Instant::now();
    let out = h.cmd().env("PATH", "/usr/bin:/bin").args(["ask", "reviewer", "hi"]).output().unwrap();
    // Refused before anything waits (a hang guard).
    assert!(t0.elapsed() < Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`kiro-cli`") && err.contains("agents.toml") && err.contains("[agents.reviewer]"), "{err}");
    let r = h.run(&["run", "--", "no-such-command-here"], 2);
    assert!(r.stderr.contains("`no-such-command-here`"), "{}", r.stderr);
    // Refused before anything was created: not a task, not even the home.
    assert_eq!(h.run(&["--json", "list"], 2).json()["kind"], "no_home", "a refused ask must not leave a task");
    assert!(!h.path().join("tasks").exists());
}

#[test]
fn long_questions_need_a_question_file_template() {
    let h = Home::new();
    let long = "q".repeat(200 * 1024);
    let mut c = h.cmd();
    c.args(["ask", "reviewer", "-"]).stdin(std::process::Stdio::piped());
    let r = with_stdin(c, &long);
    assert_eq!(r.0, Some(2));
    assert!(r.2.contains("{question_file}"), "{}", r.2);

    let toml = "[agents.reviewer]\ncommand = [\"sh\", \"-c\", \"echo \\\"> got $(wc -c < \\\"$1\\\") bytes\\\"\", \"sh\", \"{question_file}\"]\n";
    std::fs::write(h.path().join("agents.toml"), toml).unwrap();
    let mut c = h.cmd();
    c.args(["--json", "ask", "reviewer", "-"]).stdin(std::process::Stdio::piped());
    let (code, stdout, stderr) = with_stdin(c, &long);
    assert_eq!(code, Some(0), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["summary"], format!("got {} bytes", long.len()));
}

fn with_stdin(mut c: std::process::Command, input: &str) -> (Option<i32>, String, String) {
    use std::io::Write;
    let mut child = c.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn bad_roles_and_durations_are_refused() {
    let h = Home::new();
    let r = h.run(&["ask", "../etc", "hi"], 2);
    assert!(r.stderr.contains("invalid role"), "{}", r.stderr);
    let r = h.run(&["ask", "reviewer", "hi", "--wait", "soon"], 2);
    assert!(r.stderr.contains("invalid duration `soon`"), "{}", r.stderr);
    // An empty question, from stdin or not, runs nothing.
    let r = h.run(&["ask", "reviewer", "-"], 2);
    assert!(r.stderr.contains("nothing came on stdin for the question"), "{}", r.stderr);
    let r = h.run(&["ask", "reviewer", " \n"], 2);
    assert!(r.stderr.contains("the question for role `reviewer` is empty"), "{}", r.stderr);
    // A template's bad timeout names its file and role.
    let bad = h.path().join("timeout.toml");
    std::fs::write(&bad, "[agents.reviewer]\ncommand = [\"x\", \"{question}\"]\ntimeout = \"30x\"\n").unwrap();
    let r = h.run(&["--agents", bad.to_str().unwrap(), "ask", "reviewer", "hi"], 2);
    assert!(r.stderr.contains("timeout.toml: [agents.reviewer] timeout: invalid duration `30x`"), "{}", r.stderr);
    assert!(!h.path().join("tasks").exists(), "a refused ask made a task");
    let bad = h.path().join("bad.toml");
    std::fs::write(&bad, "[agents.reviewer]\ncomand = []\n").unwrap();
    let r = h.run(&["--agents", bad.to_str().unwrap(), "ask", "reviewer", "hi"], 2);
    assert!(r.stderr.contains("is not valid"), "{}", r.stderr);
    assert!(fixtures().join("demo-agent").exists());
}

#[test]
fn bad_limits_are_refused_saying_what_to_write() {
    let h = Home::new();
    let bad = h.path().join("bad.toml");
    std::fs::create_dir_all(h.path()).unwrap();
    for (toml, says) in [
        ("[agents.w]\ncommand = [\"true\"]\nmemory = \"lots\"\n", "`lots` is not a size; give one like \"512M\""),
        ("[agents.w]\ncommand = [\"true\"]\nmemory = 1000\n", "[agents.w]: memory must be at least 1M"),
        ("[agents.w]\ncommand = [\"true\"]\ncpus = 0\n", "[agents.w]: cpus must be from 0.01"),
        ("[default]\ncommand = [\"true\"]\npids = 0\n", "[default]: pids must be at least 1"),
        ("[pools.p]\nmemory = \"-1G\"\n", "is not a size"),
        ("[pools.p]\ncpus = 9999\n", "[pools.p]: cpus must be from 0.01 to 4096"),
    ] {
        std::fs::write(&bad, toml).unwrap();
        let r = h.run(&["--agents", bad.to_str().unwrap(), "ask", "w", "hi"], 2);
        assert!(r.stderr.contains(says), "{toml}: {}", r.stderr);
        assert!(r.stderr.contains("bad.toml"), "{}", r.stderr);
    }
    // Nothing was started.
    assert!(!h.path().join("tasks").exists());
}

/// Each shipped template of `examples/agents.toml`, run against a stand-in that prints what
/// the real CLI printed (`fixtures/transcripts/`: recorded from Claude Code, Codex and Gemini
/// CLI against a local fake of their model API; the kiro-cli one is built from its renderer,
/// see the README there): the summary is exactly the answer, whatever else the CLI printed.
#[test]
fn each_shipped_template_gives_exactly_the_agents_answer() {
    let h = Home::new();
    let transcripts = fixtures().join("transcripts");
    std::fs::copy(fixtures().join("../examples/agents.toml"), h.path().join("agents.toml")).unwrap();
    let answer = std::fs::read_to_string(transcripts.join("answer.md")).unwrap();
    let kiro = std::fs::read_to_string(transcripts.join("kiro.answer")).unwrap();
    let path = format!("{}:{}", transcripts.join("bin").display(), std::env::var("PATH").unwrap());
    for (role, want) in [("kiro", &kiro), ("claude", &answer), ("codex", &answer), ("gemini", &answer)] {
        let out = h.cmd().env("PATH", &path).args(["--json", "ask", "--sync", role, "Review the change"]).output();
        let v = crate::common::check(&["ask", role], out.unwrap(), 0).json();
        assert_eq!(v["status"], "completed", "{role}: {v}");
        assert_eq!(v["summary"].as_str().unwrap(), want.trim_end(), "{role}");
        let on_disk = std::fs::read_to_string(v["summary_path"].as_str().unwrap()).unwrap();
        assert_eq!(on_disk, want.trim_end(), "{role}: summary.md");
    }
}

#[test]
fn an_answer_file_the_agent_never_wrote_leaves_its_output_as_the_summary() {
    let h = Home::new();
    let toml =
        "[agents.quiet]\ncommand = [\"sh\", \"-c\", \"echo 'could not start: no model'; exit 3\", \"{result_file}\"]\n";
    std::fs::write(h.path().join("agents.toml"), toml).unwrap();
    let v = h.run(&["--json", "ask", "--sync", "quiet", "x"], 1).json();
    assert_eq!((v["status"].as_str(), v["summary"].as_str()), (Some("failed"), Some("could not start: no model")));
    // A bad `result` setting is refused with what to write instead.
    std::fs::write(h.path().join("agents.toml"), "[agents.r]\ncommand = [\"true\"]\nresult = \"last\"\n").unwrap();
    let r = h.run(&["ask", "r", "x"], 2);
    assert!(r.stderr.contains("json:FIELD"), "{}", r.stderr);
}

#[test]
fn a_misspelled_placeholder_is_refused_naming_the_known_ones() {
    let h = Home::new();
    std::fs::create_dir_all(h.path()).unwrap();
    std::fs::write(h.path().join("agents.toml"), "[agents.w]\ncommand = [\"echo\", \"{questoin}\"]\n").unwrap();
    let r = h.run(&["ask", "w", "hi"], 2);
    assert!(r.stderr.contains("[agents.w]: unknown placeholder `{questoin}`"), "{}", r.stderr);
    assert!(r.stderr.contains("{role}, {question}, {question_file}, {result_file}, {token}"), "{}", r.stderr);
    // A literal word in braces is written doubled; other braces are text.
    std::fs::write(
        h.path().join("agents.toml"),
        "[agents.w]\ncommand = [\"echo\", \"{{name}} {role} {print $1} {question}\"]\nresult = \"output\"\n",
    )
    .unwrap();
    let v = h.run(&["--json", "ask", "w", "hi", "--sync"], 0).json();
    assert_eq!(v["summary"], "{name} w {print $1} hi", "{v}");
    // `{{question}}` would now be the word, not the question: refused, saying so.
    std::fs::write(h.path().join("agents.toml"), "[agents.w]\ncommand = [\"echo\", \"{{question}}\"]\n").unwrap();
    let r = h.run(&["ask", "w", "hi"], 2);
    assert!(r.stderr.contains("would be the text {question}, not its value"), "{}", r.stderr);
}

#[test]
fn a_slurm_role_without_srun_is_refused_saying_what_to_install() {
    let h = Home::new();
    std::fs::create_dir_all(h.path()).unwrap();
    std::fs::write(
        h.path().join("agents.toml"),
        "[agents.w]\ncommand = [\"true\"]\nbackend = \"slurm\"\nenv = { PATH = \"/nonexistent\" }\n",
    )
    .unwrap();
    let r = h.run(&["ask", "w", "hi"], 2);
    assert!(r.stderr.contains("`srun` was not found on PATH") && r.stderr.contains("slurm-client"), "{}", r.stderr);
    std::fs::write(h.path().join("agents.toml"), "[agents.w]\ncommand = [\"true\"]\nbackend = \"kubernetes\"\n")
        .unwrap();
    let r = h.run(&["ask", "w", "hi"], 2);
    assert!(r.stderr.contains("unknown variant `kubernetes`") && r.stderr.contains("slurm"), "{}", r.stderr);
    // A pool's backend, for the templates that choose none.
    std::fs::write(
        h.path().join("agents.toml"),
        "[pools.c]\nbackend = \"slurm\"\n[agents.w]\ncommand = [\"true\"]\npool = \"c\"\nenv = { PATH = \"/nonexistent\" }\n",
    )
    .unwrap();
    let r = h.run(&["ask", "w", "hi"], 2);
    assert!(r.stderr.contains("backend = \"slurm\" in [pools.c]") && r.stderr.contains("`srun`"), "{}", r.stderr);
    std::fs::write(h.path().join("agents.toml"), "[pools.c]\nbackend = \"slurm\"\n[pools.c.slurm]\nqueue = \"x\"\n")
        .unwrap();
    let r = h.run(&["ask", "w", "hi"], 2);
    assert!(r.stderr.contains("unknown field `queue`") && r.stderr.contains("partition"), "{}", r.stderr);
    assert!(!h.path().join("tasks").exists());
}

/// The file's `[prices]` and a pool's `budget` reach its tasks: an agent of the codex kind
/// replaying Codex's recorded stream (which names no model: `-m` in its command does) has its
/// cost estimated from the file's price, and a pool's token budget halts it.
#[test]
fn the_files_prices_and_a_pools_budget_reach_its_tasks() {
    let h = Home::new();
    let stream = fixtures().join("transcripts/codex-stream.jsonl");
    let toml = format!(
        "[prices.\"gpt-5.5\"]\ninput = 1.0\noutput = 10.0\ncache_read = 0.5\ncache_write = 2.0\n\
         [pools.tight]\nbudget = {{ tokens = 1000 }}\n\
         [agents.priced]\nagent = \"codex\"\ncommand = [\"sh\", \"-c\", \"cat \\\"$0\\\"\", \"{s}\", \"-m\", \"gpt-5.5\"]\n\
         [agents.capped]\nagent = \"codex\"\npool = \"tight\"\n\
         command = [\"sh\", \"-c\", \"cat \\\"$0\\\"; sleep 60\", \"{s}\", \"-m\", \"gpt-5.5\"]\n",
        s = stream.display()
    );
    std::fs::write(h.path().join("agents.toml"), toml).unwrap();
    let v = h.run(&["--json", "ask", "--sync", "priced", "q"], 0).json();
    // 330 uncached input, 60 output, 800 cache read, 200 cache write (STREAMS.md).
    let want = (330.0 * 1.0 + 60.0 * 10.0 + 800.0 * 0.5 + 200.0 * 2.0) / 1e6;
    let cost = v["usage"]["cost_usd"].as_f64().unwrap_or_else(|| panic!("no cost: {v}"));
    assert!((cost - want).abs() < 1e-12 && v["usage"]["cost_estimated"] == true, "{v}");
    // 1390 tokens, past the pool's 1000: halted long before its sleep ends.
    let t0 = Instant::now();
    let v = h.run(&["--json", "ask", "--sync", "capped", "q"], 1).json();
    assert_eq!(v["status"], "over_budget", "{v}");
    assert!(v["note"].as_str().unwrap().contains("1390 tokens passed its budget of 1000 by 390"), "{v}");
    assert!(t0.elapsed() < Duration::from_secs(50), "a hang guard");
}
