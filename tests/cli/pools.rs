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

/// Start `w` with `secs`; its token and its status as it stands once saved (a start hands the
/// task back `starting`, before its place in its pool is known).
fn ask(h: &Home, secs: &str) -> (String, serde_json::Value) {
    let v = h.run(&["--json", "ask", "--async", "w", secs], 0).json();
    assert_eq!(v["status"], "starting", "{v}");
    let token = v["token"].as_str().unwrap().to_owned();
    let v = h.status(&token);
    (token, v)
}

/// The tasks holding places, starting or running, in one look at the list.
fn holding(h: &Home) -> usize {
    let tasks = h.run(&["--json", "list", "--limit", "200"], 0).json()["tasks"].as_array().unwrap().clone();
    tasks.iter().filter(|t| t["status"] == "starting" || t["status"] == "running").count()
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
    // Places go in the order tasks came; two given places together may spawn their agents a
    // few milliseconds apart either way, a wave (300 ms) never.
    let starts: Vec<u64> = waiting.iter().map(|t| h.record(t)["started"]["at_ms"].as_u64().unwrap()).collect();
    assert!(starts.windows(2).all(|w| w[1] + 100 > w[0]), "started in the order they came: {starts:?}");
    assert!(starts[2] >= starts[0] + 250 && starts[3] >= starts[1] + 250, "second wave after the first: {starts:?}");
}

#[test]
fn a_queued_task_can_be_awaited_and_halted_and_a_halted_one_never_runs() {
    let h = Home::new();
    pooled(&h, 1);
    let (holder, _) = ask(&h, "600");
    let (waiting, _) = ask(&h, "0.2");
    let (halted, v) = ask(&h, "0.2");
    assert_eq!(v["status"], "queued");
    assert!(v["summary"].as_str().unwrap().contains("place 2 in line for pool `two`"), "{v}");
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
    kill(h.supervisor_pid(&doomed));
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

#[test]
fn a_rate_limited_run_gives_its_place_up_for_the_back_off_then_runs_again_first() {
    let h = Home::new();
    let (order, counter, go) = (h.path().join("order"), h.path().join("runs"), h.path().join("go"));
    // Each run says when it starts in `order`; `blocker` holds the place until `go` exists.
    let toml = format!(
        "[pools.one]\nparallel = 1\n\
         [agents.limited]\ncommand = [\"sh\", \"-c\", \"echo limited >> {order}; exec {fake} limited {counter} 2 75\"]\n\
         pool = \"one\"\nretry_on = {{ exit = [75] }}\nbackoff = \"1s\"\n\
         [agents.blocker]\ncommand = [\"sh\", \"-c\", \"echo blocker >> {order}; while [ ! -e {go} ]; do sleep 0.05; done; echo '> done'\"]\n\
         pool = \"one\"\n\
         [agents.later]\ncommand = [\"sh\", \"-c\", \"echo later >> {order}; echo '> later'\"]\npool = \"one\"\n",
        fake = crate::common::fake_agent(),
        order = order.display(),
        counter = counter.display(),
        go = go.display(),
    );
    std::fs::write(h.path().join("agents.toml"), toml).unwrap();
    let start =
        |role: &str| h.run(&["--json", "ask", "--async", role, "go"], 0).json()["token"].as_str().unwrap().to_owned();
    let limited = start("limited");
    let blocker = start("blocker");
    let later = start("later");
    // The blocker can only run in the limited one's back-off, which gave the pool's one place up.
    wait_until(Duration::from_secs(30), "the blocker to run", || h.status(&blocker)["status"] == "running");
    let meanwhile = h.status(&limited);
    assert_eq!(
        (meanwhile["status"].as_str(), meanwhile["attempts"].as_u64()),
        (Some("queued"), Some(1)),
        "{meanwhile}"
    );
    // Its back-off over, it waits for the place: first in line again, before `later`.
    wait_until(Duration::from_secs(30), "the back-off to end", || {
        h.status(&limited)["summary"].as_str().is_some_and(|s| s.contains("place 1 in line"))
    });
    std::fs::write(&go, "").unwrap();
    for t in [&blocker, &limited, &later] {
        let v = h.run_within(Duration::from_secs(30), &["--json", "await", t], 0).json();
        assert_eq!(v["status"], "completed", "{v}");
    }
    assert_eq!(h.status(&limited)["attempts"], 2);
    assert_eq!(std::fs::read_to_string(&order).unwrap(), "limited\nblocker\nlimited\nlater\n");
}

#[test]
fn an_agents_file_empty_or_without_the_pool_for_a_moment_keeps_the_last_limit_and_says_so() {
    let h = Home::new();
    pooled(&h, 2);
    let holders: Vec<String> = (0..2).map(|_| ask(&h, "600").0).collect();
    let waiting: Vec<String> = (0..3).map(|_| ask(&h, "600").0).collect();
    let file = h.path().join("agents.toml");
    // Written in place, as an editor may: empty for a moment, then without the pool's section.
    // The second note is written after the look that read the first: both looks are done.
    for (text, says) in [("", "is empty now"), ("[agents.x]\ncommand = [\"true\"]\n", "has no [pools.two] now")] {
        std::fs::write(&file, text).unwrap();
        let summary = || h.status(&waiting[0])["summary"].as_str().unwrap_or_default().to_owned();
        wait_until(Duration::from_secs(30), "the first in line to say what it read", || {
            holding(&h) > 2 || summary().contains(says)
        });
        assert_eq!(holding(&h), 2, "the limit of 2 held");
        assert!(summary().contains("pool `two` keeps its last limit, parallel = 2"), "{}", summary());
    }
    // The section back, with a place more: one more starts, and nothing is said any more.
    pooled(&h, 3);
    wait_until(Duration::from_secs(30), "a third place to be taken", || holding(&h) >= 3);
    assert_eq!(holding(&h), 3);
    wait_until(Duration::from_secs(30), "the new first in line to say nothing of the limit", || {
        h.status(&waiting[1])["summary"].as_str().is_some_and(|s| s.contains("place 1") && !s.contains("keeps"))
    });
    for t in holders.iter().chain(&waiting) {
        h.run(&["halt", t, "--grace", "0.2s"], 0);
    }
}

/// How many descriptors process `pid` has open on the home's store (`agentctl.db` and its
/// `-wal` and `-shm`).
fn store_files_open(pid: i64) -> usize {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap();
    fds.flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter(|target| target.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("agentctl.db")))
        .count()
}

