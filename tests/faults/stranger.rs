//! A user of its own for fault tests that need what a user may hold at most (inotify
//! instances): a uid nobody else uses, a home it owns, and the binary where it can run it.

use std::fs;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::Value;

use crate::common::{BIN, check, copy_program};

/// The most instances a holder gives back.
const GIVEN_BACK: usize = 16;

/// A user of its own: a uid nobody else uses, a home it owns, and the binary where it can run it.
pub struct Stranger {
    uid: u32,
    dir: tempfile::TempDir,
}

impl Stranger {
    pub fn new() -> Stranger {
        // Its own in this run too: tests run at once, and each ends with all its user runs.
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let uid = 3_000_000 + (std::process::id() % 100_000) * 16 + NEXT.fetch_add(1, Ordering::Relaxed) % 16;
        let dir = tempfile::Builder::new().prefix("agentctl-test").tempdir().unwrap();
        let bin = dir.path().join("bin");
        fs::create_dir(&bin).unwrap();
        // The build directory may be closed to other users.
        if fs::hard_link(BIN, bin.join("agentctl")).is_err() {
            copy_program(BIN, bin.join("agentctl"));
        }
        // Every task runs at once (the default pool runs 16).
        fs::create_dir_all(dir.path().join("home")).unwrap();
        fs::write(dir.path().join("home/agents.toml"), "[pools.default]\nparallel = 1000\n").unwrap();
        fs::create_dir(dir.path().join("out")).unwrap();
        for p in ["", "home", "home/agents.toml", "out"] {
            std::os::unix::fs::chown(dir.path().join(p), Some(uid), Some(uid)).unwrap();
        }
        for p in ["", "home"] {
            fs::set_permissions(dir.path().join(p), fs::Permissions::from_mode(0o700)).unwrap();
        }
        Stranger { uid, dir }
    }

    /// Its home.
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub fn out(&self) -> PathBuf {
        self.dir.path().join("out")
    }

    /// Write `text` to `rel` in this user's home, theirs, replacing it whole.
    pub fn write(&self, rel: &str, text: &str) {
        let (file, tmp) = (self.dir.path().join("home").join(rel), self.dir.path().join("home").join(".new"));
        fs::write(&tmp, text).unwrap();
        std::os::unix::fs::chown(&tmp, Some(self.uid), Some(self.uid)).unwrap();
        fs::rename(tmp, file).unwrap();
    }

    /// A command run as this user, in its own directory.
    pub fn as_user(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", self.dir.path().join("bin").display());
        c.uid(self.uid)
            .gid(self.uid)
            .current_dir(self.dir.path())
            .env_clear()
            .env("PATH", path)
            .env("HOME", self.dir.path())
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .stdin(Stdio::null());
        c
    }

    /// agentctl with this user's home.
    pub fn cmd(&self) -> Command {
        let mut c = self.as_user(self.dir.path().join("bin/agentctl"));
        c.arg("--home").arg(self.dir.path().join("home"));
        c
    }

    pub fn run(&self, args: &[&str]) -> Value {
        check(args, self.cmd().args(args).output().unwrap(), 0).json()
    }

    /// Take this user's inotify instances, all but `free` (at most 16), for as long as the
    /// children live.
    pub fn take_instances(&self, free: u32) -> Vec<Child> {
        let mut holders = Vec::new();
        // A process holds as many as its descriptors allow: as many as it takes to reach the
        // user's limit, however high someone set it.
        for _ in 0..64 {
            let (holder, report) = self.hold_instances(free);
            holders.push(holder);
            let (taken, errno, room) = report;
            assert_eq!(errno, libc::EMFILE, "inotify_init1 failed otherwise than at a limit, after {taken}");
            if room {
                // The user's limit stopped it, not the process's.
                assert!(taken >= free, "the user holds {taken} instances at most; the test gives {free} back");
                return holders;
            }
        }
        panic!("64 processes full of inotify instances and still none refused: is the user limit unbounded?")
    }

    /// A process of this user that takes inotify instances until refused, gives back the last
    /// `free`, and sleeps; what it reported: how many it took, why it stopped, and whether it
    /// had descriptors left.
    fn hold_instances(&self, free: u32) -> (Child, (u32, i32, bool)) {
        let mut c = self.as_user("sleep");
        c.arg("600").stdout(Stdio::piped());
        // SAFETY: between fork and exec, only system calls and a stack buffer.
        unsafe {
            c.pre_exec(move || {
                let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
                libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
                lim.rlim_cur = lim.rlim_max;
                libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
                let mut last = [-1i32; GIVEN_BACK];
                let mut taken = 0u32;
                let errno = loop {
                    let fd = libc::inotify_init1(0);
                    if fd < 0 {
                        break *libc::__errno_location();
                    }
                    last[taken as usize % last.len()] = fd;
                    taken += 1;
                };
                let room = libc::dup(0) >= 0;
                // The last `free` taken: `last` holds the last `GIVEN_BACK`, the latest at `taken - 1`.
                for k in 1..=(free as usize).min(GIVEN_BACK) {
                    libc::close(last[(taken as usize).wrapping_sub(k) % GIVEN_BACK]);
                }
                let mut report = [0u8; 9];
                report[..4].copy_from_slice(&taken.to_le_bytes());
                report[4..8].copy_from_slice(&errno.to_le_bytes());
                report[8] = u8::from(room);
                libc::write(1, report.as_ptr().cast(), report.len());
                Ok(())
            });
        }
        let mut child = c.spawn().unwrap();
        let mut report = [0u8; 9];
        child.stdout.take().unwrap().read_exact(&mut report).unwrap();
        let n = |b: &[u8]| <[u8; 4]>::try_from(b).unwrap();
        (child, (u32::from_le_bytes(n(&report[..4])), i32::from_le_bytes(n(&report[4..8])), report[8] == 1))
    }
}

impl Drop for Stranger {
    fn drop(&mut self) {
        // Whatever this user still runs (a failed test's waiters, tasks, instance holders): a
        // process of the user signals every other one (kill -1), and then execs `true`.
        let mut c = self.as_user("true");
        // SAFETY: one system call between fork and exec.
        unsafe {
            c.pre_exec(|| {
                libc::kill(-1, libc::SIGKILL);
                Ok(())
            });
        }
        let _ = c.status();
    }
}
