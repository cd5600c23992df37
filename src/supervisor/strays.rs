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

/// How the task's processes outside its cgroup are found: each with a pidfd on it.
type Finder = Box<dyn FnMut() -> Vec<(i32, OwnedFd)>>;

/// The task's processes found outside its cgroup so far.
pub struct Strays {
    find: Finder,
    /// Each one found (pid, its pidfd), in the order found.
    held: Vec<(i32, OwnedFd)>,
    /// Those a signal was refused for (another user's): named in the note, never waited for.
    refused: Vec<i32>,
    /// The last look found none that was not held already: a stop or kill after the first
    /// needs no look (each is a walk through all of `/proc`).
    settled: bool,
}

impl Strays {
    /// Those of the task of supervisor `id` (none known: none found), outside its cgroup `cg`.
    pub fn of(id: Option<SupervisorId>, cg: TaskCgroup) -> Strays {
        Strays::found_by(Box::new(move || id.map_or_else(Vec::new, |id| left_cgroup(id, &cg))))
    }

    fn found_by(find: Finder) -> Strays {
        Strays { find, held: Vec::new(), refused: Vec::new(), settled: false }
    }

    /// Look for more of them (`look`), then send `sigs` to each held one that still runs and
    /// has not refused a signal. A new look finds what those forked before they were stopped
    /// (their children are born outside the cgroup too).
    pub fn signal(&mut self, sigs: &[Signal], look: bool) {
        if look {
            let before = self.held.len();
            for (pid, fd) in (self.find)() {
                if !self.held.iter().any(|(p, _)| *p == pid) {
                    self.held.push((pid, fd));
                }
            }
            self.settled = self.held.len() == before;
        }
        for (pid, fd) in &self.held {
            if self.refused.contains(pid) || !runs(fd) {
                continue;
            }
            if sigs.iter().any(|&sig| pidfd_send(fd, sig) == Err(Errno::PERM)) {
                self.refused.push(*pid);
            }
        }
    }

    /// SIGTERM (and SIGCONT) them; look again on the `first` stop, or as long as the last look
    /// found new ones.
    pub fn stop(&mut self, first: bool) {
        let look = first || !self.settled;
        self.signal(&[Signal::SIGTERM, Signal::SIGCONT], look);
    }

    /// SIGKILL them, stopped first so that none forks meanwhile; look again as long as the last
    /// look found new ones (or on the `first` kill).
    pub fn kill(&mut self, first: bool) {
        let look = first || !self.settled;
        self.signal(&[Signal::SIGSTOP, Signal::SIGKILL], look);
    }

    /// How many were found.
    pub fn count(&self) -> usize {
        self.held.len()
    }

    /// How many of them could not be signalled (another user's).
    pub fn refused(&self) -> usize {
        self.refused.len()
    }

    /// How many still run that the task's end waits for: neither exited, nor killed yet, nor
    /// another user's (which no wait would see go).
    pub fn running(&self) -> usize {
        self.held.iter().filter(|(p, fd)| !self.refused.contains(p) && runs(fd)).count()
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
        let refused: Vec<i32> =
            self.held.iter().filter(|(p, fd)| self.refused.contains(p) && runs(fd)).map(|(p, _)| *p).collect();
        match self.running() {
            0 if refused.is_empty() => s.push_str(" and were ended"),
            0 => {}
            n => s.push_str(&format!(", {n} of them still there when the end was recorded")),
        }
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
    use std::cell::Cell;
    use std::process::{Child, Command};
    use std::rc::Rc;

    use super::*;

    fn sleeper() -> (Child, i32, OwnedFd) {
        let child = Command::new("sleep").arg("100").spawn().unwrap();
        let pid = child.id() as i32;
        let fd = rustix::process::pidfd_open(
            rustix::process::Pid::from_raw(pid).unwrap(),
            rustix::process::PidfdFlags::empty(),
        )
        .unwrap();
        (child, pid, fd)
    }

    /// Strays that find `found` (once) on their first look, and count their looks.
    fn finding(found: Vec<(i32, OwnedFd)>) -> (Strays, Rc<Cell<usize>>) {
        let looks = Rc::new(Cell::new(0));
        let counted = looks.clone();
        let mut found = Some(found);
        let strays = Strays::found_by(Box::new(move || {
            counted.set(counted.get() + 1);
            found.take().unwrap_or_default()
        }));
        (strays, looks)
    }

    #[test]
    fn the_note_says_ended_only_once_they_are_gone() {
        let (mut child, pid, fd) = sleeper();
        let (mut strays, _) = finding(vec![(pid, fd)]);
        strays.signal(&[], true);
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
        assert!(finding(Vec::new()).0.describe().is_none());
    }

    #[test]
    fn one_that_refused_a_signal_is_named_and_not_waited_for() {
        let (mut child, pid, fd) = sleeper();
        let (mut strays, _) = finding(vec![(pid, fd)]);
        strays.signal(&[], true);
        // As a process of another user answers a signal.
        strays.refused.push(pid);
        assert_eq!((strays.running(), strays.refused()), (0, 1));
        let note = strays.describe().unwrap();
        assert!(note.contains(&format!("; 1 could not be ended (another user's: pids [{pid}])")), "{note}");
        assert!(!note.contains("were ended") && !note.contains("still there"), "{note}");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn stops_after_the_first_look_again_only_while_looks_find_new_ones() {
        let (mut child, pid, fd) = sleeper();
        let (mut strays, looks) = finding(vec![(pid, fd)]);
        // The first stop looks, and finds one; the next looks again (it may have forked)…
        strays.stop(true);
        strays.stop(false);
        assert_eq!(looks.get(), 2);
        // …and finding nothing new, the stops after it do not look.
        for _ in 0..5 {
            strays.stop(false);
        }
        assert_eq!(looks.get(), 2);
        // A kill's first look is its own (what a stopped one forked meanwhile).
        strays.kill(true);
        strays.kill(false);
        assert_eq!(looks.get(), 3);
        child.wait().unwrap();
        assert_eq!(strays.running(), 0);
    }
}