#[test]
fn a_waiting_supervisor_keeps_nothing_of_the_store_open() {
    // An open connection keeps a lock on the store's files, which the kernel walks past on every
    // lock any other process takes: a line of thousands made each start several times slower.
    let h = Home::new();
    pooled(&h, 1);
    let (holder, _) = ask(&h, "600");
    let waiting: Vec<String> = (0..3).map(|_| ask(&h, "600").0).collect();
    for t in &waiting {
        let pid = h.supervisor_pid(t);
        wait_until(Duration::from_secs(10), "the waiter to close the store", || store_files_open(pid) == 0);
    }
    for t in waiting.iter().chain([&holder]) {
        h.run(&["halt", t, "--grace", "0.2s"], 0);
    }
}

#[test]
fn an_ended_task_marked_as_holding_its_place_does_not_take_it() {
    // As an earlier release's supervisor ending after the upgrade left it, or a tool outside.
    let h = Home::new();
    pooled(&h, 1);
    let (done, _) = ask(&h, "0");
    h.run_within(Duration::from_secs(30), &["await", &done], 0);
    h.db().execute("UPDATE tasks SET pool_state = 'held' WHERE token = ?1", [&done]).unwrap();
    let (next, _) = ask(&h, "0");
    let v = h.run_within(Duration::from_secs(30), &["--json", "await", &next], 0).json();
    assert_eq!(v["status"], "completed", "{v}");
}

#[test]
fn list_says_what_each_pool_can_take_now() {
    let h = Home::new();
    pooled(&h, 1);
    let (first, _) = ask(&h, "30");
    let (_, second) = ask(&h, "0");
    assert_eq!(second["status"], "queued", "{second}");
    // One waiting for another task is queued too, out of the line.
    h.run(&["--json", "ask", "--async", "--after", &first, "w", "0"], 0);
    let v = h.run(&["--json", "list"], 0).json();
    assert_eq!(v["pools"], serde_json::json!([{"pool": "two", "places": 1, "running": 1, "queued": 2}]), "{v}");
    let text = h.run(&["list"], 0).stdout;
    assert!(text.ends_with("pool two: 1 of 1 running, 2 queued\n"), "{text}");
    h.run(&["halt", &first], 0);
}

#[test]
fn tasks_wait_for_memory_with_the_figures_and_start_in_order_once_the_minimum_is_lowered() {
    let h = Home::new();
    let write = |min: &str| {
        let tmp = h.path().join("agents.toml.new");
        std::fs::write(&tmp, format!("[pools.mem]\nparallel = 1\nmin_available_memory = \"{min}\"\n")).unwrap();
        std::fs::rename(tmp, h.path().join("agents.toml")).unwrap();
    };
    write("100T");
    let start = |answer: &str| {
        let v = h.run(&["--json", "run", "--async", "--pool", "mem", "--", "echo", answer], 0).json();
        assert_eq!(v["status"], "queued", "{v}");
        v["token"].as_str().unwrap().to_owned()
    };
    let (first, second) = (start("> one"), start("> two"));
    let mut s = serde_json::Value::Null;
    wait_until(Duration::from_secs(30), "the task to say it waits for memory", || {
        s = h.status(&first);
        s["summary"].as_str().is_some_and(|t| t.contains("waiting for memory"))
    });
    let why = s["summary"].as_str().unwrap();
    assert!(why.contains(" available on this machine") || why.contains(" available in agentctl's cgroup"), "{why}");
    assert!(why.contains("its pool needs 100T free to start one"), "{why}");
    assert_eq!(h.status(&second)["status"], "queued");
    write("1K");
    let ended = |t: &str| h.run(&["--json", "await", t, "--timeout", "60s"], 0).json();
    let (a, b) = (ended(&first), ended(&second));
    assert_eq!((a["summary"].as_str(), b["summary"].as_str()), (Some("one"), Some("two")));
    // One place: the second started once the first, admitted first, had ended.
    assert!(a["ended_at"].as_str() <= b["started_at"].as_str(), "in order: {a} {b}");
}
