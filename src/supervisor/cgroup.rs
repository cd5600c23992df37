//! A task's own cgroup. Its supervisor makes it before the agent starts; the agent joins it
//! before it executes, so every process it ever starts is in it, whatever it does (`setsid`,
//! double forks, setuid). A halt, a deadline or the lost path ends them all at once with
//! `cgroup.kill`, and the directories go when the task ends. Tracking needs the cgroup v2
//! hierarchy; limits go to v2 controllers where they can be enabled, else (a hybrid host, whose
//! memory, cpu and pids controllers are v1) to each controller's v1 hierarchy.

use std::fs;
use std::io::{self, ErrorKind};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;
use rustix::process::{PidfdFlags, pidfd_open, pidfd_send_signal};

use crate::task::{Bytes, Limits, TaskCgroup, Token};

/// The variable that chooses containment: `auto` (a cgroup where one can be made, else the
/// process group), `cgroup` (a task that cannot have one does not start) or `process-group`.
pub const MODE_VARIABLE: &str = "AGENTCTL_CONTAINMENT";

/// The directory, beside the supervisor's own cgroup, that holds the tasks' cgroups.
const TASKS_DIR: &str = "agentctl";

/// Why a task has no cgroup.
pub enum NoCgroup {
    /// It runs contained by its process group instead.
    Fallback(String),
    /// It must not start: its limits (or `AGENTCTL_CONTAINMENT=cgroup`) need a cgroup.
    Refused(String),
}

/// Make the cgroup of task `token`, run by the supervisor `pid`, with `limits` set.
pub fn create(token: Token, pid: u32, limits: &Limits) -> Result<TaskCgroup, NoCgroup> {
    let mode = std::env::var(MODE_VARIABLE).unwrap_or_default();
    let required = !limits.is_empty() || mode == "cgroup";
    match mode.as_str() {
        "" | "auto" | "cgroup" => {}
        "process-group" if limits.is_empty() => {
            return Err(NoCgroup::Fallback(format!("{MODE_VARIABLE}=process-group")));
        }
        "process-group" => {
            return Err(NoCgroup::Refused(format!(
                "its limits ({limits}) need a cgroup, and {MODE_VARIABLE}=process-group forbids one; unset it"
            )));
        }
        other => {
            return Err(NoCgroup::Refused(format!(
                "{MODE_VARIABLE}={other} is not a containment; use auto, cgroup or process-group"
            )));
        }
    }
    let made = make(token, pid, limits);
    match made {
        Ok(cg) => Ok(cg),
        Err(why) if required => {
            let need =
                if limits.is_empty() { format!("{MODE_VARIABLE}=cgroup") } else { format!("its limits ({limits})") };
            Err(NoCgroup::Refused(format!(
                "{need} need a cgroup, and none can be made here: {why}; run agentctl as root or in a delegated \
                 cgroup, or remove the limits"
            )))
        }
        Err(why) => Err(NoCgroup::Fallback(why)),
    }
}

fn make(token: Token, pid: u32, limits: &Limits) -> Result<TaskCgroup, String> {
    let h = Hierarchies::read();
    let (v2_mount, v2_own) = h.v2.as_ref().ok_or("no cgroup v2 hierarchy is mounted")?;
    let parent = in_mount(v2_mount, outside_tasks(v2_own)).ok_or("the supervisor's cgroup is outside the mount")?;
    let tasks = parent.join(TASKS_DIR);
    mkdir_all(&tasks).map_err(|e| format!("cannot make {}: {e}", tasks.display()))?;
    sweep(&tasks);
    // Unique while it exists: a leftover of a dead task with the same token and pid keeps its name.
    let mut name = format!("{token}.{pid}");
    let mut path = tasks.join(&name);
    for n in 2.. {
        match fs::create_dir(&path) {
            Ok(()) => break,
            Err(e) if e.kind() == ErrorKind::AlreadyExists && n < 100 => {
                name = format!("{token}.{pid}.{n}");
                path = tasks.join(&name);
            }
            Err(e) => return Err(format!("cannot make {}: {e}", path.display())),
        }
    }
    let mut cg = TaskCgroup { path, v1: Vec::new() };
    if let Err(e) = apply(&h, &parent, &tasks, &name, &mut cg, limits) {
        remove(&cg);
        return Err(e);
    }
    Ok(cg)
}

