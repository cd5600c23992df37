//! Agents that try to make their task unhaltable: one that stops its supervisor (SIGSTOP), once
//! or over and over, and a supervisor out of file descriptors. A halt still ends every process
//! of the task.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{Home, alive, read_pids, wait_until};

const HANG: Duration = Duration::from_secs(20);

fn supervisor_of(h: &Home, token: &str) -> i64 {
    wait_until(HANG, "the task to start", || h.record(token)["started"]["supervisor_pid"].is_i64());
    h.record(token)["started"]["supervisor_pid"].as_i64().unwrap()
}

/// The state letter of `pid` (R, S, T, Z…).
fn state(pid: i64) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.trim_start().chars().next()
}

/// Start an agent that runs `script` (with `$PF` a file for its pids) and return its token,
/// its supervisor's pid and the pid file.
fn start(h: &Home, script: &str) -> (String, i64, std::path::PathBuf) {
    let pf = h.path().join("pids");
    let script = script.replace("$PF", pf.to_str().unwrap());
    let token = h.start_script(&script);
    let sup = supervisor_of(h, &token);
    (token, sup, pf)
}

#[test]
fn an_agent_that_stops_its_supervisor_once_is_still_halted_gracefully() {
    let h = Home::new();
    // It stops its supervisor once the launcher is gone (a launcher waiting for its start
    // report would wake it).
    let gate = h.path().join("gate");
    let script = format!(
        "echo $$ > $PF; while [ ! -e '{}' ]; do sleep 0.02; done; kill -STOP $PPID; while :; do sleep 1; done",
        gate.display()
    );
    let (token, sup, pf) = start(&h, &script);
    let pids = read_pids(&pf);
    std::fs::write(&gate, "").unwrap();
    wait_until(HANG, "the supervisor to be stopped", || state(sup) == Some('T'));
    let st = h.status(&token);
    assert_eq!(
        st["status"],
        "running",
        "{st} {:?}",
        std::fs::read_to_string(h.path().join("tasks").join(&token).join("supervisor.err"))
    );
    let t0 = Instant::now();
    let v = h.run(&["--json", "halt", &token, "--grace", "5s"], 0).json();
    assert_eq!(v["status"], "cancelled", "{v}");
    // It ends on SIGTERM, long before SIGKILL would be due (a hang guard, not a timing claim).
    assert!(t0.elapsed() < HANG, "{:?}", t0.elapsed());
    assert!(!alive(pids[0]), "the agent survived the halt");
    wait_until(HANG, "the supervisor to exit", || !alive(sup));
}

#[test]
fn an_agent_that_keeps_stopping_its_supervisor_is_ended_by_the_halt_itself() {
    let h = Home::new();
    // It ignores SIGTERM (and so does its child) and stops its supervisor again and again, once
    // its start is recorded (stopped before that, its supervisor could not say it runs).
    let gate = h.path().join("gate");
    let script = format!(
        "trap '' TERM; sleep 1000 & echo $$ $! > $PF; while [ ! -e '{}' ]; do sleep 0.02; done; \
         while :; do kill -STOP $PPID; sleep 0.01; done",
        gate.display()
    );
    let (token, sup, pf) = start(&h, &script);
    let pids = read_pids(&pf);
    std::fs::write(&gate, "").unwrap();
    wait_until(HANG, "the supervisor to be stopped", || state(sup) == Some('T'));
    let t0 = Instant::now();
    let v = h.run(&["--json", "halt", &token, "--grace", "1s"], 0).json();
    assert!(t0.elapsed() >= Duration::from_secs(1) && t0.elapsed() < HANG, "{:?}", t0.elapsed());
    assert_eq!(v["status"], "cancelled", "{v}");
    for pid in pids {
        assert!(!alive(pid), "{pid} survived the halt: {v}");
    }
    wait_until(HANG, "the supervisor to be gone", || !alive(sup));
    assert_eq!(h.status(&token)["status"], "cancelled");
}

/// `count` processes blocked in `await` on `token`.
fn waiters(h: &Home, token: &str, count: usize) -> Vec<Child> {
    (0..count)
        .map(|_| h.cmd().args(["--json", "await", token, "--timeout", "60s"]).stdout(Stdio::null()).spawn().unwrap())
        .collect()
}

fn open_fds(pid: i64) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0)
}

#[test]
fn a_supervisor_out_of_descriptors_neither_spins_nor_stops_a_halt() {
    let h = Home::new();
    let (token, sup, pf) = start(&h, "echo $$ > $PF; while :; do sleep 1; done");
    let agent = read_pids(&pf)[0];
    let limit = open_fds(sup) + 3;
    let ok = Command::new("prlimit").arg(format!("--pid={sup}")).arg(format!("--nofile={limit}:{limit}")).status();
    assert!(ok.is_ok_and(|s| s.success()), "prlimit failed");
    let mut blocked = waiters(&h, &token, 12);
    wait_until(HANG, "the supervisor to run out of descriptors", || open_fds(sup) >= limit);
    // A supervisor spinning on a listener it cannot accept from is never seen asleep.
    let mut asleep = 0;
    wait_until(HANG, "the supervisor to sleep at its limit", || {
        asleep = if state(sup) == Some('S') { asleep + 1 } else { 0 };
        asleep >= 5
    });
    let v = h.run(&["--json", "halt", &token, "--grace", "1s"], 0).json();
    assert_eq!(v["status"], "cancelled", "{v}");
    assert!(!alive(agent), "the agent survived the halt");
    for w in &mut blocked {
        let code = w.wait().unwrap().code();
        assert_eq!(code, Some(1), "a waiter did not see the end");
    }
}
