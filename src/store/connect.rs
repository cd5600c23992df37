//! Connections to the home's SQLite database (`<home>/agentctl.db`, WAL): opening it, bringing
//! its schema up to date (`schema`, importing what earlier releases kept in files: `legacy`),
//! and a small pool of connections per process.
//!
//! Connections are opened lazily and kept for reuse. A process that forks without exec (the
//! CLI starting a supervisor) closes them first: SQLite connections and their locks must never
//! cross a fork.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::db::{err, path, write_durably};
use super::legacy;
use super::schema::{MIGRATIONS, SCHEMA_VERSION};
use crate::error::{Error, Result};

/// How much of the database file a connection maps to read it (SQLite maps at most 2 GiB;
/// a bigger store is read past that as before).
const MMAP_SIZE: i64 = 0x7fff_0000;

/// How long a write waits for another process's transaction. Transactions here take
/// milliseconds; a thousand supervisors ending at once queue up behind each other.
const BUSY_WAIT: Duration = Duration::from_secs(60);

/// Wait for another connection's lock (`attempt` counts from 0): SQLite's own handler sleeps a
/// whole millisecond first, several times what the commit it waits for takes; this one starts
/// at 20 µs and doubles up to 82 ms, for `BUSY_WAIT` in all. False gives up. (The long steps
/// matter as much: a thousand supervisors ending at once must not wake each other up faster
/// than the commits they wait for go through.)
fn wait_for_lock(attempt: i32) -> bool {
    const FIRST: Duration = Duration::from_micros(20);
    const DOUBLINGS: u32 = 12;
    let n = attempt.max(0) as u32;
    let doubled = n.min(DOUBLINGS);
    // What the earlier attempts slept: the doublings, then the longest step each.
    let slept = FIRST * ((1 << doubled) - 1) + FIRST * (1 << DOUBLINGS) * n.saturating_sub(DOUBLINGS);
    if slept >= BUSY_WAIT {
        return false;
    }
    std::thread::sleep(FIRST * (1 << doubled));
    true
}

/// Wait for other connections' locks (`wait_for_lock`), or (`false`) not at all.
fn be_patient(conn: &Connection, patient: bool) -> rusqlite::Result<()> {
    if patient { conn.busy_handler(Some(wait_for_lock)) } else { conn.busy_handler(None) }
}

/// Idle connections of one home, shared by the clones of its `Store`.
#[derive(Debug)]
pub struct Pool {
    home: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

/// A connection taken from the pool; it goes back on drop.
pub struct Conn<'a> {
    pool: &'a Pool,
    conn: Option<Connection>,
}

impl std::ops::Deref for Conn<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn.as_ref().expect("held until drop")
    }
}

impl std::ops::DerefMut for Conn<'_> {
    fn deref_mut(&mut self) -> &mut Connection {
        self.conn.as_mut().expect("held until drop")
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        if let (Some(conn), Ok(mut idle)) = (self.conn.take(), self.pool.idle.lock()) {
            idle.push(conn);
        }
    }
}

impl Pool {
    /// No connections yet to the database of `home`.
    pub fn new(home: PathBuf) -> Pool {
        Pool { home, idle: Mutex::default() }
    }

    /// A connection to the database, opened (and the schema brought up to date) if none is
    /// idle.
    pub fn get(&self) -> Result<Conn<'_>> {
        let idle = self.idle.lock().ok().and_then(|mut v| v.pop());
        let conn = match idle {
            Some(c) => c,
            None => open(&self.home)?,
        };
        Ok(Conn { pool: self, conn: Some(conn) })
    }

    /// Close every idle connection (before a fork that does not exec).
    pub fn close_all(&self) {
        if let Ok(mut idle) = self.idle.lock() {
            idle.clear();
        }
    }

    /// Empty the write-ahead log once it has grown past `LOG_KEPT` (see `checkpoint_now`),
    /// with an idle connection if there is one.
    pub fn checkpoint(&self) {
        if log_len(&self.home) < LOG_KEPT {
            return;
        }
        if let Ok(conn) = self.get() {
            checkpoint_now(&conn);
        }
    }
}

/// As the last handle on a home goes (a command ends): SQLite would empty the log as its last
/// connection closes, but that costs every short command a sync (`NO_CKPT_ON_CLOSE`); here it
/// is done once the log has grown past `LOG_KEPT`. A log left to grow costs every process
/// that opens the store alone a replay of the whole log, and each commit past SQLite's
/// threshold a copy of all of it.
impl Drop for Pool {
    fn drop(&mut self) {
        let has_idle = self.idle.get_mut().is_ok_and(|idle| !idle.is_empty());
        if has_idle {
            self.checkpoint();
        }
    }
}

