//! What the fault and scale suites share beside `common`: root, and inotify instances.

/// The number of inotify instances process `pid` holds.
pub fn inotify_instances(pid: i64) -> usize {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return 0 };
    fds.flatten()
        .filter(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy() == "anon_inode:inotify"))
        .count()
}

/// Fail (never skip) a test that cannot run without root, saying so.
pub fn needs_root(what: &str) {
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "this test needs root ({what}); scripts/test runs as root on CI");
}
