//! Tasks in cgroups of their own: every process an agent starts, however it detaches or whoever
//! it becomes, ends with the task; limits stop runaway agents and the task says why.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::common::{Home, alive, read_pids, wait_until};

/// An agent that starts a child in a process group of its own, a double-forked daemon in a
/// session of its own that ignores SIGTERM, and a child that drops its privileges; their pids go
/// to `$PF` once all run.
const ESCAPEES: &str = r#"
python3 -c 'import os, sys, time; os.setpgid(0, 0); open(sys.argv[1], "w").write("x"); time.sleep(1000)' $PF.grouped & a=$!
setsid sh -c 'trap "" TERM; sh -c "trap \"\" TERM; while :; do sleep 1; done" & echo $! > "$0"' $PF.daemon &
setpriv --reuid=65534 --regid=65534 --clear-groups sleep 1000 & c=$!
until [ -s $PF.grouped ] && [ -s $PF.daemon ] && [ "$(cat /proc/$c/comm)" = sleep ]; do :; done
echo $a $(cat $PF.daemon) $c > $PF
echo started
while :; do sleep 1; done
"#;

fn start_escapees(h: &Home) -> (String, Vec<i64>) {
    let pf = h.path().join("pids");
    let token = h.start_script(&ESCAPEES.replace("$PF", pf.to_str().unwrap()));
    let pids = read_pids(&pf);
    assert_eq!(pids.len(), 3, "{pids:?}");
    (token, pids)
}

/// The task's cgroup directory, from its `status`.
pub fn cgroup_of(st: &Value) -> String {
    assert_eq!(st["containment"]["kind"], "cgroup", "{st}");
    st["containment"]["cgroup"]["path"].as_str().unwrap().to_owned()
}

#[test]
fn every_process_of_a_task_ends_with_its_killed_supervisor() {
    crate::needs_root("cgroups, and an agent dropping privileges");
    let h = Home::contained_by("cgroup");
    let (token, pids) = start_escapees(&h);
    let st = h.status(&token);
    let dir = cgroup_of(&st);
    // The agent (sh), its three escapees, the daemon's parent's loop and its sleeps.
    assert!(st["processes"].as_u64().unwrap() >= 4, "{st}");
    assert!(st["memory_bytes"].as_u64().unwrap() > 0, "{st}");
    h.kill_supervisor(&token);

    let st = h.status(&token);
    assert_eq!(st["status"], "lost", "{st}");
    let note = st["note"].as_str().unwrap();
    assert!(note.contains("(its cgroup)") && !note.contains("had left its cgroup"), "{note}");
    // None is left by the time that status returned.
    for pid in pids {
        assert!(!alive(pid), "process {pid} outlived its task ({note})");
    }
    assert!(!Path::new(&dir).exists(), "its cgroup {dir} was left behind");
}

#[test]
fn a_halt_and_a_deadline_end_every_process_through_the_cgroup() {
    crate::needs_root("cgroups, and an agent dropping privileges");
    let h = Home::contained_by("cgroup");
    let (token, pids) = start_escapees(&h);
    let dir = cgroup_of(&h.status(&token));
    let v = h.run(&["--json", "halt", &token, "--grace", "1s"], 0).json();
    assert_eq!(v["status"], "cancelled", "{v}");
    for pid in &pids {
        assert!(!alive(*pid), "process {pid} outlived the halt");
    }
    assert!(!Path::new(&dir).exists(), "its cgroup {dir} was left behind");

    let pf = h.path().join("pids2");
    let script = ESCAPEES.replace("$PF", pf.to_str().unwrap());
    let v = h.run(&["--json", "run", "--timeout", "3s", "--", "sh", "-c", &script], 1).json();
    assert_eq!(v["status"], "expired", "{v}");
    // Those deaf to SIGTERM get the grace (5 s) before SIGKILL; the end is recorded after.
    for pid in read_pids(&pf) {
        assert!(!alive(pid), "process {pid} outlived the task's deadline: {v}");
    }
}

