//! Making a task's cgroup: where it goes, the limits set on it, and the empty cgroups of dead
//! supervisors swept away.

use std::fs::{self, File};
use std::io::{self, ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use super::members::remove;
use crate::task::{Limits, TaskCgroup, Token};

/// The variable that chooses containment: `auto` (a cgroup where one can be made, else the
/// process group), `cgroup` (a task that cannot have one does not start) or `process-group`.
pub const MODE_VARIABLE: &str = "AGENTCTL_CONTAINMENT";

/// The directory that holds the tasks' cgroups.
pub(super) const TASKS_DIR: &str = "agentctl";

/// Why a task has no cgroup.
pub enum NoCgroup {
    /// It runs contained by its process group instead.
    Fallback(String),
    /// It must not start: its limits (or `AGENTCTL_CONTAINMENT=cgroup`) need a cgroup.
    Refused(String),
}

/// A task's cgroup, made, with the locks its supervisor holds on its directories for its life:
/// a sweep leaves a locked cgroup alone, whatever pid namespace it looks from.
pub struct Made {
    pub cgroup: TaskCgroup,
    _locks: Vec<Flock<File>>,
}

/// Why the containment chosen by `AGENTCTL_CONTAINMENT` cannot serve a task with `limits`,
/// known before anything runs.
pub fn mode_refuses(limits: &Limits) -> Option<String> {
    match std::env::var(MODE_VARIABLE).unwrap_or_default().as_str() {
        "" | "auto" | "cgroup" => None,
        "process-group" if limits.is_empty() => None,
        "process-group" => Some(format!(
            "its limits ({limits}) need a cgroup, and {MODE_VARIABLE}=process-group forbids one; unset it"
        )),
        other => Some(format!("{MODE_VARIABLE}={other} is not a containment; use auto, cgroup or process-group")),
    }
}

/// Make the cgroup of task `token`, run by the supervisor `pid`, with `limits` set.
pub fn create(token: Token, pid: u32, limits: &Limits) -> Result<Made, NoCgroup> {
    if let Some(why) = mode_refuses(limits) {
        return Err(NoCgroup::Refused(why));
    }
    let mode = std::env::var(MODE_VARIABLE).unwrap_or_default();
    if mode == "process-group" {
        return Err(NoCgroup::Fallback(format!("{MODE_VARIABLE}=process-group")));
    }
    let made = make(token, pid, limits);
    match made {
        Ok(made) => Ok(made),
        Err(why) if !limits.is_empty() => Err(NoCgroup::Refused(format!(
            "its limits ({limits}) need a cgroup, and none can be made here: {why}; run agentctl as root or in \
             a delegated cgroup, or remove the limits"
        ))),
        Err(why) if mode == "cgroup" => Err(NoCgroup::Refused(format!(
            "{MODE_VARIABLE}=cgroup, and no cgroup can be made here: {why}; run agentctl as root or in a \
             delegated cgroup, or unset it"
        ))),
        Err(why) => Err(NoCgroup::Fallback(why)),
    }
}

fn make(token: Token, pid: u32, limits: &Limits) -> Result<Made, String> {
    let h = Hierarchies::read();
    let (v2_mount, v2_own) = h.v2.as_ref().ok_or("no cgroup v2 hierarchy is mounted")?;
    let own = in_mount(v2_mount, outside_tasks(v2_own)).ok_or("the supervisor's cgroup is outside the mount")?;
    // Beside ourselves, inside whatever holds us (a service, a container, a delegated
    // subtree), whose limits then cover the agents too.
    let (parent, tasks) = (own.clone(), own.join(TASKS_DIR));
    let (path, lock) = new_dir(&tasks, &format!("{token}.{pid}"))?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
    let mut made = Made { cgroup: TaskCgroup { path, v1: Vec::new() }, _locks: vec![lock] };
    if let Err(e) = apply(&h, &parent, &tasks, &name, &mut made, limits) {
        remove(&made.cgroup);
        return Err(e);
    }
    Ok(made)
}

/// Make (and lock) a new cgroup `name` in `tasks`, or `name.2`, `name.3`… while a leftover of
/// a dead task holds the name.
fn new_dir(tasks: &Path, name: &str) -> Result<(PathBuf, Flock<File>), String> {
    let mut made_tasks = false;
    let mut n = 1;
    for _ in 0..200 {
        let path = if n == 1 { tasks.join(name) } else { tasks.join(format!("{name}.{n}")) };
        match fs::DirBuilder::new().mode(0o755).create(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                n += 1;
                continue;
            }
            // First time, or another supervisor removed `tasks` as its last task ended.
            Err(e) if e.kind() == ErrorKind::NotFound => {
                match fs::DirBuilder::new().mode(0o755).create(tasks) {
                    Err(e) if e.kind() != ErrorKind::AlreadyExists => {
                        return Err(format!("cannot make {}: {e}", tasks.display()));
                    }
                    _ => {}
                }
                if !made_tasks {
                    made_tasks = true;
                    sweep(tasks);
                }
                continue;
            }
            Err(e) => return Err(format!("cannot make {}: {e}", path.display())),
        }
        // A sweep that came between the making and the locking removed it: made anew.
        if let Ok(lock) = lock_dir(&path)
            && fs::metadata(&path).is_ok_and(|m| m.ino() == lock.metadata().map_or(0, |l| l.ino()))
        {
            // Now and then (and where the directory is new) the leftovers of dead supervisors
            // go: looking at every one each time would cost a thousand tasks a million looks.
            if !made_tasks && crate::task::random_u64().is_multiple_of(8) {
                sweep(tasks);
            }
            return Ok((path, lock));
        }
        n += 1;
    }
    Err(format!("cannot make a cgroup in {}: 200 tries failed", tasks.display()))
}

