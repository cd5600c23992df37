//! Processes that move out of their task's cgroup, which `cgroup.kill` does not reach: found
//! below the supervisor or in the task's session and ended with the task. Those it cannot end
//! (another user's) and those the kernel holds are named in the note and hold up nothing.

use std::fs;
use std::path::Path;
use std::time::Duration;

use crate::cgroups::{Delegated, Elsewhere, Freezer};
use crate::common::{Home, alive, read_pids, wait_until};
use crate::containment::cgroup_of;

/// An agent that moves two children out of its cgroup into the cgroup `$ELSEWHERE`: one in a
/// process group of its own, one in a session of its own, both deaf to SIGTERM. Their pids go
/// to `$PF`; then it does `$THEN`.
const MOVERS: &str = r#"
python3 -c 'import os, signal, sys, time; os.setpgid(0, 0); signal.signal(signal.SIGTERM, signal.SIG_IGN); open(sys.argv[1], "w").write("x"); time.sleep(1000)' $PF.grouped & a=$!
setsid sh -c 'trap "" TERM; exec sleep 1000' & b=$!
until [ -s $PF.grouped ] && [ "$(cat /proc/$b/comm)" = sleep ]; do :; done
echo $a > $ELSEWHERE/cgroup.procs && echo $b > $ELSEWHERE/cgroup.procs || exit 1
echo $a $b > $PF
echo started
$THEN
"#;

/// What the agent of `MOVERS` does once they are moved: run until halted, exit and leave them,
/// or run and stop its supervisor over and over (so that a halt has to take over).
const RUN_ON: &str = "while :; do sleep 1; done";
const EXIT: &str = "exit 0";
/// It waits for `$PF.go`, made once its start is recorded (a supervisor stopped before that
/// could not say it runs).
const STOP_SUPERVISOR: &str =
    "trap '' TERM; until [ -e $PF.go ]; do sleep 0.02; done; while :; do kill -STOP $PPID; sleep 0.01; done";

/// The agent of `MOVERS`, moving into `elsewhere`, its pids in `pf`, then doing `then`.
fn movers(elsewhere: &Elsewhere, pf: &Path, then: &str) -> String {
    MOVERS
        .replace("$ELSEWHERE", elsewhere.0.to_str().unwrap())
        .replace("$PF", pf.to_str().unwrap())
        .replace("$THEN", then)
}

#[test]
fn processes_moved_out_of_the_tasks_cgroup_end_with_its_halt_and_with_its_agent() {
    crate::needs_root("cgroups to move processes between");
    // The process group's containment ends them too: the comparison.
    for mode in ["cgroup", "process-group"] {
        let h = Home::contained_by(mode);
        let elsewhere = Elsewhere::new(&h);
        let pf = h.path().join("halted");
        let token = h.start_script(&movers(&elsewhere, &pf, RUN_ON));
        let pids = read_pids(&pf);
        for pid in &pids {
            assert!(elsewhere.procs().lines().any(|p| p == pid.to_string()), "{pid} was not moved ({mode})");
        }
        let v = h.run(&["--json", "halt", &token, "--grace", "1s"], 0).json();
        assert_eq!(v["status"], "cancelled", "{v}");
        let note = v["note"].as_str().unwrap_or("");
        for pid in &pids {
            assert!(!alive(*pid), "process {pid}, moved out of the task's cgroup, outlived the halt ({mode}): {v}");
        }
        if mode == "cgroup" {
            assert!(note.contains("2 process(es) had left the task's cgroup"), "{v}");
        }

        // The agent exits and leaves them: they end before the task's end is recorded.
        let pf = h.path().join("left");
        let v = h.run(&["--json", "run", "--sync", "--", "sh", "-c", &movers(&elsewhere, &pf, EXIT)], 0).json();
        assert_eq!(v["status"], "completed", "{v}");
        let note = v["note"].as_str().unwrap_or("");
        for pid in read_pids(&pf) {
            assert!(!alive(pid), "process {pid}, moved out of the task's cgroup, outlived its task ({mode}): {v}");
        }
        assert!(note.contains("ended 2 process(es) the agent left running"), "{v}");
        if mode == "cgroup" {
            assert!(note.contains("2 process(es) had left the task's cgroup"), "{v}");
        }
        assert!(elsewhere.procs().is_empty(), "{}", elsewhere.procs());
    }
}

