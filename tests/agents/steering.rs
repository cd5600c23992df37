//! Steering the real Claude Code: a task whose template has it read user messages on its stdin
//! (`--input-format stream-json`, as the built-in template does) gets `send`'s message in its
//! running conversation. Sent while a tool call runs, the message reaches the model in the
//! request after that call, in the same conversation, and the task ends once it is answered.

use std::time::Duration;

use serde_json::Value;

use crate::clis::{self, PROMPT};
use crate::common::{Home, check, wait_until};
use crate::fake_api::FakeApi;

const MESSAGE: &str = "stop and report";

#[test]
fn claude_takes_a_message_sent_during_a_tool_call_into_its_conversation() {
    let scratch = tempfile::Builder::new().prefix("agentctl-steer").tempdir().unwrap();
    let gate = scratch.path().join("gate");
    // Its first turn calls a shell command that waits for the gate; its second answers.
    let script = serde_json::json!({"turns": [
        {"say": "I'll wait for the build.", "tool": "shell",
         "command": format!("while [ ! -e '{}' ]; do sleep 0.1; done", gate.display()),
         "usage": {"input": 100, "output": 10, "cache_read": 0, "cache_write": 200}},
        {"answer": "Stopped as asked; the build was still running.\n",
         "usage": {"input": 120, "output": 30, "cache_read": 500, "cache_write": 0}}
    ]});
    let script_file = scratch.path().join("steer.json");
    std::fs::write(&script_file, script.to_string()).unwrap();
    let api = FakeApi::start(script_file.to_str().unwrap());
    let mut cli = clis::claude(&api);
    // Its prompt comes on stdin.
    cli.argv.retain(|a| a != PROMPT);
    cli.argv.splice(2..2, ["--input-format", "stream-json"].map(String::from));
    let home = Home::new();
    let toml = format!("[agents.rev]\ncommand = {}\n", serde_json::to_string(&cli.argv).unwrap());
    std::fs::write(home.path().join("agents.toml"), toml).unwrap();
    let run = |args: &[&str]| check(args, cli.agentctl(&home, args).output().unwrap(), 0);

    let started = run(&["--json", "ask", "--async", "--timeout", "5m", "rev", PROMPT]).json();
    let token = started["token"].as_str().unwrap().to_owned();
    wait_until(Duration::from_secs(120), "the tool call to run", || {
        let s = run(&["--json", "status", &token]).json();
        s["step"]["what"].as_str().is_some_and(|w| w.starts_with("Bash"))
    });
    let sent = run(&["--json", "send", &token, MESSAGE]).json();
    assert_eq!(sent["to"], "agent", "{sent}");
    std::fs::write(&gate, "").unwrap();
    let done: Value = run(&["--json", "await", &token, "--timeout", "120s"]).json();
    assert_eq!(
        (done["status"].as_str(), done["summary"].as_str()),
        (Some("completed"), Some("Stopped as asked; the build was still running.")),
        "{done}"
    );
    // The request after the tool call carried the prompt and the message: one conversation.
    let requests = api.requests();
    let steered = requests
        .lines()
        .filter(|l| l.trim_start().starts_with("conversation:"))
        .find(|l| l.contains(MESSAGE))
        .unwrap_or_else(|| panic!("no request carried the message:\n{requests}"));
    assert!(steered.contains(PROMPT), "not the same conversation: {steered}");
    assert_eq!(done["usage"]["input_tokens"].as_u64(), Some(220), "the one answer's own usage: {done}");
}
