//! Reaching a task's processes without its supervisor's help: after the supervisor died (the
//! task is `lost`), or while it does not answer a halt (an agent stopped it with SIGSTOP, say).
//!
//! A task's processes are the members of its supervisor's session, and, while the supervisor
//! lives, the descendants it adopted (as a subreaper) after they left that session. Every
//! signal goes through a pidfd opened on a process whose start time was checked, so a pid
//! reused by another process is never signalled.

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use rustix::process::{PidfdFlags, pidfd_open, pidfd_send_signal};

use super::unix::{descendants, is_supervisor, stat_fields, stat_of};
use crate::task::SupervisorId;

/// This process, as the supervisor it is about to be.
pub fn own_id() -> Option<SupervisorId> {
    let pid = std::process::id() as i32;
    let sid = nix::unistd::getsid(None).ok()?.as_raw();
    Some(SupervisorId { pid, sid, start: start_ticks(pid)? })
}

/// When `pid` started, in clock ticks since boot (field 22 of `/proc/PID/stat`).
fn start_ticks(pid: i32) -> Option<u64> {
    stat_fields(&pid.to_string())?.split(' ').nth(19)?.parse().ok()
}

/// State and session of `pid`.
fn state_and_session(pid: i32) -> Option<(char, i32)> {
    stat_of(pid).map(|(state, _, _, sid)| (state, sid))
}

/// A pidfd on `pid` if it is still the process that started at `start`.
fn pidfd(pid: i32, start: u64) -> Option<OwnedFd> {
    let fd = pidfd_open(rustix::process::Pid::from_raw(pid)?, PidfdFlags::empty()).ok()?;
    // Checked after the open: from now on the pidfd names this process and no other.
    (start_ticks(pid) == Some(start)).then_some(fd)
}

/// What was done to a task's processes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reached {
    /// Processes signalled.
    pub ended: usize,
    /// Processes the signal was refused for (another user's, after a setuid program).
    pub refused: Vec<i32>,
}

impl Reached {
    /// A clause for a note: "ended 2 process(es) of its session[; 1 could not be (…)]".
    pub fn describe(&self) -> String {
        let mut s = format!("ended {} process(es) of the task", self.ended);
        if !self.refused.is_empty() {
            s.push_str(&format!(
                "; {} could not be ended (they run as another user, pids {:?}): end them as that user",
                self.refused.len(),
                self.refused
            ));
        }
        s
    }
}

/// Whether the supervisor `id` is alive and stopped (SIGSTOP, or a debugger).
pub fn is_stopped(id: SupervisorId) -> bool {
    state_and_session(id.pid).is_some_and(|(state, _)| matches!(state, 'T' | 't'))
        && start_ticks(id.pid) == Some(id.start)
}

/// The task's processes, with their start times: the members of session `id.sid` and, if the
/// supervisor lives, its descendants; never the supervisor itself or another task's.
fn task_processes(id: SupervisorId) -> Vec<(i32, u64)> {
    let alive = start_ticks(id.pid) == Some(id.start);
    // The session's id stays taken while any member lives, so a process whose pid is the id
    // but that is not the leader we knew means the session ended and its id was reused.
    if id.sid != id.pid && start_ticks(id.sid).is_some() {
        return Vec::new();
    }
    if id.sid == id.pid && !alive && start_ticks(id.sid).is_some() {
        return Vec::new();
    }
    let mut found = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
            if pid != id.pid
                && state_and_session(pid).is_some_and(|(state, sid)| sid == id.sid && state != 'Z')
                && !is_supervisor(Pid::from_raw(pid))
                && let Some(start) = start_ticks(pid)
            {
                found.push((pid, start));
            }
        }
    }
    if alive {
        for p in descendants(Pid::from_raw(id.pid)) {
            if !found.iter().any(|&(f, _)| f == p.as_raw())
                && let Some(start) = start_ticks(p.as_raw())
            {
                found.push((p.as_raw(), start));
            }
        }
    }
    found
}

/// Send `signals` to every process of the task; the processes signalled (pid, start time) and
/// those that refused (pids).
fn signal_task(id: SupervisorId, signals: &[Signal]) -> (Vec<(i32, u64)>, Vec<i32>) {
    let (mut signalled, mut refused) = (Vec::new(), Vec::new());
    for (pid, start) in task_processes(id) {
        let Some(fd) = pidfd(pid, start) else { continue };
        let mut denied = false;
        for &sig in signals {
            let sig = rustix::process::Signal::from_named_raw(sig as i32).expect("a named signal");
            denied |= pidfd_send_signal(&fd, sig) == Err(rustix::io::Errno::PERM);
        }
        if denied { refused.push(pid) } else { signalled.push((pid, start)) }
    }
    (signalled, refused)
}

/// SIGKILL every process of the task until none is left (each pass catches what the last one's
/// victims forked), for at most a second.
fn kill_task(id: SupervisorId) -> Reached {
    let give_up = Instant::now() + Duration::from_secs(1);
    let mut ended = std::collections::HashSet::new();
    let mut refused = Vec::new();
    loop {
        // Stopped first, so that none can fork while the others are killed.
        signal_task(id, &[Signal::SIGSTOP]);
        let (signalled, denied) = signal_task(id, &[Signal::SIGKILL]);
        refused.extend(denied.into_iter().filter(|p| !refused.contains(p)).collect::<Vec<_>>());
        let before = ended.len();
        ended.extend(signalled);
        if ended.len() == before || Instant::now() >= give_up {
            return Reached { ended: ended.len(), refused };
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// End what is left of a task whose supervisor died.
pub fn end_lost(id: SupervisorId) -> Reached {
    kill_task(id)
}

/// Wake a supervisor that was stopped (SIGCONT); true if it was. Only the supervisor: it
/// carries out whatever it was asked (a halt signalling the agent behind its back would make
/// the agent's end look like a failure of its own).
pub fn resume(id: SupervisorId) -> bool {
    if !is_stopped(id) {
        return false;
    }
    if let Some(fd) = pidfd(id.pid, id.start) {
        let _ = pidfd_send_signal(&fd, rustix::process::Signal::CONT);
    }
    true
}

/// End a task whose supervisor does not answer: SIGKILL to every process of the task, then to
/// the supervisor. `None` if the supervisor was already gone.
pub fn take_over(id: SupervisorId) -> Option<Reached> {
    let sup = pidfd(id.pid, id.start)?;
    // Stopped first: it must not record its agent's death at our hands as the agent's own
    // failure; alive, it keeps the task's ids from being reused while they are killed.
    let _ = pidfd_send_signal(&sup, rustix::process::Signal::STOP);
    let reached = kill_task(id);
    let _ = pidfd_send_signal(&sup, rustix::process::Signal::KILL);
    Some(reached)
}