/// Set each limit through the v2 controller if it can be enabled for the tasks' directory, else
/// through the controller's v1 hierarchy.
fn apply(
    h: &Hierarchies,
    parent: &Path,
    tasks: &Path,
    name: &str,
    cg: &mut TaskCgroup,
    limits: &Limits,
) -> Result<(), String> {
    let mut wanted: Vec<Setting> = Vec::new();
    if let Some(m) = limits.memory_bytes {
        // Swap counts too: a limit that swapping can pass does not stop a runaway agent.
        let v2 = vec![("memory.max", m.to_string()), ("memory.swap.max", "0".into())];
        let v1 = vec![("memory.limit_in_bytes", m.to_string()), ("memory.memsw.limit_in_bytes", m.to_string())];
        wanted.push(Setting { controller: "memory", v2, v1 });
    }
    if let Some(c) = limits.cpus {
        let quota = ((c * 100_000.0).round() as u64).max(1000);
        let v2 = vec![("cpu.max", format!("{quota} 100000"))];
        let v1 = vec![("cpu.cfs_period_us", "100000".into()), ("cpu.cfs_quota_us", quota.to_string())];
        wanted.push(Setting { controller: "cpu", v2, v1 });
    }
    if let Some(p) = limits.pids {
        wanted.push(Setting {
            controller: "pids",
            v2: vec![("pids.max", p.to_string())],
            v1: vec![("pids.max", p.to_string())],
        });
    }
    for Setting { controller, v2, v1 } in wanted {
        if enable_v2(parent, tasks, controller) {
            write_limits(&cg.path, &v2)?;
            continue;
        }
        let Some((mount, own)) =
            h.v1.iter().find(|(_, (cs, _))| cs.split(',').any(|c| c == controller)).map(|(m, (_, o))| (m, o))
        else {
            return Err(format!(
                "the {controller} controller is neither enabled for {} nor mounted as cgroup v1",
                tasks.display()
            ));
        };
        let dir = in_mount(mount, outside_tasks(own))
            .ok_or_else(|| format!("the supervisor's {controller} cgroup is outside its mount"))?
            .join(TASKS_DIR);
        mkdir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        sweep(&dir);
        let dir = dir.join(name);
        if !cg.v1.contains(&dir) {
            // A leftover of the same name is empty (its task is dead): made anew.
            let _ = fs::remove_dir(&dir);
            fs::create_dir(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
            cg.v1.push(dir.clone());
        }
        write_limits(&dir, &v1)?;
    }
    Ok(())
}

/// Remove the empty cgroups in `tasks` whose supervisor is gone: one killed after it wrote its
/// task's end but before it removed them. (One whose task's end was never written, and which
/// still holds processes, is left to the lost path, which ends them and says so.)
fn sweep(tasks: &Path) {
    let Ok(entries) = fs::read_dir(tasks) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let mut parts = name.to_str().unwrap_or("").split('.');
        let (Some(Ok(_)), Some(Ok(pid))) = (parts.next().map(Token::parse), parts.next().map(str::parse::<i32>)) else {
            continue;
        };
        // Only where no process has its supervisor's pid; fails on a cgroup with processes.
        if pid > 0 && nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) == Err(nix::errno::Errno::ESRCH) {
            let _ = fs::remove_dir(e.path());
        }
    }
}

