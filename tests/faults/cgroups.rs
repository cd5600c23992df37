//! Cgroups a test makes for itself: one beside the tasks' to move processes into, and one of
//! the v1 freezer (a process the kernel holds). Each kills what it holds and is removed on drop.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::{Home, wait_until};

/// A new cgroup `name` in the test's own cgroup of the v2 hierarchy (beside the tasks').
fn test_cgroup(name: &str) -> PathBuf {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let (root, point) = mountinfo
        .lines()
        .find(|l| l.contains(" - cgroup2 "))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[3].to_owned(), f[4].to_owned())
        })
        .expect("a cgroup v2 hierarchy");
    let own = fs::read_to_string("/proc/self/cgroup").unwrap();
    let own = own.lines().find_map(|l| l.strip_prefix("0::")).unwrap().to_owned();
    let own = own.strip_prefix(root.trim_end_matches('/')).unwrap_or(&own).trim_start_matches('/').to_owned();
    let dir = Path::new(&point).join(own).join(name);
    fs::create_dir(&dir).unwrap();
    dir
}

/// Kill whatever is in cgroup `dir` and below, and remove them all.
fn remove_cgroup(dir: &Path) {
    let _ = fs::write(dir.join("cgroup.kill"), "1");
    let give_up = Instant::now() + Duration::from_secs(5);
    while fs::read_to_string(dir.join("cgroup.events")).is_ok_and(|e| e.contains("populated 1"))
        && Instant::now() < give_up
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut dirs = vec![dir.to_owned()];
    let mut i = 0;
    while i < dirs.len() {
        let inside = fs::read_dir(&dirs[i]).into_iter().flatten().flatten();
        dirs.extend(inside.filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()));
        i += 1;
    }
    for d in dirs.iter().rev() {
        let _ = fs::remove_dir(d);
    }
}

/// The last part of `path`, to name what a test makes after its temp directory.
fn name_of(path: &Path) -> String {
    path.file_name().unwrap().to_str().unwrap().to_owned()
}

/// A cgroup of the test's own, outside any task's, for an agent to move processes into.
/// Whatever is left in it is killed, and it is removed, on drop.
pub struct Elsewhere(pub PathBuf);

impl Elsewhere {
    pub fn new(h: &Home) -> Elsewhere {
        Elsewhere(test_cgroup(&format!("{}.elsewhere", name_of(h.path()))))
    }

    pub fn procs(&self) -> String {
        fs::read_to_string(self.0.join("cgroup.procs")).unwrap_or_default()
    }
}

impl Drop for Elsewhere {
    fn drop(&mut self) {
        remove_cgroup(&self.0);
    }
}

/// A cgroup of the test's own in the v1 freezer hierarchy. A process frozen there stays, with
/// its SIGKILL pending, in its task's cgroup until thawed, as one blocked in the kernel would.
/// Thawed and removed on drop.
pub struct Freezer(PathBuf);

impl Freezer {
    pub fn new(h: &Home) -> Freezer {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap();
        let freezer =
            |l: &&str| l.contains(" - cgroup ") && l.rsplit(' ').next().is_some_and(|o| o.contains("freezer"));
        let point = mountinfo
            .lines()
            .find(freezer)
            .map(|l| l.split(' ').nth(4).unwrap().to_owned())
            .expect("this test needs the cgroup v1 freezer, to make a process the kernel holds");
        let dir = Path::new(&point).join(format!("{}.frozen", name_of(h.path())));
        fs::create_dir(&dir).unwrap();
        Freezer(dir)
    }

    /// Freeze process `pid` (it stays where it is in the v2 hierarchy).
    pub fn freeze(&self, pid: i64) {
        fs::write(self.0.join("cgroup.procs"), pid.to_string()).unwrap();
        fs::write(self.0.join("freezer.state"), "FROZEN").unwrap();
        wait_until(Duration::from_secs(10), "the process to freeze", || {
            fs::read_to_string(self.0.join("freezer.state")).is_ok_and(|s| s.trim() == "FROZEN")
        });
    }

    pub fn thaw(&self) {
        let _ = fs::write(self.0.join("freezer.state"), "THAWED");
    }
}

impl Drop for Freezer {
    fn drop(&mut self) {
        self.thaw();
        // What a failed test left there: the test's own processes.
        for pid in fs::read_to_string(self.0.join("cgroup.procs")).unwrap_or_default().lines() {
            if let Ok(pid) = pid.parse::<i32>() {
                // SAFETY: kill on a process this test froze, held in its cgroup until reaped.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        let give_up = Instant::now() + Duration::from_secs(5);
        while fs::remove_dir(&self.0).is_err() && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
