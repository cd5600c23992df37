//! Reaching a task's processes without its supervisor's help: after the supervisor died (the
//! task is `lost`), or while it does not answer a halt (an agent stopped it with SIGSTOP, say).
//!
//! While the supervisor lives (checked through a pidfd and its start time), the task's
//! processes are the members of its session, whose id it keeps from reuse, and the descendants
//! it adopted as a subreaper after they left that session. Once it is dead the session's id may
//! have been reused by the time anyone looks, so a process counts only if it is in that session,
//! started after the supervisor, in the same boot, and carries the task's token in its
//! environment. Every signal goes through a pidfd whose process was checked after the pidfd
//! was opened, in one read of its `/proc` entry: a pid reused meanwhile is never signalled.

use std::collections::HashSet;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use rustix::process::{PidfdFlags, pidfd_open, pidfd_send_signal};

use super::cgroup;
use super::unix::{descendants, is_supervisor, pidfd_send, stat_fields};
use crate::task::{Containment, SupervisorId, TaskCgroup, Token};

/// This process, as the supervisor it is about to be.
pub fn own_id() -> Option<SupervisorId> {
    let pid = std::process::id() as i32;
    let sid = nix::unistd::getsid(None).ok()?.as_raw();
    Some(SupervisorId { pid, sid, start: read_proc(pid)?.start, boot: boot_id()? })
}

/// Whether process `pid`, started at `start` in boot `boot`, still runs (not a zombie). With
/// no start time known (0), whether some process has that pid.
pub fn lives(pid: i32, start: u64, boot: u128) -> bool {
    if start == 0 {
        return pid > 0 && nix::sys::signal::kill(Pid::from_raw(pid), None).is_ok();
    }
    boot_id() == Some(boot) && read_proc(pid).is_some_and(|p| p.start == start && p.state != 'Z')
}

/// When process `pid` started, and in which boot: what `lives` asks for.
pub fn started(pid: i32) -> Option<(u64, u128)> {
    Some((read_proc(pid)?.start, boot_id()?))
}

/// The kernel's id of this boot.
fn boot_id() -> Option<u128> {
    let text = super::unix::read_pseudo("/proc/sys/kernel/random/boot_id").ok()?;
    u128::from_str_radix(&text.trim().replace('-', ""), 16).ok()
}

/// What `/proc/PID/stat` says of a process, in one read.
struct Proc {
    state: char,
    sid: i32,
    /// Clock ticks since boot (field 22).
    start: u64,
}

fn read_proc(pid: i32) -> Option<Proc> {
    let fields = stat_fields(&pid.to_string())?;
    let f: Vec<&str> = fields.split(' ').collect();
    Some(Proc { state: f.first()?.chars().next()?, sid: f.get(3)?.parse().ok()?, start: f.get(19)?.parse().ok()? })
}

/// A pidfd on `pid`, if the process it names passes `check`. Read after the open: if the pid
/// was reused before it, the start time (which `check` compares) tells.
fn pidfd_if(pid: i32, check: impl FnOnce(&Proc) -> bool) -> Option<OwnedFd> {
    let fd = pidfd_open(rustix::process::Pid::from_raw(pid)?, PidfdFlags::empty()).ok()?;
    read_proc(pid).filter(|p| check(p)).map(|_| fd)
}

/// The supervisor itself, if it still lives (a zombie counts: its ids are still held).
fn supervisor_fd(id: SupervisorId) -> Option<OwnedFd> {
    pidfd_if(id.pid, |p| p.start == id.start)
}

/// What was done to a task's processes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reached {
    /// Processes signalled.
    pub ended: usize,
    /// They were its cgroup's (`cgroup.kill`).
    pub cgroup: bool,
    /// Processes of its cgroup's task found outside it (moved out of it), and signalled.
    pub outside: usize,
    /// Processes the signal was refused for (another user's, after a setuid program).
    pub refused: Vec<i32>,
    /// Processes in the dead supervisor's session that could not be proven the task's (no
    /// token in their environment): left alone.
    pub unproven: Vec<i32>,
    /// Processes of its cgroup still there when agentctl stopped waiting for them to die (in
    /// an uninterruptible wait, say).
    pub lingering: usize,
}

impl Reached {
    /// What `end_cgroup` did, with `outside`: what was done to the task's processes that had
    /// left its cgroup.
    fn and_outside(self, outside: Reached) -> Reached {
        Reached { outside: outside.ended, refused: outside.refused, unproven: outside.unproven, ..self }
    }

    /// A clause for a note: "ended 2 process(es) of the task[ (its cgroup)][; 1 could not be (…)]".
    pub fn describe(&self) -> String {
        let mut s = format!("ended {} process(es) of the task", self.ended);
        if self.cgroup {
            s.push_str(" (its cgroup)");
        }
        if self.outside > 0 {
            s.push_str(&format!("; ended {} process(es) that had left its cgroup", self.outside));
        }
        if !self.refused.is_empty() {
            s.push_str(&format!("; {}", refused_clause(&self.refused)));
        }
        if self.lingering > 0 {
            s.push_str(&format!(
                "; {} process(es) were still dying when agentctl stopped waiting (blocked in the kernel); the cgroup \
                 was left for them",
                self.lingering
            ));
        }
        if !self.unproven.is_empty() {
            s.push_str(&format!(
                "; {} process(es) in its session without the task's token in their environment were left alone \
                 (pids {:?}): end them if they are the task's",
                self.unproven.len(),
                self.unproven
            ));
        }
        s
    }
}

