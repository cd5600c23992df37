//! Making a task's cgroup: where it goes, the limits set on it, and the empty cgroups of dead
//! supervisors swept away.

use std::fs::{self, File};
use std::io::{self, ErrorKind};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use super::hierarchy::{Hierarchies, TASKS_DIR, in_mount, is_task_name, outside_tasks, write_to};
use super::members::{remove, remove_tree};
use crate::task::{Limits, TaskCgroup, Token};

/// The variable that chooses containment: `auto` (a cgroup where one can be made, else the
/// process group), `cgroup` (a task that cannot have one does not start) or `process-group`.
pub const MODE_VARIABLE: &str = "AGENTCTL_CONTAINMENT";

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
