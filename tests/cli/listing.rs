//! list, status and logs: what they show, `--follow`, and one JSON object per command.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::{Home, fake_agent, wait_until};

#[test]
fn list_shows_every_task_with_role_status_elapsed_lines_and_question() {
    let h = Home::new();
    h.run(&["--json", "run", "--role", "builder", "--", &fake_agent(), "sleep", "0", "built"], 0);
    h.run(&["--json", "ask", "reviewer", "Is this fine?\nSecond line"], 0);
    let running = h.start(&["sleep", "30"]);

    let r = h.run(&["list"], 0);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{}", r.stdout);
    for word in ["TOKEN", "ROLE", "STATUS", "ELAPSED", "LINES", "QUESTION"] {
        assert!(lines[0].contains(word), "{}", lines[0]);
    }
    // The running task first, then the ended ones, newest first (as top and MCP `list`).
    assert!(lines[1].contains(&running) && lines[1].contains("running"));
    assert!(lines[2].contains("reviewer") && lines[2].contains("completed") && lines[2].contains("Is this fine?…"));
    assert!(lines[3].contains("builder") && lines[3].contains("completed") && lines[3].contains("sleep 0 built"));
    // Then what each pool with open tasks can take.
    assert_eq!(lines[4], "pool default: 1 of 16 running, 0 queued");

    // --json: newest first, whatever the status.
    let v = h.run(&["--json", "list"], 0).json();
    assert_eq!(v["count"], 3);
    let tasks = v["tasks"].as_array().unwrap();
    let roles: Vec<&str> = tasks.iter().map(|t| t["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["run", "reviewer", "builder"]);
    assert_eq!(tasks[0]["token"], running.as_str());
    assert_eq!(tasks[1]["question"], "Is this fine?…");
    assert!(tasks[1]["line_count"].as_u64().unwrap() >= 5);
    assert!(tasks.iter().all(|t| t["elapsed_ms"].is_u64() && t["status"].is_string()));

    assert_eq!(v["pools"], serde_json::json!([{"pool": "default", "places": 16, "running": 1, "queued": 0}]));

    let only = h.run(&["--json", "list", "--status", "running"], 0).json();
    assert_eq!(only["count"], 1);
    let r = h.run(&["list", "--status", "sleeping"], 2);
    assert!(r.stderr.contains("unknown status `sleeping`"), "{}", r.stderr);

    // Pages: the newest first; the next page's offset said.
    let page = h.run(&["--json", "list", "--limit", "2"], 0).json();
    let tokens: Vec<&str> = page["tasks"].as_array().unwrap().iter().map(|t| t["token"].as_str().unwrap()).collect();
    assert_eq!(tokens, [running.as_str(), tasks[1]["token"].as_str().unwrap()]);
    assert_eq!(page["next_offset"], 2);
    let rest = h.run(&["--json", "list", "--limit", "2", "--offset", "2"], 0).json();
    assert_eq!(rest["count"], 1);
    assert_eq!(rest["tasks"][0]["token"], tasks[2]["token"]);
    assert!(rest["next_offset"].is_null(), "{rest}");
    let r = h.run(&["list", "--limit", "1"], 0);
    assert!(r.stderr.contains("`agentctl list --limit 1 --offset 1`"), "{}", r.stderr);
    h.run(&["halt", &running], 0);
}

#[test]
fn logs_strip_escapes_unless_raw_and_tail_counts_lines() {
    let h = Home::new();
    let v = h.run(&["--json", "ask", "reviewer", "colours?"], 0).json();
    let token = v["token"].as_str().unwrap();
    let clean = h.run(&["logs", token], 0).stdout;
    assert!(!clean.contains('\x1b'), "{clean:?}");
    assert!(clean.contains("> Final answer: [reviewer] colours?"), "{clean}");
    let raw = h.run(&["logs", token, "--raw"], 0).stdout;
    assert!(raw.contains('\x1b'));
    let tail = h.run(&["logs", token, "--tail", "2"], 0).stdout;
    assert_eq!(tail, "> Final answer: [reviewer] colours?\nSecond line of the final answer.\n");
    let j = h.run(&["--json", "logs", token, "--tail", "1"], 0).json();
    assert_eq!(j["text"], "Second line of the final answer.\n");
    assert_eq!(j["token"], token);
}

#[test]
fn logs_follow_streams_until_the_task_ends() {
    let h = Home::new();
    let token = h.start(&["tick", "10", "0.15"]);
    let t0 = Instant::now();
    let r = h.run(&["logs", &token, "--follow"], 0);
    assert!(t0.elapsed() >= Duration::from_millis(900), "follow returned after {:?}", t0.elapsed());
    let want: Vec<String> = (1..=10).map(|i| format!("tick {i}")).chain(["> ticked 10".to_owned()]).collect();
    assert_eq!(r.stdout.lines().collect::<Vec<_>>(), want);

    let token = h.start(&["tick", "3", "0.1"]);
    let r = h.run(&["--json", "logs", &token, "--follow"], 0);
    let objects: Vec<serde_json::Value> = r.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(objects.len(), 5, "{}", r.stdout);
    assert_eq!(objects[0]["line"], "tick 1");
    assert_eq!(objects[4]["status"], "completed");
}

#[test]
fn a_reader_that_goes_away_ends_logs_follow_quietly() {
    use std::io::{BufRead, BufReader};
    let h = Home::new();
    let token = h.start(&["tick", "200", "0.05"]);
    let mut follow = h.cmd().args(["logs", &token, "--follow"]).stdout(std::process::Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "tick 1");
    // Like `| head -n 1`: the reader closes its end; the next write meets a broken pipe.
    drop(lines);
    let out = follow.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(h.status(&token)["status"], "running", "the task must not notice");
    h.run(&["halt", &token, "--grace", "1s"], 0);
}

#[test]
fn every_command_prints_one_json_object() {
    let h = Home::new();
    let token = h.start(&["sleep", "30"]);
    for args in [
        vec!["--json", "status", token.as_str()],
        vec!["--json", "list"],
        vec!["--json", "logs", token.as_str()],
        vec!["--json", "status", "zzzzzz"],
        vec!["--json", "await", token.as_str(), "--timeout", "0.1s"],
        vec!["--json", "halt", token.as_str()],
        vec!["--json", "halt", token.as_str()],
    ] {
        let out = h.cmd().args(&args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text.lines().count(), 1, "{args:?} printed {text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(v.is_object(), "{args:?}: {v}");
    }
}

#[test]
fn usage_errors_under_json_print_one_object_too() {
    let h = Home::new();
    for args in
        [vec!["--json", "lsit"], vec!["--json", "ask"], vec!["status", "--json"], vec!["--json", "list", "--bogus"]]
    {
        let r = h.run(&args, 2);
        let v = r.json();
        assert_eq!((v["kind"].as_str(), v["exit_code"].as_i64()), (Some("usage"), Some(2)), "{args:?}: {v}");
        assert!(!v["error"].as_str().unwrap().is_empty());
        assert!(r.stderr.starts_with("agentctl: error: "), "the text still goes to stderr: {}", r.stderr);
    }
    // `--json` after `--` belongs to the command, not to agentctl.
    let r = h.run(&["run", "--bogus", "--", "echo", "--json"], 2);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
}

#[test]
fn logs_follow_ends_with_the_exit_code_of_the_tasks_status() {
    let h = Home::new();
    let failing = h.start(&["fail", "3"]);
    let r = h.run(&["logs", &failing, "--follow"], 1);
    assert_eq!(r.stdout.trim(), "> something went wrong");
    // How it ended, on stderr apart from the output.
    assert!(r.stderr.starts_with(&format!("agentctl: task {failing} (run) failed in ")), "{}", r.stderr);
    assert!(r.stderr.contains(", exit 3, "), "{}", r.stderr);
    // A task halted while it is followed: said, not a silent exit 1.
    let slow = h.start(&["tick", "600", "0.05"]);
    let follow =
        h.cmd().args(["logs", &slow, "--follow"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    wait_until(Duration::from_secs(20), "the task's first output", || h.status(&slow)["line_count"].as_u64() > Some(0));
    h.run(&["halt", &slow, "--grace", "1s"], 0);
    let out = follow.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.starts_with(&format!("agentctl: task {slow} (run) cancelled in ")), "{err}");
    let r = h.run(&["--json", "logs", &failing, "--follow"], 1);
    assert_eq!(
        r.stdout.lines().last().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["status"].clone()),
        Some("failed".into())
    );
    let ok = h.start(&["sleep", "0", "fine"]);
    assert_eq!(h.run(&["logs", &ok, "--follow"], 0).stderr, "", "a completed task's end needs no word");
}