/// An exclusive lock on directory `dir`, if nobody holds one.
fn lock_dir(dir: &Path) -> io::Result<Flock<File>> {
    let f = File::open(dir)?;
    Flock::lock(f, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| io::Error::from(e))
}

/// Remove the cgroups in `tasks` that no supervisor holds and that are empty: left by one killed
/// after it wrote its task's end but before it removed them. (One whose task's end was never
/// written, and which still holds processes, is left to the lost path, which ends them and says
/// so.)
fn sweep(tasks: &Path) {
    let Ok(entries) = fs::read_dir(tasks) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str().filter(|n| is_task_name(n)) else { continue };
        // Its supervisor still runs (in our pid namespace): nothing to look at. (A supervisor
        // in another namespace, or a pid reused, is told by the lock.)
        let pid = name.split('.').nth(1).and_then(|p| p.parse::<i32>().ok()).unwrap_or(0);
        if nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) != Err(nix::errno::Errno::ESRCH) {
            continue;
        }
        if let Ok(_held) = lock_dir(&e.path()) {
            let _ = remove_tree(&e.path());
        }
    }
}

/// Remove cgroup `dir` and any it holds, deepest first; fails on one with processes.
pub(super) fn remove_tree(dir: &Path) -> io::Result<()> {
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

/// Set each limit through the v2 controller if it can be enabled for the tasks' cgroups, else
/// through the controller's v1 hierarchy.
fn apply(
    h: &Hierarchies,
    parent: &Path,
    tasks: &Path,
    name: &str,
    made: &mut Made,
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
        let max = vec![("pids.max", p.to_string())];
        wanted.push(Setting { controller: "pids", v2: max.clone(), v1: max });
    }
    for Setting { controller, v2, v1 } in wanted {
        let v2_refused = match enable_v2(parent, tasks, controller) {
            Ok(()) => {
                write_limits(&made.cgroup.path, &v2)?;
                continue;
            }
            Err(e) => e,
        };
        let Some((mount, own)) =
            h.v1.iter().find(|(_, (cs, _))| cs.split(',').any(|c| c == controller)).map(|(m, (_, o))| (m, o))
        else {
            return Err(format!(
                "the {controller} controller cannot be used: {v2_refused}, and it has no v1 hierarchy"
            ));
        };
        let dir = in_mount(mount, outside_tasks(own))
            .ok_or_else(|| format!("the supervisor's {controller} cgroup is outside its mount"))?
            .join(TASKS_DIR);
        let dir = match made.cgroup.v1.iter().find(|d| d.starts_with(&dir)) {
            Some(d) => d.clone(),
            None => {
                let (d, lock) = new_dir(&dir, name)?;
                made.cgroup.v1.push(d.clone());
                made._locks.push(lock);
                d
            }
        };
        write_limits(&dir, &v1)?;
    }
    Ok(())
}

