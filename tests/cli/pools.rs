//! Pools: `[pools.NAME] parallel = N` caps how many of a pool's tasks run at once; the rest
//! wait `queued`, in the order they came, and start as places free.

use std::time::{Duration, Instant};

use crate::common::{Home, alive, wait_until};

/// A home whose role `w` runs `sleep QUESTION` in pool `two` (of `parallel` places).
fn pooled(h: &Home, parallel: u32) {
    let toml = format!(
        "[pools.two]\nparallel = {parallel}\n[agents.w]\ncommand = [\"sh\", \"-c\", \"sleep $0; echo \\\"> slept $0\\\"\", \"{{question}}\"]\npool = \"two\"\n"
    );
    // Written whole, then renamed: a waiter never reads half a file.
    let tmp = h.path().join("agents.toml.new");
    std::fs::write(&tmp, toml).unwrap();
    std::fs::rename(tmp, h.path().join("agents.toml")).unwrap();
}

/// Start `w` with `secs`; its token and its status as the launch answered.
fn ask(h: &Home, secs: &str) -> (String, serde_json::Value) {
    let v = h.run(&["--json", "ask", "--async", "w", secs], 0).json();
    (v["token"].as_str().unwrap().to_owned(), v)
}

/// The tasks holding places: starting or running.
fn holding(h: &Home) -> u64 {
    ["starting", "running"]
        .iter()
        .map(|s| h.run(&["--json", "list", "--status", s], 0).json()["count"].as_u64().unwrap())
        .sum()
}

#[test]
fn a_pool_runs_at_most_parallel_tasks_and_starts_the_rest_in_order() {
    let h = Home::new();
    pooled(&h, 2);
    // Two holders that end only when halted, so the line is sure to form.
    let holders: Vec<String> = (0..2).map(|_| ask(&h, "600").0).collect();
    let t0 = Instant::now();
    let mut waiting = Vec::new();
    for i in 0..4 {
        let (t, v) = ask(&h, "0.3");
        assert_eq!(v["status"], "queued", "{v}");
        assert!(v["summary"].as_str().unwrap().contains(&format!("place {} in line for pool `two`", i + 1)), "{v}");
        waiting.push(t);
    }
    for t in &holders {
        h.run(&["halt", t, "--grace", "0.2s"], 0);
    }
    let mut most = 0;
    wait_until(Duration::from_secs(60), "the four to end", || {
        most = most.max(holding(&h));
        waiting.iter().all(|t| h.status(t)["status"] == "completed")
    });
    assert!(most <= 2, "{most} held places at once");
    // Two waves of two: not before 0.6 s.
    assert!(t0.elapsed() >= Duration::from_millis(600), "{:?}", t0.elapsed());
    let starts: Vec<u64> = waiting.iter().map(|t| h.record(t)["started"]["at_ms"].as_u64().unwrap()).collect();
    let mut sorted = starts.clone();
    sorted.sort();
    assert_eq!(starts, sorted, "started in the order they came");
}

#[test]
fn a_queued_task_can_be_awaited_and_halted_and_a_halted_one_never_runs() {
    let h = Home::new();
    pooled(&h, 1);
    let (holder, _) = ask(&h, "600");
    let (waiting, _) = ask(&h, "0.2");
    let (halted, v) = ask(&h, "0.2");
    assert_eq!(v["status"], "queued");
    assert!(v["message"].as_str().unwrap().contains("waits for a place"), "{v}");
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

fn kill(pid: i64) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL).unwrap();
}

#[test]
fn a_killed_supervisor_running_or_queued_frees_its_place_for_the_next_in_line() {
    let h = Home::new();
    pooled(&h, 1);
    let (holder, _) = ask(&h, "600");
    let (doomed, _) = ask(&h, "600");
    let (next, _) = ask(&h, "0.2");
    // The waiter ahead of `next` dies first: `next` moves up (it is recorded lost).
    let queued_sup = std::fs::read_to_string(h.path().join("tasks").join(&doomed).join("lock")).unwrap();
    kill(queued_sup.split_whitespace().next().unwrap().parse().unwrap());
    wait_until(Duration::from_secs(30), "the dead waiter to be recorded lost", || {
        h.status(&doomed)["status"] == "lost"
    });
    assert!(h.status(&doomed)["note"].as_str().unwrap().contains("waited for a place"), "{}", h.status(&doomed));
    let rec = h.record(&holder);
    let (sup, agent) = (rec["started"]["supervisor_pid"].as_i64().unwrap(), rec["started"]["pid"].as_i64().unwrap());
    kill(sup);
    let v = h.run_within(Duration::from_secs(30), &["--json", "await", &next], 0).json();
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(h.status(&holder)["status"], "lost");
    wait_until(Duration::from_secs(10), "the lost task's agent to be gone", || !alive(agent));
}

#[test]
fn raising_parallel_starts_waiting_tasks_without_any_other_end() {
    let h = Home::new();
    pooled(&h, 1);
    let (holder, _) = ask(&h, "600");
    let tokens: Vec<String> = (0..3).map(|_| ask(&h, "600").0).collect();
    assert_eq!(h.status(&tokens[2])["status"], "queued");
    pooled(&h, 4);
    wait_until(Duration::from_secs(30), "all four to hold places", || holding(&h) == 4);
    for t in tokens.iter().chain([&holder]) {
        h.run(&["halt", t, "--grace", "0.2s"], 0);
    }
}

#[test]
fn a_task_started_from_inside_a_task_does_not_wait_behind_its_parent() {
    let h = Home::new();
    pooled(&h, 1);
    // The parent holds the pool's one place; its children would wait for ever behind it.
    let bin = env!("CARGO_BIN_EXE_agentctl");
    let script = format!("{bin} run --sync --pool two -- echo one && {bin} run --sync -- echo two && echo '> both'");
    let v = h.run_within(
        Duration::from_secs(60),
        &["--json", "run", "--sync", "--pool", "two", "--", "sh", "-c", &script],
        0,
    );
    let v = v.json();
    assert_eq!((v["status"].as_str(), v["summary"].as_str()), (Some("completed"), Some("both")), "{v}");
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
