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
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};

use super::db::{self, err};
use super::files;
use super::{FileLock, Store};
use crate::error::{IoContext, Result};
use crate::task::{Event, TaskRecord, TaskSpec, Token};

/// The largest record or spec an earlier release wrote.
const MAX_RECORD: u64 = 64 << 20;

/// Import every task record and spec, and the event log with what was consumed of it, in the
/// migration's transaction `tx`. Events keep their seqs.
pub(super) fn import_files(tx: &Connection, home: &Path) -> Result<()> {
    let what = || format!("cannot import the earlier files of home {}", home.display());
    let tasks = home.join("tasks");
    let entries = match fs::read_dir(&tasks) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).ctx(what),
    };
    let mut insert = tx
        .prepare("INSERT OR IGNORE INTO tasks (token, created_at_ms, ended_at_ms, status, role, record, spec) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")
        .map_err(err(what))?;
    for entry in entries.flatten() {
        let Some(t) = entry.file_name().to_str().and_then(|n| Token::parse(n).ok()) else { continue };
        let Some(rec) = read_json::<TaskRecord>(&entry.path().join("record.json")) else { continue };
        let spec = read_json::<TaskSpec>(&entry.path().join("spec.json"));
        if rec.token != t {
            continue;
        }
        insert
            .execute(params![
                t.as_str(),
                rec.created_at_ms as i64,
                rec.ended.as_ref().map(|e| e.at_ms as i64),
                rec.status().as_str(),
                rec.role.as_str(),
                serde_json::to_string(&rec).unwrap_or_default(),
                spec.map(|s| serde_json::to_string(&s).unwrap_or_default()),
            ])
            .map_err(err(what))?;
    }
    let events = home.join("events");
    let consumed: HashSet<u64> = match files::read(&events.join("consumed"), u64::MAX / 2) {
        Ok(b) => String::from_utf8_lossy(&b).lines().filter_map(|l| l.trim().parse().ok()).collect(),
        Err(_) => HashSet::new(),
    };
    import_log(tx, &events.join("log.jsonl"), &consumed)
}

/// Insert the events of a log file, keeping each seq unless it is taken (then the next one).
fn import_log(tx: &Connection, log: &Path, consumed: &HashSet<u64>) -> Result<()> {
    let bytes = match files::read(log, u64::MAX / 2) {
        Ok(b) => b,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).ctx(|| format!("cannot read {}", log.display())),
    };
    let what = || format!("cannot import {}", log.display());
    for line in bytes.split(|&b| b == b'\n') {
        let Ok(mut event) = serde_json::from_slice::<Event>(line) else { continue };
        let old = event.seq;
        let next: i64 = tx
            .query_row("SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0) + 1", [], |r| {
                r.get(0)
            })
            .map_err(err(what))?;
        let seq = old.map(|s| s as i64).filter(|&s| s >= next).unwrap_or(next);
        event.seq = Some(seq as u64);
        let state = if old.is_some_and(|s| consumed.contains(&s)) { 2 } else { 0 };
        let at_ms = event
            .time
            .as_deref()
            .and_then(|t| humantime::parse_rfc3339(t).ok())
            .map_or(0, |t| crate::task::unix_ms(t) as i64);
        tx.execute(
            "INSERT INTO events (seq, session, kind, token, at_ms, body, state) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                seq,
                event.session,
                event.kind.as_str(),
                event.token.map(|t| t.to_string()),
                at_ms,
                serde_json::to_string(&event).unwrap_or_default(),
                state
            ],
        )
        .map_err(err(what))?;
    }
    Ok(())
}

/// Remove the files the migration imported (best effort: what is left is never read again,
/// except a record an earlier supervisor writes later, which `late_record` takes in).
pub(super) fn remove_imported_files(home: &Path) {
    if let Ok(entries) = fs::read_dir(home.join("tasks")) {
        for entry in entries.flatten() {
            for name in ["record.json", "spec.json"] {
                let _ = fs::remove_file(entry.path().join(name));
            }
        }
    }
    for name in ["log.jsonl", "consumed"] {
        let _ = fs::remove_file(home.join("events").join(name));
    }
}

/// The final record an earlier release's supervisor wrote in its file after the upgrade, if
/// there is one; removed once taken in. The caller holds the task's lock.
pub(super) fn late_record(store: &Store, t: Token) -> Option<TaskRecord> {
    let path = store.task_dir(t).join("record.json");
    let rec = read_json::<TaskRecord>(&path).filter(|r| r.token == t && r.ended.is_some())?;
    let _ = fs::remove_file(&path);
    Some(rec)
}

/// Take in events an earlier release's supervisor appended to `events/log.jsonl` after the
/// upgrade. The file is renamed before it is read and its identity recorded with its events,
/// so a crash at any point neither loses nor repeats them. Costs one `stat` when there are none.
pub(super) fn import_late_events(store: &Store) -> Result<()> {
    let dir = store.home().join("events");
    let (log, taking) = (dir.join("log.jsonl"), dir.join("importing.jsonl"));
    if fs::symlink_metadata(&log).is_err() && fs::symlink_metadata(&taking).is_err() {
        return Ok(());
    }
    // The lock earlier releases append under.
    let _lock = FileLock::take(&dir.join("lock"))?;
    if fs::symlink_metadata(&taking).is_err() {
        match fs::rename(&log, &taking) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e).ctx(|| format!("cannot take in {}", log.display())),
        }
    }
    let meta = fs::symlink_metadata(&taking).ctx(|| format!("cannot read {}", taking.display()))?;
    let identity = format!("{}:{}:{}", meta.ino(), meta.size(), meta.mtime_nsec());
    let conn = store.db()?;
    let what = || format!("cannot take in {}", taking.display());
    let tx = db::write_durably(&conn).map_err(err(what))?;
    let done: Option<String> = tx
        .query_row("SELECT value FROM meta WHERE key = 'late_events'", [], |r| r.get(0))
        .optional()
        .map_err(err(what))?;
    if done.as_deref() != Some(identity.as_str()) {
        import_log(&tx, &taking, &HashSet::new())?;
        tx.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('late_events', ?1)", [&identity])
            .map_err(err(what))?;
        tx.commit().map_err(err(what))?;
        store.events().ring();
    }
    let _ = fs::remove_file(&taking);
    Ok(())
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    files::read(path, MAX_RECORD).ok().and_then(|b| serde_json::from_slice(&b).ok())
}
