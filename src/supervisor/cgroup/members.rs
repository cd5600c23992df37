//! The processes in a task's cgroup (and any cgroups the agent made inside it): joining,
//! counting, signalling, killing them all, what they use and what their limits did.

use std::fs::{self, File};
use std::io::{self, ErrorKind};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;
use rustix::process::{PidfdFlags, pidfd_open};

use super::hierarchy::{TASKS_DIR, is_task_name, write_to};
use crate::supervisor::unix::pidfd_send;
use crate::task::{Bytes, Limits, TaskCgroup, Token};

/// The `cgroup.procs` files of `cg`, open for the agent to join them before it executes.
pub fn join_files(cg: &TaskCgroup) -> Result<Vec<File>, String> {
    dirs(cg)
        .map(|dir| {
            let file = dir.join("cgroup.procs");
            fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&file)
                .map_err(|e| format!("cannot open {}: {e}", file.display()))
        })
        .collect()
}

/// The task's cgroup directories: v2's, then v1's.
fn dirs(cg: &TaskCgroup) -> impl Iterator<Item = &PathBuf> {
    std::iter::once(&cg.path).chain(&cg.v1)
}

/// The processes in the task's v2 cgroup and the cgroups inside it.
pub fn procs(cg: &TaskCgroup) -> Vec<i32> {
    let mut pids = Vec::new();
    let mut todo = vec![cg.path.clone()];
    while let Some(dir) = todo.pop() {
        let text = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        pids.extend(text.lines().filter_map(|l| l.parse::<i32>().ok()));
        if let Ok(entries) = fs::read_dir(&dir) {
            todo.extend(entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()));
        }
    }
    pids
}

/// Whether any process is left in the task's cgroup or below (or it cannot be read: assumed so).
pub fn populated(cg: &TaskCgroup) -> bool {
    match fs::read_to_string(cg.path.join("cgroup.events")) {
        Ok(text) => text.lines().any(|l| l == "populated 1"),
        Err(e) => e.kind() != ErrorKind::NotFound,
    }
}

/// Send `sigs`, in order, to every process of the cgroup, each through a pidfd opened while it
/// is known to be there: a pid reused meanwhile is never signalled.
pub fn signal_all(cg: &TaskCgroup, sigs: &[Signal]) {
    // One walk and one membership look per process, whatever the signals.
    for pid in procs(cg) {
        let Some(p) = rustix::process::Pid::from_raw(pid) else { continue };
        if let Ok(fd) = pidfd_open(p, PidfdFlags::empty())
            && contains(cg, pid)
        {
            for &sig in sigs {
                let _ = pidfd_send(&fd, sig);
            }
        }
    }
}

/// Whether process `pid` is in the task's v2 cgroup or one inside it, as its `/proc` entry says.
pub fn contains(cg: &TaskCgroup, pid: i32) -> bool {
    let Some(name) = cg.path.file_name().and_then(|n| n.to_str()) else { return false };
    let inside = format!("/{TASKS_DIR}/{name}");
    crate::supervisor::unix::read_pseudo(format!("/proc/{pid}/cgroup")).is_ok_and(|t| {
        t.lines()
            .filter_map(|l| l.strip_prefix("0::"))
            .any(|p| p.find(&inside).is_some_and(|i| matches!(p.as_bytes().get(i + inside.len()), None | Some(b'/'))))
    })
}

/// SIGKILL every process of the cgroup at once (`cgroup.kill`); on kernels before 5.14, which
/// lack it, each one found (call again for those it forked meanwhile).
pub fn kill(cg: &TaskCgroup) {
    if let Err(e) = write_to(&cg.path.join("cgroup.kill"), "1")
        && e.kind() == ErrorKind::NotFound
    {
        signal_all(cg, &[Signal::SIGKILL]);
    }
}

