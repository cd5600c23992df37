//! A thousand running tasks and five hundred waits at once: supervisors hold no inotify instance,
//! a server's waits share one (the machine's limits are left as they are).

use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

use crate::common::{Home, wait_until};
use crate::raw_mcp::RawMcp;
use crate::root::inotify_instances;

const TASKS: usize = 1000;
const WAITS: u64 = 500;

#[test]
fn a_thousand_running_tasks_and_five_hundred_waits_hold_one_inotify_instance() {
    let h = Home::new();
    // With pools in use: all of them in one pool that holds them all.
    std::fs::write(h.path().join("agents.toml"), "[pools.default]\nparallel = 2000\n").unwrap();
    let mut tokens = Vec::with_capacity(TASKS);
    for _ in 0..TASKS {
        let v = h.run(&["--json", "run", "--async", "--", "sleep", "600"], 0).json();
        tokens.push(v["token"].as_str().unwrap().to_owned());
    }
    let supervisors: Vec<i64> = tokens.iter().map(|t| h.supervisor_pid(t)).collect();
    assert_eq!(
        supervisors.iter().map(|&p| inotify_instances(p)).sum::<usize>(),
        0,
        "supervisors hold inotify instances"
    );

    let mut mcp = RawMcp::start(&h, &[]);
    for id in 0..WAITS {
        let args = json!({"session": format!("w{id}"), "timeout_secs": 30});
        let msg = json!({"jsonrpc": "2.0", "id": 1000 + id, "method": "tools/call", "params": {"name": "wait_for_event", "arguments": args}});
        mcp.send(&msg);
    }
    // Some waits may start after their event came: they take it at once. Answers come in any
    // order.
    for id in 0..WAITS {
        h.run(&["notify", "--session", &format!("w{id}"), &format!("for {id}")], 0);
    }
    let mut answered = 0;
    while answered < WAITS {
        let msg = mcp.receive().expect("the server answered");
        let Some(id) = msg["id"].as_u64().filter(|id| (1000..1000 + WAITS).contains(id)) else { continue };
        let e = &msg["result"]["structuredContent"];
        assert_eq!(e["text"], format!("for {}", id - 1000), "{msg}");
        answered += 1;
    }
    // None if the user's instances were all taken by other processes: it looks at the files then.
    assert!(inotify_instances(mcp.server.id() as i64) <= 1, "the server's waits share one instance");
    assert_eq!(mcp.close(), Some(0));

    // Every task still runs, supervised; then each supervisor is asked to stop its task.
    let running = h.run(&["--json", "list", "--status", "running"], 0).json();
    assert_eq!(running["count"], TASKS);
    for &sup in &supervisors {
        kill(Pid::from_raw(sup as i32), Signal::SIGTERM).unwrap();
    }
    wait_until(Duration::from_secs(120), "every task to be halted", || {
        h.run(&["--json", "list", "--status", "running", "--limit", "1"], 0).json()["count"] == 0
    });
    let cancelled = h.run(&["--json", "list", "--status", "cancelled"], 0).json();
    assert_eq!(cancelled["count"], TASKS);
}