#[test]
fn processes_moved_out_of_the_tasks_cgroup_end_with_a_halt_that_takes_over_and_a_lost_task() {
    crate::needs_root("cgroups to move processes between");
    let h = Home::contained_by("cgroup");
    let elsewhere = Elsewhere::new(&h);
    // Its supervisor is stopped over and over: the halt ends the task itself.
    let pf = h.path().join("taken");
    let token = h.start_script(&movers(&elsewhere, &pf, STOP_SUPERVISOR));
    let pids = read_pids(&pf);
    fs::write(pf.with_extension("go"), "").unwrap();
    let v = h.run(&["--json", "halt", &token, "--grace", "1s"], 0).json();
    assert_eq!(v["status"], "cancelled", "{v}");
    for pid in &pids {
        assert!(!alive(*pid), "process {pid}, moved out of the task's cgroup, outlived the halt: {v}");
    }

    // Its supervisor is killed: the one still in its session (and carrying its token) is ended;
    // the one that left its session too cannot be traced, and the note says so.
    let pf = h.path().join("lost");
    let token = h.start_script(&movers(&elsewhere, &pf, RUN_ON));
    let pids = read_pids(&pf);
    h.kill_supervisor(&token);
    let st = h.status(&token);
    assert_eq!(st["status"], "lost", "{st}");
    let note = st["note"].as_str().unwrap();
    assert!(!alive(pids[0]), "process {}, moved out of the task's cgroup, outlived its task: {note}", pids[0]);
    assert!(note.contains("(its cgroup); ended 1 process(es) that had left its cgroup"), "{note}");
    assert!(note.contains("could not be traced"), "{note}");
}

/// Write `toml` as the agents file of the home at `home`.
fn agents(home: &Path, toml: &str) {
    fs::create_dir_all(home).unwrap();
    fs::write(home.join("agents.toml"), toml).unwrap();
}

/// A template whose runs do `script`, then exit 75, which counts as rate-limited: the next run
/// comes after an hour, the deadline (`timeout`) before that.
fn retried(script: &str, timeout: &str) -> String {
    format!(
        "[agents.limited]\ncommand = [\"sh\", \"-c\", '''{script}; exit 75''']\nretry_on = {{ exit = [75] }}\n\
         backoff = \"1h\"\ntimeout = \"{timeout}\"\n"
    )
}

#[test]
fn a_lost_tasks_note_counts_its_dying_members_once_and_says_what_could_not_be_traced() {
    crate::needs_root("cgroups to move processes between, and the v1 freezer");
    let h = Home::contained_by("cgroup");
    let elsewhere = Elsewhere::new(&h);
    // A child that leaves both its cgroup and its session: nothing finds it once its
    // supervisor is dead, and the note says so.
    let pf = h.path().join("gone");
    let script = format!(
        "setsid sh -c 'echo $$ > {e}/cgroup.procs && exec sleep 1000' & b=$!; \
         until [ \"$(cat /proc/$b/comm)\" = sleep ]; do :; done; echo $b > {pf}; echo started; {RUN_ON}",
        e = elsewhere.0.display(),
        pf = pf.display()
    );
    let token = h.start_script(&script);
    let gone = read_pids(&pf)[0];
    h.kill_supervisor(&token);
    let st = h.status(&token);
    assert_eq!(st["status"], "lost", "{st}");
    let note = st["note"].as_str().unwrap();
    assert!(note.contains("(its cgroup)") && !note.contains("had left its cgroup"), "{note}");
    assert!(note.contains("processes that left both its cgroup and its session could not be traced"), "{note}");
    assert!(alive(gone), "the premise: nothing finds it");

    // A member of its cgroup that the kernel holds as it dies of `cgroup.kill` is still in it:
    // one still dying, not one that had left the cgroup (and was ended twice).
    let freezer = Freezer::new(&h);
    let pf = h.path().join("held");
    let token = h.start_script(&format!("sleep 1000 & echo $! > {}; echo started; {RUN_ON}", pf.display()));
    freezer.freeze(read_pids(&pf)[0]);
    let dir = cgroup_of(&h.status(&token));
    h.kill_supervisor(&token);
    let st = h.status(&token);
    assert_eq!(st["status"], "lost", "{st}");
    let note = st["note"].as_str().unwrap();
    assert!(note.contains("; 1 process(es) were still dying when agentctl stopped waiting"), "{note}");
    assert!(!note.contains("had left its cgroup"), "{note}");
    freezer.thaw();
    wait_until(Duration::from_secs(10), "the cgroup left for it to empty", || fs::remove_dir(&dir).is_ok());
}

