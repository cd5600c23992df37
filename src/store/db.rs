//! Reading and writing the home's SQLite database: where it is, errors that say what was being
//! done, and write transactions that wait their turn (connections: `connect`).

use std::path::{Path, PathBuf};

use rusqlite::Connection;

use crate::error::Error;

/// The database file of a home.
pub fn path(home: &Path) -> PathBuf {
    home.join("agentctl.db")
}

/// A database error with what was being done. A full disk keeps its kind, so that the end of a
/// task can give back its reserve and try again.
pub fn err(what: impl FnOnce() -> String) -> impl FnOnce(rusqlite::Error) -> Error {
    move |e| {
        let kind = match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DiskFull) => Some(std::io::ErrorKind::StorageFull),
            Some(rusqlite::ErrorCode::ReadOnly) => Some(std::io::ErrorKind::ReadOnlyFilesystem),
            Some(rusqlite::ErrorCode::CannotOpen | rusqlite::ErrorCode::PermissionDenied) => {
                Some(std::io::ErrorKind::PermissionDenied)
            }
            _ => None,
        };
        let advice = match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                "; another process held the store for over a minute: try again, and look for a stuck agentctl"
            }
            Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) => {
                "; the store is damaged: move agentctl.db (and its -wal and -shm files) aside to start a new one, or \
                 restore it from a backup"
            }
            _ => "",
        };
        match kind {
            Some(kind) => Error::Io { context: what(), source: std::io::Error::new(kind, e) },
            None => Error::Internal(format!("{}: {e}{advice}", what())),
        }
    }
}

/// A write transaction, rolled back unless committed.
pub struct Tx<'a> {
    conn: &'a Connection,
    done: bool,
    durable: bool,
}

impl std::ops::Deref for Tx<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Tx<'_> {
    /// Commit: on the disk before this returns if the transaction was begun `durable`, else
    /// possibly lost by a crash (never torn).
    pub fn commit(mut self) -> rusqlite::Result<()> {
        self.done = true;
        let committed = self.conn.execute_batch("COMMIT");
        if committed.is_err() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        committed
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        if self.durable {
            let _ = self.conn.pragma_update(None, "synchronous", "NORMAL");
        }
    }
}

/// Start a write transaction: `BEGIN IMMEDIATE`, so that it waits for other writers at its
/// start and never has to be retried halfway. (rusqlite's own `Transaction` wants `&mut`.)
pub fn write(conn: &Connection) -> rusqlite::Result<Tx<'_>> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    Ok(Tx { conn, done: false, durable: false })
}

/// `write`, committed to the disk before `commit` returns (the level can only change between
/// transactions).
pub fn write_durably(conn: &Connection) -> rusqlite::Result<Tx<'_>> {
    conn.pragma_update(None, "synchronous", "FULL")?;
    let mut tx = write(conn).inspect_err(|_| {
        let _ = conn.pragma_update(None, "synchronous", "NORMAL");
    })?;
    tx.durable = true;
    Ok(tx)
}
