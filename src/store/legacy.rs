//! What earlier releases kept in files, brought into the database: task records and specs
//! (`tasks/<token>/record.json`, `spec.json`), the event log (`events/log.jsonl`) and the
//! list of events already taken (`events/consumed`).
//!
//! The first open of such a home imports them all in the migration's transaction. A
//! supervisor of the earlier release still running at the upgrade goes on writing those files;
//! what it writes is taken in later: its final record when its task is next looked at
//! (`late_record`), its events whenever events are read (`import_late_events`).

use std::collections::HashSet;
use std::fs;
use std::io::ErrorKind;
use std::ops::Deref;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};

use super::db::{self, err};
use super::rows::{insert_as, to_json};
use super::{FileLock, files};
use crate::error::{IoContext, Result};
use crate::task::{Event, TaskRecord, TaskSpec, Token};

/// The largest record or spec an earlier release wrote.
const MAX_RECORD: u64 = 64 << 20;

/// What the migration imported: the record and spec files (with their identity when read),
/// removed once the import is committed.
pub(super) struct Imported(Vec<(PathBuf, String)>);

/// The lock earlier releases append to the event log under, if the home has an event log.
pub(super) fn lock_events(home: &Path) -> Result<Option<FileLock>> {
    let dir = home.join("events");
    if !dir.is_dir() {
        return Ok(None);
    }
    FileLock::take(&dir.join("lock")).map(Some)
}

/// Import every task record and spec, and the event log with what was consumed of it, in the
/// migration's transaction `tx`, under `lock_events`. Events keep their seqs.
pub(super) fn import_files(tx: &Connection, home: &Path) -> Result<Imported> {
    let what = || format!("cannot import the earlier files of home {}", home.display());
    let mut imported = Vec::new();
    let tasks = home.join("tasks");
    let entries = match fs::read_dir(&tasks) {
        Ok(e) => Some(e),
        Err(e) if e.kind() == ErrorKind::NotFound => None,
        Err(e) => return Err(e).ctx(what),
    };
    let mut insert = tx
        .prepare(
            "INSERT OR IGNORE INTO tasks (token, created_at_ms, ended_at_ms, status, role, record, spec) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .map_err(err(what))?;
    for entry in entries.into_iter().flatten().flatten() {
        let Some(t) = entry.file_name().to_str().and_then(|n| Token::parse(n).ok()) else { continue };
        let (record_path, spec_path) = (entry.path().join("record.json"), entry.path().join("spec.json"));
        let Some((rec, rec_id)) = read_json::<TaskRecord>(&record_path) else { continue };
        if rec.token != t {
            continue;
        }
        let spec = read_json::<TaskSpec>(&spec_path);
        insert
            .execute(params![
                t.as_str(),
                rec.created_at_ms as i64,
                rec.ended.as_ref().map(|e| e.at_ms as i64),
                rec.status().as_str(),
                rec.role.as_str(),
                to_json(&rec)?,
                spec.as_ref().map(|(s, _)| to_json(s)).transpose()?,
            ])
            .map_err(err(what))?;
        imported.push((record_path, rec_id));
        imported.extend(spec.map(|(_, id)| (spec_path, id)));
    }
    let events = home.join("events");
    let consumed: HashSet<u64> = match files::read(&events.join("consumed"), u64::MAX / 2) {
        Ok(b) => String::from_utf8_lossy(&b).lines().filter_map(|l| l.trim().parse().ok()).collect(),
        Err(_) => HashSet::new(),
    };
    import_event_file(tx, &events, &consumed)?;
    Ok(Imported(imported))
}

/// Import `events/log.jsonl` (renamed to `importing.jsonl` first, so that an earlier release's
/// appends go to a new file) in `tx`, recording the file's identity with its events: once
/// committed, a crash before the file is removed cannot bring them in twice. The caller holds
/// `lock_events`.
fn import_event_file(tx: &Connection, events: &Path, consumed: &HashSet<u64>) -> Result<()> {
    let (log, taking) = (events.join("log.jsonl"), events.join("importing.jsonl"));
    if fs::symlink_metadata(&taking).is_err() {
        match fs::rename(&log, &taking) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e).ctx(|| format!("cannot take in {}", log.display())),
        }
    }
    let meta = fs::symlink_metadata(&taking).ctx(|| format!("cannot read {}", taking.display()))?;
    let what = || format!("cannot take in {}", taking.display());
    let done: Option<String> = tx
        .query_row("SELECT value FROM meta WHERE key = 'imported_events'", [], |r| r.get(0))
        .optional()
        .map_err(err(what))?;
    if done.as_deref() == Some(identity(&meta).as_str()) {
        return Ok(());
    }
    import_log(tx, &taking, consumed)?;
    tx.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('imported_events', ?1)", [identity(&meta)])
        .map_err(err(what))?;
    Ok(())
}

