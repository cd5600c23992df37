//! The per-task lock: held by the supervisor for its whole life, so a free lock with no final
//! record means the supervisor died.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::{IoContext, Result};

/// An exclusive `flock` on a task's lock file. It is released when the last descriptor of its
/// open file description closes: on drop here, unless the supervisor shares it (see `launch`).
pub struct TaskLock(File);

impl TaskLock {
    /// Take the lock without waiting; `None` when someone (the live supervisor) holds it.
    pub fn try_take(path: &Path) -> Result<Option<TaskLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .ctx(|| format!("cannot open lock {}", path.display()))?;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(Some(TaskLock(file)));
        }
        match io::Error::last_os_error() {
            e if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            e => Err(e).ctx(|| format!("cannot lock {}", path.display())),
        }
    }

    /// The descriptor, for handing the held lock to the supervisor across exec.
    pub fn raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}
