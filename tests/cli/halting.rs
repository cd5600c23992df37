//! halt: SIGTERM, grace, SIGKILL for everything of the task; clear refusals otherwise.

use std::time::{Duration, Instant};

use crate::common::{Home, alive, fake_agent, read_pids, wait_until};

#[test]
fn halt_ends_a_stubborn_agent_and_its_grandchild_in_another_session() {
    let h = Home::new();
    let pidfile = h.path().join("pids");
    let token = h.start(&["grandchild", pidfile.to_str().unwrap()]);
    let pids = read_pids(&pidfile);
    assert_eq!(pids.len(), 2);
    assert!(pids.iter().all(|&p| alive(p)));

    let t0 = Instant::now();
    let v = h.run(&["--json", "halt", &token, "--grace", "1s"], 0).json();
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(1000), "halt returned after {took:?}, before the grace period");
    assert!(took < Duration::from_secs(8), "halt took {took:?}");
    assert_eq!(v["status"], "cancelled");
    assert_eq!(v["summary"], "partial: started a grandchild");
    for p in pids {
        assert!(!alive(p), "process {p} of the task survived the halt");
    }
    assert_eq!(h.status(&token)["status"], "cancelled");
}

#[test]
fn halt_of_a_cooperative_agent_returns_at_once_with_its_partial_output() {
    let h = Home::new();
    let token = h.start(&["tick", "1000", "0.05"]);
    wait_until(Duration::from_secs(10), "some output", || h.status(&token)["line_count"].as_u64() >= Some(2));
    let t0 = Instant::now();
    let v = h.run(&["--json", "halt", &token, "--grace", "60s"], 0).json();
    // Signal 15 below shows it ended before SIGKILL was due; this bound is a hang guard.
    assert!(t0.elapsed() < Duration::from_secs(30), "a TERM-respecting agent took {:?}", t0.elapsed());
    assert_eq!(v["status"], "cancelled");
    assert_eq!(v["signal"], 15);
    assert!(v["summary"].as_str().unwrap().contains("tick 1"), "{v}");
}

#[test]
fn refused_halts_exit_2_and_change_nothing() {
    let h = Home::new();
    let done = h.run(&["--json", "run", "--", &fake_agent(), "sleep", "0"], 0).json();
    let token = done["token"].as_str().unwrap();
    let before = h.record(token);
    let outside = h.path().parent().unwrap().join("x");
    let outside_before = outside.exists();

    let r = h.run(&["halt", "abcdef"], 2);
    assert!(r.stderr.contains("no task abcdef"), "{}", r.stderr);
    let r = h.run(&["halt", "../x"], 2);
    assert!(r.stderr.contains("invalid token `../x`"), "{}", r.stderr);
    let r = h.run(&["--json", "halt", "ABCDEF"], 2);
    assert_eq!(r.json()["kind"], "invalid_token");

    assert_eq!(h.record(token), before, "a refused halt changed the record");
    assert!(!h.path().join("x").exists());
    assert_eq!(outside.exists(), outside_before, "`../x` reached outside the home");
}

#[test]
fn a_halt_of_an_ended_task_reports_how_it_ended_and_stops_nothing() {
    let h = Home::new();
    let done = h.run(&["--json", "run", "--", &fake_agent(), "fail", "3"], 1).json();
    let token = done["token"].as_str().unwrap();
    let before = h.record(token);
    // As the MCP tool answers: the task as it ended, exit 0, and a note that nothing was stopped.
    let r = h.run(&["halt", token], 0);
    assert!(r.stdout.contains(&format!("task {token} (run) failed")), "{}", r.stdout);
    assert!(r.stdout.contains("had already ended (failed); nothing was stopped"), "{}", r.stdout);
    let v = h.run(&["--json", "halt", token], 0).json();
    assert_eq!((v["status"].as_str(), v["exit_code"].as_i64()), (Some("failed"), Some(3)), "{v}");
    assert!(v["note"].as_str().unwrap().contains("nothing was stopped"), "{v}");
    assert_eq!(h.record(token), before, "a halt of an ended task changed its record");
    // --purge still removes what it says it removes.
    let log = v["log_path"].as_str().unwrap().to_owned();
    let v = h.run(&["--json", "halt", token, "--purge"], 0).json();
    assert!(v["note"].as_str().unwrap().contains("log and summary removed"), "{v}");
    assert!(!std::path::Path::new(&log).exists());
    let v = h.run(&["--json", "halt", token, "--purge"], 0).json();
    assert!(v["note"].as_str().unwrap().contains("its log and summary were gone already"), "{v}");
}

#[test]
fn two_halts_at_once_leave_one_cancelled_record() {
    let h = Home::new();
    let pidfile = h.path().join("pid");
    let token = h.start(&["stubborn", pidfile.to_str().unwrap()]);
    read_pids(&pidfile);
    let spawned: Vec<_> = (0..2)
        .map(|_| {
            h.cmd()
                .args(["--json", "halt", &token, "--grace", "0.5s"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut cancelled = 0;
    for child in spawned {
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["status"], "cancelled", "{v}");
        if !v["note"].as_str().unwrap_or("").contains("nothing was stopped") {
            cancelled += 1;
        }
    }
    assert!(cancelled >= 1, "neither halt reported the cancellation");
    let rec = h.record(&token);
    assert_eq!(rec["ended"]["outcome"]["status"], "cancelled");
    assert_eq!(h.status(&token)["status"], "cancelled");
}

#[test]
fn halt_purge_removes_log_and_summary() {
    let h = Home::new();
    let token = h.start(&["sleep", "30"]);
    let v = h.run(&["--json", "halt", &token, "--purge"], 0).json();
    assert_eq!(v["status"], "cancelled");
    assert!(!std::path::Path::new(v["log_path"].as_str().unwrap()).exists());
    assert!(!std::path::Path::new(v["summary_path"].as_str().unwrap()).exists());
    assert_eq!(h.status(&token)["status"], "cancelled");
}
