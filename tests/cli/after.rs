//! `--after`: a task waits `queued` for others to end, then starts if each completed (or, with
//! `--after-any-end`, whatever they ended as), else ends `cancelled` without running; `{after}`
//! hands it their answers.

use std::time::Duration;

use serde_json::Value;

use crate::common::{Home, wait_until};

/// `run --async` of a shell script that answers `> NAME` once the file `gate` exists (and then
/// exits with `code`), waiting for `after`; its token.
fn gated(h: &Home, name: &str, code: i32, after: &[&str]) -> String {
    let gate = h.path().join("gate");
    let script = format!("while [ ! -e '{}' ]; do sleep 0.05; done; echo '> {name}'; exit {code}", gate.display());
    let mut args = vec!["--json", "run", "--async"];
    let list = after.join(",");
    if !after.is_empty() {
        args.extend(["--after", &list]);
    }
    args.extend(["--", "sh", "-c", &script]);
    h.run(&args, 0).json()["token"].as_str().unwrap().to_owned()
}

fn open_gate(h: &Home) {
    std::fs::write(h.path().join("gate"), "").unwrap();
}

/// Task `token` once it ended, its `await` exiting `code`.
fn ended_with(h: &Home, token: &str, code: i32) -> Value {
    h.run(&["--json", "await", token, "--timeout", "60s"], code).json()
}

fn ended(h: &Home, token: &str) -> Value {
    ended_with(h, token, 0)
}

#[test]
fn a_chain_and_a_fan_in_start_each_task_once_what_it_waits_for_completed() {
    let h = Home::new();
    let a = gated(&h, "A", 0, &[]);
    let b = gated(&h, "B", 0, &[&a]);
    let c = gated(&h, "C", 0, &[&b]);
    let d = gated(&h, "D", 0, &[&a, &b]);
    let s = h.status(&d);
    assert_eq!(s["status"], "queued", "{s}");
    assert_eq!(s["waiting_for"], serde_json::json!([a, b]), "{s}");
    assert!(s["summary"].as_str().unwrap().contains(&format!("waiting for task(s) {a}, {b} to end")), "{s}");
    open_gate(&h);
    let ends: Vec<Value> = [&a, &b, &c, &d].iter().map(|t| ended(&h, t)).collect();
    for (v, name) in ends.iter().zip(["A", "B", "C", "D"]) {
        assert_eq!((v["status"].as_str(), v["summary"].as_str()), (Some("completed"), Some(name)), "{v}");
    }
    // Each started once what it waited for had ended.
    let at = |v: &Value, field: &str| v[field].as_str().unwrap().to_owned();
    assert!(at(&ends[1], "started_at") >= at(&ends[0], "ended_at"), "B before A ended");
    assert!(at(&ends[2], "started_at") >= at(&ends[1], "ended_at"), "C before B ended");
    assert!(at(&ends[3], "started_at") >= at(&ends[1], "ended_at"), "D before B ended");
}

#[test]
fn a_task_whose_prerequisite_failed_never_runs_unless_any_end_will_do() {
    let h = Home::new();
    let a = gated(&h, "A", 3, &[]);
    let b = gated(&h, "B", 0, &[&a]);
    let c = gated(&h, "C", 0, &[&b]);
    let anyway = {
        let v = h.run(&["--json", "run", "--async", "--after", &a, "--after-any-end", "--", "echo", "> ran anyway"], 0);
        v.json()["token"].as_str().unwrap().to_owned()
    };
    open_gate(&h);
    assert_eq!(ended_with(&h, &a, 1)["status"], "failed");
    for (t, names) in [(&b, &a), (&c, &b)] {
        let v = h.run(&["--json", "await", t, "--timeout", "60s"], 1).json();
        assert_eq!((v["status"].as_str(), v["started_at"].as_str()), (Some("cancelled"), None), "{v}");
        let note = v["note"].as_str().unwrap();
        assert!(note.contains(&format!("never ran: task {names}")) && note.contains("rather than completed"), "{v}");
    }
    assert_eq!(ended(&h, &anyway)["summary"], "ran anyway");
}

#[test]
fn an_unknown_prerequisite_or_one_with_a_follow_up_is_refused_and_nothing_is_saved() {
    let h = Home::new();
    let r = h.run(&["run", "--after", "abc123", "--", "true"], 2);
    assert!(r.stderr.contains("no task abc123"), "{}", r.stderr);
    let r = h.run(&["run", "--after", "nope", "--", "true"], 2);
    assert!(r.stderr.contains("invalid token"), "{}", r.stderr);
    let r = h.run(&["ask", "--to", "abc123", "--after", "abc123", "go on"], 2);
    assert!(r.stderr.contains("cannot be used with"), "{}", r.stderr);
    let saved: i64 = h.db().query_row("SELECT count(*) FROM tasks", [], |r| r.get(0)).unwrap_or(0);
    assert_eq!(saved, 0, "nothing was saved");
    assert!(!h.path().join("tasks").exists() || std::fs::read_dir(h.path().join("tasks")).unwrap().next().is_none());
}

