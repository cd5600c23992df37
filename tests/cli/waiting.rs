//! await: timeouts with a growing line count, and a prompt return once the task ends.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::{Home, wait_until};

#[test]
fn await_times_out_with_124_then_returns_promptly_after_the_end() {
    let h = Home::new();
    let token = h.start(&["tick", "40", "0.1"]);

    let t0 = Instant::now();
    let first = h.run(&["--json", "await", &token, "--timeout", "1s"], 124).json();
    assert!(t0.elapsed() >= Duration::from_secs(1), "await --timeout 1s returned after {:?}", t0.elapsed());
    assert_eq!(first["timed_out"], true);
    assert_eq!(first["status"], "running");
    assert_eq!(first["message"], "Task still running. Call await again to continue waiting.");
    let second = h.run(&["--json", "await", &token, "--timeout", "1s"], 124).json();
    assert!(
        second["line_count"].as_u64() > first["line_count"].as_u64(),
        "line_count did not grow: {} then {}",
        first["line_count"],
        second["line_count"]
    );
    let human = h.run(&["await", &token, "--timeout", "0.3s"], 124);
    assert!(human.stdout.contains("Task still running. Call await again to continue waiting."), "{}", human.stdout);

    let done = h.run(&["--json", "await", &token, "--timeout", "60s"], 0).json();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["timed_out"], false);
    assert_eq!(done["summary"], "ticked 40");
    assert_eq!(done["line_count"], 41);
}

#[test]
fn await_returns_within_moments_of_the_childs_exit() {
    let h = Home::new();
    let mut slack = Vec::new();
    for _ in 0..3 {
        let stamp = h.path().join("exit-stamp");
        let _ = std::fs::remove_file(&stamp);
        let token = h.start(&["stamp", stamp.to_str().unwrap(), "1"]);
        h.run(&["await", &token], 0);
        let returned = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i128;
        let exited: i128 = std::fs::read_to_string(&stamp).unwrap().trim().parse().unwrap();
        slack.push((returned - exited) / 1_000_000);
    }
    slack.sort();
    // The median must be far below any polling period; 500 ms is a loose guard for noisy machines.
    assert!(slack[1] < 500, "await returned {slack:?} ms after the child exited");
}

#[test]
fn a_killed_supervisor_makes_the_task_lost_not_running() {
    let h = Home::new();
    let token = h.start(&["sleep", "30"]);
    let sup = h.record(&token)["started"]["supervisor_pid"].as_i64().unwrap();
    let agent = h.record(&token)["started"]["pid"].as_i64().unwrap();
    let open_fds = || std::fs::read_dir(format!("/proc/{sup}/fd")).map(|d| d.count()).unwrap_or(0);
    let before = open_fds();
    let waiter = h
        .cmd()
        .args(["--json", "await", &token, "--timeout", "60s"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The supervisor accepting the waiter's connection shows as one more open descriptor.
    wait_until(Duration::from_secs(10), "the waiter to connect", || open_fds() > before);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(sup as i32), nix::sys::signal::Signal::SIGKILL).unwrap();
    let t0 = Instant::now();
    let out = waiter.wait_with_output().unwrap();
    // It asked for 60 s; a hang guard well below that.
    assert!(t0.elapsed() < Duration::from_secs(20), "await stayed blocked {:?}", t0.elapsed());
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "lost");
    assert_eq!(h.status(&token)["status"], "lost");
    wait_until(Duration::from_secs(5), "the agent to die with its supervisor", || !crate::common::alive(agent));
}

#[test]
fn a_running_tasks_line_count_comes_from_the_supervisors_published_count() {
    let h = Home::new();
    let r = h.run(&["--json", "run", "--async", "--", "sh", "-c", "seq 1 200000; echo; printf partial; sleep 30"], 0);
    let token = r.json()["token"].as_str().unwrap().to_owned();
    let log = std::path::PathBuf::from(r.json()["log_path"].as_str().unwrap());
    let saved = h.path().join("tasks").join(&token).join("lines");
    // The agent has written all it will ("partial" comes last), and the supervisor publishes its
    // count once it has caught up with that.
    wait_until(Duration::from_secs(20), "the agent's output to be complete", || {
        std::fs::read(&log).is_ok_and(|b| b.ends_with(b"partial"))
    });
    let len = std::fs::metadata(&log).unwrap().len();
    wait_until(Duration::from_secs(20), "the count to be published up to the end", || {
        std::fs::read_to_string(&saved).is_ok_and(|t| t.split(' ').next() == Some(&len.to_string()))
    });
    let published: Vec<u64> =
        std::fs::read_to_string(&saved).unwrap().split_whitespace().map(|w| w.parse().unwrap()).collect();
    assert_eq!(published[1], 200_001, "newlines counted: {published:?}");
    assert_eq!(published[2], 0, "the log ends inside a line");
    assert_eq!(h.status(&token)["line_count"], 200_002);
    let listed = h.run(&["--json", "list"], 0).json();
    assert_eq!(listed["tasks"][0]["line_count"], 200_002);
    let done = h.run(&["--json", "halt", &token, "--grace", "1s"], 0).json();
    assert_eq!(done["line_count"], 200_002);
    assert!(!saved.exists(), "the published count outlived the task");
}