/// Open the database of `home` (created if missing), read-write if the home allows it, else
/// read-only; bring the schema up to date.
///
/// The database file is only ever opened by SQLite: closing any other descriptor on it would
/// drop the POSIX locks this process's connections hold on it.
fn open(home: &Path) -> Result<Connection> {
    let file = path(home);
    let what = || format!("cannot open the store {}", file.display());
    // One look at its name serves every check below (each command opens the store).
    let found = std::fs::symlink_metadata(&file).ok();
    // A symlink planted at its name is refused with the home's own words (SQLite refuses it too).
    if found.as_ref().is_some_and(|m| !m.is_file()) {
        let refused = super::files::open(&file, super::files::Access::Read).err();
        return Err(refused.map_or_else(|| Error::Internal(what()), |e| Error::from_io(e, what)));
    }
    let base = OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_NOFOLLOW | OpenFlags::SQLITE_OPEN_URI;
    if found.is_none() {
        super::files::create_private(&file);
    }
    let rw =
        Connection::open_with_flags(&file, base | OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE);
    let conn = match rw {
        Ok(c) => c,
        Err(_) if read_only_home(home) && !file.exists() => return Err(no_store_here(home)),
        Err(e) if read_only_home(home) => open_read_only(&file, base).map_err(|_| e).map_err(err(what))?,
        Err(e) => return Err(err(what)(e)),
    };
    // Made by SQLite after all (a file system without hard links), or by an older agentctl:
    // private from now on. (chmod by name: no descriptor of ours on the file.)
    // (A home that cannot be written keeps it as it is.)
    use std::os::unix::fs::PermissionsExt;
    let open_to_others = |m: &std::fs::Metadata| m.permissions().mode() & 0o077 != 0;
    let made_now = || std::fs::metadata(&file).is_ok_and(|m| open_to_others(&m));
    if found.as_ref().map_or_else(made_now, open_to_others) {
        let _ = std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600));
    }
    be_patient(&conn, true).map_err(err(what))?;
    // Most commands are short processes: closing the last connection would otherwise copy the
    // WAL into the database, sync it and delete the WAL, for every command. Commits check
    // point the WAL once it holds 1 000 pages.
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true).map_err(err(what))?;
    // Not-final writes need not reach the disk before returning (a crash then loses nothing
    // true: the task would be `lost`); the final ones raise this to FULL (see `write_durably`).
    conn.pragma_update(None, "synchronous", "NORMAL").map_err(err(what))?;
    // Pages read through a mapping of the file rather than one system call each (writes still
    // go through the log).
    let _ = conn.pragma_update(None, "mmap_size", MMAP_SIZE);
    let read_version = |conn: &Connection| conn.pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0));
    if read_version(&conn).ok() == Some(SCHEMA_VERSION) {
        return Ok(conn);
    }
    if read_only_home(home) {
        return match read_version(&conn).map_err(err(what))? {
            v if v > SCHEMA_VERSION => Err(newer(&file, v)),
            _ => Err(no_store_here(home)),
        };
    }
    // The first open by this release, or another process is setting the store up right now:
    // one process at a time, under an flock on the home directory.
    let _setup = super::FileLock::take_dir(home)?;
    let version = read_version(&conn).map_err(err(what))?;
    if version > SCHEMA_VERSION {
        return Err(newer(&file, version));
    }
    if version < SCHEMA_VERSION {
        migrate(&conn, home)?;
    }
    Ok(conn)
}

fn newer(file: &Path, version: i64) -> Error {
    Error::Usage(format!(
        "the store {} was written by a newer agentctl (schema {version}, this one knows {SCHEMA_VERSION}); use that \
         release, or another home",
        file.display()
    ))
}

fn no_store_here(home: &Path) -> Error {
    Error::Usage(format!(
        "the home {} is read-only and its store is not set up for this agentctl (it was written by an earlier \
         release, or nothing has run in it): run any command on it once with write access",
        home.display()
    ))
}

/// Read-only: a home on a read-only mount. A WAL database there is read through its existing
/// shared-memory file; without one, as immutable (nobody can change it meanwhile anyway).
fn open_read_only(file: &Path, base: OpenFlags) -> rusqlite::Result<Connection> {
    let ro = base | OpenFlags::SQLITE_OPEN_READ_ONLY;
    let conn = Connection::open_with_flags(file, ro)?;
    match conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(())) {
        Ok(()) => Ok(conn),
        Err(_) => {
            let escaped: String = file
                .to_string_lossy()
                .chars()
                .map(|c| match c {
                    '%' | '?' | '#' => format!("%{:02X}", c as u32),
                    c => c.to_string(),
                })
                .collect();
            Connection::open_with_flags(format!("file:{escaped}?immutable=1"), ro)
        }
    }
}

