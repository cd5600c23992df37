//! The home on disk: permissions, long paths, damaged records, deadlines.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{Home, fake_agent};

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, out);
        }
        out.push(p);
    }
}

#[test]
fn the_home_is_private_dirs_0700_files_0600() {
    let h = Home::under("state/agentctl");
    let v = h.run(&["--json", "ask", "reviewer", "perms"], 0).json();
    assert_eq!(v["status"], "completed");
    assert_eq!(mode(h.path()), 0o700);
    let mut all = Vec::new();
    walk(h.path(), &mut all);
    assert!(all.len() >= 8, "{all:?}");
    for p in all {
        let m = mode(&p);
        if p.is_dir() {
            assert_eq!(m, 0o700, "{} is {m:o}", p.display());
        } else {
            assert_eq!(m, 0o600, "{} is {m:o}", p.display());
        }
    }
}

#[test]
fn a_long_home_path_still_gets_a_working_control_socket() {
    let h = Home::under(&format!("{}/{}", "x".repeat(90), "y".repeat(60)));
    assert!(h.path().join("tasks/abcdef/ctl.sock").as_os_str().len() > 108);
    let token = h.start(&["sleep", "30"]);
    let w = h.run(&["--json", "await", &token, "--timeout", "0.2s"], 124).json();
    assert_eq!(w["status"], "running");
    let halted = h.run(&["--json", "halt", &token], 0).json();
    assert_eq!(halted["status"], "cancelled");
}

#[test]
fn a_damaged_record_does_not_hide_the_other_tasks() {
    let h = Home::new();
    let good = h.run(&["--json", "run", "--", &fake_agent(), "sleep", "0"], 0).json();
    let bad = h.run(&["--json", "run", "--", &fake_agent(), "sleep", "0"], 0).json();
    let bad_token = bad["token"].as_str().unwrap();
    h.db().execute("UPDATE tasks SET record = '{ torn' WHERE token = ?1", [bad_token]).unwrap();
    let r = h.run(&["--json", "list"], 0);
    assert_eq!(r.json()["count"], 1);
    assert_eq!(r.json()["tasks"][0]["token"], good["token"]);
    assert!(r.stderr.contains(bad_token), "{}", r.stderr);
    let r = h.run(&["status", bad_token], 70);
    assert!(r.stderr.contains("damaged"), "{}", r.stderr);
}

#[test]
fn a_task_past_its_deadline_is_expired() {
    let h = Home::new();
    let t0 = Instant::now();
    let v = h.run(&["--json", "run", "--sync", "--timeout", "1s", "--", &fake_agent(), "sleep", "30"], 1).json();
    assert!(t0.elapsed() >= Duration::from_secs(1));
    assert!(t0.elapsed() < Duration::from_secs(20), "took {:?}", t0.elapsed());
    assert_eq!(v["status"], "expired");
    assert_eq!(v["note"], "the task's deadline passed");
    assert_eq!(v["summary"], "working for 30 s");
}

#[test]
fn prune_removes_finished_tasks_only_as_asked_and_never_a_running_one() {
    let h = Home::new();
    let fake = fake_agent();
    let mut finished = Vec::new();
    for i in 0..3 {
        let v = h.run(&["--json", "run", "--", &fake, "sleep", "0", &format!("n{i}")], 0).json();
        finished.push((v["token"].as_str().unwrap().to_owned(), v["log_path"].as_str().unwrap().to_owned()));
    }
    let running = h.start(&["sleep", "30"]);

    let r = h.run(&["prune"], 2);
    assert!(r.stderr.contains("--older-than") && r.stderr.contains("--keep"), "{}", r.stderr);
    let dry = h.run(&["--json", "prune", "--keep", "1", "--dry-run"], 0).json();
    assert_eq!((dry["count"].as_u64(), dry["dry_run"].as_bool()), (Some(2), Some(true)));
    assert_eq!(h.run(&["--json", "list"], 0).json()["count"], 4, "a dry run removed something");

    assert_eq!(h.run(&["--json", "prune", "--older-than", "1h"], 0).json()["count"], 0);
    // A lead took the first two tasks' events; the third's is still waiting.
    for (token, _) in &finished[..2] {
        assert_eq!(h.run(&["--json", "wait", "--timeout", "10s"], 0).json()["token"], token.as_str());
    }
    let pruned = h.run(&["--json", "prune", "--keep", "1"], 0).json();
    assert_eq!(pruned["events_removed"], 2, "{pruned}");
    let events = h.run(&["--json", "events"], 0).json();
    let left: Vec<&str> = events["events"].as_array().unwrap().iter().map(|e| e["token"].as_str().unwrap()).collect();
    assert_eq!(left, [finished[2].0.as_str()], "only the event no one took stays");
    let removed: Vec<&str> =
        pruned["removed"].as_array().unwrap().iter().map(|t| t["token"].as_str().unwrap()).collect();
    assert_eq!(removed.len(), 2);
    assert!(!removed.contains(&finished[2].0.as_str()), "--keep 1 must spare the newest");
    for (token, log) in &finished[..2] {
        assert!(!Path::new(log).exists(), "{token}'s log is still there");
        assert!(!h.path().join("tasks").join(token).exists());
        h.run(&["status", token], 2);
    }
    let everything = h.run(&["--json", "prune", "--older-than", "0s"], 0).json();
    assert_eq!(everything["count"], 1);
    assert_eq!(everything["events_removed"], 1, "a removed task's events go with it, taken or not");
    assert_eq!(h.run(&["--json", "events"], 0).json()["count"], 0);
    assert_eq!(h.run(&["--json", "wait", "--timeout", "0.2s"], 124).json()["type"], "timeout");
    let left = h.run(&["--json", "list"], 0).json();
    assert_eq!(left["count"], 1);
    assert_eq!(left["tasks"][0]["token"], running.as_str());
    assert_eq!(left["tasks"][0]["status"], "running");
    h.run(&["halt", &running], 0);
}

