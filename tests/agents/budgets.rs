//! A real claude task in a loop of tool calls (`budget-loop.json`: each call about $0.02 at
//! Claude Code's price for claude-opus-4-8, for ever) is halted `over_budget` within a turn of
//! crossing its budget, in dollars or in turns, with nothing of it left running, its usage and
//! a partial answer kept.

use std::time::Duration;

use serde_json::Value;

use crate::clis::{self, Cli};
use crate::common::{alive, wait_until};
use crate::fake_api::FakeApi;
use crate::task::Task;

/// `run --sync BUDGET -- claude …` against `api`: the task, its result and the CLI's run.
fn halted(api: &FakeApi, budget: &[&str]) -> (Task, Value, Cli) {
    let cli = clis::claude(api);
    let (task, v) = Task::run_sync(&cli, budget, 1);
    assert_eq!(v["status"], "over_budget", "{v}\nlog:\n{}", task.log(&v));
    (task, v, cli)
}

/// Nothing of the task runs: its agent, the shells its tool calls ran in (each wrote its pid
/// to `tool-pids` in the working directory) and its cgroup, if it had one.
fn assert_all_gone(task: &Task, cli: &Cli) {
    let record = task.home.record(&task.token);
    let agent = record["started"]["pid"].as_i64().unwrap_or_else(|| panic!("no agent pid: {record}"));
    let tools = std::fs::read_to_string(cli.work().join("tool-pids")).unwrap_or_default();
    let tools: Vec<i64> = tools.split_whitespace().map(|p| p.parse().unwrap()).collect();
    assert!(!tools.is_empty(), "no tool call ran");
    for pid in tools.iter().chain([&agent]) {
        // Reaped by now, or by init very soon after its parent died.
        wait_until(Duration::from_secs(10), &format!("process {pid} of the task to be gone"), || !alive(*pid));
    }
    if let Some(cgroup) = record["containment"]["cgroup"]["path"].as_str() {
        // Removed once empty; if it is still there, it holds nothing.
        let procs = std::fs::read_to_string(std::path::Path::new(cgroup).join("cgroup.procs")).unwrap_or_default();
        assert_eq!(procs, "", "the task's cgroup {cgroup} still has processes");
    }
}

#[test]
fn a_claude_loop_is_halted_over_budget_by_its_cost_and_by_its_turns() {
    let api = FakeApi::start("budget-loop.json");
    std::thread::scope(|s| {
        let by_cost = s.spawn(|| halted(&api, &["--budget-usd", "0.05"]));
        let by_turns = s.spawn(|| halted(&api, &["--budget-turns", "3"]));

        let (task, v, cli) = by_cost.join().unwrap();
        let u = &v["usage"];
        // $0.0195 a call while it runs (its output counted as 1 token until the call ends): the
        // third call passes $0.05. On a quiet machine the halt comes before a fifth (3 or 4
        // turns); the fake model answers at once, so on a loaded one the loop may run a few
        // calls more before the supervisor reads its log: the upper bounds are hang guards.
        let turns = u["turns"].as_u64().unwrap_or_else(|| panic!("no turns: {v}"));
        eprintln!("--budget-usd 0.05: halted at {turns} turns, {}", v["note"]);
        assert!((3..=12).contains(&turns), "{v}");
        let cost = u["cost_usd"].as_f64().unwrap();
        assert!(cost > 0.05 && cost < 0.0201 * turns as f64, "{u}");
        // Killed before its result event: agentctl's estimate at Claude Code's price.
        assert_eq!(u["cost_estimated"], true, "{u}");
        assert_eq!(u["input_tokens"].as_u64(), Some(3900 * turns), "{u}");
        let note = v["note"].as_str().unwrap();
        assert!(note.contains("over budget: cost $0.0") && note.contains("budget of $0.0500"), "{note}");
        assert_eq!(v["summary"], "Still checking.", "the partial answer: {v}");
        assert_all_gone(&task, &cli);

        let (task, v, cli) = by_turns.join().unwrap();
        let turns = v["usage"]["turns"].as_u64().unwrap_or_else(|| panic!("no turns: {v}"));
        eprintln!("--budget-turns 3: halted at {turns} turns, {}", v["note"]);
        // The fourth call's first event is what passes 3 turns (a loaded machine may see a
        // later one first, as above).
        assert!((4..=12).contains(&turns), "{v}");
        // What the supervisor had read when it halted the task: at most what the task did.
        let note = v["note"].as_str().unwrap();
        let seen: u64 = note
            .strip_prefix("over budget: ")
            .and_then(|n| n.split_once(" turns passed its budget of 3 by "))
            .and_then(|(n, by)| (by.parse::<u64>().ok()? + 3 == n.parse::<u64>().ok()?).then(|| n.parse().ok())?)
            .unwrap_or_else(|| panic!("{note}"));
        assert!((4..=turns).contains(&seen), "{v}");
        assert_eq!(v["summary"], "Still checking.", "the partial answer: {v}");
        assert_all_gone(&task, &cli);
    });
    assert!(api.turns().len() >= 7, "both loops ran: {}", api.requests());
}
