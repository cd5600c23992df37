//! Follow-ups: `ask --to TOKEN` goes on with an ended task's conversation as its next turn,
//! under the same token, its agent's session resumed; what cannot be followed up is refused.

use std::time::Duration;

use std::path::Path;

use crate::common::{Home, fixtures, wait_until};

/// A home whose role `chat` runs the stand-in for Claude Code's stream, answering what it heard.
fn chat_home() -> Home {
    let h = Home::new();
    let claude = fixtures().join("stream/claude");
    let toml = format!(
        "[agents.chat]\ncommand = [{claude:?}, \"echo\", \"{{question}}\"]\n\
         [agents.mute]\nagent = \"claude\"\ncommand = [\"sh\", \"-c\", \"echo nothing said\"]\n\
         [agents.slow]\ncommand = [{claude:?}, \"steps\", \"{{question}}\"]\n"
    );
    std::fs::write(h.path().join("agents.toml"), toml).unwrap();
    h
}

#[test]
fn a_follow_up_resumes_the_agents_session_as_the_tasks_next_turn() {
    let h = chat_home();
    let first = h.run(&["--json", "ask", "chat", "read the repo", "--sync"], 0).json();
    let token = first["token"].as_str().unwrap().to_owned();
    assert_eq!(first["summary"], "heard: read the repo", "{first}");
    let session = first["usage"]["session_id"].as_str().unwrap().to_owned();

    let second = h.run(&["--json", "ask", "--to", &token, "now summarise it", "--sync"], 0).json();
    assert_eq!(second["token"], token.as_str(), "the same token: {second}");
    assert_eq!(second["status"], "completed", "{second}");
    assert_eq!(
        second["summary"],
        format!("heard: now summarise it (resumed {session})"),
        "the agent resumed its session"
    );
    let v = h.status(&token);
    assert_eq!(v["turn"], 2, "{v}");
    let turns = v["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1, "the earlier turns: {v}");
    assert_eq!(
        (turns[0]["question"].as_str(), turns[0]["answer"].as_str()),
        (Some("read the repo"), Some("heard: read the repo"))
    );
    assert_eq!(turns[0]["usage"]["cost_usd"].as_f64(), Some(0.01), "{v}");
    // The task's usage is the conversation's: each turn added once.
    let u = &v["usage"];
    assert_eq!(
        (u["input_tokens"].as_u64(), u["turns"].as_u64(), u["cost_usd"].as_f64()),
        (Some(200), Some(2), Some(0.02)),
        "{u}"
    );
    // Its log keeps both turns, with a visible mark between them.
    let log = h.run(&["logs", &token], 0).stdout;
    let mark = log.find("──── turn 2: now summarise it ────").unwrap_or_else(|| panic!("no mark in {log}"));
    assert!(log[..mark].contains("heard: read the repo") && log[mark..].contains("resumed"), "{log}");
    // A third turn works the same way; `usage` counts the task once, with every turn.
    let third = h.run(&["--json", "ask", "--to", &token, "and the tests?", "--sync"], 0).json();
    assert_eq!((third["turn"].as_u64(), third["usage"]["cost_usd"].as_f64()), (Some(3), Some(0.03)), "{third}");
}

#[test]
fn what_cannot_be_followed_up_is_refused_saying_what_to_do_and_nothing_starts() {
    let h = chat_home();
    let gate = h.path().join("gate");
    let running = h.run(&["--json", "ask", "slow", gate.to_str().unwrap(), "--async"], 0).json();
    let running = running["token"].as_str().unwrap().to_owned();
    wait_until(Duration::from_secs(30), "the slow task to run", || h.status(&running)["status"] == "running");
    let refused = h.run(&["ask", "--to", &running, "more"], 2).stderr;
    assert!(refused.contains("still running") && refused.contains(&format!("agentctl await {running}")), "{refused}");
    std::fs::write(&gate, "").unwrap();
    h.run(&["await", &running], 0);

    let command = h.run(&["run", "-q", "--sync", "--", "true"], 0).stdout.trim().to_owned();
    let refused = h.run(&["ask", "--to", &command, "more"], 2).stderr;
    assert!(refused.contains("ran a command"), "{refused}");

    let mute = h.run(&["--json", "ask", "mute", "anything", "--sync"], 0).json();
    let mute = mute["token"].as_str().unwrap().to_owned();
    let refused = h.run(&["ask", "--to", &mute, "more"], 2).stderr;
    assert!(refused.contains("never reported a session id") && refused.contains("agentctl await"), "{refused}");

    let refused = h.run(&["ask", "--to", "abc123", "more"], 2).stderr;
    assert!(refused.contains("abc123"), "{refused}");
    let refused = h.run(&["ask", "--to", &mute, "more", "extra"], 2).stderr;
    assert!(refused.contains("takes the question alone"), "{refused}");
    // Nothing was started by any of them: each task is as it ended.
    for token in [&running, &command, &mute] {
        let v = h.status(token);
        assert!(v.get("turns").is_none() && v["status"] == "completed", "{v}");
    }
}

#[test]
fn a_fork_is_a_new_task_from_a_copy_of_the_conversation_and_leaves_the_original_as_it_was() {
    let h = chat_home();
    let first = h.run(&["--json", "ask", "chat", "read the repo", "--sync"], 0).json();
    let token = first["token"].as_str().unwrap().to_owned();
    let session = first["usage"]["session_id"].as_str().unwrap().to_owned();
    let mut forks = Vec::new();
    for approach in ["try the first approach", "try the other approach"] {
        let v = h.run(&["--json", "ask", "--fork", &token, approach, "--sync"], 0).json();
        assert_eq!(v["summary"], format!("heard: {approach} (resumed {session})"), "from the original's session: {v}");
        assert_eq!((v["role"].as_str(), v.get("turn")), (Some("chat"), None), "a task of its own: {v}");
        assert_ne!(v["usage"]["session_id"], session.as_str(), "a conversation of its own: {v}");
        forks.push(v["token"].as_str().unwrap().to_owned());
    }
    assert!(forks[0] != forks[1] && !forks.contains(&token), "{forks:?}");
    let original = h.status(&token);
    assert!(original.get("turns").is_none(), "{original}");
    assert_eq!(
        (original["summary"].as_str(), original["usage"]["cost_usd"].as_f64()),
        (Some("heard: read the repo"), Some(0.01))
    );
    let refused = h.run(&["ask", "--fork", &token, "--to", &token, "x"], 2).stderr;
    assert!(refused.contains("cannot be used with"), "{refused}");
}

#[test]
fn a_task_lost_with_its_supervisor_is_followed_up_like_any_other() {
    let h = chat_home();
    let gate = h.path().join("gate");
    let v = h.run(&["--json", "ask", "slow", gate.to_str().unwrap(), "--async"], 0).json();
    let token = v["token"].as_str().unwrap().to_owned();
    // Its session is known once its stream said it; then its supervisor dies.
    wait_until(Duration::from_secs(30), "the session to show", || h.status(&token)["usage"]["session_id"].is_string());
    h.kill_supervisor(&token);
    let lost = h.run(&["--json", "await", &token], 1).json();
    assert_eq!(lost["status"], "lost", "{lost}");
    // The role's question is the file its agent waits for: there now.
    std::fs::write(&gate, "").unwrap();
    let v = h.run(&["--json", "ask", "--to", &token, gate.to_str().unwrap(), "--sync"], 0).json();
    assert_eq!((v["status"].as_str(), v["turn"].as_u64()), (Some("completed"), Some(2)), "{v}");
    assert_eq!(v["turns"][0]["status"], "lost", "{v}");
}

#[test]
fn a_fork_of_a_task_in_a_worktree_gets_a_worktree_of_its_own_with_the_originals_files() {
    use std::os::unix::fs::PermissionsExt;

    use crate::worktrees::{agentctl, git, repo};
    let h = Home::new();
    let r = repo(&h);
    // A claude that notes each run in a new file and an edit, then answers what it heard.
    let wrapper = h.path().join("noting-claude");
    let claude = fixtures().join("stream/claude");
    let script = format!("#!/bin/sh\necho \"run $*\" >> runs.txt\necho edit >> a.txt\nexec {claude:?} \"$@\"\n");
    std::fs::write(&wrapper, script).unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let toml = format!(
        "[agents.wt]\nagent = \"claude\"\nworktree = true\ncommand = [{wrapper:?}, \"echo\", \"{{question}}\"]\n"
    );
    std::fs::write(h.path().join("agents.toml"), toml).unwrap();
    // Where it keeps its conversations, by directory, as Claude Code does.
    let config = h.path().join("claude-config");
    let ask = |args: &[&str]| {
        let mut cmd = agentctl(&h, &r);
        cmd.env("CLAUDE_CONFIG_DIR", &config);
        let out = cmd.args([&["--json", "ask", "--sync"], args].concat()).output().unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let first = ask(&["wt", "try it one way"]);
    let token = first["token"].as_str().unwrap().to_owned();
    let original = h.status(&token)["worktree"].as_str().unwrap().to_owned();
    let forked = ask(&["--fork", &token, "try it the other way"]);
    assert!(forked["summary"].as_str().unwrap().starts_with("heard: try it the other way (resumed "), "{forked}");
    let fork = forked["token"].as_str().unwrap();
    let there = h.status(fork)["worktree"].as_str().unwrap().to_owned();
    assert_ne!(there, original);
    // It started from the original's files as they were, new and edited ones too.
    let runs = std::fs::read_to_string(Path::new(&there).join("runs.txt")).unwrap();
    assert_eq!(runs.lines().count(), 2, "{runs}");
    assert!(runs.lines().nth(1).unwrap().contains("--fork-session"), "{runs}");
    assert_eq!(std::fs::read_to_string(Path::new(&there).join("a.txt")).unwrap(), "one\nedit\nedit\n");
    // Its changes are its own, over that state; the original's worktree and branch are as they were.
    assert_eq!(
        (forked["changes"]["files"].as_u64(), forked["changes"]["added"].as_u64()),
        (Some(2), Some(2)),
        "{forked}"
    );
    assert_eq!(std::fs::read_to_string(Path::new(&original).join("runs.txt")).unwrap().lines().count(), 1);
    assert_eq!(git(Path::new(&original), &["status", "--porcelain"]), " M a.txt\n?? runs.txt\n");
}

#[test]
fn a_window_of_spend_counts_the_turns_that_ended_in_it() {
    let h = chat_home();
    let first = h.run(&["--json", "ask", "chat", "read the repo", "--sync"], 0).json();
    let token = first["token"].as_str().unwrap().to_owned();
    h.run(&["--json", "ask", "--to", &token, "now summarise it", "--sync"], 0);
    let cost = |args: &[&str]| h.run(&[&["--json", "usage"], args].concat(), 0).json()["total"]["cost_usd"].as_f64();
    assert_eq!(cost(&["--since", "1h"]), Some(0.02), "both turns ended within the hour");
    // The first turn ended long ago (as a record a day old says it): a window of an hour holds
    // the second alone; all time holds both.
    h.db()
        .execute(
            "UPDATE tasks SET record = json_set(record, '$.turns[0].ended_at_ms', 1000) WHERE token = ?1",
            [token.as_str()],
        )
        .unwrap();
    assert_eq!(cost(&["--since", "1h"]), Some(0.01));
    assert_eq!(cost(&[]), Some(0.02));
    // A pool's window of spend counts the same way: $0.01 of its $0.015 an hour, so a new task
    // runs (the conversation's $0.02 would hold it).
    let claude = fixtures().join("stream/claude");
    let toml = format!(
        "[pools.paid]\nspend = {{ usd = 0.015, per = \"1h\" }}\n[agents.paid]\npool = \"paid\"\n\
         command = [{claude:?}, \"echo\", \"{{question}}\"]\n"
    );
    std::fs::write(h.path().join("agents.toml"), toml).unwrap();
    h.db().execute("UPDATE tasks SET pool = 'paid' WHERE token = ?1", [token.as_str()]).unwrap();
    let v = h.run(&["--json", "ask", "paid", "one more", "--sync"], 0).json();
    assert_eq!(v["status"], "completed", "{v}");
}