/// One limit: the controller that enforces it, and the files that set it in v2 and in v1.
struct Setting {
    controller: &'static str,
    v2: Vec<(&'static str, String)>,
    v1: Vec<(&'static str, String)>,
}

/// Write each `(file, value)`; a swap file the kernel lacks (swap accounting off) is skipped.
fn write_limits(dir: &Path, settings: &[(&str, String)]) -> Result<(), String> {
    for (file, value) in settings {
        match write_to(&dir.join(file), value) {
            Err(e) if e.kind() == ErrorKind::NotFound && file.contains("sw") => {}
            Err(e) => return Err(format!("cannot set {file} = {value} in {}: {e}", dir.display())),
            Ok(()) => {}
        }
    }
    Ok(())
}

/// Write `value` to the cgroup file `file`, which must exist: never created, nor reached
/// through a symlink.
pub(super) fn write_to(file: &Path, value: &str) -> io::Result<()> {
    fs::OpenOptions::new().write(true).custom_flags(libc::O_NOFOLLOW).open(file)?.write_all(value.as_bytes())
}

/// Enable `controller` in v2 for the children of `tasks` (made in `parent`, the supervisor's
/// own cgroup), or say why not. cgroup v2 lets a cgroup with processes of its own (ours) give
/// controllers to its children only if it is the root.
fn enable_v2(parent: &Path, tasks: &Path, controller: &str) -> Result<(), String> {
    let listed = |file: &Path| fs::read_to_string(file).is_ok_and(|s| s.split_whitespace().any(|c| c == controller));
    if !listed(&parent.join("cgroup.controllers")) {
        return Err(format!("{} does not have it in v2", parent.display()));
    }
    for dir in [parent, tasks] {
        let control = dir.join("cgroup.subtree_control");
        if !listed(&control) {
            write_to(&control, &format!("+{controller}")).map_err(|e| match e.raw_os_error() {
                Some(libc::EBUSY) => format!(
                    "cgroup v2 gives it to the children of {} only if no process runs there itself (the root \
                     aside), and the supervisor does",
                    dir.display()
                ),
                _ => format!("cannot enable it in {}: {e}", control.display()),
            })?;
        }
    }
    Ok(())
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
pub(super) struct Mount {
    pub(super) point: PathBuf,
    pub(super) root: String,
}

impl Hierarchies {
    fn read() -> Hierarchies {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        Hierarchies::parse(&mountinfo, &fs::read_to_string("/proc/self/cgroup").unwrap_or_default())
    }

    /// From `/proc/self/mountinfo` and `/proc/self/cgroup`: for each hierarchy, the first mount
    /// that shows this process's cgroup.
    fn parse(mountinfo: &str, own: &str) -> Hierarchies {
        let mut v2 = None;
        let mut v1: Vec<(Mount, (String, String))> = Vec::new();
        for line in mountinfo.lines() {
            // ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER_OPTIONS
            let Some((head, tail)) = line.split_once(" - ") else { continue };
            let f: Vec<&str> = head.split(' ').collect();
            let t: Vec<&str> = tail.split(' ').collect();
            let (Some(root), Some(point), Some(kind)) = (f.get(3), f.get(4), t.first()) else { continue };
            let mount = Mount { point: PathBuf::from(unescape(point)), root: unescape(root) };
            match *kind {
                "cgroup2" if v2.is_none() => {
                    if let Some(path) = own.lines().find_map(|l| l.strip_prefix("0::"))
                        && in_mount(&mount, path).is_some()
                    {
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
                        && in_mount(&mount, &found.1).is_some()
                        && !v1.iter().any(|(_, (cs, _))| *cs == found.0)
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
pub(super) fn in_mount(mount: &Mount, path: &str) -> Option<PathBuf> {
    let root = mount.root.trim_end_matches('/');
    let rest = if root.is_empty() { path } else { path.strip_prefix(root)? };
    if !(rest.is_empty() || rest.starts_with('/')) || rest.split('/').any(|c| c == "..") {
        return None;
    }
    Some(mount.point.join(rest.trim_start_matches('/')))
}

/// The part of cgroup `path` above any task's cgroup (`…/agentctl/<token>.<pid>`): a task
/// started from inside another makes its cgroup beside the other's, not in it.
pub(super) fn outside_tasks(path: &str) -> &str {
    let mut at = 0;
    let mut rest = path;
    while let Some(i) = rest.find(&format!("/{TASKS_DIR}/")) {
        let leaf = rest[i + TASKS_DIR.len() + 2..].split('/').next().unwrap_or("");
        if is_task_name(leaf) {
            return &path[..at + i];
        }
        at += i + 1;
        rest = &rest[i + 1..];
    }
    path
}

/// Whether `name` is a task cgroup's: `<token>.<pid>[.<n>]`.
pub(super) fn is_task_name(name: &str) -> bool {
    let mut parts = name.split('.');
    let token = parts.next().is_some_and(|t| Token::parse(t).is_ok());
    let rest: Vec<&str> = parts.collect();
    token
        && (1..=2).contains(&rest.len())
        && rest.iter().all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Move this process out of any task's cgroup, into the cgroup the task's was made beside: a
/// supervisor started by an agent has its own task, which its parent's halt must not end.
pub fn leave_task_cgroups() -> Result<(), String> {
    let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    // The cheap look first: almost every supervisor is in no task's cgroup.
    let in_task = |path: &str| outside_tasks(path).len() < path.len();
    if !own.lines().any(|l| in_task(l.splitn(3, ':').nth(2).unwrap_or(""))) {
        return Ok(());
    }
    let h = Hierarchies::read();
    let all = h.v2.iter().map(|(m, p)| (m, p)).chain(h.v1.iter().map(|(m, (_, p))| (m, p)));
    // Into the enclosing supervisor's own cgroup, in every hierarchy that can be left.
    let mut failed = Vec::new();
    for (mount, path) in all {
        let outside = outside_tasks(path);
        if outside.len() < path.len()
            && let Some(dir) = in_mount(mount, outside)
            && let Err(e) = write_to(&dir.join("cgroup.procs"), &std::process::id().to_string())
        {
            failed.push(format!("cannot leave the enclosing task's cgroup {path} for {}: {e}", dir.display()));
        }
    }
    if failed.is_empty() { Ok(()) } else { Err(failed.join("; ")) }
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
        assert_eq!(outside_tasks("/agentctl/abc123.x1"), "/agentctl/abc123.x1");
        assert_eq!(outside_tasks("/agentctl/x/agentctl/abc123.7"), "/agentctl/x");
        assert_eq!(outside_tasks("/agentctl/é.7/agentctl/abc123.7"), "/agentctl/é.7");
    }

    #[test]
    fn cgroup_paths_map_into_their_mount() {
        let m = Mount { point: "/sys/fs/cgroup/unified".into(), root: "/".into() };
        assert_eq!(in_mount(&m, "/"), Some(PathBuf::from("/sys/fs/cgroup/unified/")));
        assert_eq!(in_mount(&m, "/a/b"), Some(PathBuf::from("/sys/fs/cgroup/unified/a/b")));
        assert_eq!(in_mount(&m, "/a/../b"), None);
        let m = Mount { point: "/sys/fs/cgroup".into(), root: "/docker/x".into() };
        assert_eq!(in_mount(&m, "/docker/x/y"), Some(PathBuf::from("/sys/fs/cgroup/y")));
        assert_eq!(in_mount(&m, "/docker/xy"), None);
        assert_eq!(in_mount(&m, "/other"), None);
    }

    #[test]
    fn hierarchies_are_found_on_hybrid_and_pure_v2_hosts() {
        let hybrid = "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n\
                      35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
                      40 31 0:37 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd\n\
                      41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate\n";
        let own = "9:name=systemd:/\n4:memory:/box/1\n1:cpu,cpuacct:/\n0::/\n";
        let h = Hierarchies::parse(hybrid, own);
        let (m, p) = h.v2.unwrap();
        assert_eq!((m.point, p.as_str()), (PathBuf::from("/sys/fs/cgroup/unified"), "/"));
        let v1: Vec<(PathBuf, String, String)> = h.v1.into_iter().map(|(m, (c, p))| (m.point, c, p)).collect();
        assert_eq!(
            v1,
            [
                ("/sys/fs/cgroup/cpu,cpuacct".into(), "cpu,cpuacct".into(), "/".into()),
                ("/sys/fs/cgroup/memory".into(), "memory".into(), "/box/1".into())
            ]
        );
        // A container's own view of part of the tree: the mount that shows our cgroup counts.
        let pure = "50 40 0:30 /other /mnt/elsewhere rw - cgroup2 cgroup2 rw\n\
                    51 40 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let (m, p) = Hierarchies::parse(pure, "0::/user.slice/s.scope\n").v2.unwrap();
        assert_eq!((m.point, p.as_str()), (PathBuf::from("/sys/fs/cgroup"), "/user.slice/s.scope"));
    }
}