/// Whether the home is on a read-only mount (or otherwise not writable by us).
fn read_only_home(home: &Path) -> bool {
    nix::unistd::access(home, nix::unistd::AccessFlags::W_OK).is_err()
        || nix::sys::statvfs::statvfs(home).is_ok_and(|s| s.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
}

/// Bring the schema to `SCHEMA_VERSION`, one migration at a time, in one transaction; the
/// first one imports what an earlier release kept in files. Concurrent openers wait for the
/// first and find the work done.
fn migrate(conn: &Connection, home: &Path) -> Result<()> {
    let what = || format!("cannot set up the store {}", path(home).display());
    // Both only take effect on a new database; prune gives freed pages back (`compact`).
    conn.pragma_update(None, "auto_vacuum", "INCREMENTAL").map_err(err(what))?;
    conn.pragma_update(None, "journal_mode", "WAL").map_err(err(what))?;
    // An earlier release's supervisor may still append to its event log meanwhile.
    let _events = legacy::lock_events(home)?;
    let tx = write_durably(conn).map_err(err(what))?;
    let version: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(err(what))?;
    let mut imported = None;
    for (i, step) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        tx.execute_batch(step).map_err(err(what))?;
        if i == 0 {
            imported = Some(legacy::import_files(&tx, home)?);
        }
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION).map_err(err(what))?;
    tx.commit().map_err(err(what))?;
    // A new store: its files' names on the disk (SQLite, built without it, syncs no directory).
    if version == 0 {
        let _ = std::fs::File::open(home).and_then(|d| d.sync_all());
    }
    mark_schema(home);
    if let Some(imported) = imported {
        legacy::remove_imported_files(home, &imported);
    }
    Ok(())
}

/// The file beside the database that says its schema, for a start that does not open it
/// (`Store::check_schema`). Every release that changes the schema writes it as it does.
fn schema_mark(home: &Path) -> PathBuf {
    home.join("schema")
}

/// Say the schema is this release's (best effort: without it, a start opens the database).
pub(super) fn mark_schema(home: &Path) {
    let _ =
        super::write_atomic(&schema_mark(home), format!("{SCHEMA_VERSION}\n").as_bytes(), super::Durability::Atomic);
}

/// Whether the schema mark says this release's schema.
pub(super) fn schema_marked(home: &Path) -> bool {
    let mark = std::fs::read_to_string(schema_mark(home)).ok();
    mark.and_then(|m| m.trim().parse::<i64>().ok()) == Some(SCHEMA_VERSION)
}

/// How long the write-ahead log may grow before a process empties it (`Pool::checkpoint`):
/// about four short tasks' writes. Every process that opens the store while no other has it
/// open replays the whole log first (one read per page), and most commands are such processes;
/// emptying it costs the process that does it three syncs (the log, the database, the log's
/// new header), after its work is done: about one per task's life.
const LOG_KEPT: u64 = 512 * 1024;

/// The length of the write-ahead log (0 if there is none).
fn log_len(home: &Path) -> u64 {
    let mut wal = path(home).into_os_string();
    wal.push("-wal");
    std::fs::metadata(wal).map_or(0, |m| m.len())
}

/// Checkpoint and truncate the write-ahead log without waiting for another connection: when
/// one writes or reads an older state, only what can be copied is (`Store::checkpoint`).
fn checkpoint_now(conn: &Connection) {
    if be_patient(conn, false).is_ok() {
        // Copying first, without the write lock, keeps writers from waiting while pages are
        // copied and synced; truncating then holds it only for the rest.
        let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
        let emptied = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get::<_, i64>(0)) == Ok(0);
        // The first write to an empty log writes its header and syncs it: done here, where
        // nobody waits, not by the next task's start.
        if emptied {
            let _ = conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('log_emptied_at_ms', ?1)",
                [crate::task::unix_ms(std::time::SystemTime::now()).to_string()],
            );
        }
        let _ = be_patient(conn, true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_for_a_lock_gives_up_after_the_whole_wait() {
        // The steps as `wait_for_lock` takes them, without sleeping them.
        let step = |n: u32| Duration::from_micros(20) * (1 << n.min(12));
        let mut slept = Duration::ZERO;
        let mut n = 0;
        while slept < BUSY_WAIT {
            slept += step(n);
            n += 1;
        }
        // It sleeps (a first step of 20 µs) until the attempt whose earlier sleeps reach BUSY_WAIT.
        let start = std::time::Instant::now();
        assert!(wait_for_lock(0));
        assert!(start.elapsed() >= Duration::from_micros(20));
        assert!(!wait_for_lock(n as i32));
        assert!(slept - step(n - 1) < BUSY_WAIT, "the attempt before the last still waits");
    }

    #[test]
    fn a_store_of_a_newer_schema_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        drop(open(&home).unwrap());
        let conn = Connection::open(path(&home)).unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
        drop(conn);
        let e = open(&home).unwrap_err().to_string();
        assert!(e.contains("written by a newer agentctl") && e.contains("use that release"), "{e}");
    }

    #[test]
    fn the_store_is_private_in_wal_mode_and_set_up_once() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        let conns: Vec<Connection> = std::thread::scope(|s| {
            let opening: Vec<_> = (0..4).map(|_| s.spawn(|| open(&home).unwrap())).collect();
            opening.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let mode: String = conns[0].pragma_query_value(None, "journal_mode", |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal");
        let version: i64 = conns[1].pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        for name in ["agentctl.db", "agentctl.db-wal", "agentctl.db-shm"] {
            let perms = std::fs::metadata(home.join(name)).unwrap().permissions().mode() & 0o777;
            assert_eq!(perms, 0o600, "{name}");
        }
    }
}