/// A file's identity: inode, size and change times (a file written after it never matches).
fn identity(meta: &fs::Metadata) -> String {
    format!(
        "{}:{}:{}.{}:{}.{}",
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec()
    )
}

/// Insert the events of a log file, keeping each seq unless it is taken (then the next one).
fn import_log(tx: &Connection, log: &Path, consumed: &HashSet<u64>) -> Result<()> {
    let bytes = match files::read(log, u64::MAX / 2) {
        Ok(b) => b,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).ctx(|| format!("cannot read {}", log.display())),
    };
    for line in bytes.split(|&b| b == b'\n') {
        let Ok(event) = serde_json::from_slice::<Event>(line) else { continue };
        let delivered = event.seq.is_some_and(|s| consumed.contains(&s));
        let at = event.time.as_deref().and_then(|t| humantime::parse_rfc3339(t).ok());
        insert_as(tx, event, at, delivered)?;
    }
    Ok(())
}

/// Remove the files the migration imported, those still as they were read (a record an
/// earlier supervisor wrote since is left for `late_record`), and the event log's.
pub(super) fn remove_imported_files(home: &Path, imported: &Imported) {
    for (path, id) in &imported.0 {
        if fs::symlink_metadata(path).is_ok_and(|m| &identity(&m) == id) {
            let _ = fs::remove_file(path);
        }
    }
    for name in ["importing.jsonl", "consumed"] {
        let _ = fs::remove_file(home.join("events").join(name));
    }
}

/// The final record an earlier release's supervisor wrote in its file after the upgrade, if
/// there is one, and where it is (to remove once it is taken in). `task_dir` is task `t`'s
/// directory; the caller holds the task's lock.
pub(super) fn late_record(task_dir: &Path, t: Token) -> Option<(TaskRecord, PathBuf)> {
    let path = task_dir.join("record.json");
    let (rec, _) = read_json::<TaskRecord>(&path)?;
    (rec.token == t && rec.ended.is_some()).then_some((rec, path))
}

/// Take in events an earlier release's supervisor appended to `events/log.jsonl` of `home`
/// after the upgrade (see `import_event_file`), through the connection `db` opens; whether
/// any were. Costs two `stat`s when there are none.
pub(super) fn import_late_events<C: Deref<Target = Connection>>(
    home: &Path,
    db: impl FnOnce() -> Result<C>,
) -> Result<bool> {
    let dir = home.join("events");
    let (log, taking) = (dir.join("log.jsonl"), dir.join("importing.jsonl"));
    if fs::symlink_metadata(&log).is_err() && fs::symlink_metadata(&taking).is_err() {
        return Ok(false);
    }
    // The store first: opening it may migrate, which takes the same lock.
    let conn = db()?;
    let Some(_lock) = lock_events(home)? else { return Ok(false) };
    let what = || format!("cannot take in {}", log.display());
    let tx = db::write_durably(&conn).map_err(err(what))?;
    import_event_file(&tx, &dir, &HashSet::new())?;
    tx.commit().map_err(err(what))?;
    let _ = fs::remove_file(&taking);
    Ok(true)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Option<(T, String)> {
    let meta = fs::symlink_metadata(path).ok()?;
    let value = files::read(path, MAX_RECORD).ok().and_then(|b| serde_json::from_slice(&b).ok())?;
    Some((value, identity(&meta)))
}
