//! Pools: `[pools.NAME] parallel = N` caps how many of a pool's tasks run at once; the rest
//! wait `queued`, in the order they came, and start as places free.

use std::time::{Duration, Instant};

use crate::common::{Home, alive, wait_until};

/// A home whose role `w` runs `sleep QUESTION` in pool `two` (parallel 2).
fn pooled(h: &Home, parallel: u32) {
    let toml = format!(
        "[pools.two]\nparallel = {parallel}\n[agents.w]\ncommand = [\"sh\", \"-c\", \"sleep $0; echo \\\"> slept $0\\\"\", \"{{question}}\"]\npool = \"two\"\n"
    );
    std::fs::write(h.path().join("agents.toml"), toml).unwrap();
}

fn ask(h: &Home, secs: &str) -> String {
    h.run(&["--json", "ask", "--async", "w", secs], 0).json()["token"].as_str().unwrap().to_owned()
}

fn running(h: &Home) -> usize {
    h.run(&["--json", "list", "--status", "running"], 0).json()["count"].as_u64().unwrap() as usize
}

#[test]
fn a_pool_runs_at_most_parallel_tasks_and_starts_the_rest_in_order() {
    let h = Home::new();
    pooled(&h, 2);
    let t0 = Instant::now();
    let tokens: Vec<String> = (0..6).map(|_| ask(&h, "0.5")).collect();
    let first = h.status(&tokens[2]);
    assert_eq!(first["status"], "queued", "{first}");
    assert!(first["summary"].as_str().unwrap().contains("place 1 in line for pool `two`"), "{first}");
    assert!(h.status(&tokens[5])["summary"].as_str().unwrap().contains("place 4 in line"));
    let mut most = 0;
    wait_until(Duration::from_secs(60), "all six to end", || {
        most = most.max(running(&h));
        h.run(&["--json", "list", "--status", "completed"], 0).json()["count"] == 6
    });
    assert!(most <= 2, "{most} ran at once");
    // Three waves of two: not before 1.5 s.
    assert!(t0.elapsed() >= Duration::from_millis(1500), "{:?}", t0.elapsed());
    let starts: Vec<u64> = tokens.iter().map(|t| h.record(t)["started"]["at_ms"].as_u64().unwrap()).collect();
    let mut sorted = starts.clone();
    sorted.sort();
    assert_eq!(starts, sorted, "started in the order they came");
}

#[test]
fn a_queued_task_can_be_awaited_and_halted_and_a_halted_one_never_runs() {
    let h = Home::new();
    pooled(&h, 1);
    let holder = ask(&h, "60");
    let waiting = ask(&h, "0.2");
    let halted = ask(&h, "0.2");
    assert_eq!(h.status(&halted)["status"], "queued");
    let v = h.run_within(Duration::from_secs(30), &["--json", "halt", &halted], 0).json();
    assert_eq!(v["status"], "cancelled", "{v}");
    assert!(v["note"].as_str().unwrap().contains("it never ran"), "{v}");
    assert!(h.record(&halted)["started"].is_null());
    // An await of a queued task times out as for a running one, then ends with it.
    let v = h.run(&["--json", "await", &waiting, "--timeout", "1s"], 124).json();
    assert_eq!((v["status"].as_str(), v["timed_out"].as_bool()), (Some("queued"), Some(true)), "{v}");
    h.run(&["halt", &holder, "--grace", "0.5s"], 0);
    let v = h.run_within(Duration::from_secs(30), &["--json", "await", &waiting], 0).json();
    assert_eq!((v["status"].as_str(), v["summary"].as_str()), (Some("completed"), Some("slept 0.2")), "{v}");
}

#[test]
fn a_killed_supervisor_frees_its_place_for_the_next_in_line() {
    let h = Home::new();
    pooled(&h, 1);
    let holder = ask(&h, "60");
    let next = ask(&h, "0.2");
    let rec = h.record(&holder);
    let (sup, agent) = (rec["started"]["supervisor_pid"].as_i64().unwrap(), rec["started"]["pid"].as_i64().unwrap());
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(sup as i32), nix::sys::signal::Signal::SIGKILL).unwrap();
    let v = h.run_within(Duration::from_secs(30), &["--json", "await", &next], 0).json();
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(h.status(&holder)["status"], "lost");
    wait_until(Duration::from_secs(10), "the lost task's agent to be gone", || !alive(agent));
}

#[test]
fn raising_parallel_lets_waiting_tasks_start_at_the_next_end() {
    let h = Home::new();
    pooled(&h, 1);
    let first = ask(&h, "0.5");
    let tokens: Vec<String> = (0..3).map(|_| ask(&h, "30")).collect();
    pooled(&h, 4);
    h.run_within(Duration::from_secs(30), &["await", &first], 0);
    wait_until(Duration::from_secs(30), "the three to run together", || running(&h) == 3);
    for t in &tokens {
        h.run(&["halt", t, "--grace", "0.5s"], 0);
    }
}

#[test]
fn a_pool_that_is_not_defined_is_refused_with_how_to_define_it() {
    let h = Home::new();
    pooled(&h, 2);
    let err = h.run(&["run", "--pool", "nope", "--", "true"], 2).stderr;
    assert!(err.contains("pool `nope` is not defined") && err.contains("[pools.nope]"), "{err}");
    std::fs::write(h.path().join("agents.toml"), "[agents.w]\ncommand = [\"true\"]\npool = \"missing\"\n").unwrap();
    let err = h.run(&["ask", "w", "x"], 2).stderr;
    assert!(err.contains("[agents.w]") && err.contains("pool `missing`"), "{err}");
    std::fs::write(h.path().join("agents.toml"), "[pools.zero]\nparallel = 0\n").unwrap();
    let err = h.run(&["run", "--", "true"], 2).stderr;
    assert!(err.contains("parallel = 0"), "{err}");
}
