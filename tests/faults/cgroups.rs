//! Cgroups a test makes for itself: one beside the tasks' to move processes into, one of the
//! v1 freezer (a process the kernel holds), and one delegated to a user of its own who runs
//! agentctl there. Each kills what it holds and is removed on drop.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{BIN, Home, Run, check, copy_program, wait_until};

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

/// agentctl run by a user of its own (a fresh uid) from a cgroup delegated to it: a home it
/// owns, a cgroup `elsewhere` beside its tasks' to move processes into, and a setuid-root copy
/// of `setpriv` (`drop`) through which its agents become another user, whom no signal of its
/// supervisor reaches.
pub struct Delegated {
    pub uid: u32,
    dir: tempfile::TempDir,
    cgroup: PathBuf,
    /// `AGENTCTL_CONTAINMENT` for its tasks.
    containment: &'static str,
}

impl Delegated {
    pub fn new(containment: &'static str) -> Delegated {
        // Apart from those of every other test (`Stranger` takes 3 000 000 to 4 600 000), in
        // this process and in others, and from the other user it makes (`uid + 2 000 000`).
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let uid = 5_000_000 + (std::process::id() % 100_000) * 16 + NEXT.fetch_add(1, Ordering::Relaxed) % 16;
        let dir = tempfile::Builder::new().prefix("agentctl-test").tempdir().unwrap();
        let bin = dir.path().join("bin");
        fs::create_dir(&bin).unwrap();
        // The build directory may be closed to other users.
        if fs::hard_link(BIN, bin.join("agentctl")).is_err() {
            copy_program(BIN, bin.join("agentctl"));
        }
        copy_program("/usr/bin/setpriv", bin.join("drop"));
        fs::set_permissions(bin.join("drop"), fs::Permissions::from_mode(0o4755)).unwrap();
        fs::create_dir(dir.path().join("home")).unwrap();
        let cgroup = test_cgroup(&format!("{}.delegated", name_of(dir.path())));
        fs::create_dir(cgroup.join("elsewhere")).unwrap();
        // What a delegation hands over: the directory and the files that move processes.
        let files =
            ["", "cgroup.procs", "cgroup.threads", "cgroup.subtree_control", "elsewhere", "elsewhere/cgroup.procs"];
        for p in [dir.path().to_owned(), dir.path().join("home")].into_iter().chain(files.map(|f| cgroup.join(f))) {
            std::os::unix::fs::chown(p, Some(uid), Some(uid)).unwrap();
        }
        Delegated { uid, dir, cgroup, containment }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// agentctl with `args`, as this user, moved into its cgroup first (by root).
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(r#"cg=$1 u=$2; shift 2; echo $$ > "$cg/cgroup.procs" && exec setpriv --reuid=$u --regid=$u --clear-groups "$@""#)
            .arg("sh")
            .arg(&self.cgroup)
            .arg(self.uid.to_string())
            .arg(self.path("bin/agentctl"))
            .arg("--home")
            .arg(self.path("home"))
            .args(args)
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", self.path("bin").display()))
            .env("HOME", self.dir.path())
            .env("AGENTCTL_CONTAINMENT", self.containment)
            .current_dir(self.dir.path())
            .stdin(Stdio::null());
        c
    }

    pub fn run(&self, args: &[&str], code: i32) -> Run {
        check(args, self.cmd(args).output().unwrap(), code)
    }

    pub fn status(&self, token: &str) -> Value {
        serde_json::from_slice(&self.cmd(&["--json", "status", token]).output().unwrap().stdout).unwrap()
    }

    /// An agent's script that starts a child which moves itself out of the task's cgroup and
    /// becomes another user; the child's pid goes to `pf` once it runs as that user.
    pub fn another_users_child(&self, pf: &Path) -> String {
        format!(
            "sh -c 'echo $$ > {e}/cgroup.procs && exec {drop} --reuid={o} --regid={o} --clear-groups sleep 1000' & \
             b=$!; until [ \"$(cat /proc/$b/comm)\" = sleep ]; do :; done; echo $b > {pf}",
            e = self.cgroup.join("elsewhere").display(),
            drop = self.path("bin/drop").display(),
            o = self.uid + 2_000_000,
            pf = pf.display()
        )
    }

    /// Wait until its supervisors have removed their tasks' cgroups and exited.
    pub fn wait_idle(&self) {
        wait_until(Duration::from_secs(10), "the supervisor to remove its task's cgroup and exit", || {
            !self.cgroup.join("agentctl").exists()
                && fs::read_to_string(self.cgroup.join("cgroup.procs")).is_ok_and(|p| p.is_empty())
        });
    }
}

impl Drop for Delegated {
    fn drop(&mut self) {
        // All it ran is in its cgroup, the other user's processes too.
        remove_cgroup(&self.cgroup);
    }
}
