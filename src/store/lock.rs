//! Exclusive file locks (flock). A task's lock is held by its supervisor for its whole life,
//! so a free lock with no final record means the supervisor died; the event log's lock
//! serialises appends and consumption.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::{IoContext, Result};

/// An exclusive `flock` on a lock file. It is released when the last descriptor of its open file
/// description closes: on drop here, unless a supervisor shares it (see `launch`).
pub struct FileLock(File);

impl FileLock {
    /// Take the lock without waiting; `None` when someone (the live supervisor) holds it.
    pub fn try_take(path: &Path) -> Result<Option<FileLock>> {
        FileLock::lock(path, libc::LOCK_EX | libc::LOCK_NB)
    }

    /// Take the lock, waiting for its holder (only for locks held briefly).
    pub fn take(path: &Path) -> Result<FileLock> {
        FileLock::lock(path, libc::LOCK_EX)?.ok_or_else(|| crate::error::Error::Internal("flock gave way".into()))
    }

    fn lock(path: &Path, how: libc::c_int) -> Result<Option<FileLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .ctx(|| format!("cannot open lock {}", path.display()))?;
        // SAFETY: flock on a descriptor we own.
        loop {
            if unsafe { libc::flock(file.as_raw_fd(), how) } == 0 {
                return Ok(Some(FileLock(file)));
            }
            match io::Error::last_os_error() {
                e if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                e if e.kind() == io::ErrorKind::Interrupted => continue,
                e => return Err(e).ctx(|| format!("cannot lock {}", path.display())),
            }
        }
    }

    /// The descriptor, for handing the held lock to the supervisor across exec.
    pub fn raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}