#[test]
fn a_process_the_kernel_holds_keeps_no_retried_task_past_its_deadline() {
    crate::needs_root("cgroups, and the v1 freezer");
    let h = Home::contained_by("cgroup");
    let freezer = Freezer::new(&h);
    let (pf, go) = (h.path().join("pid"), h.path().join("go"));
    // Its first run leaves a child that the kernel holds (frozen, then SIGKILLed), and is
    // rate-limited: the next run would come in an hour, the deadline in a few seconds.
    let script = format!("sleep 1000 & echo $! > {}; until [ -e {} ]; do sleep 0.05; done", pf.display(), go.display());
    agents(h.path(), &retried(&script, "6s"));
    let token = h.run(&["--json", "ask", "limited", "go", "--async"], 0).json()["token"].as_str().unwrap().to_owned();
    freezer.freeze(read_pids(&pf)[0]);
    fs::write(&go, "").unwrap();
    // SIGKILL after the grace (5 s), given up on 5 s later; then the deadline, and the same
    // wait before the end is recorded. A hang guard: before, it waited on for ever.
    wait_until(Duration::from_secs(90), "the task to expire", || h.status(&token)["status"] == "expired");
    let st = h.status(&token);
    let note = st["note"].as_str().unwrap();
    assert!(note.contains("run 1 was rate-limited") && note.contains("the task's deadline passed"), "{note}");
    assert!(note.contains("(blocked in the kernel)"), "{note}");
    let dir = cgroup_of(&st);
    freezer.thaw();
    wait_until(Duration::from_secs(10), "its cgroup to be removed", || !Path::new(&dir).exists());
}

#[test]
fn another_users_processes_a_task_left_are_named_and_hold_up_nothing() {
    crate::needs_root("a user of its own, a cgroup delegated to it, and a setuid program");
    // The agent exits and leaves it: no signal of the supervisor reaches it, and nothing waits
    // for it (no wait would see it go). Contained by its process group, it is as much the
    // task's, and as far out of reach.
    for mode in ["cgroup", "process-group"] {
        let d = Delegated::new(mode);
        let pf = d.path("left");
        let script = format!("{}; echo done", d.another_users_child(&pf));
        let v = d.run(&["--json", "run", "--sync", "--", "sh", "-c", &script], 0).json();
        let stray = read_pids(&pf)[0];
        assert_eq!(v["status"], "completed", "{v}");
        let note = v["note"].as_str().unwrap_or("");
        assert!(!note.contains("blocked in the kernel") && !note.contains("ended 1 process(es) the agent"), "{note}");
        d.wait_idle();
        assert!(note.contains(&format!("1 could not be ended (another user's: pids [{stray}])")), "{mode}: {note}");
        assert!(alive(stray), "the premise: the supervisor cannot end it");
    }

    // A rate-limited run leaves it: the deadline comes during the back-off all the same.
    let d = Delegated::new("cgroup");
    let pf = d.path("retried");
    agents(&d.path("home"), &retried(&d.another_users_child(&pf), "3s"));
    std::os::unix::fs::chown(d.path("home/agents.toml"), Some(d.uid), Some(d.uid)).unwrap();
    let token = d.run(&["--json", "ask", "limited", "go", "--async"], 0).json()["token"].as_str().unwrap().to_owned();
    let stray = read_pids(&pf)[0];
    // A hang guard: before, it waited on for ever.
    wait_until(Duration::from_secs(60), "the task to expire", || d.status(&token)["status"] == "expired");
    let note = d.status(&token)["note"].as_str().unwrap_or("").to_owned();
    assert!(note.contains("run 1 was rate-limited") && note.contains("the task's deadline passed"), "{note}");
    assert!(note.contains(&format!("could not be ended (another user's: pids [{stray}])")), "{note}");
    assert!(!note.contains("blocked in the kernel"), "{note}");
    d.wait_idle();
}
