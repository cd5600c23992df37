//! Wall-clock jumps (issue 5, fault 14) do not break timeouts: every duration is measured on
//! the monotonic clock. libfaketime runs agentctl (and its supervisor) with a wall clock 50 times too fast.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{Home, check, fake_agent, read_pids};

fn libfaketime() -> String {
    let candidates = [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
        "/usr/lib/faketime/libfaketimeMT.so.1",
    ];
    candidates
        .iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("libfaketime is needed for this test (scripts/test installs the `faketime` package)")
        .to_string()
}

/// agentctl under a wall clock running 50x, with the monotonic clock left alone.
fn fast_wall_clock(h: &Home, args: &[&str], code: i32) -> (serde_json::Value, Duration) {
    let mut cmd: Command = h.cmd();
    cmd.env("LD_PRELOAD", libfaketime())
        .env("FAKETIME", "+0 x50")
        .env("DONT_FAKE_MONOTONIC", "1")
        .arg("--json")
        .args(args);
    let t0 = Instant::now();
    let out = cmd.output().unwrap();
    let took = t0.elapsed();
    (check(args, out, code).json(), took)
}

#[test]
fn timeouts_waits_grace_and_deadlines_follow_real_time_when_the_wall_clock_races() {
    let h = Home::new();
    let fake = fake_agent();
    let pidfile = h.path().join("pid");
    let (v, _) = fast_wall_clock(&h, &["run", "--async", "--", &fake, "stubborn", pidfile.to_str().unwrap()], 0);
    let token = v["token"].as_str().unwrap().to_owned();
    read_pids(&pidfile);

    let (v, took) = fast_wall_clock(&h, &["await", &token, "--timeout", "2s"], 124);
    assert!(took >= Duration::from_secs(2), "await --timeout 2s returned after {took:?}");
    // The wall clock really raced: the task looks far older than it is.
    assert!(v["elapsed_ms"].as_u64().unwrap() >= 20_000, "faketime did not take effect: {v}");

    let (v, took) = fast_wall_clock(&h, &["halt", &token, "--grace", "1s"], 0);
    assert!(took >= Duration::from_secs(1), "halt --grace 1s took {took:?}");
    assert_eq!(v["status"], "cancelled");

    let pidfile = h.path().join("pid2");
    let (v, took) = fast_wall_clock(
        &h,
        &["run", "--wait", "2s", "--timeout", "3s", "--", &fake, "stubborn", pidfile.to_str().unwrap()],
        0,
    );
    assert!(took >= Duration::from_secs(2), "--wait 2s returned after {took:?}");
    assert_eq!(v["status"], "running");
    let token = v["token"].as_str().unwrap().to_owned();
    let t0 = Instant::now();
    let (v, _) = fast_wall_clock(&h, &["await", &token, "--timeout", "30s"], 1);
    assert_eq!(v["status"], "expired", "{v}");
    // Started 2 s ago with a 3 s deadline and a 5 s grace for a SIGTERM-ignoring agent.
    assert!(t0.elapsed() >= Duration::from_millis(500), "the deadline passed after {:?}", t0.elapsed());
}
