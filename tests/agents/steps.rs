//! What a real claude task is doing shows while it does it: during the `sleep 5` the fake API
//! asked for (`sleep5.json`), `status --json`, `list --json` and an MCP `await` that times out
//! all say `Bash: sleep 5`, and the supervisor publishes it soon after the CLI wrote it.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::clis;
use crate::common::{Home, wait_until};
use crate::fake_api::FakeApi;
use crate::raw_mcp::RawMcp;
use crate::task::Task;

const STEP: &str = "Bash: sleep 5";

/// Whether a log line is the CLI's event of the `sleep 5` tool call.
fn is_the_call(line: &str) -> bool {
    serde_json::from_str::<Value>(line).is_ok_and(|e| {
        e["type"] == "assistant"
            && e["message"]["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_use" && b["input"]["command"] == "sleep 5"))
    })
}

#[test]
fn a_claude_tasks_tool_call_shows_in_status_list_and_mcp_await_while_it_runs() {
    let api = FakeApi::start("sleep5.json");
    let cli = clis::claude(&api);
    let home = Home::new();
    // The MCP server is ready before the step begins: the five seconds are for looking.
    let mut mcp = RawMcp::start(&home, &[]);
    let (task, launched) = Task::run_async(home, &cli, &[]);
    let log_path = launched["log_path"].as_str().unwrap_or_else(|| panic!("no log_path: {launched}")).to_owned();
    // Where the supervisor publishes what the stream says so far.
    let seen_path = task.home.path().join("tasks").join(&task.token).join("seen.json");

    // The CLI writes the call's event to the log; the supervisor publishes it in seen.json.
    let (mut written, mut published) = (None::<Instant>, None::<Instant>);
    wait_until(Duration::from_secs(120), "the step to be written and then published", || {
        let now = Instant::now();
        if written.is_none() && std::fs::read_to_string(&log_path).is_ok_and(|l| l.lines().any(is_the_call)) {
            written = Some(now);
        }
        let seen = std::fs::read(&seen_path).ok().and_then(|b| serde_json::from_slice::<Value>(&b).ok());
        if published.is_none() && seen.is_some_and(|s| s["step"]["what"] == STEP) {
            published = Some(now);
        }
        written.is_some() && published.is_some()
    });
    let (written, published) = (written.unwrap(), published.unwrap());
    let delay = published.saturating_duration_since(written);
    // The figure asked for is 500 ms; on a shared machine only a hang is a failure.
    eprintln!("step published {} ms after the CLI wrote it", delay.as_millis());
    assert!(delay < Duration::from_secs(10), "the step took {delay:?} to show");

    let s = task.status();
    assert_eq!((s["status"].as_str(), s["step"]["what"].as_str()), (Some("running"), Some(STEP)), "{s}");
    let listed = task.home.run(&["--json", "list"], 0).json();
    assert_eq!(listed["tasks"][0]["step"]["what"], STEP, "{listed}");
    let r = mcp.call("await", json!({"token": task.token, "timeout_secs": 0.5}));
    let r = &r["structuredContent"];
    assert_eq!((r["status"].as_str(), r["timed_out"].as_bool()), (Some("running"), Some(true)), "{r}");
    assert_eq!(r["step"], STEP, "{r}");
    // All three looked while the sleep ran: it is still the step.
    assert_eq!(task.status()["step"]["what"], STEP, "the sleep ended before the views were read");

    let v = task.home.run(&["--json", "await", "--timeout", "5m", &task.token], 0).json();
    assert_eq!((v["status"].as_str(), v["summary"].as_str()), (Some("completed"), Some("The wait is over.")), "{v}");
    assert!(v.get("step").is_none(), "an ended task is on no step: {v}");
    assert_eq!(mcp.close(), Some(0));
}
