//! 6. The launching terminal hanging up, the MCP server's whole process group killed, and a supervisor
//!    slow to save its task.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use crate::common::{BIN, Home, copy_program, fake_agent, wait_until};
use crate::raw_mcp::RawMcp;

fn only_token(h: &Home) -> Option<String> {
    let mut dir = std::fs::read_dir(h.path().join("tasks")).ok()?;
    Some(dir.next()?.ok()?.file_name().to_str()?.to_owned())
}

#[test]
fn a_pty_hangup_of_the_launching_terminal_does_not_stop_the_task() {
    let h = Home::new();
    let inner = format!(
        "'{BIN}' --home '{}' run --wait 60s -- '{}' sleep 2 'survived the hangup'",
        h.path().display(),
        fake_agent()
    );
    // `script` gives the launcher a real terminal; killing `script` closes the pty's master
    // side, and the kernel hangs up the terminal's session.
    let mut term = Command::new("script")
        .args(["-qfec", &inner, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("the `script` command (util-linux) is needed for this test");
    wait_until(Duration::from_secs(20), "the task to run", || {
        only_token(&h).is_some_and(|t| h.status(&t)["status"] == "running")
    });
    let token = only_token(&h).unwrap();
    kill(Pid::from_raw(term.id() as i32), Signal::SIGKILL).unwrap();
    term.wait().unwrap();
    let v = h.run(&["--json", "await", &token, "--timeout", "30s"], 0).json();
    assert_eq!(v["status"], "completed");
    assert_eq!(v["summary"], "survived the hangup");
}

#[test]
fn killing_the_mcp_servers_whole_process_group_leaves_its_tasks_running() {
    let h = Home::new();
    let mut mcp = RawMcp::start(&h, &["--allow-run"]);
    let args = serde_json::json!({"command": [fake_agent(), "sleep", "2", "outlived its server"], "async": true});
    let token = mcp.call("run", args)["structuredContent"]["token"].as_str().unwrap().to_owned();
    let server = &mut mcp.server;

    killpg(Pid::from_raw(server.id() as i32), Signal::SIGKILL).unwrap();
    server.wait().unwrap();
    let v = h.run(&["--json", "await", &token, "--timeout", "30s"], 0).json();
    assert_eq!(v["status"], "completed");
    assert_eq!(v["summary"], "outlived its server");
}

#[test]
fn a_worker_finds_the_agentctl_its_server_was_started_from_also_once_rebuilt() {
    let h = Home::under("home");
    // The server started by its path (as an MCP client's config does), PATH without agentctl.
    let bin = h.path().parent().unwrap().join("build/agentctl");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    copy_program(BIN, &bin);
    let mut cmd = h.cmd_of(&bin, h.path());
    cmd.env("PATH", "/usr/bin:/bin");
    let mut mcp = RawMcp::spawn_cmd(cmd, &["--allow-run"]);
    let init = serde_json::json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "faults", "version": "0"}});
    mcp.request("initialize", init);
    mcp.send(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let found = |mcp: &mut RawMcp| {
        let script = "command -v agentctl && agentctl --version && echo '> found'";
        let r = mcp.call("run", serde_json::json!({"command": ["sh", "-c", script], "wait_secs": 30}));
        let log = std::fs::read_to_string(
            h.path()
                .join("subagents/run/data/history")
                .join(r["structuredContent"]["token"].as_str().unwrap().to_owned() + ".log"),
        )
        .unwrap();
        (r["structuredContent"]["status"].as_str().unwrap_or_default().to_owned(), log)
    };
    let (status, log) = found(&mut mcp);
    assert_eq!(status, "completed", "{log}");
    assert!(log.contains(&format!("{}/bin/", h.path().display())) && log.contains("agentctl "), "{log}");
    // Rebuilt under the running server: the binary it runs is gone from that path, a new one
    // is there; its workers find that one.
    let next = bin.with_file_name("agentctl.new");
    copy_program(BIN, &next);
    std::fs::rename(&next, &bin).unwrap();
    let (status, log) = found(&mut mcp);
    assert_eq!(status, "completed", "{log}");
    assert!(log.contains("> found"), "{log}");
}

#[test]
fn a_launcher_whose_supervisor_is_slow_to_save_the_task_hands_back_a_token_the_store_knows() {
    let h = Home::new();
    h.init();
    // Another writer holds the store past the 5 s a launcher gives a saved task's start report:
    // the supervisor cannot save the task meanwhile (the fault lasts 7 s; nothing is waited for).
    let db = h.db();
    db.execute_batch("BEGIN IMMEDIATE").unwrap();
    let launcher = h.cmd().args(["--json", "run", "--async", "--", "true"]).stdout(Stdio::piped()).spawn().unwrap();
    std::thread::sleep(Duration::from_secs(7));
    db.execute_batch("COMMIT").unwrap();
    let out = launcher.wait_with_output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert!(out.status.success(), "{v} {:?}", out.status);
    let token = v["token"].as_str().unwrap();
    let status = h.run(&["--json", "await", token, "--timeout", "60s"], 0).json();
    assert_eq!(status["status"], "completed", "{status}");
}
