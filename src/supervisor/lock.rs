//! The task's lock file as its supervisor holds it for its whole life: marked with what whoever
//! finds the supervisor dead (or stopped) needs to end the task: who it was, the task's cgroup,
//! the backend's run (a Slurm job).

use std::os::fd::OwnedFd;

use crate::task::{LockNote, SupervisorId};

/// The held lock and what it says.
pub(super) struct Lock {
    fd: OwnedFd,
    note: LockNote,
}

impl Lock {
    /// The lock on `fd`, marked at once with `id`: whoever finds us dead can then find the
    /// task's processes, however early that happens.
    pub(super) fn new(fd: OwnedFd, id: Option<SupervisorId>) -> Lock {
        let mut lock = Lock { fd, note: LockNote::default() };
        lock.mark(|note| note.id = id);
        lock
    }

    /// Change what the lock file says, and write it (each write holds what the last did, and
    /// more, but for a later run's job).
    pub(super) fn mark(&mut self, change: impl FnOnce(&mut LockNote)) {
        change(&mut self.note);
        if self.note == LockNote::default() {
            return;
        }
        let text = self.note.to_text();
        // A later run's job replaces the earlier one's: nothing of a longer text is left after.
        if rustix::io::pwrite(&self.fd, text.as_bytes(), 0).is_ok() {
            let _ = rustix::fs::ftruncate(&self.fd, text.len() as u64);
        }
    }
}
