//! Follow-ups of the real CLIs (`ask --to TOKEN`): the second run resumes the first one's
//! session, which the fake API sees as one conversation carrying both prompts; the task keeps
//! its token, counts two turns and adds each run's usage once (Codex reports its thread's
//! running total: the turn's own is what it adds).

use serde_json::Value;

use crate::clis::{self, Cli, PROMPT};
use crate::common::{Home, check};
use crate::fake_api::FakeApi;
use crate::task::tokens;
use crate::usage::PRICES;

const FOLLOW_UP: &str = "Now summarise it";

/// A home whose role `rev` runs `cli` with the question in place of its prompt.
fn home_for(cli: &Cli) -> Home {
    let home = Home::new();
    let command: Vec<String> =
        cli.argv.iter().map(|a| if a == PROMPT { "{question}".to_owned() } else { a.clone() }).collect();
    let toml = format!("{PRICES}\n[agents.rev]\ncommand = {}\n", serde_json::to_string(&command).unwrap());
    std::fs::write(home.path().join("agents.toml"), toml).unwrap();
    home
}

/// `ask` with `args` (after `--json ask --sync`), which must complete.
fn ask(cli: &Cli, home: &Home, args: &[&str]) -> Value {
    let args: Vec<&str> = ["--json", "ask", "--sync"].iter().chain(args).copied().collect();
    let v = check(&args, cli.agentctl(home, &args).output().unwrap(), 0).json();
    assert_eq!(v["status"], "completed", "{v}");
    v
}

/// Both runs of a follow-up, and what the fake API saw.
fn follow_up(cli: &Cli, api: &FakeApi) -> (Value, Value) {
    let home = home_for(cli);
    // A hang guard (a CLI that retries a failing API for ever ends as expired); the follow-up
    // keeps it.
    let first = ask(cli, &home, &["--timeout", "5m", "rev", PROMPT]);
    let token = first["token"].as_str().unwrap().to_owned();
    let second = ask(cli, &home, &["--to", &token, FOLLOW_UP]);
    assert_eq!((second["token"].as_str(), second["turn"].as_u64()), (Some(token.as_str()), Some(2)), "{second}");
    // The resumed run's first model call carried the first prompt and the new one.
    let requests = api.requests();
    let resumed = requests
        .lines()
        .filter(|l| l.trim_start().starts_with("conversation:"))
        .find(|l| l.contains(FOLLOW_UP))
        .unwrap_or_else(|| panic!("no call carried the follow-up:\n{requests}"));
    assert!(resumed.contains(PROMPT), "not the same conversation: {resumed}");
    let status =
        check(&["--json", "status", &token], home.cmd().args(["--json", "status", &token]).output().unwrap(), 0).json();
    assert_eq!(status["usage"]["session_id"], first["usage"]["session_id"], "{status}");
    (first, status)
}

#[test]
fn claude_goes_on_with_its_session_and_the_task_adds_each_runs_usage() {
    let api = FakeApi::start("streams.json");
    let (first, s) = follow_up(&clis::claude(&api), &api);
    let (u, one) = (&s["usage"], &first["usage"]);
    let twice = tokens(one).map(|n| n.map(|n| 2 * n));
    assert_eq!((tokens(u), u["turns"].as_u64()), (twice, Some(6)), "{s}");
    let cost = one["cost_usd"].as_f64().unwrap();
    assert!((u["cost_usd"].as_f64().unwrap() - 2.0 * cost).abs() < 1e-12, "each run's own cost, added: {u}");
    assert_eq!(s["turns"][0]["usage"], *one, "the first turn keeps what it spent: {s}");
}

