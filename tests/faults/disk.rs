//! 8. A full disk; the home's permissions and ownership; symlinks planted in the home.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{Home, fake_agent};

/// A 2 MiB tmpfs, unmounted when dropped.
struct TinyDisk(PathBuf);

impl TinyDisk {
    fn mount(at: &Path) -> TinyDisk {
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount").args(["-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs"]).arg(at).status();
        assert!(ok.is_ok_and(|s| s.success()), "mounting a tmpfs needs root (as on the CI machine)");
        TinyDisk(at.to_owned())
    }
}

impl Drop for TinyDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn an_agent_filling_the_disk_ends_with_a_recorded_error_and_valid_records() {
    let h = Home::under("tiny");
    let _disk = TinyDisk::mount(h.path());
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
    let log = std::fs::read_to_string(h.path().join("events/log.jsonl")).unwrap();
    for line in log.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
}

#[test]
fn a_home_open_to_others_is_tightened_and_one_owned_by_another_user_refused() {
    let h = Home::new();
    h.run(&["list"], 0);
    std::fs::set_permissions(h.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let r = h.run(&["list"], 0);
    assert!(r.stderr.contains("now 0700"), "{}", r.stderr);
    assert_eq!(std::fs::metadata(h.path()).unwrap().mode() & 0o777, 0o700);

    std::os::unix::fs::chown(h.path(), Some(65534), None).expect("chown needs root");
    let r = h.run(&["list"], 2);
    assert!(r.stderr.contains("belongs to uid 65534"), "{}", r.stderr);
    std::os::unix::fs::chown(h.path(), Some(unsafe { libc::geteuid() }), None).unwrap();
}

#[test]
fn a_symlink_planted_in_the_home_does_not_redirect_writes() {
    let h = Home::new();
    h.run(&["list"], 0);
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
