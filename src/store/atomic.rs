//! Whole-file writes that readers see entirely or not at all.

use std::io::Write;
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
pub fn write_atomic(path: &Path, bytes: &[u8], how: Durability) -> Result<()> {
    let dir = path.parent().expect("record paths have a parent");
    let what = || format!("cannot write {}", path.display());
    // Never into a directory that a planted symlink redirects.
    super::files::check_dir(dir).ctx(what)?;
    // Named after the file, so a stray left by a crash can be traced to its task and removed.
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut tmp = tempfile::Builder::new().prefix(&format!(".tmp-{name}-")).tempfile_in(dir).ctx(what)?;
    tmp.write_all(bytes).ctx(what)?;
    if how == Durability::Durable {
        tmp.as_file().sync_all().ctx(what)?;
    }
    tmp.persist(path).map_err(|e| e.error).ctx(what)?;
    if how == Durability::Durable {
        std::fs::File::open(dir).and_then(|d| d.sync_all()).ctx(what)?;
    }
    Ok(())
}