#[test]
fn codex_resumes_its_thread_and_the_turn_counts_what_the_thread_added() {
    let api = FakeApi::start("streams.json");
    let mut cli = clis::codex(&api);
    cli.argv.splice(2..2, ["-m".to_owned(), "gpt-5.5".to_owned()]);
    let (first, s) = follow_up(&cli, &api);
    let (u, one) = (&s["usage"], &first["usage"]);
    let twice = tokens(one).map(|n| n.map(|n| 2 * n));
    assert_eq!((tokens(u), u["turns"].as_u64()), (twice, Some(2)), "not the thread's total twice: {s}");
    assert_eq!(s["turns"][0]["usage"]["input_tokens"], one["input_tokens"], "{s}");
}

#[test]
fn gemini_and_opencode_go_on_with_their_sessions_each_run_counted_once() {
    for make in [clis::gemini as fn(&FakeApi) -> Cli, clis::opencode] {
        let api = FakeApi::start("streams.json");
        let cli = make(&api);
        let (first, s) = follow_up(&cli, &api);
        let twice = tokens(&first["usage"]).map(|n| n.map(|n| 2 * n));
        assert_eq!(tokens(&s["usage"]), twice, "{}: {s}", cli.argv[0]);
    }
}

#[test]
fn claude_forks_twice_from_one_conversation_and_the_original_stays_as_it_was() {
    let api = FakeApi::start("streams.json");
    let cli = clis::claude(&api);
    let home = home_for(&cli);
    let first = ask(&cli, &home, &["--timeout", "5m", "rev", PROMPT]);
    let token = first["token"].as_str().unwrap();
    let session = first["usage"]["session_id"].as_str().unwrap();
    let mut forks = Vec::new();
    for approach in ["Try the first approach", "Try the other approach"] {
        let v = ask(&cli, &home, &["--fork", token, approach]);
        let forked = v["usage"]["session_id"].as_str().unwrap().to_owned();
        assert!(forked != session && !forks.contains(&forked), "a session of its own: {v}");
        forks.push(forked);
        let requests = api.requests();
        let carried =
            requests.lines().filter(|l| l.trim_start().starts_with("conversation:")).find(|l| l.contains(approach));
        assert!(carried.is_some_and(|l| l.contains(PROMPT)), "not from the original's conversation:\n{requests}");
        assert!(
            !carried.unwrap().contains("Try the first approach") || approach == "Try the first approach",
            "forks share nothing"
        );
    }
    let original = check(&["status"], home.cmd().args(["--json", "status", token]).output().unwrap(), 0).json();
    assert!(original.get("turns").is_none() && original["usage"] == first["usage"], "{original}");
}

#[test]
fn claude_forks_a_task_that_ran_in_a_worktree_into_a_worktree_of_its_own() {
    let api = FakeApi::start("streams.json");
    let cli = clis::claude(&api);
    let home = home_for(&cli);
    let git = |args: &[&str]| {
        let mut cmd = std::process::Command::new("git");
        cmd.arg("-C").arg(cli.work()).args(["-c", "user.name=t", "-c", "user.email=t@example.com"]).args(args);
        let out = cmd.env("GIT_CONFIG_GLOBAL", "/dev/null").env("GIT_CONFIG_NOSYSTEM", "1").output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    std::fs::write(cli.work().join("README"), "a repository\n").unwrap();
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-qm", "init"]);
    let first = ask(&cli, &home, &["--timeout", "5m", "--worktree", "rev", PROMPT]);
    let token = first["token"].as_str().unwrap();
    let v = ask(&cli, &home, &["--fork", token, FOLLOW_UP]);
    let (ran, forked) = (first["worktree"].as_str().unwrap(), v["worktree"].as_str().unwrap());
    assert!(ran != forked && forked.ends_with(v["token"].as_str().unwrap()), "{v}");
    // Claude Code found the conversation from the new worktree: the fork's call carried it.
    let requests = api.requests();
    let carried =
        requests.lines().filter(|l| l.trim_start().starts_with("conversation:")).find(|l| l.contains(FOLLOW_UP));
    assert!(carried.is_some_and(|l| l.contains(PROMPT)), "not from the original's conversation:\n{requests}");
}