/// Kill everything in the cgroup and wait until it is empty, at most `limit`: how many
/// processes it held, and how many are left.
pub fn kill_and_wait(cg: &TaskCgroup, limit: Duration) -> (usize, usize) {
    let before = procs(cg).len();
    let end = Instant::now() + limit;
    loop {
        kill(cg);
        if wait_empty(cg, Duration::from_millis(50)) || Instant::now() >= end {
            return (before, procs(cg).len());
        }
    }
}

/// Wait until the cgroup is empty (woken by the kernel's notice on `cgroup.events`), at most
/// `limit`: true if it is.
fn wait_empty(cg: &TaskCgroup, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    let Some(events) = Events::open(cg) else { return !cg.path.is_dir() };
    loop {
        // Read through the descriptor polled, which takes its notice. Unreadable: removed.
        if events.populated() != Some(true) {
            return true;
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let mut fds = [PollFd::new(events.0.as_fd(), PollFlags::POLLPRI)];
        let _ = poll(&mut fds, PollTimeout::from(left.as_millis().min(1000) as u16));
    }
}

/// A task cgroup's `cgroup.events`, whose change (the last process leaving) wakes a poll for
/// `POLLPRI`.
pub struct Events(File);

impl Events {
    pub fn open(cg: &TaskCgroup) -> Option<Events> {
        File::open(cg.path.join("cgroup.events")).ok().map(Events)
    }

    /// Whether it says processes are left; reading it takes the notice that woke a poll.
    /// `None` once the cgroup is gone (its file then polls ready for ever: stop polling it).
    pub fn populated(&self) -> Option<bool> {
        let mut buf = [0u8; 256];
        let n = rustix::io::pread(&self.0, &mut buf, 0).ok()?;
        Some(String::from_utf8_lossy(&buf[..n]).lines().any(|l| l == "populated 1"))
    }

    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// Remove the task's cgroup directories (and any made inside them), then the tasks' directory
/// if it was the last.
pub fn remove(cg: &TaskCgroup) {
    for dir in dirs(cg) {
        if let Err(e) = remove_tree(dir) {
            eprintln!("agentctl supervisor: cannot remove cgroup {}: {e}", dir.display());
        }
        // Left in place it would keep whoever manages the cgroup above from removing that one.
        if let Some(tasks) = dir.parent() {
            let _ = fs::remove_dir(tasks);
        }
    }
}

/// Remove cgroup `dir` and any it holds, deepest first; fails on one with processes.
pub(super) fn remove_tree(dir: &Path) -> io::Result<()> {
    // Most hold none: one call.
    match fs::remove_dir(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(_) => {}
    }
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path())?;
            }
        }
    }
    match fs::remove_dir(dir) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Whether `cg`, as read from a lock file that anyone with the task's rights could have
/// written, names a task cgroup of `token` on a cgroup file system (so ending and removing it
/// can touch nothing else).
pub fn is_tasks(cg: &TaskCgroup, token: Token) -> bool {
    dirs(cg).all(|d| {
        let name = d.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let parent = d.parent().and_then(|p| p.file_name()).and_then(|n| n.to_str());
        let named = is_task_name(name) && name.starts_with(token.as_str()) && parent == Some(TASKS_DIR);
        // Gone already (swept when empty): nothing there to end or remove. Else reached
        // through no symlink, on a cgroup file system.
        let real = match fs::canonicalize(d) {
            Err(e) => return named && e.kind() == ErrorKind::NotFound && d.is_absolute(),
            Ok(real) => real,
        };
        let on_cgroupfs = real == *d
            && rustix::fs::statfs(d.as_path()).is_ok_and(|s| {
                const CGROUP_SUPER_MAGIC: i64 = 0x27e0eb;
                const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
                #[allow(clippy::unnecessary_cast, reason = "f_type is narrower than i64 on some targets")]
                let kind = s.f_type as i64;
                matches!(kind, CGROUP_SUPER_MAGIC | CGROUP2_SUPER_MAGIC)
            });
        named && on_cgroupfs
    })
}

/// What a task's processes use now.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    pub processes: u32,
    /// From the memory controller when the task has one, else its processes' resident memory.
    pub memory_bytes: u64,
}

