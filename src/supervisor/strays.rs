//! The processes of a contained task that left its cgroup (moved to another one: `systemd-run
//! --scope`, a write to some `cgroup.procs`), which `cgroup.kill` does not reach. Its
//! supervisor finds them among its descendants (orphans come to it, a subreaper) and in its
//! session, holds each through a pidfd opened while it was checked to be the one found, signals
//! them with the cgroup, waits for them and says in the note what became of them.

use std::os::fd::{AsFd, OwnedFd};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;
use rustix::io::Errno;

use super::reach::{left_cgroup, refused_clause, untraced};
use super::unix::pidfd_send;
use crate::task::{SupervisorId, TaskCgroup};

/// The task's processes found outside its cgroup so far.
#[derive(Default)]
pub struct Strays {
    /// Each one found (pid, its pidfd), in the order found.
    held: Vec<(i32, OwnedFd)>,
    /// Those a signal was refused for (another user's).
    refused: Vec<i32>,
    /// The last look found none that was not held already: the next kill needs no look.
    settled: bool,
}

impl Strays {
    /// Look for the processes of supervisor `id`'s task outside `cg` (`look`), then send
    /// `sigs` to each held one that still runs. A new look finds what those forked before
    /// they were stopped (their children are born outside the cgroup too).
    pub fn signal(&mut self, id: SupervisorId, cg: &TaskCgroup, sigs: &[Signal], look: bool) {
        if look {
            let found = left_cgroup(id, cg);
            let before = self.held.len();
            for (pid, fd) in found {
                if !self.held.iter().any(|(p, _)| *p == pid) {
                    self.held.push((pid, fd));
                }
            }
            self.settled = self.held.len() == before;
        }
        for (pid, fd) in self.held.iter().filter(|(_, fd)| runs(fd)) {
            for &sig in sigs {
                if pidfd_send(fd, sig) == Err(Errno::PERM) && !self.refused.contains(pid) {
                    self.refused.push(*pid);
                }
            }
        }
    }

    /// SIGKILL them, stopped first so that none forks meanwhile; look again as long as the last
    /// look found new ones (or on the `first` kill).
    pub fn kill(&mut self, id: SupervisorId, cg: &TaskCgroup, first: bool) {
        let look = first || !self.settled;
        self.signal(id, cg, &[Signal::SIGSTOP, Signal::SIGKILL], look);
    }

    /// How many were found.
    pub fn count(&self) -> usize {
        self.held.len()
    }

    /// How many still run (neither exited nor killed yet).
    pub fn running(&self) -> usize {
        self.held.iter().filter(|(_, fd)| runs(fd)).count()
    }

    /// What became of them, for the task's note; `None` if none left the cgroup.
    pub fn describe(&self) -> Option<String> {
        if self.held.is_empty() {
            return None;
        }
        let pids: Vec<i32> = self.held.iter().map(|(p, _)| *p).collect();
        let mut s = format!(
            "{} process(es) had left the task's cgroup (pids {pids:?}, found below its supervisor or in its session)",
            pids.len()
        );
        match self.running() {
            0 => s.push_str(" and were ended"),
            n => s.push_str(&format!(", {n} of them still there when the end was recorded")),
        }
        let refused: Vec<i32> =
            self.refused.iter().copied().filter(|p| self.held.iter().any(|(h, fd)| h == p && runs(fd))).collect();
        if !refused.is_empty() {
            s.push_str(&format!("; {}", refused_clause(&refused)));
        }
        s.push_str(&format!("; {}", untraced(true)));
        Some(s)
    }
}

/// Whether the process of `fd` still runs: a pidfd polls readable once it has exited.
fn runs(fd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_note_says_ended_only_once_they_are_gone() {
        let mut child = std::process::Command::new("sleep").arg("100").spawn().unwrap();
        let pid = child.id() as i32;
        let fd = rustix::process::pidfd_open(
            rustix::process::Pid::from_raw(pid).unwrap(),
            rustix::process::PidfdFlags::empty(),
        )
        .unwrap();
        let strays = Strays { held: vec![(pid, fd)], ..Strays::default() };
        assert_eq!(strays.running(), 1);
        let note = strays.describe().unwrap();
        assert!(
            note.starts_with(&format!("1 process(es) had left the task's cgroup (pids [{pid}], found below")),
            "{note}"
        );
        assert!(note.contains(", 1 of them still there") && note.ends_with(untraced(true)), "{note}");
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(strays.running(), 0);
        let note = strays.describe().unwrap();
        assert!(note.contains("in its session) and were ended; processes that left both"), "{note}");
        assert!(Strays::default().describe().is_none());
    }
}