#[test]
fn processes_an_agent_leaves_behind_are_ended_when_it_exits() {
    crate::needs_root("cgroups");
    let h = Home::contained_by("cgroup");
    let pf = h.path().join("pid");
    // A daemon in a session of its own, deaf to SIGTERM: SIGKILL after the grace.
    let script = format!(
        "setsid sh -c 'trap \"\" TERM; echo $$ > {pf}; while :; do sleep 1; done' & until [ -s {pf} ]; do :; done; echo bye",
        pf = pf.display()
    );
    let v = h.run(&["--json", "run", "--sync", "--", "sh", "-c", &script], 0).json();
    assert_eq!(v["status"], "completed", "{v}");
    let dir = cgroup_of(&h.status(v["token"].as_str().unwrap()));
    assert!(v["note"].as_str().unwrap().contains("process(es) the agent left running"), "{v}");
    // Killed after the grace, before the end was recorded.
    let daemon = read_pids(&pf)[0];
    assert!(!alive(daemon), "{v}");
    wait_until(Duration::from_secs(10), "its cgroup to be removed", || !Path::new(&dir).exists());
}

#[test]
fn limits_stop_a_runaway_agent_and_the_task_says_why() {
    crate::needs_root("cgroups");
    let h = Home::new();
    std::fs::create_dir_all(h.path()).unwrap();
    std::fs::write(
        h.path().join("agents.toml"),
        r#"
[agents.hog]
command = ["python3", "-c", "s = 'x' * (1 << 30); print('allocated 1G')"]
memory = "100M"

[agents.forker]
command = ["python3", "-c", "import os, sys, time\nfor i in range(40):\n    if os.fork() == 0:\n        time.sleep(30)\n        os._exit(0)\nprint('forked all')"]
pool = "small"

[pools.small]
pids = 10
"#,
    )
    .unwrap();
    let v = h.run(&["--json", "ask", "hog", "go", "--sync"], 1).json();
    assert_eq!(v["status"], "failed", "{v}");
    assert_eq!(v["signal"], 9, "{v}");
    let error = v["error"].as_str().unwrap();
    assert!(error.contains("memory limit (100M)") && error.contains("OOM killer"), "{error}");
    let log = std::fs::read_to_string(v["log_path"].as_str().unwrap()).unwrap();
    assert!(!log.contains("allocated 1G"), "{log}");

    // The pool's limit holds for its tasks; the forks past it fail.
    let v = h.run(&["--json", "ask", "forker", "go", "--sync"], 1).json();
    assert!(v["error"].as_str().unwrap().contains("pids limit (10)"), "{v}");
    let st = h.status(v["token"].as_str().unwrap());
    assert_eq!(st["containment"]["limits"]["pids"], 10, "{st}");
    assert!(h.all_ended());
}

#[test]
fn limits_that_cannot_be_enforced_keep_the_task_from_starting() {
    let h = Home::contained_by("process-group");
    std::fs::create_dir_all(h.path()).unwrap();
    std::fs::write(h.path().join("agents.toml"), "[agents.w]\ncommand = [\"true\"]\ncpus = 0.5\n").unwrap();
    let r = h.run(&["ask", "w", "go"], 2);
    assert!(
        r.stderr.contains("its limits (cpus 0.5) need a cgroup") && r.stderr.contains("AGENTCTL_CONTAINMENT"),
        "{}",
        r.stderr
    );
    // Without limits it runs, contained by its process group, and says so.
    let token = &h.start_argv(&["sleep", "30"]);
    let st = h.status(token);
    assert_eq!(st["containment"]["kind"], "process-group", "{st}");
    assert!(st["containment"]["why"].as_str().unwrap().contains("AGENTCTL_CONTAINMENT=process-group"), "{st}");
    assert_eq!(st["processes"], 1, "{st}");
    h.run(&["halt", token], 0);
}

