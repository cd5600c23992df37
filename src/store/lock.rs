//! Exclusive file locks (flock). A task's lock is held by its supervisor for its whole life,
//! so a free lock with no final record means the supervisor died. (An earlier release's event
//! log is appended to under one too; see `legacy`.)

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::Path;
use std::time::{Duration, Instant};

use super::files::{self, Access};
use crate::error::{IoContext, Result};

/// An exclusive `flock` on a lock file. It is released when the last descriptor of its open file
/// description closes: on drop here, unless a supervisor shares it (see `launch`).
pub struct FileLock(File);

impl FileLock {
    /// Create the lock file of a new task and take it.
    pub fn create(path: &Path) -> Result<FileLock> {
        let file =
            files::open(path, Access::ReadWriteCreate).ctx(|| format!("cannot create lock {}", path.display()))?;
        FileLock::lock(file, path, libc::LOCK_EX | libc::LOCK_NB)?.ok_or_else(|| {
            crate::error::Error::Internal(format!("fresh lock {} was taken by someone else", path.display()))
        })
    }

    /// Take an existing lock without waiting; `None` when someone (the live supervisor) holds
    /// it. Opened for reading only (flock needs no more), so a read-only home can be checked.
    pub fn try_take(path: &Path) -> Result<Option<FileLock>> {
        let file = match files::open(path, Access::Read) {
            // Removed by hand: nobody can hold it; make one to serialise whoever comes next.
            Err(e) if e.kind() == io::ErrorKind::NotFound => files::open(path, Access::ReadWriteCreate),
            other => other,
        }
        .ctx(|| format!("cannot open lock {}", path.display()))?;
        FileLock::lock(file, path, libc::LOCK_EX | libc::LOCK_NB)
    }

    /// Take an existing lock, waiting at most `limit` for its holder to let go.
    pub fn take_within(path: &Path, limit: Duration) -> Result<Option<FileLock>> {
        let give_up = Instant::now() + limit;
        loop {
            if let Some(lock) = FileLock::try_take(path)? {
                return Ok(Some(lock));
            }
            if Instant::now() >= give_up {
                return Ok(None);
            }
            // flock has no timeout; its holders here are processes about to exit.
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Take the lock (created if needed), waiting for its holder (only for locks held briefly).
    pub fn take(path: &Path) -> Result<FileLock> {
        let file = files::open(path, Access::ReadWriteCreate).ctx(|| format!("cannot open lock {}", path.display()))?;
        FileLock::wait_for(file, path)
    }

    /// Take a task's lock again for its next turn: for writing (its new supervisor notes who it
    /// is in it), waiting at most `limit` for the last turn's supervisor to exit.
    pub fn take_again(path: &Path, limit: Duration) -> Result<Option<FileLock>> {
        let give_up = Instant::now() + limit;
        loop {
            let file =
                files::open(path, Access::ReadWriteCreate).ctx(|| format!("cannot open lock {}", path.display()))?;
            if let Some(lock) = FileLock::lock(file, path, libc::LOCK_EX | libc::LOCK_NB)? {
                return Ok(Some(lock));
            }
            if Instant::now() >= give_up {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Take an exclusive lock on the directory `dir` itself, waiting for its holder (only for
    /// locks held briefly: a store's first setup).
    pub fn take_dir(dir: &Path) -> Result<FileLock> {
        let file = File::open(dir).ctx(|| format!("cannot open {}", dir.display()))?;
        FileLock::wait_for(file, dir)
    }

    /// An exclusive lock on `file` (named `path`), waiting for its holder.
    fn wait_for(file: File, path: &Path) -> Result<FileLock> {
        FileLock::lock(file, path, libc::LOCK_EX)?.ok_or_else(|| crate::error::Error::Internal("flock gave way".into()))
    }

    fn lock(file: File, path: &Path, how: libc::c_int) -> Result<Option<FileLock>> {
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
