//! Whole-file writes that readers see entirely or not at all.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::{IoContext, Result};

/// How much a write must survive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Readers see all of it or none of it (temp file, rename).
    Atomic,
    /// Also on disk before this returns (fsync of the file, then of its directory).
    Durable,
}

/// Write `bytes` to `path` via a 0600 temp file in the same directory and a rename; with
/// `Durable`, fsync the file before the rename and the directory after it.
///
/// The temp file's name is fixed (`.tmp-<name>`): each file agentctl writes this way has one
/// writer at a time (the holder of its task's lock), and a temp file a crash left is simply
/// written over next time, or removed with its task, without looking through the directory.
pub fn write_atomic(path: &Path, bytes: &[u8], how: Durability) -> Result<()> {
    let dir = path.parent().expect("record paths have a parent");
    let what = || format!("cannot write {}", path.display());
    // Never into a directory that a planted symlink redirects.
    super::files::check_dir(dir).ctx(what)?;
    let tmp = temp_path(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)
        .ctx(what)?;
    file.write_all(bytes).ctx(what)?;
    if how == Durability::Durable {
        file.sync_all().ctx(what)?;
    }
    drop(file);
    std::fs::rename(&tmp, path).ctx(what)?;
    if how == Durability::Durable {
        std::fs::File::open(dir).and_then(|d| d.sync_all()).ctx(what)?;
    }
    Ok(())
}

/// Where `write_atomic` writes `path` before renaming it.
pub fn temp_path(path: &Path) -> std::path::PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".tmp-{name}"))
}
