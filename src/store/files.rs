//! Opening the files of a home: never through a symlink (in any part of the path), never
//! anything but a regular file (a FIFO or a device would block or never end), never more
//! than the caller can hold.
//!
//! Every path given here is under the home, whose own path is canonical, so a symlink
//! anywhere in it was planted. On Linux `openat2(RESOLVE_NO_SYMLINKS)` refuses them all; where
//! that call is missing, `O_NOFOLLOW` still refuses the last component.

use std::fmt;
use std::fs::File;
use std::io::{self, ErrorKind, Read};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// The cause of an `io::Error` for a file agentctl will not use: a symlink, a FIFO, a device,
/// a directory where a file belongs, or a file too large to be what agentctl wrote.
#[derive(Debug)]
pub struct Refused(pub String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// An I/O error in words: a refusal says what to do; anything else as the system says it.
pub fn describe(e: &io::Error) -> String {
    match e.get_ref().and_then(|r| r.downcast_ref::<Refused>()) {
        Some(r) => r.0.clone(),
        None => e.to_string(),
    }
}

fn refused(path: &Path, what: &str) -> io::Error {
    io::Error::new(
        ErrorKind::InvalidInput,
        Refused(format!(
            "{} is {what}, where the home keeps a regular file of its own; such a file is never followed or \
             read: remove it",
            path.display()
        )),
    )
}

/// How to open: for reading, or for reading and writing (created 0600 if missing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    /// Read and write, created 0600 if missing (locks, the event log).
    ReadWriteCreate,
}

/// Make the file at `path`, which must not exist yet, private (0600) and holding `bytes`.
pub fn create(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?.write_all(bytes)
}

/// Open the regular file at `path` under the home. `NotFound` passes through as it is.
pub fn open(path: &Path, access: Access) -> io::Result<File> {
    let flags = libc::O_CLOEXEC
        | libc::O_NOCTTY
        | libc::O_NOFOLLOW
        // A FIFO would block the open itself until a writer came.
        | libc::O_NONBLOCK
        | match access {
            Access::Read => libc::O_RDONLY,
            Access::ReadWriteCreate => libc::O_RDWR | libc::O_CREAT,
        };
    let file = match open_no_symlinks(path, flags) {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(refused(path, "a symlink (or under one)")),
        // A socket cannot be opened at all.
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => return Err(refused(path, "a FIFO or socket")),
        Err(e) if e.raw_os_error() == Some(libc::EISDIR) => return Err(refused(path, "a directory")),
        Err(e) => return Err(e),
    };
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() || kind.is_socket() {
            "a FIFO or socket"
        } else {
            "a device"
        };
        return Err(refused(path, what));
    }
    // O_NONBLOCK stays: regular files ignore it (an agent's output is opened anew, without it).
    Ok(file)
}

/// Whether `path` is a directory reached through no symlink (one call where the kernel has
/// `openat2`; false where it cannot tell).
pub(super) fn is_real_dir(path: &Path) -> bool {
    cfg!(target_os = "linux") && open_no_symlinks(path, libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC).is_ok()
}

/// Whether the kernel has `openat2` (Linux 5.6); learned on the first call.
#[cfg(target_os = "linux")]
fn open_no_symlinks(path: &Path, flags: libc::c_int) -> io::Result<File> {
    use std::sync::atomic::{AtomicBool, Ordering};

    use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
    use nix::sys::stat::Mode;

    static MISSING: AtomicBool = AtomicBool::new(false);
    if !MISSING.load(Ordering::Relaxed) {
        // openat2 refuses a mode unless the file may be created.
        let mode = if flags & libc::O_CREAT != 0 { 0o600 } else { 0 };
        let how = OpenHow::new()
            .flags(OFlag::from_bits_retain(flags))
            .mode(Mode::from_bits_truncate(mode))
            .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
        match openat2(nix::fcntl::AT_FDCWD, path, how) {
            Ok(fd) => return Ok(File::from(fd)),
            // No openat2 (old kernel, or a sandbox that filters it): O_NOFOLLOW alone.
            Err(nix::errno::Errno::ENOSYS | nix::errno::Errno::EPERM) => MISSING.store(true, Ordering::Relaxed),
            Err(e) => return Err(e.into()),
        }
    }
    open_plain(path, flags)
}