/// A clause for a note on processes `pids` a signal was refused for.
pub fn refused_clause(pids: &[i32]) -> String {
    format!("{} could not be ended (another user's: pids {pids:?}); end them as that user", pids.len())
}

/// What no look for a task's processes outside its cgroup can find, for a note: those that
/// left its session too, and (while its supervisor `lives`, whose descendants are looked at
/// as well) are not below it.
pub fn untraced(lives: bool) -> &'static str {
    if lives {
        "processes that left both its cgroup and its session, and were not below its supervisor, could not be traced"
    } else {
        "processes that left both its cgroup and its session could not be traced"
    }
}

/// Whether the supervisor `id` is alive and stopped (SIGSTOP, or a debugger).
pub fn is_stopped(id: SupervisorId) -> bool {
    read_proc(id.pid).is_some_and(|p| p.start == id.start && matches!(p.state, 'T' | 't'))
}

/// Whose processes to look for.
#[derive(Clone, Copy)]
enum Owner {
    /// A live supervisor (its pidfd held by the caller).
    Alive(SupervisorId),
    /// A dead one, of task `Token`.
    Dead(SupervisorId, Token),
}

/// The task's processes as (pid, start time), never the supervisor or another task's.
fn task_processes(owner: Owner) -> Vec<(i32, u64)> {
    let (Owner::Alive(id) | Owner::Dead(id, _)) = owner;
    let mut found = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
            if pid != id.pid
                && let Some(p) = read_proc(pid)
                && p.sid == id.sid
                && p.state != 'Z'
                && !is_supervisor(Pid::from_raw(pid))
            {
                found.push((pid, p.start));
            }
        }
    }
    if let Owner::Alive(id) = owner {
        for p in descendants(Pid::from_raw(id.pid)) {
            if !found.iter().any(|&(f, _)| f == p.as_raw())
                && let Some(proc) = read_proc(p.as_raw())
                && proc.state != 'Z'
            {
                found.push((p.as_raw(), proc.start));
            }
        }
    }
    found
}

/// The processes of the task of `id`, a live supervisor, that are outside its cgroup `cg`
/// (moved out of it), each held through a pidfd opened while it was checked to be the one found
/// there: its descendants and the members of its session.
pub fn left_cgroup(id: SupervisorId, cg: &TaskCgroup) -> Vec<(i32, OwnedFd)> {
    outside(Owner::Alive(id), Some(cg))
        .into_iter()
        .filter_map(|(pid, start)| Some((pid, pidfd_if(pid, |p| p.start == start && p.state != 'Z')?)))
        .collect()
}

/// Whether process `pid`, seen as `p`, is still the one found (same start) and provably the
/// task's.
fn still_the_tasks(owner: Owner, pid: i32, found_start: u64, p: &Proc) -> bool {
    match owner {
        Owner::Alive(_) => p.start == found_start,
        Owner::Dead(id, token) => {
            p.start == found_start && p.sid == id.sid && p.start >= id.start && carries_token(pid, token)
        }
    }
}

/// Whether the environment of `pid` holds `AGENTCTL_TOKEN=<token>`, as every process an agent
/// starts inherits it.
fn carries_token(pid: i32, token: Token) -> bool {
    let want = format!("AGENTCTL_TOKEN={token}");
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|&b| b == 0).any(|var| var == want.as_bytes()))
}

/// The task's processes as `task_processes` finds them, but for those in its cgroup `cg` (which
/// `cgroup.kill` ends, or which are still dying of it).
fn outside(owner: Owner, cg: Option<&TaskCgroup>) -> Vec<(i32, u64)> {
    let mut found = task_processes(owner);
    if let Some(cg) = cg {
        // Looked at before the pidfd's check: if that passes, it was looked at in the same process.
        found.retain(|&(pid, _)| !cgroup::contains(cg, pid));
    }
    found
}

/// Send `signals` to every process of the task outside `cg`; the processes signalled (pid,
/// start time) and those that refused (pids).
fn signal_task(owner: Owner, cg: Option<&TaskCgroup>, signals: &[Signal]) -> (Vec<(i32, u64)>, Vec<i32>) {
    let (mut signalled, mut refused) = (Vec::new(), Vec::new());
    for (pid, start) in outside(owner, cg) {
        let Some(fd) = pidfd_if(pid, |p| still_the_tasks(owner, pid, start, p)) else { continue };
        let mut denied = false;
        for &sig in signals {
            denied |= pidfd_send(&fd, sig) == Err(rustix::io::Errno::PERM);
        }
        if denied { refused.push(pid) } else { signalled.push((pid, start)) }
    }
    (signalled, refused)
}

