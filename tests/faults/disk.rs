//! 8. A full disk; the home's permissions and ownership; symlinks planted in the home.

use crate::common::{Home, fake_agent, wait_until};
use crate::mounts::Mount;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::time::Duration;

#[test]
fn an_agent_filling_the_disk_ends_with_a_recorded_error_and_valid_records() {
    let h = Home::under("tiny");
    let _disk = Mount::tiny_tmpfs(h.path());
    let v = h.run(&["--json", "run", "--sync", "--", &fake_agent(), "flood", "300000"], 1).json();
    assert_eq!(v["status"], "failed", "{v}");
    let note = v["note"].as_str().unwrap_or_default();
    assert!(note.contains("disk is full"), "the full disk is not recorded: {v}");
    let token = v["token"].as_str().unwrap();
    // The record and the event log are whole and agree.
    assert_eq!(h.record(token)["ended"]["outcome"]["status"], "failed");
    let events = h.run(&["--json", "events"], 0).json();
    assert_eq!(events["events"][0]["token"], token);
    assert_eq!(events["events"][0]["status"], "failed");
    let check: String = h.db().query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
}

#[test]
fn a_home_open_to_others_is_tightened_and_one_owned_by_another_user_refused() {
    // A home inside a directory of the test's own, whose mode it may change.
    let h = Home::under("home");
    h.init();
    std::fs::set_permissions(h.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let r = h.run(&["list"], 0);
    assert!(r.stderr.contains("now 0700"), "{}", r.stderr);
    assert_eq!(std::fs::metadata(h.path()).unwrap().mode() & 0o777, 0o700);

    crate::needs_root("it gives the home to another user with chown");
    std::os::unix::fs::chown(h.path(), Some(65534), None).unwrap();
    let r = h.run(&["list"], 2);
    assert!(r.stderr.contains("belongs to uid 65534"), "{}", r.stderr);
    std::os::unix::fs::chown(h.path(), Some(unsafe { libc::geteuid() }), None).unwrap();

    // Another user, who cannot look inside the 0700 home, is told it is not theirs, not that
    // there is none (its parent lets them pass).
    let parent = h.path().parent().unwrap();
    assert_ne!(parent, std::env::temp_dir(), "the test's own directory, not the system's temp dir");
    std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o711)).unwrap();
    for args in [&["list"][..], &["status", "abcdef"][..], &["run", "--", "true"][..]] {
        let out = std::process::Command::new(crate::common::BIN)
            .arg("--home")
            .arg(h.path())
            .args(args)
            .env_remove("AGENTCTL_HOME")
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("exists and belongs to uid 0, not to you (uid 65534)"), "{args:?}: {err}");
    }
}

#[test]
fn a_symlink_planted_in_the_home_does_not_redirect_writes() {
    let h = Home::new();
    h.init();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(h.path().join("subagents")).unwrap();
    std::os::unix::fs::symlink(outside.path(), h.path().join("subagents/reviewer")).unwrap();
    let r = h.run(&["ask", "reviewer", "hi"], 2);
    assert!(r.stderr.contains("is a symlink"), "{}", r.stderr);

    std::fs::remove_dir_all(h.path().join("events")).unwrap();
    std::os::unix::fs::symlink(outside.path(), h.path().join("events")).unwrap();
    let r = h.run(&["wait", "--timeout", "0.1s"], 2);
    assert!(r.stderr.contains("is a symlink"), "{}", r.stderr);
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0, "something was written through the symlink");
}

#[test]
fn refused_runs_on_a_full_disk_leave_nothing_and_prune_clears_strays() {
    let h = Home::under("tiny");
    let _disk = Mount::tiny_tmpfs(h.path());
    h.init();
    // Fill the disk to the last byte.
    let mut filler = std::fs::File::create(h.path().join("filler")).unwrap();
    let block = vec![b'x'; 64 * 1024];
    while std::io::Write::write_all(&mut filler, &block).is_ok() {}
    while std::io::Write::write_all(&mut filler, b"x").is_ok() {}
    let tasks = h.path().join("tasks");
    for _ in 0..20 {
        let r = h.cmd().args(["run", "--", &fake_agent(), "sleep", "0"]).output().unwrap();
        assert_ne!(r.status.code(), Some(0), "a run on a full disk succeeded");
        assert!(String::from_utf8_lossy(&r.stderr).contains("disk"), "{}", String::from_utf8_lossy(&r.stderr));
    }
    let left: Vec<_> = std::fs::read_dir(&tasks).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(left.is_empty(), "refused runs left task directories: {left:?}");
    drop(filler);
    std::fs::remove_file(h.path().join("filler")).unwrap();
    // Its pages come back once no process holds it open: a child another test's thread forked
    // meanwhile holds a copy of every descriptor until it execs, and a loaded machine can take
    // its time over that.
    let probe = h.path().join("probe");
    wait_until(Duration::from_secs(30), "the filler's space to come back", || {
        std::fs::write(&probe, vec![b'x'; 64 * 1024]).is_ok()
    });
    std::fs::remove_file(&probe).unwrap();

    // A stray from a launcher that died half way (no record), old enough to be sure: prune
    // lists it in a dry run and removes it.
    let stray = tasks.join("abc123");
    std::fs::create_dir(&stray).unwrap();
    std::fs::write(stray.join("lock"), "").unwrap();
    std::fs::create_dir_all(h.path().join("subagents/run/data/history")).unwrap();
    std::fs::write(h.path().join("subagents/run/data/history/abc123.log"), "half").unwrap();
    // Its starting file half written aside, and one a crash of the machine left empty.
    let starting = h.path().join("starting");
    std::fs::create_dir_all(&starting).unwrap();
    let leftovers = [starting.join("abc123.tmp"), starting.join("abc123.json")];
    std::fs::write(&leftovers[0], "{\"record\":").unwrap();
    std::fs::write(&leftovers[1], "").unwrap();
    let an_hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::open(&stray).unwrap().set_modified(an_hour_ago).unwrap();
    let dry = h.run(&["--json", "prune", "--keep", "100", "--dry-run"], 0).json();
    assert_eq!(dry["strays_removed"], 1, "{dry}");
    assert!(stray.exists());
    let real = h.run(&["--json", "prune", "--keep", "100"], 0).json();
    assert_eq!(real["strays_removed"], 1, "{real}");
    assert!(!stray.exists() && !h.path().join("subagents/run/data/history/abc123.log").exists());
    assert!(leftovers.iter().all(|f| !f.exists()), "{:?}", std::fs::read_dir(&starting).unwrap().collect::<Vec<_>>());
}
