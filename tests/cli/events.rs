//! Events: wait for whatever finishes first, messages and questions from tasks, sessions.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::common::{Home, fake_agent};

fn now_ns() -> i128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i128
}

fn spawn_wait(h: &Home, args: &[&str]) -> Child {
    h.cmd().arg("--json").arg("wait").args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

fn finish(child: Child) -> (i32, Value) {
    let out = child.wait_with_output().unwrap();
    let v =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn waits_return_tasks_in_the_order_they_finish_then_time_out() {
    let h = Home::new();
    let fake = fake_agent();
    let mut stamps = Vec::new();
    for secs in ["3", "1", "2"] {
        let stamp = h.path().join(format!("stamp{secs}"));
        let v = h
            .run(
                &["--json", "run", "--async", "--session", "s1", "--", &fake, "stamp", stamp.to_str().unwrap(), secs],
                0,
            )
            .json();
        stamps.push((secs, v["token"].as_str().unwrap().to_owned(), stamp));
    }
    let mut slack = Vec::new();
    for want in ["1", "2", "3"] {
        let v = h.run(&["--json", "wait", "--session", "s1", "--timeout", "30s"], 0).json();
        let returned = now_ns();
        let (_, token, stamp) = stamps.iter().find(|(s, _, _)| *s == want).unwrap();
        assert_eq!(v["type"], "task_finished");
        assert_eq!(v["token"], token.as_str(), "expected the {want} s task");
        assert_eq!(v["status"], "completed");
        assert_eq!(v["summary"], "stamped");
        assert_eq!(v["session"], "s1");
        let exited: i128 = std::fs::read_to_string(stamp).unwrap().trim().parse().unwrap();
        slack.push((returned - exited) / 1_000_000);
    }
    slack.sort();
    assert!(slack[1] < 500, "wait returned {slack:?} ms after the tasks ended");
    let t0 = Instant::now();
    let v = h.run(&["--json", "wait", "--session", "s1", "--timeout", "1s"], 124).json();
    assert!(t0.elapsed() >= Duration::from_secs(1));
    assert_eq!(v["type"], "timeout");
}

#[test]
fn a_question_wakes_its_waiter_and_leaves_the_other_waiter_alone() {
    let h = Home::new();
    let finished = spawn_wait(&h, &["--session", "lead", "--types", "task_finished", "--timeout", "30s"]);
    let asked = spawn_wait(&h, &["--session", "lead", "--types", "question", "--timeout", "30s"]);
    let v = h
        .run(
            &["--json", "run", "--async", "--session", "lead", "--", &fake_agent(), "question", "which branch?", "1"],
            0,
        )
        .json();
    let token = v["token"].as_str().unwrap();

    let (code, q) = finish(asked);
    assert_eq!(code, 0, "{q}");
    assert_eq!(q["type"], "question");
    assert_eq!(q["text"], "which branch?");
    assert_eq!(q["token"], token);
    let (code, f) = finish(finished);
    assert_eq!(code, 0, "{f}");
    assert_eq!(f["type"], "task_finished");
    assert_eq!(f["token"], token);
    assert_eq!(f["summary"], "asked: which branch?");
    // Both were consumed exactly once.
    h.run(&["--json", "wait", "--session", "lead", "--timeout", "0.2s"], 124);
}

#[test]
fn events_wait_for_the_next_waiter_in_order_and_once_each() {
    let h = Home::new();
    let fake = fake_agent();
    let mut tokens = Vec::new();
    for i in 0..2 {
        let v = h
            .run(&["--json", "run", "--sync", "--session", "later", "--", &fake, "sleep", "0", &format!("n{i}")], 0)
            .json();
        tokens.push(v["token"].as_str().unwrap().to_owned());
    }
    h.run(&["--json", "run", "--session", "later", "--", &fake, "message", "progress report"], 0);
    // Nobody was waiting; each event is still there, in order, for the next waiters.
    let all = h.run(&["--json", "events", "--session", "later"], 0).json();
    assert_eq!(all["count"], 4);
    assert!(all["events"].as_array().unwrap().iter().all(|e| e["consumed"] == false));
    let a = h.run(&["--json", "wait", "--session", "later"], 0).json();
    let b = h.run(&["--json", "wait", "--session", "later"], 0).json();
    assert_eq!([a["token"].as_str().unwrap(), b["token"].as_str().unwrap()], [tokens[0].as_str(), tokens[1].as_str()]);
    let m = h.run(&["--json", "wait", "--session", "later", "--types", "message"], 0).json();
    assert_eq!(m["text"], "progress report");
    let rest =
        h.run(&["--json", "wait", "--session", "later", "--types", "task_finished", "--timeout", "5s"], 0).json();
    assert_eq!(rest["summary"], "told: progress report");
    h.run(&["--json", "wait", "--session", "later", "--timeout", "0.2s"], 124);
    let all = h.run(&["--json", "events", "--session", "later"], 0).json();
    assert!(all["events"].as_array().unwrap().iter().all(|e| e["consumed"] == true));
}

#[test]
fn two_waiters_share_four_events_without_duplicates_or_losses() {
    let h = Home::new();
    let fake = fake_agent();
    for round in 0..5 {
        let session = format!("r{round}");
        let (mut delivered, mut started) = std::thread::scope(|scope| {
            let waiters: Vec<_> = (0..2)
                .map(|_| {
                    scope.spawn(|| {
                        let mut got = Vec::new();
                        loop {
                            let out = h
                                .cmd()
                                .args(["--json", "wait", "--session", &session, "--timeout", "2s"])
                                .output()
                                .unwrap();
                            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
                            if v["type"] == "timeout" {
                                return got;
                            }
                            got.push(v["token"].as_str().unwrap().to_owned());
                        }
                    })
                })
                .collect();
            let started: Vec<String> = (0..4)
                .map(|_| {
                    let v = h
                        .run(&["--json", "run", "--async", "--session", &session, "--", &fake, "sleep", "0.3"], 0)
                        .json();
                    v["token"].as_str().unwrap().to_owned()
                })
                .collect();
            let delivered: Vec<String> = waiters.into_iter().flat_map(|w| w.join().unwrap()).collect();
            (delivered, started)
        });
        delivered.sort();
        started.sort();
        assert_eq!(delivered, started, "round {round}: every event exactly once");
    }
}

#[test]
fn sessions_do_not_leak() {
    let h = Home::new();
    h.run(&["--json", "run", "--sync", "--session", "b", "--", &fake_agent(), "sleep", "0"], 0);
    let v = h.run(&["--json", "wait", "--session", "a", "--timeout", "0.5s"], 124).json();
    assert_eq!(v["type"], "timeout");
    assert_eq!(v["session"], "a");
    let v = h.run(&["--json", "wait", "--session", "b", "--timeout", "5s"], 0).json();
    assert_eq!(v["session"], "b");
    let r = h.run(&["wait", "--session", "../x"], 2);
    assert!(r.stderr.contains("invalid session"), "{}", r.stderr);
}

#[test]
fn notify_needs_a_task_or_a_session_and_tasks_report_their_subtasks_to_themselves() {
    let h = Home::new();
    let r = h.run(&["notify", "hello"], 2);
    assert!(r.stderr.contains("--session"), "{}", r.stderr);
    let v = h.run(&["--json", "notify", "--session", "ops", "--question", "deploy?"], 0).json();
    assert_eq!(
        (v["type"].as_str(), v["session"].as_str(), v["token"].is_null()),
        (Some("question"), Some("ops"), true)
    );

    // A task's own sub-tasks report to the session named after it.
    // The sub-task outlives its parent: ending the parent must not end it (another task).
    let parent = h.run(&["--json", "run", "--sync", "--", &fake_agent(), "spawn", "1"], 0).json();
    let parent_token = parent["token"].as_str().unwrap();
    let sub = h.run(&["--json", "wait", "--session", parent_token, "--timeout", "20s"], 0).json();
    assert_eq!(sub["summary"], "sub-task done");
    let mine = h.run(&["--json", "wait", "--session", "default", "--timeout", "5s"], 0).json();
    assert_eq!(mine["token"], parent_token);
}

#[test]
fn a_long_message_between_two_others_is_delivered_once_in_order() {
    let h = Home::new();
    let long = "x".repeat(70_000);
    for text in ["before", long.as_str(), "after"] {
        h.run(&["notify", "--session", "s", text], 0);
    }
    // A fourth after a waiter took the first: numbering goes on past the long one.
    let first = h.run(&["--json", "wait", "--session", "s", "--timeout", "5s"], 0).json();
    h.run(&["notify", "--session", "s", "last"], 0);
    let mut got = vec![first];
    for _ in 0..3 {
        got.push(h.run(&["--json", "wait", "--session", "s", "--timeout", "5s"], 0).json());
    }
    let texts: Vec<usize> = got.iter().map(|e| e["text"].as_str().unwrap().len()).collect();
    assert_eq!(texts, [6, 70_000, 5, 4]);
    let seqs: Vec<u64> = got.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
    h.run(&["--json", "wait", "--session", "s", "--timeout", "0.2s"], 124);
    // Longer than one argument can be: from stdin, and refused above the cap.
    let mut notify =
        h.cmd().args(["notify", "--session", "s", "-"]).stdin(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    // It stops reading past the cap: the rest of the write may find the pipe closed.
    let _ = std::io::Write::write_all(&mut notify.stdin.take().unwrap(), "y".repeat(300_000).as_bytes());
    let out = notify.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("longer than the 262144 bytes an event carries"), "{stderr}");
}

#[test]
fn an_event_taken_by_a_waiter_that_dies_before_printing_goes_to_the_next_one() {
    let h = Home::new();
    h.run(&["notify", "--session", "s", "hello"], 0);
    // A waiter that took the event and was killed before it printed it: its hold, as it
    // leaves it in the store (a dead process of this boot).
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let pid = dead.id();
    dead.wait().unwrap();
    let changed =
        h.db().execute("UPDATE events SET state = 1, holder = ?1 WHERE seq = 1", [format!("{pid} 1 0 0")]).unwrap();
    assert_eq!(changed, 1);
    let e = h.run(&["--json", "wait", "--session", "s", "--timeout", "5s"], 0).json();
    assert_eq!(e["text"], "hello");
    let listed = h.run(&["--json", "events", "--session", "s"], 0).json();
    assert_eq!(listed["events"][0]["consumed"], true, "{listed}");
    h.run(&["--json", "wait", "--session", "s", "--timeout", "0.2s"], 124);
}

/// `notify --lines` to `session`, its stdin, stdout and stderr piped.
fn notify_lines(h: &Home, flags: &[&str], session: &str) -> Child {
    let args = [flags, &["notify", "--session", session, "--lines"]].concat();
    h.cmd().args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

#[test]
fn notify_lines_from_processes_posting_at_once_posts_each_line_once_in_order() {
    let h = Home::new();
    h.init();
    const PROCS: usize = 6;
    const LINES: usize = 150;
    let children: Vec<Child> = (0..PROCS)
        .map(|p| {
            let mut child = notify_lines(&h, &["--json"], "bulk");
            // Blank lines are skipped; a line may end in CRLF.
            let input: String = (0..LINES).map(|i| format!("p{p} line {i}\r\n\n")).collect();
            std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.as_bytes()).unwrap();
            child
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), LINES, "one line said per message posted");
    }
    // In seq order, each process's lines come as it wrote them, each once.
    let listed = h.run(&["--json", "events", "--session", "bulk"], 0).json();
    let texts: Vec<&str> = listed["events"].as_array().unwrap().iter().map(|e| e["text"].as_str().unwrap()).collect();
    for p in 0..PROCS {
        let mine: Vec<&str> = texts.iter().copied().filter(|t| t.starts_with(&format!("p{p} "))).collect();
        let written: Vec<String> = (0..LINES).map(|i| format!("p{p} line {i}")).collect();
        assert_eq!(mine, written, "process {p}'s lines");
    }
    assert_eq!(texts.len(), PROCS * LINES);
    let first = h.run(&["--json", "wait", "--session", "bulk", "--timeout", "5s"], 0).json();
    assert_eq!(first["seq"], listed["events"][0]["seq"], "taken in order, as any event");
}

#[test]
fn notify_lines_stops_at_a_line_it_cannot_post_and_says_what_was_posted() {
    let h = Home::new();
    let mut child = notify_lines(&h, &[], "s");
    let input = format!("first\n\nsecond\n{}\nthird\n", "y".repeat(300_000));
    // It stops reading at the long line: the rest of the write may find the pipe closed.
    let _ = std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.as_bytes());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("line 4 of stdin is longer than the 262144 bytes"), "{stderr}");
    assert!(stderr.contains("the 2 messages before it were posted, none after it"), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);
    let listed = h.run(&["--json", "events", "--session", "s"], 0).json();
    let texts: Vec<&str> = listed["events"].as_array().unwrap().iter().map(|e| e["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["first", "second"]);
}

#[test]
fn notify_lines_posts_everything_when_nobody_reads_what_it_says() {
    let h = Home::new();
    let mut child = notify_lines(&h, &[], "s");
    // Its stdout closed before anything is posted (a `| head -0`).
    drop(child.stdout.take());
    let input: String = (0..3000).map(|i| format!("line {i}\n")).collect();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed = h.run(&["--json", "events", "--session", "s"], 0).json();
    assert_eq!(listed["events"].as_array().unwrap().len(), 3000);
}
