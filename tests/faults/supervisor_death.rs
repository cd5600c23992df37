//! 1. A supervisor killed with SIGKILL; 2. pid reuse never leads to a stray signal.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::common::{Home, alive, read_pids, wait_until};

fn sigkill(pid: i64) {
    let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
}

#[test]
fn a_killed_supervisor_means_lost_at_once_and_no_silent_orphans() {
    let h = Home::new();
    let pidfile = h.path().join("pids");
    let token = h.start(&["family", pidfile.to_str().unwrap()]);
    let pids = read_pids(&pidfile);
    let (agent, child, escaped) = (pids[0], pids[1], pids[2]);
    let sup = h.record(&token)["started"]["supervisor_pid"].as_i64().unwrap();
    let fds = || std::fs::read_dir(format!("/proc/{sup}/fd")).map(|d| d.count()).unwrap_or(0);
    let idle = fds();
    let waiter = h.cmd().args(["--json", "await", &token, "--timeout", "60s"]).stdout(Stdio::piped()).spawn().unwrap();
    wait_until(Duration::from_secs(10), "the waiter to connect", || fds() > idle);

    sigkill(sup);
    let t0 = Instant::now();
    let out = waiter.wait_with_output().unwrap();
    let woke = t0.elapsed();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "lost", "{v}");
    // It asked for 60 s; a hang guard well below that.
    assert!(woke < Duration::from_secs(20), "the blocked await took {woke:?}");
    assert_eq!(h.status(&token)["status"], "lost");
    let listed = h.run(&["--json", "list"], 0).json();
    assert_eq!(listed["tasks"][0]["status"], "lost");

    // The agent died with its supervisor; what was left of its group was ended; a process that
    // left the group is reported, not silently forgotten.
    wait_until(Duration::from_secs(5), "the agent and its group to end", || !alive(agent) && !alive(child));
    let note = v["note"].as_str().unwrap();
    assert!(note.contains("supervisor died") && note.contains("could not be traced"), "{note}");
    sigkill(escaped);
}

/// A process in a process group of its own (the way a pid reused as a group id would look).
fn stranger() -> std::process::Child {
    Command::new("sleep").arg("1000").process_group(0).spawn().unwrap()
}

#[test]
fn a_reused_pid_is_never_signalled_by_halt_or_the_lost_path() {
    let h = Home::new();
    let pidfile = h.path().join("pid");
    let token = h.start(&["stubborn", pidfile.to_str().unwrap()]);
    let agent = read_pids(&pidfile)[0];
    let sup = h.record(&token)["started"]["supervisor_pid"].as_i64().unwrap();
    sigkill(sup);
    wait_until(Duration::from_secs(5), "the agent to die with its supervisor", || !alive(agent));

    // Force the agent's pid onto a new, unrelated process where the kernel lets us (the
    // supervisor's record still names that pid); otherwise point the record at a stranger.
    let mut other = None;
    for _ in 0..20 {
        if std::fs::write("/proc/sys/kernel/ns_last_pid", (agent - 1).to_string()).is_err() {
            break;
        }
        let s = stranger();
        if s.id() as i64 == agent {
            other = Some(s);
            break;
        }
        let mut s = s;
        let _ = s.kill();
        let _ = s.wait();
    }
    let forced = other.is_some();
    let mut other = other.unwrap_or_else(|| {
        let s = stranger();
        let path = h.path().join("tasks").join(&token).join("record.json");
        let mut rec: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        rec["started"]["pid"] = (s.id() as i64).into();
        std::fs::write(&path, serde_json::to_vec(&rec).unwrap()).unwrap();
        s
    });
    eprintln!("pid reuse {}", if forced { "forced through ns_last_pid" } else { "simulated in the record" });

    assert_eq!(h.status(&token)["status"], "lost");
    let r = h.run(&["halt", &token], 2);
    assert!(r.stderr.contains("already finished (lost)"), "{}", r.stderr);
    assert!(alive(other.id() as i64), "a process that merely reused the task's pid was signalled");
    let _ = other.kill();
    let _ = other.wait();
}

#[test]
fn halt_of_a_live_task_ignores_the_pid_in_its_record() {
    let h = Home::new();
    let pidfile = h.path().join("pid");
    let token = h.start(&["stubborn", pidfile.to_str().unwrap()]);
    let agent = read_pids(&pidfile)[0];
    let mut other = stranger();
    let path = h.path().join("tasks").join(&token).join("record.json");
    let mut rec: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    rec["started"]["pid"] = (other.id() as i64).into();
    std::fs::write(&path, serde_json::to_vec(&rec).unwrap()).unwrap();

    let v = h.run(&["--json", "halt", &token, "--grace", "0.5s"], 0).json();
    assert_eq!(v["status"], "cancelled");
    assert!(!alive(agent));
    assert!(alive(other.id() as i64), "halt signalled the pid written in the record");
    let _ = other.kill();
    let _ = other.wait();
}
