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
    // It ignores SIGTERM: SIGKILL comes after the 5 s grace period.
    wait_until(Duration::from_secs(15), "the escaped daemon to be ended", || !alive(daemon));
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
    wait_until(Duration::from_secs(10), "the leftover to be ended", || !alive(left));
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