#[test]
fn a_home_that_cannot_be_a_directory_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "keep me").unwrap();
    for (home, reason) in [(file.clone(), "is not a directory"), (file.join("sub"), "cannot create home")] {
        let out = std::process::Command::new(crate::common::BIN)
            .args(["--home", home.to_str().unwrap(), "list"])
            .output()
            .unwrap();
        let r = crate::common::check(&["list"], out, 2);
        assert!(r.stderr.contains(reason) && r.stderr.contains("--home"), "{}", r.stderr);
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me", "the file was touched");
}

#[test]
fn refused_commands_and_commands_that_only_read_create_no_home() {
    let h = Home::under("not/yet/here");
    let top = h.path().parent().unwrap().parent().unwrap().to_owned();
    for args in [
        vec!["ask", "my role", "q"],
        vec!["status", "../../etc"],
        vec!["run", "--session", "bad name", "--", "true"],
        vec!["run", "--timeout", "soon", "--", "true"],
        vec!["run", "--", "no-such-command-anywhere"],
        vec!["ask", "--cwd", "/no/such/dir", "reviewer", "q"],
    ] {
        h.run(&args, 2);
        assert!(!top.exists(), "{args:?} created {}", top.display());
    }
    for args in [
        vec!["status", "abcdef"],
        vec!["list"],
        vec!["logs", "abcdef"],
        vec!["await", "abcdef"],
        vec!["halt", "abcdef"],
        vec!["events"],
        vec!["prune", "--keep", "1"],
    ] {
        let r = h.run(&[&["--json"], args.as_slice()].concat(), 2);
        assert_eq!(r.json()["kind"], "no_home", "{args:?}: {}", r.stdout);
        assert!(r.stderr.contains("no home at") && r.stderr.contains("--home"), "{}", r.stderr);
        assert!(!top.exists(), "{args:?} created {}", top.display());
    }
    // The first command that starts something makes it.
    h.run(&["run", "--", &fake_agent(), "sleep", "0"], 0);
    assert_eq!(h.run(&["--json", "list"], 0).json()["count"], 1);
}

#[test]
fn prune_removes_what_its_dry_run_listed_even_while_a_supervisor_is_finishing() {
    let h = Home::new();
    // The agent leaves a child that ignores SIGTERM: its supervisor spends the grace period
    // ending it after the final record is written, holding the task's lock.
    let script = r#"trap "" TERM; (while :; do sleep 1; done) & echo "> left one behind""#;
    let v = h.run(&["--json", "run", "--", "sh", "-c", script], 0).json();
    assert_eq!(v["status"], "completed");
    let dry = h.run(&["--json", "prune", "--older-than", "0s", "--dry-run"], 0).json();
    assert_eq!(dry["count"], 1, "{dry}");
    let real = h.run(&["--json", "prune", "--older-than", "0s"], 0).json();
    assert_eq!(real["count"], 1, "{real}");
    assert_eq!(h.run(&["--json", "list"], 0).json()["count"], 0);
}