/// What the processes of the cgroup use now.
pub fn usage(cg: &TaskCgroup) -> Usage {
    let pids = procs(cg);
    let counted = std::iter::once(cg.path.join("memory.current"))
        .chain(cg.v1.iter().map(|d| d.join("memory.usage_in_bytes")))
        .find_map(|f| fs::read_to_string(f).ok()?.trim().parse().ok());
    Usage { processes: pids.len() as u32, memory_bytes: counted.unwrap_or_else(|| resident(&pids)) }
}

/// The resident memory of `pids` together (shared pages counted in each).
pub fn resident(pids: &[i32]) -> u64 {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    pids.iter()
        .filter_map(|p| fs::read_to_string(format!("/proc/{p}/statm")).ok())
        .filter_map(|s| s.split(' ').nth(1)?.parse::<u64>().ok())
        .sum::<u64>()
        * page
}

/// The kernel's counts of what a task's limits did, so far.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counters {
    /// Processes the OOM killer ended.
    oom_kills: u64,
    /// Forks refused at the pids limit.
    forks_refused: u64,
}

/// What the cgroup's `limits` have done so far (nothing to read without a memory or pids
/// limit).
pub fn counters(cg: &TaskCgroup, limits: &Limits) -> Counters {
    if limits.memory_bytes.is_none() && limits.pids.is_none() {
        return Counters::default();
    }
    let count = |file: &str, key: &str| {
        dirs(cg)
            .filter_map(|d| fs::read_to_string(d.join(file)).ok())
            .flat_map(|t| t.lines().filter_map(|l| l.strip_prefix(key)?.trim().parse::<u64>().ok()).collect::<Vec<_>>())
            .max()
            .unwrap_or(0)
    };
    Counters {
        oom_kills: count("memory.events", "oom_kill ").max(count("memory.oom_control", "oom_kill ")),
        forks_refused: count("pids.events", "max "),
    }
}

/// What the task's limits did since `since` (its run's start), for its end: the OOM killer's
/// kills and refused forks.
pub fn limits_reached(cg: &TaskCgroup, limits: &Limits, since: Counters) -> Vec<String> {
    let now = counters(cg, limits);
    let mut notes = Vec::new();
    let kills = now.oom_kills.saturating_sub(since.oom_kills);
    if let (Some(m), true) = (limits.memory_bytes, kills > 0) {
        notes.push(format!(
            "the task reached its memory limit ({}): the kernel's OOM killer ended {kills} of its processes",
            Bytes(m)
        ));
    }
    let refused = now.forks_refused.saturating_sub(since.forks_refused);
    if let (Some(p), true) = (limits.pids, refused > 0) {
        notes.push(format!("the task reached its pids limit ({p}): {refused} fork(s) failed"));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_tasks_own_cgroup_is_taken_from_a_lock_file() {
        let token = Token::parse("abc123").unwrap();
        let cg = |p: &std::path::Path| TaskCgroup { path: p.to_owned(), v1: Vec::new() };
        // Not a task's name, another task's, not in `agentctl`, relative.
        for p in ["/sys/fs/cgroup/system.slice", "/sys/fs/cgroup/agentctl/def456.5", "/sys/fs/cgroup/x/abc123.5"] {
            assert!(!is_tasks(&cg(p.as_ref()), token), "{p}");
        }
        assert!(!is_tasks(&cg("agentctl/abc123.5".as_ref()), token));
        // A directory that is no cgroup, and a symlink to one.
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("agentctl/abc123.5");
        fs::create_dir_all(&dir).unwrap();
        assert!(!is_tasks(&cg(&dir), token));
        let link = t.path().join("agentctl/abc123.6");
        std::os::unix::fs::symlink("/sys/fs/cgroup", &link).unwrap();
        assert!(!is_tasks(&cg(&link), token));
        // Gone already: nothing there to touch.
        assert!(is_tasks(&cg(&t.path().join("agentctl/abc123.7")), token));
    }
}