#[test]
fn a_running_tasks_supervisor_holds_no_inotify_instance_and_publishes_its_growing_count() {
    let h = Home::new();
    let token = h.start(&["tick", "100", "0.1"]);
    let sup = h.record(&token)["started"]["supervisor_pid"].as_i64().unwrap();
    // Instances are few (128 per user by default) and tasks many: a supervisor looks at its
    // log's size on a timer instead.
    let fds: Vec<_> = std::fs::read_dir(format!("/proc/{sup}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
        .collect();
    assert!(!fds.is_empty());
    assert!(fds.iter().all(|l| l.as_os_str() != "anon_inode:inotify"), "{fds:?}");
    let saved = h.path().join("tasks").join(&token).join("lines");
    let published_bytes =
        || std::fs::read_to_string(&saved).ok().and_then(|t| t.split(' ').next().and_then(|b| b.parse::<u64>().ok()));
    wait_until(Duration::from_secs(20), "a first published count", || published_bytes().is_some_and(|b| b > 0));
    let first = published_bytes().unwrap();
    wait_until(Duration::from_secs(20), "a larger published count", || published_bytes().is_some_and(|b| b > first));
    let (a, b) = (h.status(&token)["line_count"].as_u64().unwrap(), h.status(&token)["line_count"].as_u64().unwrap());
    assert!(a >= 1 && b >= a, "{a} then {b}");
    h.run(&["halt", &token, "--grace", "1s"], 0);
}

#[test]
fn await_of_several_tasks_returns_as_soon_as_one_ends_with_the_others_still_running() {
    let h = Home::new();
    let slow = h.start(&["sleep", "30"]);
    let go = h.path().join("go");
    let quick = h.start_script(&format!("while [ ! -e '{}' ]; do sleep 0.05; done; echo '> quick one'", go.display()));

    let t0 = Instant::now();
    let none = h.run(&["--json", "await", &slow, &quick, "--timeout", "0.3s"], 124).json();
    assert!(t0.elapsed() >= Duration::from_millis(300), "returned after {:?}", t0.elapsed());
    assert_eq!((none["timed_out"].as_bool(), none["ended"].as_array().map(Vec::len)), (Some(true), Some(0)), "{none}");
    let running: Vec<&str> = none["running"].as_array().unwrap().iter().map(|v| v["token"].as_str().unwrap()).collect();
    assert_eq!(running, [slow.as_str(), quick.as_str()]);

    // The quick one ends (before or while the await blocks): the await returns with it, and
    // the slow one still running (a token given twice counts once).
    let waiting =
        h.cmd().args(["--json", "await", &slow, &quick, &slow]).stdout(std::process::Stdio::piped()).spawn().unwrap();
    std::fs::write(&go, "").unwrap();
    let out = waiting.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["timed_out"], false);
    assert_eq!(got["ended"].as_array().map(Vec::len), Some(1), "{got}");
    assert_eq!(
        (got["ended"][0]["token"].as_str(), got["ended"][0]["summary"].as_str()),
        (Some(quick.as_str()), Some("quick one"))
    );
    assert_eq!(got["running"].as_array().map(Vec::len), Some(1), "{got}");
    assert_eq!(
        (got["running"][0]["token"].as_str(), got["running"][0]["status"].as_str()),
        (Some(slow.as_str()), Some("running"))
    );

    // In text: the ended task's result, then how to await the rest.
    let text = h.run(&["await", &quick, &slow], 0).stdout;
    let again = text.lines().find(|l| l.starts_with("await them: agentctl ")).unwrap_or_else(|| panic!("{text}"));
    assert!(text.contains("quick one") && again.ends_with(&format!("await {slow}")), "{text}");
    h.run(&["halt", &slow, "--grace", "0.1s"], 0);
}
