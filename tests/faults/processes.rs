//! Issue 5's faults 3 to 5 and 13: descendants that escape; agents that ignore SIGTERM or are
//! stopped; a grandchild holding the log open; no zombies in a long-running MCP server.

use std::time::{Duration, Instant};

use crate::common::{Home, alive, fake_agent, read_pids, wait_until};
use crate::raw_mcp::RawMcp;

#[test]
fn a_daemon_that_double_forked_into_its_own_session_is_ended_with_the_task() {
    let h = Home::new();
    let pidfile = h.path().join("daemon");
    let v = h.run(&["--json", "run", "--", &fake_agent(), "daemon", pidfile.to_str().unwrap()], 0).json();
    assert_eq!(v["status"], "completed");
    let daemon = read_pids(&pidfile)[0];
    // It ignores SIGTERM: SIGKILL comes after the 5 s grace period, and the end after that.
    assert!(!alive(daemon), "{v}");
}

#[test]
fn stubborn_and_stopped_agents_are_halted_within_grace_plus_a_second() {
    let h = Home::new();
    let pidfile = h.path().join("pid");
    let stubborn = h.start(&["stubborn", pidfile.to_str().unwrap()]);
    let agent = read_pids(&pidfile)[0];
    let t0 = Instant::now();
    let v = h.run(&["--json", "halt", &stubborn, "--grace", "1s"], 0).json();
    // SIGKILL comes only once the grace period is over (the upper bound is a hang guard).
    assert!(t0.elapsed() >= Duration::from_secs(1) && t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert_eq!((v["status"].as_str(), v["signal"].as_i64()), (Some("cancelled"), Some(9)));
    assert!(!alive(agent));

    let stopped = h.start(&["stopped"]);
    wait_until(Duration::from_secs(10), "the agent to stop itself", || {
        let pid = h.record(&stopped)["started"]["pid"].as_i64().unwrap();
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit(')').next().unwrap().trim_start().starts_with('T'))
    });
    // SIGCONT comes with SIGTERM: a stopped agent ends gracefully, long before SIGKILL is due.
    let t0 = Instant::now();
    let v = h.run(&["--json", "halt", &stopped, "--grace", "60s"], 0).json();
    // Signal 15 below shows it ended before SIGKILL was due; this bound is a hang guard.
    assert!(t0.elapsed() < Duration::from_secs(30), "a stopped agent took {:?}", t0.elapsed());
    assert_eq!((v["status"].as_str(), v["signal"].as_i64()), (Some("cancelled"), Some(15)), "{v}");
    assert_eq!(v["summary"], "partial before stopping");
}

#[test]
fn a_grandchild_holding_the_log_open_does_not_hold_up_the_end() {
    let h = Home::new();
    let pidfile = h.path().join("left");
    let t0 = Instant::now();
    let v = h.run(&["--json", "run", "--", &fake_agent(), "leave", pidfile.to_str().unwrap()], 0).json();
    // The grandchild never exits: waiting for it would hang; this bound is a hang guard.
    assert!(t0.elapsed() < Duration::from_secs(30), "took {:?}", t0.elapsed());
    assert_eq!(v["status"], "completed");
    assert_eq!(v["summary"], "done, leaving a child behind");
    assert!(v["note"].as_str().unwrap().contains("left running"), "{v}");
    let left = read_pids(&pidfile)[0];
    assert!(!alive(left), "{v}");
}

#[test]
fn the_note_on_processes_an_agent_left_is_true_when_the_task_ends() {
    for mode in [None, Some("process-group")] {
        let h = match mode {
            Some(m) => Home::contained_by(m),
            None => Home::new(),
        };
        let pf = h.path().join("left");
        // Two children deaf to SIGTERM, each once it ignores it (a `sleep` executed by a shell
        // that ignores TERM keeps ignoring it).
        let script = format!(
            "sh -c 'trap \"\" TERM; exec sleep 1000' & a=$!; sh -c 'trap \"\" TERM; exec sleep 1000' & b=$!; \
             until [ \"$(cat /proc/$a/comm)\" = sleep ] && [ \"$(cat /proc/$b/comm)\" = sleep ]; do :; done; \
             echo $a $b > {}; echo bye",
            pf.display()
        );
        let t0 = Instant::now();
        let v = h.run(&["--json", "run", "--sync", "--", "sh", "-c", &script], 0).json();
        // Read as the task ends: whatever it says of them holds now.
        let left: Vec<i64> = read_pids(&pf).into_iter().filter(|&p| alive(p)).collect();
        assert_eq!(v["status"], "completed", "{v}");
        let note = v["note"].as_str().unwrap_or("");
        assert!(
            left.is_empty() || !note.contains("ended"),
            "the note says {note:?}, and {left:?} still run ({mode:?})"
        );
        // They ignore SIGTERM: SIGKILL comes after the grace period (5 s), then the end.
        assert!(note.contains("ended 2 process(es) the agent left running"), "{v}");
        assert!(left.is_empty(), "{left:?} ({mode:?})");
        assert!(t0.elapsed() >= Duration::from_secs(5), "{:?}", t0.elapsed());
    }
}

#[test]
fn what_an_agent_left_writes_as_it_ends_is_no_part_of_its_answer() {
    let h = Home::new();
    let pf = h.path().join("left");
    let script = format!(
        "sh -c 'trap \"echo leftover noise; exit\" TERM; echo $$ > {}; while :; do sleep 0.05; done' & \
         until [ -s {} ]; do :; done; echo '> the answer'",
        pf.display(),
        pf.display()
    );
    let v = h.run(&["--json", "run", "--sync", "--", "sh", "-c", &script], 0).json();
    assert_eq!(v["summary"], "the answer", "{v}");
    // The shell, and its sleep if one ran then.
    let note = v["note"].as_str().unwrap();
    assert!(note.starts_with("ended ") && note.ends_with(" process(es) the agent left running"), "{v}");
    // It did write, before the end was recorded.
    let log = std::fs::read_to_string(v["log_path"].as_str().unwrap()).unwrap();
    assert!(log.ends_with("leftover noise\n"), "{log}");
    assert!(!alive(read_pids(&pf)[0]));
}

#[test]
fn a_long_running_mcp_server_leaves_no_zombies_after_200_tasks() {
    let h = Home::new();
    let mut mcp = RawMcp::start(&h, &["--allow-run"]);
    for _ in 0..200 {
        let r = mcp.call("run", serde_json::json!({"command": ["true"], "async": true}));
        assert!(r["structuredContent"]["token"].is_string(), "{r}");
    }
    wait_until(Duration::from_secs(60), "all 200 tasks to end", || h.all_ended());
    // The server's own children, thread by thread: no look at anyone else's processes.
    let me = mcp.server.id();
    let children: Vec<String> = std::fs::read_dir(format!("/proc/{me}/task"))
        .unwrap()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| c.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .collect();
    let zombies: Vec<_> = children
        .iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|stat| stat.rsplit(')').next().unwrap().split_whitespace().next() == Some("Z"))
        })
        .collect();
    assert!(zombies.is_empty(), "the MCP server has zombie children: {zombies:?}");
    let _ = mcp.server.kill();
    let _ = mcp.server.wait();
}
