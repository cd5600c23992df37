//! What an agent spends and does, read from its stream while it runs, and budgets that halt it.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{Home, fixtures, wait_until};

/// The stand-in for Claude Code's stream (recognised as `claude` by its name).
fn claude() -> String {
    fixtures().join("stream/claude").to_string_lossy().into_owned()
}

#[test]
fn a_claude_tasks_step_shows_while_it_runs_and_its_usage_is_the_clis_own_at_the_end() {
    let h = Home::new();
    let gate = h.path().join("gate");
    let claude = claude();
    let v = h.run(&["--json", "run", "--async", "--", &claude, "steps", gate.to_str().unwrap()], 0).json();
    let token = v["token"].as_str().unwrap().to_owned();
    let mut last = Value::Null;
    wait_until(Duration::from_secs(30), "the Bash step to show", || {
        last = h.status(&token);
        last["step"]["what"] == "Bash: sleep 5"
    });
    // One message in two events counts once; its cost is estimated while it runs.
    let u = &last["usage"];
    assert_eq!(
        (u["input_tokens"].as_u64(), u["output_tokens"].as_u64(), u["turns"].as_u64()),
        (Some(100), Some(12), Some(1)),
        "{last}"
    );
    assert_eq!(
        (u["session_id"].as_str(), u["cost_estimated"].as_bool()),
        (Some("5e0c4a52-7d1f-4a43-9d0b-3c4fb0d3e001"), Some(true)),
        "{u}"
    );
    let listed = h.run(&["--json", "list"], 0).json();
    assert_eq!(listed["tasks"][0]["step"]["what"], "Bash: sleep 5", "{listed}");
    std::fs::write(&gate, "").unwrap();
    let v = h.run(&["--json", "await", &token], 0).json();
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["summary"], "All done: the change is good.");
    let u = &v["usage"];
    let tokens: Vec<_> = ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "turns"]
        .map(|k| u[k].as_u64())
        .into();
    assert_eq!(tokens, [Some(200), Some(50), Some(30), Some(40), Some(2)], "{u}");
    assert_eq!((u["cost_usd"].as_f64(), u.get("cost_estimated")), (Some(0.0123), None), "the CLI's own cost: {u}");
    assert!(v.get("step").is_none(), "{v}");
    // The end's event says it too.
    let e = h.run(&["--json", "wait", "--timeout", "5s"], 0).json();
    assert_eq!(e["usage"]["cost_usd"].as_f64(), Some(0.0123), "{e}");
}

#[test]
fn a_task_that_passes_its_budget_is_halted_over_budget_within_the_turn() {
    let h = Home::new();
    let claude = claude();
    let v = h.run(&["--json", "run", "--sync", "--budget-usd", "0.05", "--", &claude, "loop"], 1).json();
    assert_eq!(v["status"], "over_budget", "{v}");
    let u = &v["usage"];
    // $0.02 a call (estimated at list prices while it runs): the third passes $0.05.
    assert_eq!((u["turns"].as_u64(), u["cost_estimated"].as_bool()), (Some(3), Some(true)), "{u}");
    let note = v["note"].as_str().unwrap();
    assert!(note.contains("over budget: cost $0.06") && note.contains("budget of $0.0500"), "{note}");
    assert!(h.all_ended());

    let v = h.run(&["--json", "run", "--sync", "--budget-turns", "3", "--", &claude, "loop"], 1).json();
    assert_eq!((v["status"].as_str(), v["usage"]["turns"].as_u64()), (Some("over_budget"), Some(4)), "{v}");
    assert!(v["note"].as_str().unwrap().contains("4 turns passed its budget of 3 by 1"), "{v}");
    let text = h.run(&["status", v["token"].as_str().unwrap()], 1).stdout;
    assert!(text.contains("over_budget"), "{text}");
}

#[test]
fn a_broken_stream_leaves_the_answer_and_usage_unknown_never_zero() {
    let h = Home::new();
    let v = h.run(&["--json", "run", "--sync", "--", &claude(), "broken"], 0).json();
    assert_eq!((v["status"].as_str(), v["summary"].as_str()), (Some("completed"), Some("the answer")), "{v}");
    assert!(v.get("usage").is_none(), "a session id alone is no usage: {v}");
}

