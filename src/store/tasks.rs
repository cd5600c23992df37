//! Task records: creating a task, saving and reading its record and spec, listing tokens.

use std::fs::{self, DirBuilder};
use std::io::ErrorKind;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use rusqlite::{OptionalExtension, params};

use super::db::err;
use super::home::ensure_dir;
use super::rows::{from_json, to_json};
use super::{FileLock, Store};
use crate::error::{Error, IoContext, Result};
use crate::task::{Role, TaskRecord, TaskSpec, Token};

/// A task's spec as read: from its own table, else (saved by an earlier release) its row's.
const SPEC: &str = "coalesce((SELECT spec FROM specs WHERE specs.token = tasks.token), spec)";

/// Save task `t`'s spec, over the one it had.
fn save_spec(conn: &rusqlite::Connection, t: Token, spec: &TaskSpec) -> Result<()> {
    let what = || format!("cannot save task {t}");
    conn.execute("INSERT OR REPLACE INTO specs (token, spec) VALUES (?1, ?2)", params![t.as_str(), to_json(spec)?])
        .map(drop)
        .map_err(err(what))
}

/// Whether a task about to start waits for a place: its pool is full, or has a spend limit (its
/// supervisor looks at what the pool spent first).
fn must_queue(tx: &rusqlite::Connection, spec: &TaskSpec) -> Result<bool> {
    if waits_first(spec) {
        return Ok(true);
    }
    match &spec.pool {
        Some(pool) => super::pools::full(tx, &pool.name, pool.parallel.unwrap_or(crate::agents::DEFAULT_PARALLEL)),
        None => Ok(false),
    }
}

/// Whether a task waits before it starts whatever its pool holds: for other tasks (`--after`),
/// or for its supervisor to look at what its pool spent, or at the memory free.
pub fn waits_first(spec: &TaskSpec) -> bool {
    spec.after.is_some() || spec.pool.as_ref().is_some_and(|p| p.spend.is_some() || p.min_memory.is_some())
}