#[test]
fn a_task_started_by_an_agent_outlives_its_parents_halt() {
    crate::needs_root("cgroups");
    let h = Home::contained_by("cgroup");
    let tf = h.path().join("token");
    let script = format!("agentctl --json run --async -- sleep 300 > {}; echo started; sleep 300", tf.display());
    let parent = h.start_script(&script);
    wait_until(Duration::from_secs(20), "the sub-task to start", || {
        std::fs::read_to_string(&tf).is_ok_and(|s| s.ends_with('\n'))
    });
    let sub: Value = serde_json::from_str(&std::fs::read_to_string(&tf).unwrap()).unwrap();
    let sub = sub["token"].as_str().unwrap();
    // Handed back `starting`: its cgroup is made as its agent starts.
    wait_until(Duration::from_secs(60), "the sub-task to run", || h.status(sub)["status"] == "running");
    let (parent_dir, sub_dir) = (cgroup_of(&h.status(&parent)), cgroup_of(&h.status(sub)));
    // Beside its parent's cgroup, not in it.
    assert_eq!(Path::new(&parent_dir).parent(), Path::new(&sub_dir).parent());
    h.run(&["halt", &parent], 0);
    assert_eq!(h.status(sub)["status"], "running");
    h.run(&["halt", sub], 0);
    assert!(!Path::new(&sub_dir).exists() && !Path::new(&parent_dir).exists());
}

#[test]
fn cgroups_an_agent_makes_inside_its_own_are_ended_and_removed_with_it() {
    crate::needs_root("cgroups");
    let h = Home::contained_by("cgroup");
    let (dirfile, pf) = (h.path().join("dir"), h.path().join("pid"));
    // It waits to be told its cgroup's directory, makes one inside and moves a child there.
    let script = format!(
        "until [ -s {d} ]; do sleep 0.05; done; sub=$(cat {d})/sub; mkdir $sub; \\
         sh -c 'trap \"\" TERM; while :; do sleep 1; done' & echo $! > $sub/cgroup.procs; echo $! > {p}; wait",
        d = dirfile.display(),
        p = pf.display()
    );
    let token = h.start_script(&script);
    let dir = cgroup_of(&h.status(&token));
    std::fs::write(&dirfile, &dir).unwrap();
    let child = read_pids(&pf)[0];
    assert!(std::fs::read_to_string(format!("{dir}/sub/cgroup.procs")).unwrap().contains(&child.to_string()));
    assert!(h.status(&token)["processes"].as_u64().unwrap() >= 2);
    let v = h.run(&["--json", "halt", &token, "--grace", "1s"], 0).json();
    assert_eq!(v["status"], "cancelled", "{v}");
    assert!(!alive(child), "a process in a cgroup inside the task's outlived the halt");
    assert!(!Path::new(&dir).exists(), "its cgroup {dir} was left behind");
}

#[test]
fn a_cgroup_named_in_a_tampered_lock_file_is_not_killed() {
    crate::needs_root("cgroups");
    let h = Home::contained_by("cgroup");
    let victim = h.start_script("echo running; sleep 300");
    let victim_dir = cgroup_of(&h.status(&victim));
    let pf = h.path().join("pid");
    let token = h.start_script(&format!("sleep 300 & echo $! > {}; wait", pf.display()));
    let child = read_pids(&pf)[0];
    // The task's lock file now names the other task's cgroup; then its supervisor dies.
    let lock = h.path().join("tasks").join(&token).join("lock");
    let text = std::fs::read_to_string(&lock).unwrap();
    let first = text.lines().next().unwrap();
    std::fs::write(&lock, format!("{first}\ncgroup {victim_dir}\n")).unwrap();
    h.kill_supervisor(&token);
    assert_eq!(h.status(&token)["status"], "lost");
    assert_eq!(h.status(&victim)["status"], "running", "another task's cgroup was killed");
    // Its own processes were found as without a cgroup: its session, its token.
    wait_until(Duration::from_secs(10), "the task's child to end", || !alive(child));
    h.run(&["halt", &victim], 0);
    assert!(!Path::new(&victim_dir).exists(), "{victim_dir} outlived its task");
}
