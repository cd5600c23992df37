//! Steering: `send` to a running agent that reads user messages on its stdin (Claude's
//! `--input-format stream-json`) goes into its conversation; its stdin closes once it has
//! answered every message, and the task ends. An agent that reads no input gets its inbox.

use std::time::Duration;

use crate::common::{Home, fixtures};

/// A home whose roles run the stand-in for Claude Code reading messages on its stdin: `echo`
/// answers each, `steer` holds its first turn in a tool call until the file `gate` exists;
/// both share a pool of one place.
fn steer_home() -> Home {
    let h = Home::new();
    let claude = fixtures().join("stream/claude");
    let gate = h.path().join("gate");
    let toml = format!(
        "[pools.one]\nparallel = 1\n\
         [agents.echo]\npool = \"one\"\ncommand = [{claude:?}, \"--input-format\", \"stream-json\", \"echo\", \"{{question}}\"]\n\
         [agents.steer]\npool = \"one\"\ncommand = [{claude:?}, \"--input-format\", \"stream-json\", \"steer\", {gate:?}]\n"
    );
    std::fs::write(h.path().join("agents.toml"), toml).unwrap();
    h
}

#[test]
fn a_message_sent_during_a_tool_call_joins_the_agents_turn() {
    let h = steer_home();
    let token = h.run(&["--json", "ask", "steer", "review the change", "--async"], 0).json()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let sent = h.run(&["send", &token, "stop and report"], 0).stdout;
    assert!(sent.contains(&format!("sent to task {token}'s agent")), "{sent}");
    std::fs::write(h.path().join("gate"), "").unwrap();
    let done = h.run(&["--json", "await", &token, "--timeout", "60s"], 0).json();
    assert_eq!(
        (done["status"].as_str(), done["summary"].as_str()),
        (Some("completed"), Some("stopped: stop and report"))
    );
    let u = &done["usage"];
    assert_eq!((u["input_tokens"].as_u64(), u["cost_usd"].as_f64()), (Some(200), Some(0.02)), "{done}");
    // The question came on its stdin, and the message after it, each taken as the log says.
    let log = h.run(&["logs", &token], 0).stdout;
    let question = log.find(r#""content":"review the change""#).unwrap_or_else(|| panic!("{log}"));
    let message = log.find(r#""content":"stop and report""#).unwrap_or_else(|| panic!("{log}"));
    assert!(question < message, "{log}");
    let r = h.run(&["send", &token, "too late"], 2);
    assert!(r.stderr.contains("already ended") && r.stderr.contains(&format!("ask --to {token}")), "{}", r.stderr);
}

#[test]
fn an_agent_that_answered_all_it_was_given_ends_and_goes_on_as_a_follow_up() {
    let h = steer_home();
    let first = h.run_within(Duration::from_secs(60), &["--json", "ask", "echo", "read the repo", "--sync"], 0).json();
    assert_eq!(
        (first["status"].as_str(), first["summary"].as_str()),
        (Some("completed"), Some("heard: read the repo"))
    );
    let token = first["token"].as_str().unwrap();
    let session = first["usage"]["session_id"].as_str().unwrap();
    let second = h.run_within(Duration::from_secs(60), &["--json", "ask", "--to", token, "again", "--sync"], 0).json();
    assert_eq!(second["summary"], format!("heard: again (resumed {session})"), "{second}");
}

#[test]
fn messages_sent_while_a_task_waits_for_its_place_follow_its_question() {
    let h = steer_home();
    let ask = |args: &[&str]| {
        h.run(&[&["--json", "ask"], args, &["--async"]].concat(), 0).json()["token"].as_str().unwrap().to_owned()
    };
    let holder = ask(&["steer", "hold the place"]);
    let waiter = ask(&["echo", "first question"]);
    assert_eq!(h.status(&waiter)["status"], "queued");
    let sent = h.run(&["--json", "send", &waiter, "and a second"], 0).json();
    assert_eq!((sent["to"].as_str(), sent["token"].as_str()), (Some("agent"), Some(waiter.as_str())), "{sent}");
    h.run(&["send", &holder, "let go"], 0);
    std::fs::write(h.path().join("gate"), "").unwrap();
    let done = h.run(&["--json", "await", &waiter, "--timeout", "60s"], 0).json();
    // Two answers in one run: the last is the task's, and each counts once.
    assert_eq!(done["summary"], "heard: and a second", "{done}");
    let u = &done["usage"];
    assert_eq!(
        (u["input_tokens"].as_u64(), u["turns"].as_u64(), u["cost_usd"].as_f64()),
        (Some(200), Some(2), Some(0.02))
    );
}