/// SIGKILL every process of the task outside its cgroup `cg` (all, without one) until none is
/// left (each pass catches what the last one's victims forked), for at most a second.
fn kill_task(owner: Owner, cg: Option<&TaskCgroup>) -> Reached {
    let give_up = Instant::now() + Duration::from_secs(1);
    let mut ended = HashSet::new();
    let mut refused = Vec::new();
    loop {
        // Stopped first, so that none can fork while the others are killed.
        signal_task(owner, cg, &[Signal::SIGSTOP]);
        let (signalled, denied) = signal_task(owner, cg, &[Signal::SIGKILL]);
        refused.extend(denied.into_iter().filter(|p| !refused.contains(p)).collect::<Vec<_>>());
        let before = ended.len();
        ended.extend(signalled);
        if ended.len() == before || Instant::now() >= give_up {
            let unproven = match owner {
                Owner::Dead(id, _) => outside(owner, cg)
                    .into_iter()
                    .filter(|p| !ended.contains(p) && p.1 >= id.start && !refused.contains(&p.0))
                    .map(|(pid, _)| pid)
                    .collect(),
                Owner::Alive(_) => Vec::new(),
            };
            return Reached { ended: ended.len(), refused, unproven, ..Reached::default() };
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// End what is left of task `token`, whose supervisor `id` died: its cgroup if it had one, and
/// what can be proven its (outside the cgroup: moved out of it). `None` if the machine
/// restarted since: nothing of the task can be running, and its numbers mean other things now.
pub fn end_lost(id: SupervisorId, token: Token, cgroup: Option<&TaskCgroup>) -> Option<Reached> {
    (boot_id() == Some(id.boot)).then(|| match cgroup {
        Some(cg) => end_cgroup(cg).and_outside(kill_task(Owner::Dead(id, token), Some(cg))),
        None => kill_task(Owner::Dead(id, token), None),
    })
}

/// SIGKILL everything in the task's cgroup at once (the kernel's own list: no pid can be
/// mistaken), wait for it to empty and remove it.
pub fn end_cgroup(cg: &TaskCgroup) -> Reached {
    let (held, left) = cgroup::kill_and_wait(cg, Duration::from_secs(5));
    if left == 0 {
        cgroup::remove(cg);
    }
    Reached { ended: held - left.min(held), cgroup: true, lingering: left, ..Reached::default() }
}

/// How many processes a running task has and the memory they use: its cgroup's, else those of
/// its supervisor's session and descendants (a look through all of `/proc`).
pub fn usage(containment: Option<&Containment>, id: Option<SupervisorId>) -> Option<cgroup::Usage> {
    if let Some(Containment::Cgroup { cgroup: cg, .. }) = containment {
        return Some(cgroup::usage(cg));
    }
    let id = id.filter(|&id| supervisor_fd(id).is_some())?;
    let pids: Vec<i32> = task_processes(Owner::Alive(id)).into_iter().map(|(p, _)| p).collect();
    Some(cgroup::Usage { processes: pids.len() as u32, memory_bytes: cgroup::resident(&pids) })
}

/// Wake a supervisor that was stopped (SIGCONT); true if it was. Only the supervisor: it
/// carries out whatever it was asked (a halt signalling the agent behind its back would make
/// the agent's end look like a failure of its own).
pub fn resume(id: SupervisorId) -> bool {
    if !is_stopped(id) {
        return false;
    }
    if let Some(fd) = supervisor_fd(id) {
        let _ = pidfd_send_signal(&fd, rustix::process::Signal::CONT);
    }
    true
}

/// The supervisor `id`, stopped (SIGSTOP) so that it changes nothing until `Stopped::kill_all`
/// or `Stopped::resume`; `None` if it is already gone.
pub fn stop(id: SupervisorId, cgroup: Option<TaskCgroup>) -> Option<Stopped> {
    let fd = supervisor_fd(id)?;
    let _ = pidfd_send_signal(&fd, rustix::process::Signal::STOP);
    Some(Stopped { id, fd, cgroup })
}

/// A supervisor a halt has stopped to take over from it.
pub struct Stopped {
    id: SupervisorId,
    fd: OwnedFd,
    /// The task's cgroup, if it has one.
    cgroup: Option<TaskCgroup>,
}

impl Stopped {
    /// Let it go on (it had finished the task after all).
    pub fn resume(self) {
        let _ = pidfd_send_signal(&self.fd, rustix::process::Signal::CONT);
    }

    /// SIGKILL every process of the task (its cgroup's, and any that left it), then the
    /// supervisor. Alive until the end, it keeps the task's ids from being reused while they are
    /// signalled.
    pub fn kill_all(self) -> Reached {
        let reached = match &self.cgroup {
            Some(cg) => end_cgroup(cg).and_outside(kill_task(Owner::Alive(self.id), Some(cg))),
            None => kill_task(Owner::Alive(self.id), None),
        };
        let _ = pidfd_send_signal(&self.fd, rustix::process::Signal::KILL);
        reached
    }
}