#[test]
fn a_pool_that_spent_its_window_holds_new_tasks_saying_until_when_and_a_halt_cancels_them() {
    let h = Home::new();
    let toml = format!(
        "[pools.paid]\nparallel = 4\nspend = {{ usd = 0.10, per = \"1h\" }}\n\n[agents.spender]\ncommand = [\"{}\", \"spend\", \"{{question}}\"]\npool = \"paid\"\n",
        claude()
    );
    std::fs::write(h.path().join("agents.toml"), toml).unwrap();
    for usd in ["0.04", "0.06"] {
        let v = h.run(&["--json", "ask", "--sync", "spender", usd], 0).json();
        assert_eq!(
            (v["status"].as_str(), v["usage"]["cost_usd"].as_f64()),
            (Some("completed"), usd.parse().ok()),
            "{v}"
        );
    }
    // $0.10 spent in the last hour: the next one waits, and says until when.
    let v = h.run(&["--json", "ask", "--async", "spender", "0.01"], 0).json();
    let token = v["token"].as_str().unwrap().to_owned();
    let mut s = Value::Null;
    wait_until(Duration::from_secs(30), "the task to say why it waits", || {
        s = h.status(&token);
        s["summary"].as_str().is_some_and(|t| t.contains("spent"))
    });
    assert_eq!(s["status"], "queued", "{s}");
    let why = s["summary"].as_str().unwrap();
    assert!(why.contains("pool `paid` spent $0.1000 of its $0.1000 per 1h; its window frees at "), "{why}");
    assert!(why.contains("(in 59m") || why.contains("(in 1h"), "{why}");
    let v = h.run(&["--json", "halt", &token], 0).json();
    assert_eq!(v["status"], "cancelled", "{v}");
    assert!(v["note"].as_str().unwrap().contains("never ran"), "{v}");
    // A task of another pool is not held.
    let claude = claude();
    h.run(&["--json", "run", "--sync", "--", &claude, "spend", "0.5"], 0);
}

#[test]
fn list_and_status_say_the_step_and_spend_soon_after_the_agent_writes_them() {
    let h = Home::new();
    let gate = h.path().join("gate");
    let claude = claude();
    let v = h.run(&["--json", "run", "--async", "--", &claude, "steps", gate.to_str().unwrap()], 0).json();
    let (token, log) = (v["token"].as_str().unwrap().to_owned(), v["log_path"].as_str().unwrap().to_owned());
    // From the moment the agent's Bash call is in its log (its stdout) to the step in `list`.
    wait_until(Duration::from_secs(30), "the Bash call in the log", || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("toolu_1"))
    });
    let written = Instant::now();
    let mut row = String::new();
    wait_until(Duration::from_secs(30), "list to show the step", || {
        let listed = h.run(&["list"], 0).stdout;
        row = listed.lines().find(|l| l.contains(&token)).unwrap_or_default().to_owned();
        row.contains("[Bash: sleep 5]")
    });
    let shown = written.elapsed();
    eprintln!("the step showed in list {shown:?} after the agent wrote it");
    // Estimated at list prices while it runs: 100 in, 12 out, 15 cache read, 20 cache write ($0.00093).
    assert!(row.contains(" ~$0.0009 ") && row.contains("running"), "{row}");
    let text = h.run(&["status", &token], 0).stdout;
    for said in [
        "usage: ~$0.0009 · 147 tokens · 1 turn · tokens in 100, out 12, cache read 15, cache write 20 · \
         claude-opus-4-8 · session 5e0c4a52-7d1f-4a43-9d0b-3c4fb0d3e001 (so far)",
        "step: Bash: sleep 5 (for ",
        "line(s) of output so far; now: Bash: sleep 5; spent ~$0.0009",
    ] {
        assert!(text.contains(said), "{said} in:\n{text}");
    }
    // Awaiting it with another task: the still-running list says its step.
    let other = h.start(&["sleep", "30"]);
    let text = h.run(&["await", &token, &other, "--timeout", "0.2s"], 124).stdout;
    let line = text.lines().find(|l| l.contains(&token)).unwrap_or_default();
    assert!(line.ends_with("; now: Bash: sleep 5"), "{text}");
    h.run(&["halt", &other], 0);
    std::fs::write(&gate, "").unwrap();
    let text = h.run(&["await", &token], 0).stdout;
    assert!(
        text.contains("usage: $0.0123 · 320 tokens · 2 turns · tokens in 200, out 50, cache read 30, cache write 40"),
        "{text}"
    );
    assert!(!text.contains("step:") && !text.contains("(so far)"), "{text}");
    let listed = h.run(&["list"], 0).stdout;
    assert!(listed.lines().next().unwrap().contains(" COST "), "{listed}");
    let row = listed.lines().find(|l| l.contains(&token)).unwrap();
    assert!(row.contains(" $0.0123 ") && !row.contains("[Bash"), "{row}");
    // A task whose agent reports nothing costs `-`, not $0.
    h.run(&["run", "--sync", "--", "true"], 0);
    let listed = h.run(&["list"], 0).stdout;
    assert!(listed.lines().nth(1).unwrap().contains(" - "), "{listed}");
}
