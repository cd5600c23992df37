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
    // Without a cgroup (see `containment` for a task with one).
    let h = Home::contained_by("process-group");
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
        set_recorded_pid(&h, &token, s.id());
        s
    });
    eprintln!("pid reuse {}", if forced { "forced through ns_last_pid" } else { "simulated in the record" });

    assert_eq!(h.status(&token)["status"], "lost");
    let r = h.run(&["halt", &token], 0);
    assert!(r.stdout.contains("had already ended (lost); nothing was stopped"), "{}", r.stdout);
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
    set_recorded_pid(&h, &token, other.id());

    let v = h.run(&["--json", "halt", &token, "--grace", "0.5s"], 0).json();
    assert_eq!(v["status"], "cancelled");
    assert!(!alive(agent));
    assert!(alive(other.id() as i64), "halt signalled the pid written in the record");
    let _ = other.kill();
    let _ = other.wait();
}

/// Start `script` (with `$PF` a file for pids) as a task, wait for the pids it writes, SIGKILL
/// its supervisor, and return the token, the pids and the status the next look reports.
fn kill_the_supervisor_of(h: &Home, script: &str) -> (String, Vec<i64>, serde_json::Value) {
    // Where any user may write (an agent may drop its privileges).
    let shared = tempfile::tempdir().unwrap();
    std::fs::set_permissions(shared.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let pf = shared.path().join("pids");
    let script = script.replace("$PF", pf.to_str().unwrap());
    let token = h.start_script(&script);
    let pids = read_pids(&pf);
    h.kill_supervisor(&token);
    let st = h.status(&token);
    (token, pids, st)
}

#[test]
fn processes_that_outlive_a_killed_supervisor_are_ended_by_the_next_look() {
    crate::needs_root("its agent drops privileges to another user");
    let h = Home::new();
    // Dropping privileges clears the parent-death signal: the agent would run on.
    let (_, pids, st) = kill_the_supervisor_of(
        &h,
        "setpriv --reuid=65534 --regid=65534 --clear-groups sh -c 'echo $$ > $PF; exec sleep 1000'",
    );
    assert_eq!(st["status"], "lost", "{st}");
    assert!(st["note"].as_str().unwrap().contains("ended 1 process"), "{st}");
    wait_until(Duration::from_secs(10), "the unprivileged agent to end", || !alive(pids[0]));

    // A child in a process group of its own, still in the task's session.
    let h = Home::new();
    let (_, pids, st) = kill_the_supervisor_of(
        &h,
        r#"python3 -c 'import os, sys, time; os.setpgid(0, 0); open(sys.argv[1], "w").write("%d\n" % os.getpid()); time.sleep(1000)' $PF & wait"#,
    );
    assert_eq!(st["status"], "lost", "{st}");
    wait_until(Duration::from_secs(10), "the regrouped child to end", || !alive(pids[0]));
}

#[test]
fn an_agent_that_kills_its_supervisor_at_once_leaves_nothing_running_and_the_note_tells_why() {
    let h = Home::new();
    let pf = h.path().join("pids");
    // Its child does not die with the supervisor (the parent-death signal is not inherited).
    let script = format!("sleep 1000 & echo $! > '{}'; kill -9 $PPID; wait", pf.display());
    let r = h.run(&["--json", "run", "--", "sh", "-c", &script], 1);
    let v = r.json();
    assert_eq!(v["status"], "lost", "{v}");
    let token = v["token"].as_str().unwrap().to_owned();
    let child = read_pids(&pf)[0];
    let st = h.status(&token);
    assert_eq!(st["status"], "lost");
    let note = st["note"].as_str().unwrap();
    assert!(!note.contains("before it started the agent"), "{note}");
    wait_until(Duration::from_secs(10), "the child to be ended", || {
        h.status(&token);
        !alive(child)
    });

    // As it came: the supervisor killed first, `sleep` started after.
    let v = h.run(&["--json", "run", "--", "sh", "-c", "kill -9 $PPID; sleep 30"], 1).json();
    assert_eq!(v["status"], "lost", "{v}");
    let note = v["note"].as_str().unwrap();
    assert!(note.contains("the supervisor died") && !note.contains("before it started the agent"), "{note}");
}

#[test]
fn after_a_supervisor_died_only_processes_proven_the_tasks_are_ended() {
    // Without a cgroup, which would say exactly which processes are the task's.
    let h = Home::contained_by("process-group");
    // Both children stay in the task's session; one runs with an empty environment, so it
    // cannot be told from a process of a session that reused the id.
    let (_, pids, st) =
        // (Its pid is written once it runs `sleep`: before the exec it is still the shell, which
        // has the token.)
        kill_the_supervisor_of(
            &h,
            "sleep 1000 & a=$!; env -i /bin/sleep 1000 & b=$!; \
             until [ \"$(cat /proc/$b/comm)\" = sleep ]; do :; done; echo $a $b > $PF; wait",
        );
    let (with_token, without) = (pids[0], pids[1]);
    assert_eq!(st["status"], "lost", "{st}");
    let note = st["note"].as_str().unwrap();
    assert!(note.contains("without the task's token") && note.contains(&without.to_string()), "{note}");
    wait_until(Duration::from_secs(10), "the task's child to end", || !alive(with_token));
    assert!(alive(without), "a process not proven the task's was ended");
    sigkill(without);
}

#[test]
fn a_supervisor_from_an_earlier_boot_ends_nothing() {
    let h = Home::new();
    let pf = h.path().join("pids");
    let script = format!("sleep 1000 & echo $! > '{}'; wait", pf.display());
    let token = h.start_script(&script);
    let child = read_pids(&pf)[0];
    h.kill_supervisor(&token);
    // As if the machine had restarted since: the lock names another boot.
    let lock = h.path().join("tasks").join(&token).join("lock");
    let text = std::fs::read_to_string(&lock).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    let mut fields: Vec<&str> = first.split(' ').collect();
    fields[3] = "0123456789abcdef0123456789abcdef";
    std::fs::write(&lock, format!("{}\n{rest}", fields.join(" "))).unwrap();
    let st = h.status(&token);
    assert_eq!(st["status"], "lost", "{st}");
    assert!(st["note"].as_str().unwrap().contains("before the machine restarted"), "{st}");
    assert!(alive(child), "a process was ended on the word of another boot");
    sigkill(child);
    // Its cgroup, if it had one, is left as the other boot's: this test removes it.
    if let Some(dir) = rest.lines().find_map(|l| l.strip_prefix("cgroup ")) {
        wait_until(Duration::from_secs(10), "the cgroup to empty", || std::fs::remove_dir(dir).is_ok());
    }
}

/// Write `pid` into the task's record as its agent's pid, as a damaged or stale record would.
fn set_recorded_pid(h: &Home, token: &str, pid: u32) {
    let changed = h
        .db()
        .execute(
            "UPDATE tasks SET record = json_set(record, '$.started.pid', ?2) WHERE token = ?1",
            rusqlite::params![token, pid],
        )
        .unwrap();
    assert_eq!(changed, 1);
}