#[cfg(not(target_os = "linux"))]
fn open_no_symlinks(path: &Path, flags: libc::c_int) -> io::Result<File> {
    open_plain(path, flags)
}

fn open_plain(path: &Path, flags: libc::c_int) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut o = std::fs::OpenOptions::new();
    // The access mode is in `flags`; OpenOptions wants one of read/write set to build.
    o.read(flags & libc::O_ACCMODE != libc::O_WRONLY)
        .write(flags & libc::O_ACCMODE != libc::O_RDONLY)
        .mode(0o600)
        .custom_flags(flags & !libc::O_ACCMODE & !libc::O_CREAT);
    if flags & libc::O_CREAT != 0 {
        o.create(true);
    }
    if flags & libc::O_APPEND != 0 {
        o.append(true);
    }
    o.open(path)
}

/// Read the whole regular file at `path` under the home, refusing one larger than `max`
/// bytes (agentctl never wrote it). `NotFound` passes through.
pub fn read(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let mut f = open(path, Access::Read)?;
    let mut bytes = Vec::new();
    f.by_ref().take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(refused(path, &format!("larger than the {max} bytes written there")));
    }
    Ok(bytes)
}

/// Check that the directory `dir` under the home is reached through no symlink, before
/// agentctl writes into it.
pub fn check_dir(dir: &Path) -> io::Result<()> {
    let flags = libc::O_CLOEXEC | libc::O_DIRECTORY | libc::O_PATH | libc::O_NOFOLLOW;
    match open_no_symlinks(dir, flags) {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
            Err(refused(dir, "a symlink (or under one)"))
        }
        Err(e) => Err(e),
    }
}

/// Make the empty database file `file` 0600 before SQLite opens it: SQLite would make it 0644,
/// and its WAL and shared-memory files take its mode. It is made whole under another name and
/// linked into place, so that no opener ever sees it other than private, and closed before:
/// closing a descriptor on it later would drop the locks this process's connections hold on it.
/// Where it cannot be made (a read-only home), SQLite says why.
pub(super) fn create_private(file: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let fresh = file.with_extension(format!("db.new.{}.{n}", std::process::id()));
    if std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&fresh).is_ok() {
        // Another opener may have linked its own meanwhile: either is the empty store.
        let _ = std::fs::hard_link(&fresh, file);
        let _ = std::fs::remove_file(&fresh);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_symlinks_fifos_devices_and_oversized_files() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        let real = home.join("real");
        std::fs::write(&real, b"hello").unwrap();
        assert_eq!(read(&real, 100).unwrap(), b"hello");
        assert!(read(&real, 3).unwrap_err().to_string().contains("larger than"));
        assert_eq!(read(&home.join("missing"), 10).unwrap_err().kind(), ErrorKind::NotFound);

        let link = home.join("link");
        std::os::unix::fs::symlink("/etc/hostname", &link).unwrap();
        let sub = home.join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("f"), b"x").unwrap();
        let linked_dir = home.join("linked");
        std::os::unix::fs::symlink(&sub, &linked_dir).unwrap();
        let fifo = home.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        for (path, what) in [
            (link.clone(), "symlink"),
            (linked_dir.join("f"), "symlink"),
            (fifo.clone(), "FIFO"),
            (sub.clone(), "directory"),
        ] {
            for access in [Access::Read, Access::ReadWriteCreate] {
                let e = open(&path, access).unwrap_err();
                let refused = e.get_ref().and_then(|r| r.downcast_ref::<Refused>()).map(|r| r.0.clone());
                assert!(refused.as_deref().is_some_and(|m| m.contains(what)), "{path:?} {access:?}: {e}");
            }
        }
        assert!(check_dir(&sub).is_ok());
        assert!(check_dir(&linked_dir).is_err());
        assert!(open(Path::new("/dev/null"), Access::Read).unwrap_err().to_string().contains("a device"));
    }
}