#[test]
fn after_in_a_question_is_what_the_tasks_it_waited_for_answered_and_a_halt_ends_a_waiter() {
    let h = Home::new();
    std::fs::write(
        h.path().join("agents.toml"),
        "[agents.rev]\ncommand = [\"sh\", \"-c\", \"printf '%s\\\\n' \\\"$1\\\" > \\\"$2\\\"\", \"rev\", \"{question}\", \"{result_file}\"]\n",
    )
    .unwrap();
    let plan = gated(&h, "use a queue", 0, &[]);
    let review = h.run(&["--json", "ask", "rev", "--after", &plan, "--async", "Check: {after}"], 0).json();
    let review = review["token"].as_str().unwrap().to_owned();
    let waiter = gated(&h, "never", 0, &[&plan]);
    let halted = h.run(&["--json", "halt", &waiter], 0).json();
    assert_eq!(halted["status"], "cancelled", "{halted}");
    assert!(halted["note"].as_str().unwrap().contains("never ran"), "{halted}");
    open_gate(&h);
    let v = ended(&h, &review);
    assert_eq!(v["summary"], format!("Check: ── task {plan} (run), completed ──\nuse a queue"), "{v}");
    wait_until(Duration::from_secs(30), "every task to end", || h.all_ended());
}

#[test]
fn a_waiter_stays_out_of_its_pools_line_and_a_prerequisite_whose_supervisor_died_is_lost() {
    let h = Home::new();
    std::fs::write(h.path().join("agents.toml"), "[pools.one]\nparallel = 1\n").unwrap();
    let wait_for =
        |file: &str, answer: &str| format!("while [ ! -e '{file}' ]; do sleep 0.05; done; echo '> {answer}'");
    let start = |args: &[&str]| {
        h.run(&[&["--json", "run", "--async"], args].concat(), 0).json()["token"].as_str().unwrap().to_owned()
    };
    let later = h.path().join("later").display().to_string();
    let a = start(&["--", "sh", "-c", &wait_for(&later, "A")]);
    let gate = h.path().join("gate").display().to_string();
    start(&["--pool", "one", "--", "sh", "-c", &wait_for(&gate, "X")]);
    let b = start(&["--pool", "one", "--after", &a, "--", "echo", "> B"]);
    let c = start(&["--pool", "one", "--", "echo", "> C"]);
    // B waits for A, not for a place: C is first in the pool's line, and takes the place.
    let s = h.status(&c);
    assert!(s["summary"].as_str().unwrap().contains("place 1 in line for pool `one`"), "{s}");
    open_gate(&h);
    assert_eq!(ended(&h, &c)["summary"], "C");
    assert_eq!(h.status(&b)["status"], "queued");
    // A's supervisor dies: A is lost, and B never runs.
    h.kill_supervisor(&a);
    let v = ended_with(&h, &b, 1);
    assert_eq!(v["status"], "cancelled", "{v}");
    assert!(v["note"].as_str().unwrap().contains(&format!("task {a} (run), which it waited for, ended lost")), "{v}");
}

#[test]
fn a_prerequisite_pruned_after_it_completed_still_counts_and_a_run_gets_its_answer() {
    let h = Home::new();
    let done =
        h.run(&["--json", "run", "--sync", "--", "echo", "> first"], 0).json()["token"].as_str().unwrap().to_owned();
    let later = gated(&h, "second", 0, &[]);
    let both = format!("{done},{later}");
    let echo = ["--", "sh", "-c", "printf '> %s\\n' \"$1\" | tr '\\n' ' '", "sh", "{after}"];
    let waiter = h.run(&[&["--json", "run", "--async", "--after", &both][..], &echo[..]].concat(), 0).json();
    let waiter = waiter["token"].as_str().unwrap().to_owned();
    wait_until(Duration::from_secs(30), "the waiter to wait for the running one alone", || {
        h.status(&waiter)["waiting_for"] == serde_json::json!([later])
    });
    h.run(&["prune", "--keep", "0"], 0);
    open_gate(&h);
    let v = ended(&h, &waiter);
    let summary = v["summary"].as_str().unwrap();
    assert!(summary.contains(&format!("task {done} (run), completed")) && summary.contains("first"), "{v}");
    assert!(summary.contains(&format!("task {later} (run), completed")) && summary.contains("second"), "{v}");
}
