//! Pools whose waiters cannot act: a first in line whose supervisor is stopped (SIGSTOP) does
//! not keep the line from moving, and loses nothing.

use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::common::{Home, wait_until};

/// A home whose role `w` runs `sleep QUESTION` in pool `one` (one place), each run adding its
/// token to `runs`.
fn one_place(h: &Home) {
    let runs = h.path().join("runs");
    let toml = format!(
        "[pools.one]\nparallel = 1\n[agents.w]\ncommand = [\"sh\", \"-c\", \"echo {{token}} >> '{}'; sleep $0; echo '> slept'\", \"{{question}}\"]\npool = \"one\"\n",
        runs.display()
    );
    std::fs::write(h.path().join("agents.toml"), toml).unwrap();
}

fn ask(h: &Home, secs: &str) -> String {
    let v = h.run(&["--json", "ask", "--async", "w", secs], 0).json();
    v["token"].as_str().unwrap().to_owned()
}

fn signal_supervisor(h: &Home, token: &str, sig: Signal) {
    let lock = std::fs::read_to_string(h.path().join("tasks").join(token).join("lock")).unwrap();
    let pid: i32 = lock.split_whitespace().next().unwrap().parse().unwrap();
    kill(Pid::from_raw(pid), sig).unwrap();
}

#[test]
fn a_stopped_first_in_line_is_passed_and_takes_the_next_place_when_it_wakes() {
    let h = Home::new();
    one_place(&h);
    let holder = ask(&h, "600");
    let waiting: Vec<String> = (0..3).map(|_| ask(&h, "0.3")).collect();
    assert_eq!(h.status(&waiting[0])["status"], "queued");
    signal_supervisor(&h, &waiting[0], Signal::SIGSTOP);
    h.run(&["halt", &holder, "--grace", "0.2s"], 0);
    // The second in line takes the place the first does not take in time.
    wait_until(Duration::from_secs(60), "the second in line to start", || h.status(&waiting[1])["status"] != "queued");
    assert_eq!(h.status(&waiting[0])["status"], "queued", "the stopped one cannot have started");
    let freed = h.record(&holder)["ended"]["at_ms"].as_u64().unwrap();
    let started = h.record(&waiting[1])["started"]["at_ms"].as_u64().unwrap();
    assert!(started >= freed + 1500, "passed {} ms after the place came free", started.saturating_sub(freed));
    // Woken, the first keeps its place in line: it runs next, then the third.
    signal_supervisor(&h, &waiting[0], Signal::SIGCONT);
    for t in &waiting {
        let v = h.run_within(Duration::from_secs(60), &["--json", "await", t], 0).json();
        assert_eq!(v["status"], "completed", "{v}");
    }
    let starts: Vec<u64> = waiting.iter().map(|t| h.record(t)["started"]["at_ms"].as_u64().unwrap()).collect();
    assert!(starts[0] < starts[2], "the one passed started before the one behind it: {starts:?}");
    let runs = std::fs::read_to_string(h.path().join("runs")).unwrap();
    let mut ran: Vec<&str> = runs.lines().collect();
    ran.sort_unstable();
    let mut all: Vec<&str> = waiting.iter().map(String::as_str).chain([holder.as_str()]).collect();
    all.sort_unstable();
    assert_eq!(ran, all, "each task ran exactly once");
}
