//! Tasks outlive their launcher: the shell exiting, a hang-up, the launcher being killed.

use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::common::{BIN, Home, fake_agent, wait_until};

#[test]
fn a_task_outlives_the_shell_that_launched_it() {
    let h = Home::new();
    let script = format!(
        "\"{BIN}\" --home \"{}\" --json run --async -- \"{}\" sleep 1 survived; exit 0",
        h.path().display(),
        fake_agent()
    );
    let out = std::process::Command::new("sh").arg("-c").arg(script).output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let token = v["token"].as_str().unwrap();
    let done = h.run(&["--json", "await", token, "--timeout", "30s"], 0).json();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["summary"], "survived");
}

#[test]
fn a_hangup_of_the_launching_terminal_does_not_stop_the_task() {
    let h = Home::new();
    // The launcher waits in the hybrid window, in its own process group like a terminal job.
    let mut launcher = h.cmd();
    launcher
        .args(["--json", "run", "--", &fake_agent(), "sleep", "2", "hung up on"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    // A terminal's job takes hangups by default, even when this test runs under nohup.
    // SAFETY: signal is async-signal-safe.
    unsafe {
        launcher.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = launcher.spawn().unwrap();
    let group = Pid::from_raw(child.id() as i32);
    wait_until(Duration::from_secs(10), "the task to start", || {
        std::fs::read_dir(h.path().join("tasks")).is_ok_and(|d| d.count() == 1)
    });
    let token = std::fs::read_dir(h.path().join("tasks")).unwrap().next().unwrap().unwrap().file_name();
    let token = token.to_str().unwrap().to_owned();
    wait_until(Duration::from_secs(10), "the task to run", || h.status(&token)["status"] == "running");
    killpg(group, Signal::SIGHUP).unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "the launcher should have died of SIGHUP");
    let done = h.run(&["--json", "await", &token, "--timeout", "30s"], 0).json();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["summary"], "hung up on");
}

#[test]
fn the_supervisor_is_detached_and_named() {
    let h = Home::new();
    let token = h.start(&["sleep", "30"]);
    let sup = h.record(&token)["started"]["supervisor_pid"].as_i64().unwrap();
    let proc = |what: &str| std::fs::read_link(format!("/proc/{sup}/{what}")).unwrap();
    // Its own session, stdio away from the launcher's terminal.
    let stat = std::fs::read_to_string(format!("/proc/{sup}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let sid: i64 = fields[3].parse().unwrap();
    assert_ne!(sid, nix::unistd::getsid(None).unwrap().as_raw() as i64, "the supervisor shares our session");
    assert_eq!(proc("fd/0"), std::path::Path::new("/dev/null"));
    assert_eq!(proc("fd/1"), std::path::Path::new("/dev/null"));
    assert_eq!(proc("cwd"), std::path::Path::new("/"));
    // Named, so that a supervisor adopting it (a task started inside a task) spares it, and
    // shown as what it is rather than as the launcher's command line.
    assert_eq!(std::fs::read_to_string(format!("/proc/{sup}/comm")).unwrap(), "agentctl-sv\n");
    let cmdline = std::fs::read(format!("/proc/{sup}/cmdline")).unwrap();
    let words: Vec<&[u8]> = cmdline.split(|&b| b == 0).filter(|w| !w.is_empty()).collect();
    assert_eq!(words, [&b"agentctl"[..], b"__supervise", token.as_bytes()]);
    h.run(&["halt", &token, "--grace", "1s"], 0);
}