/// One limit: the controller that enforces it, and the files that set it in v2 and in v1.
struct Setting {
    controller: &'static str,
    v2: Vec<(&'static str, String)>,
    v1: Vec<(&'static str, String)>,
}

/// Write each `(file, value)`; a file the kernel lacks (swap accounting off) is skipped.
fn write_limits(dir: &Path, settings: &[(&str, String)]) -> Result<(), String> {
    for (file, value) in settings {
        match fs::write(dir.join(file), value) {
            Err(e) if e.kind() == ErrorKind::NotFound && file.contains("sw") => {}
            Err(e) => return Err(format!("cannot set {file} = {value} in {}: {e}", dir.display())),
            Ok(()) => {}
        }
    }
    Ok(())
}

/// Enable `controller` in v2 for the children of `tasks`: true if they have it.
fn enable_v2(parent: &Path, tasks: &Path, controller: &str) -> bool {
    let listed = |file: &Path| fs::read_to_string(file).is_ok_and(|s| s.split_whitespace().any(|c| c == controller));
    if !listed(&parent.join("cgroup.controllers")) {
        return false;
    }
    for dir in [parent, tasks] {
        let control = dir.join("cgroup.subtree_control");
        if !listed(&control) && fs::write(&control, format!("+{controller}")).is_err() {
            return false;
        }
    }
    true
}

fn mkdir_all(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new().recursive(true).mode(0o755).create(dir)
}

/// The cgroup hierarchies and where this process is in each: v2's mount and path, and each v1
/// hierarchy's mount, controllers and path.
struct Hierarchies {
    v2: Option<(Mount, String)>,
    v1: Vec<(Mount, (String, String))>,
}

/// A mounted cgroup hierarchy: its mount point, and the cgroup mounted there (`/` unless a
/// container was given part of the tree).
#[derive(Clone)]
struct Mount {
    point: PathBuf,
    root: String,
}

impl Hierarchies {
    fn read() -> Hierarchies {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mut v2 = None;
        let mut v1 = Vec::new();
        for line in mountinfo.lines() {
            // ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER_OPTIONS
            let Some((head, tail)) = line.split_once(" - ") else { continue };
            let f: Vec<&str> = head.split(' ').collect();
            let t: Vec<&str> = tail.split(' ').collect();
            let (Some(root), Some(point), Some(kind)) = (f.get(3), f.get(4), t.first()) else { continue };
            let mount = Mount { point: PathBuf::from(unescape(point)), root: unescape(root) };
            match *kind {
                "cgroup2" if v2.is_none() => {
                    if let Some(path) = own.lines().find_map(|l| l.strip_prefix("0::")) {
                        v2 = Some((mount, path.to_owned()));
                    }
                }
                "cgroup" => {
                    // The hierarchy whose controllers (`cpu,cpuacct`) are all among the mount's options.
                    let opts: Vec<&str> = t.get(2).copied().unwrap_or("").split(',').collect();
                    let found = own.lines().find_map(|l| {
                        let mut p = l.splitn(3, ':');
                        let (_, cs, path) = (p.next()?, p.next()?, p.next()?);
                        let named = !cs.is_empty() && !cs.contains('=');
                        (named && cs.split(',').all(|c| opts.contains(&c))).then(|| (cs.to_owned(), path.to_owned()))
                    });
                    if let Some(found) = found
                        && !v1.iter().any(|(_, (cs, _)): &(Mount, (String, String))| *cs == found.0)
                    {
                        v1.push((mount, found));
                    }
                }
                _ => {}
            }
        }
        Hierarchies { v2, v1 }
    }
}

/// Mount-info fields escape space, tab, newline and backslash as octal.
fn unescape(field: &str) -> String {
    field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
}

/// The directory of cgroup `path` under `mount`, if the mount shows it.
fn in_mount(mount: &Mount, path: &str) -> Option<PathBuf> {
    let root = mount.root.trim_end_matches('/');
    let rest = if root.is_empty() { path } else { path.strip_prefix(root)? };
    if !(rest.is_empty() || rest.starts_with('/')) {
        return None;
    }
    Some(mount.point.join(rest.trim_start_matches('/')))
}

/// The part of cgroup `path` above any task's cgroup (`…/agentctl/<token>.<pid>`): a task
/// started from inside another makes its cgroup beside the other's, not in it.
fn outside_tasks(path: &str) -> &str {
    let mut at = 0;
    let mut rest = path;
    while let Some(i) = rest.find(&format!("/{TASKS_DIR}/")) {
        let after = &rest[i + TASKS_DIR.len() + 2..];
        let leaf = after.split('/').next().unwrap_or("");
        if leaf.get(..6).is_some_and(|t| Token::parse(t).is_ok()) && leaf.get(6..7) == Some(".") && leaf.len() > 7 {
            return &path[..at + i];
        }
        at += i + 1;
        rest = &rest[i + 1..];
    }
    path
}

/// Move this process out of any task's cgroup, into the cgroup the task's was made beside: a
/// supervisor started by an agent has its own task, which its parent's halt must not end.
pub fn leave_task_cgroups() {
    if std::env::var(MODE_VARIABLE).is_ok_and(|m| m == "process-group") {
        return;
    }
    let h = Hierarchies::read();
    let all = h.v2.iter().map(|(m, p)| (m, p)).chain(h.v1.iter().map(|(m, (_, p))| (m, p)));
    for (mount, path) in all {
        let outside = outside_tasks(path);
        if outside.len() < path.len()
            && let Some(dir) = in_mount(mount, outside)
            && let Err(e) = fs::write(dir.join("cgroup.procs"), std::process::id().to_string())
        {
            eprintln!("agentctl supervisor: cannot leave the enclosing task's cgroup {path}: {e}");
        }
    }
}

/// The `cgroup.procs` files of `cg`, open for the agent to join them before it executes.
pub fn join_files(cg: &TaskCgroup) -> Result<Vec<fs::File>, String> {
    std::iter::once(&cg.path)
        .chain(&cg.v1)
        .map(|dir| {
            let file = dir.join("cgroup.procs");
            fs::OpenOptions::new().write(true).open(&file).map_err(|e| format!("cannot open {}: {e}", file.display()))
        })
        .collect()
}

/// The processes in the task's cgroup now.
pub fn procs(cg: &TaskCgroup) -> Vec<i32> {
    let text = fs::read_to_string(cg.path.join("cgroup.procs")).unwrap_or_default();
    text.lines().filter_map(|l| l.parse().ok()).collect()
}

/// Whether any process is left in the task's cgroup (or it cannot be read: assumed so).
pub fn populated(cg: &TaskCgroup) -> bool {
    match fs::read_to_string(cg.path.join("cgroup.events")) {
        Ok(text) => text.lines().any(|l| l == "populated 1"),
        Err(e) => e.kind() != ErrorKind::NotFound,
    }
}

/// Send `sig` to every process in the cgroup, each through a pidfd opened while it is known
/// to be there: a pid reused meanwhile is never signalled.
pub fn signal_all(cg: &TaskCgroup, sig: Signal) {
    let Some(name) = cg.path.file_name().and_then(|n| n.to_str()) else { return };
    let member = |pid: i32| {
        fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .is_ok_and(|t| t.lines().any(|l| l.strip_prefix("0::").is_some_and(|p| p.rsplit('/').next() == Some(name))))
    };
    let sig = rustix::process::Signal::from_named_raw(sig as i32).expect("a named signal");
    for pid in procs(cg) {
        let Some(p) = rustix::process::Pid::from_raw(pid) else { continue };
        if let Ok(fd) = pidfd_open(p, PidfdFlags::empty())
            && member(pid)
        {
            let _ = pidfd_send_signal(&fd, sig);
        }
    }
}

/// SIGKILL every process in the cgroup at once (`cgroup.kill`; kernels before 5.14: each
/// member, until none is left).
pub fn kill(cg: &TaskCgroup) {
    match fs::write(cg.path.join("cgroup.kill"), "1") {
        Err(e) if e.kind() == ErrorKind::NotFound && cg.path.is_dir() => {
            let give_up = Instant::now() + Duration::from_secs(1);
            while populated(cg) && Instant::now() < give_up {
                signal_all(cg, Signal::SIGKILL);
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        _ => {}
    }
}

/// Wait until the cgroup is empty (woken by the kernel's notice on `cgroup.events`), at most
/// `limit`: true if it is.
pub fn wait_empty(cg: &TaskCgroup, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    let Ok(events) = fs::File::open(cg.path.join("cgroup.events")) else { return !cg.path.is_dir() };
    loop {
        if !populated(cg) {
            return true;
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let mut fds = [PollFd::new(events.as_fd(), PollFlags::POLLPRI)];
        let ms = left.as_millis().min(1000) as u16;
        let _ = poll(&mut fds, PollTimeout::from(ms));
    }
}

/// Remove the task's cgroup directories (empty once its processes are gone).
pub fn remove(cg: &TaskCgroup) {
    for dir in std::iter::once(&cg.path).chain(&cg.v1) {
        match fs::remove_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => eprintln!("agentctl supervisor: cannot remove cgroup {}: {e}", dir.display()),
        }
    }
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

/// What the task's limits did, for its end's note: the OOM killer's kills and refused forks.
pub fn limits_reached(cg: &TaskCgroup, limits: &Limits) -> Vec<String> {
    let count = |file: &str, key: &str| {
        std::iter::once(&cg.path)
            .chain(&cg.v1)
            .filter_map(|d| fs::read_to_string(d.join(file)).ok())
            .flat_map(|t| t.lines().filter_map(|l| l.strip_prefix(key)?.trim().parse::<u64>().ok()).collect::<Vec<_>>())
            .max()
            .unwrap_or(0)
    };
    let mut notes = Vec::new();
    if let Some(m) = limits.memory_bytes {
        let kills = count("memory.events", "oom_kill ").max(count("memory.oom_control", "oom_kill "));
        if kills > 0 {
            notes.push(format!(
                "the task reached its memory limit ({}): the kernel's OOM killer ended {kills} of its processes",
                Bytes(m)
            ));
        }
    }
    if let Some(p) = limits.pids {
        let refused = count("pids.events", "max ");
        if refused > 0 {
            notes.push(format!("the task reached its pids limit ({p}): {refused} fork(s) failed"));
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_cgroups_are_made_beside_the_enclosing_task() {
        assert_eq!(outside_tasks("/"), "/");
        assert_eq!(outside_tasks("/user.slice/s.scope"), "/user.slice/s.scope");
        assert_eq!(outside_tasks("/agentctl/abc123.42"), "");
        assert_eq!(outside_tasks("/a/agentctl/abc123.42/x"), "/a");
        assert_eq!(outside_tasks("/a/agentctl/abc123.42.2"), "/a");
        // Not a task's: a user's own `agentctl` unit, a name that is no token.
        assert_eq!(outside_tasks("/agentctl/mcp.service"), "/agentctl/mcp.service");
        assert_eq!(outside_tasks("/x/agentctl/zzzzzz.1"), "/x/agentctl/zzzzzz.1");
        assert_eq!(outside_tasks("/agentctl/x/agentctl/abc123.7"), "/agentctl/x");
    }

    #[test]
    fn cgroup_paths_map_into_their_mount() {
        let m = Mount { point: "/sys/fs/cgroup/unified".into(), root: "/".into() };
        assert_eq!(in_mount(&m, "/"), Some(PathBuf::from("/sys/fs/cgroup/unified/")));
        assert_eq!(in_mount(&m, "/a/b"), Some(PathBuf::from("/sys/fs/cgroup/unified/a/b")));
        let m = Mount { point: "/sys/fs/cgroup".into(), root: "/docker/x".into() };
        assert_eq!(in_mount(&m, "/docker/x/y"), Some(PathBuf::from("/sys/fs/cgroup/y")));
        assert_eq!(in_mount(&m, "/docker/xy"), None);
        assert_eq!(in_mount(&m, "/other"), None);
    }
}