impl Store {
    /// Create a task with a fresh unique token and take its lock. Nothing is left behind if
    /// that fails (a full disk, say).
    pub fn create_task(&self, role: &Role) -> Result<(Token, FileLock)> {
        ensure_dir(self.home(), &Path::new("subagents").join(role.as_str()).join("data/history"))?;
        for _ in 0..1000 {
            let t = Token::random();
            let dir = self.task_dir(t);
            match DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => {
                    let taken = FileLock::create(&self.lock_path(t)).and_then(|lock| {
                        self.reserve_space(t)?;
                        Ok(lock)
                    });
                    if taken.is_err() {
                        let _ = fs::remove_dir_all(&dir);
                    }
                    return Ok((t, taken?));
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e).ctx(|| format!("cannot create {}", dir.display())),
            }
        }
        Err(Error::Internal("could not find a free token after 1000 tries; prune old tasks".into()))
    }

    /// Save a new task. One of a pool that has a place free for it (and nobody queued ahead)
    /// takes it in the same transaction and is saved `starting`; one that has none is saved
    /// `queued` (its supervisor waits). Whether it is queued; `Refused` if it is saved already.
    pub fn insert_task(&self, rec: &TaskRecord, spec: &TaskSpec) -> Result<bool> {
        let what = || format!("cannot save task {}", rec.token);
        let conn = self.db()?;
        let tx = super::db::write(&conn).map_err(err(what))?;
        let queued = must_queue(&tx, spec)?;
        let saved = TaskRecord { queued, ..rec.clone() };
        let inserted = tx
            .execute(
                "INSERT INTO tasks (token, created_at_ms, status, role, record, pool, queue_seq) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, (SELECT coalesce(max(queue_seq), 0) + 1 FROM tasks)) \
                 ON CONFLICT (token) DO NOTHING",
                params![
                    saved.token.as_str(),
                    saved.created_at_ms as i64,
                    saved.status().as_str(),
                    saved.role.as_str(),
                    to_json(&saved)?,
                    spec.pool.as_ref().map(|p| p.name.as_str()),
                ],
            )
            .map_err(err(what))?;
        if inserted == 0 {
            return Err(Error::Refused(format!("task {} is saved already", rec.token)));
        }
        save_spec(&tx, rec.token, spec)?;
        tx.commit().map_err(err(what))?;
        Ok(queued)
    }

    /// Save a task about to start: a new one (`insert_task`), or the next turn of one that
    /// ended (`reopen_task`). Whether it is queued.
    pub fn save_start(&self, rec: &TaskRecord, spec: &TaskSpec) -> Result<bool> {
        match rec.turns.is_empty() {
            true => self.insert_task(rec, spec),
            false => self.reopen_task(rec, spec),
        }
    }

    /// Save the next turn of a task that ended, over its final record (the caller holds its
    /// lock), in its pool's line as a new task would be. Whether it is queued.
    pub fn reopen_task(&self, rec: &TaskRecord, spec: &TaskSpec) -> Result<bool> {
        let what = || format!("cannot save task {}", rec.token);
        let conn = self.db()?;
        let tx = super::db::write(&conn).map_err(err(what))?;
        let queued = must_queue(&tx, spec)?;
        let saved = TaskRecord { queued, ..rec.clone() };
        let changed = tx
            .execute(
                "UPDATE tasks SET record = ?2, spec = NULL, summary = NULL, status = ?3, pool = ?4, \
                 ended_at_ms = NULL, queue_seq = (SELECT coalesce(max(queue_seq), 0) + 1 FROM tasks) \
                 WHERE token = ?1 AND ended_at_ms IS NOT NULL",
                params![
                    saved.token.as_str(),
                    to_json(&saved)?,
                    saved.status().as_str(),
                    spec.pool.as_ref().map(|p| p.name.as_str()),
                ],
            )
            .map_err(err(what))?;
        if changed == 0 {
            return Err(Error::Refused(format!("task {} is not ended: it cannot begin another turn", rec.token)));
        }
        save_spec(&tx, rec.token, spec)?;
        tx.commit().map_err(err(what))?;
        Ok(queued)
    }

    /// Save a record that is not final (a crash may lose this write, which loses nothing true:
    /// the task would be `lost` anyway). Final records are written by `finish`, once.
    pub fn write_record(&self, rec: &TaskRecord) -> Result<()> {
        debug_assert!(rec.ended.is_none(), "final records go through finish");
        let what = || format!("cannot save task {}", rec.token);
        let conn = self.db()?;
        conn.execute(super::pools::WRITE_RECORD, params![rec.token.as_str(), to_json(rec)?, rec.status().as_str()])
            .map_err(err(what))?;
        Ok(())
    }

    /// Load the record (of a task just handed back, moved into the database first: see
    /// `starting`); `UnknownToken` if there is no such task.
    pub fn read_record(&self, t: Token) -> Result<TaskRecord> {
        match self.read_db_record(t) {
            Err(Error::UnknownToken { .. }) => self.settle_read(t),
            read => read,
        }
    }

    /// The record in the database alone.
    pub(super) fn read_db_record(&self, t: Token) -> Result<TaskRecord> {
        self.read_json(t, "record")
    }

    /// `read`, what was read of task `t`'s summary file, or, if that file is not there (a crash
    /// of the machine lost it: it is not synced), the answer saved with the task's end. A task
    /// not ended, or ended by an earlier release, has none saved: `read` stands.
    pub fn or_saved_answer(&self, t: Token, read: std::io::Result<Vec<u8>>) -> std::io::Result<Vec<u8>> {
        match read {
            Err(e) if e.kind() == ErrorKind::NotFound => match self.saved_answer(t) {
                Ok(Some(text)) => Ok(text.into_bytes()),
                _ => Err(e),
            },
            read => read,
        }
    }

    /// The answer saved with task `t`'s end, if it has one.
    fn saved_answer(&self, t: Token) -> Result<Option<String>> {
        let what = || format!("cannot read task {t}");
        let conn = self.db()?;
        let text = conn.query_row("SELECT summary FROM tasks WHERE token = ?1", [t.as_str()], |r| r.get(0)).optional();
        Ok(text.map_err(err(what))?.flatten())
    }

    /// Load the spec.
    pub fn read_spec(&self, t: Token) -> Result<TaskSpec> {
        match self.read_json(t, SPEC) {
            Err(Error::UnknownToken { .. }) => {
                self.settle_read(t)?;
                self.read_json(t, SPEC)
            }
            read => read,
        }
    }

    /// Save the spec of task `t` as its supervisor made it final (its command rendered again
    /// with what it waited for).
    pub fn write_spec(&self, t: Token, spec: &TaskSpec) -> Result<()> {
        let what = || format!("cannot save task {t}");
        let conn = self.db()?;
        save_spec(&conn, t, spec)?;
        conn.execute("UPDATE tasks SET spec = NULL WHERE token = ?1 AND spec IS NOT NULL", [t.as_str()])
            .map_err(err(what))?;
        Ok(())
    }

    fn read_json<T: serde::de::DeserializeOwned>(&self, t: Token, column: &str) -> Result<T> {
        let what = || format!("cannot read task {t}");
        let conn = self.db()?;
        let sql = format!("SELECT {column} FROM tasks WHERE token = ?1");
        let text: Option<Option<String>> =
            conn.query_row(&sql, [t.as_str()], |r| r.get(0)).optional().map_err(err(what))?;
        match text.flatten() {
            Some(text) => from_json(t, &text),
            None => Err(Error::UnknownToken { token: t, home: self.home().to_path_buf() }),
        }
    }

    /// The tasks whose record is not final: running ones, and any whose supervisor died
    /// unnoticed. Their number does not grow with history.
    pub fn open_tokens(&self) -> Result<Vec<Token>> {
        self.tokens_where("ended_at_ms IS NULL")
    }

    /// The tokens of the tasks in the database that match `condition` (SQL of ours).
    pub(super) fn tokens_where(&self, condition: &str) -> Result<Vec<Token>> {
        let what = || "cannot list the tasks".to_owned();
        let conn = self.db()?;
        let mut stmt = conn.prepare_cached(&format!("SELECT token FROM tasks WHERE {condition}")).map_err(err(what))?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0)).map_err(err(what))?;
        Ok(rows.flatten().filter_map(|t| Token::parse(&t).ok()).collect())
    }

    /// Every task directory's token in the home, sorted (strays included: tasks whose launcher
    /// died before saving the record).
    pub fn tokens(&self) -> Result<Vec<Token>> {
        let dir = self.home().join("tasks");
        let mut out = Vec::new();
        for entry in fs::read_dir(&dir).ctx(|| format!("cannot list {}", dir.display()))? {
            let entry = entry.ctx(|| format!("cannot list {}", dir.display()))?;
            if let Some(t) = entry.file_name().to_str().and_then(|n| Token::parse(n).ok()) {
                out.push(t);
            }
        }
        out.sort();
        Ok(out)
    }
}
