//! `Store`: the layout of a home and the reading and writing of task records.
//!
//! ```text
//! <home>/agentctl.db                 records, specs, events (SQLite, see `db`)
//! <home>/events/bell                 written after each new event: waiters watch `events/`
//! <home>/tasks/<token>/lock          flock held by the supervisor
//! <home>/tasks/<token>/ctl.sock      the supervisor's control socket
//! <home>/tasks/<token>/reserve       disk space set aside to record the end on a full disk
//! <home>/subagents/<role>/data/history/<token>.log | .summary.md | .question.md | .result.md
//! ```

use std::fs::{self, DirBuilder};
use std::io::ErrorKind;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::{OptionalExtension, params};

use super::db::{Conn, Pool, err};
use super::home::{check_home, check_owner, create_home, ensure_dir, locate_home};
use super::{EventLog, FileLock, files};
use crate::error::{Error, IoContext, Result};
use crate::task::{LockNote, Role, SupervisorId, TaskRecord, TaskSpec, Token};

/// A home directory, created 0700, with a canonical path (no symlinks in it), and its store.
#[derive(Clone, Debug)]
pub struct Store {
    home: PathBuf,
    pool: Arc<Pool>,
    /// The home existed and was checked (`check_home`) when this store was made.
    checked: bool,
}

impl Store {
    /// The home at `home`, created with its layout if needed: for commands that write.
    pub fn open(home: &Path) -> Result<Store> {
        let store = Store::at(home)?;
        store.create()?;
        Ok(store)
    }

    /// The home at `home` as it is, creating nothing (checked if it exists): for commands that
    /// validate their input before they create anything (`create` then makes it).
    pub fn at(home: &Path) -> Result<Store> {
        let (home, found) = locate_home(home)?;
        if found {
            check_home(&home)?;
        }
        Ok(Store::with(home, found))
    }

    fn with(home: PathBuf, checked: bool) -> Store {
        Store { pool: Arc::new(Pool::new(home.clone())), home, checked }
    }

    /// The home at `home`, which must exist: for commands that only read (a mistyped --home is
    /// said to be one, not created).
    pub fn existing(home: &Path) -> Result<Store> {
        let (home, found) = locate_home(home)?;
        // Another user's home hides its `tasks/`: it is not theirs, rather than none.
        if found {
            check_owner(&home)?;
        }
        // `tasks/` marks a home; an unrelated directory is not made private.
        if !found || !home.join("tasks").is_dir() {
            return Err(Error::NoHome(home));
        }
        check_home(&home)?;
        Ok(Store::with(home, true))
    }

    /// Create the home and its layout; nothing happens to what is already there.
    pub fn create(&self) -> Result<()> {
        // A home checked already is not checked (nor warned about) twice.
        if !self.checked {
            create_home(&self.home)?;
        }
        ensure_dir(&self.home, Path::new("tasks"))?;
        ensure_dir(&self.home, Path::new("events"))?;
        Ok(())
    }

    /// `<home>/rel`, made (each missing part 0700) if needed, never through a symlink.
    pub fn private_dir(&self, rel: &Path) -> Result<PathBuf> {
        ensure_dir(&self.home, rel)
    }

    /// The absolute home directory.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// `tasks/<token>/`: the lock, control socket and line count of one task.
    pub fn task_dir(&self, t: Token) -> PathBuf {
        self.home.join("tasks").join(t.as_str())
    }

    /// The home's events.
    pub fn events(&self) -> EventLog<'_> {
        EventLog::new(self)
    }

    /// A connection to the home's database.
    pub(super) fn db(&self) -> Result<Conn<'_>> {
        self.pool.get()
    }

    /// The same home with connections of its own, for a process forked from this one: close
    /// this one's first (`close_db`), since SQLite connections must not cross a fork.
    pub fn detached(&self) -> Store {
        Store::with(self.home.clone(), self.checked)
    }

    /// Close the idle connections to the database: before forking without exec, and before a
    /// long sleep (an open connection keeps a lock on the store's files, which the kernel walks
    /// past on every lock any other process takes: a thousand sleeping ones slow all).
    pub fn close_db(&self) {
        self.pool.close_all();
    }

    /// Empty the write-ahead log if it has grown past a few tasks' worth, best effort, never
    /// waiting (`Pool::checkpoint`). A supervisor does it as it exits, after its task's end is
    /// recorded; other processes as their last handle on the store goes.
    pub fn checkpoint(&self) {
        self.pool.checkpoint();
    }

    /// Where task `t`'s git worktree is (`--worktree`).
    pub fn worktree_path(&self, t: Token) -> PathBuf {
        self.home.join("worktrees").join(t.as_str())
    }

    /// The task's lock file.
    pub fn lock_path(&self, t: Token) -> PathBuf {
        self.task_dir(t).join("lock")
    }

    /// Who supervises (or supervised) task `t`, as its supervisor wrote in the task's lock file.
    pub fn supervisor_id(&self, t: Token) -> Option<SupervisorId> {
        self.lock_note(t).id
    }

    /// What task `t`'s supervisor wrote in its lock file: who it is, and the task's cgroup and
    /// Slurm job, known even if it never recorded anything else.
    pub fn lock_note(&self, t: Token) -> LockNote {
        let bytes = files::read(&self.lock_path(t), 16 * 1024).unwrap_or_default();
        LockNote::parse(&String::from_utf8_lossy(&bytes))
    }

    /// The supervisor's control socket.
    pub fn socket_path(&self, t: Token) -> PathBuf {
        self.task_dir(t).join("ctl.sock")
    }

    /// How much of a running task's log its supervisor has counted (see `logfile::Checkpoint`).
    pub fn lines_path(&self, t: Token) -> PathBuf {
        self.task_dir(t).join("lines")
    }

    fn history_dir(&self, role: &Role) -> PathBuf {
        self.home.join("subagents").join(role.as_str()).join("data").join("history")
    }

    /// `subagents/<role>/data/history/<token>.log`
    pub fn log_path(&self, role: &Role, t: Token) -> PathBuf {
        self.history_dir(role).join(format!("{t}.log"))
    }

    /// `subagents/<role>/data/history/<token>.summary.md`
    pub fn summary_path(&self, role: &Role, t: Token) -> PathBuf {
        self.history_dir(role).join(format!("{t}.summary.md"))
    }

    /// `subagents/<role>/data/history/<token>.question.md`, for `{question_file}` templates.
    pub fn question_path(&self, role: &Role, t: Token) -> PathBuf {
        self.history_dir(role).join(format!("{t}.question.md"))
    }

    /// `subagents/<role>/data/history/<token>.result.md`, for `{result_file}` templates: the
    /// agent writes its answer there.
    pub fn result_path(&self, role: &Role, t: Token) -> PathBuf {
        self.history_dir(role).join(format!("{t}.result.md"))
    }

    /// Create a task with a fresh unique token and take its lock. Nothing is left behind if
    /// that fails (a full disk, say).
    pub fn create_task(&self, role: &Role) -> Result<(Token, FileLock)> {
        ensure_dir(&self.home, &Path::new("subagents").join(role.as_str()).join("data/history"))?;
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
    /// `queued` (its supervisor waits). Whether it is queued.
    pub fn insert_task(&self, rec: &TaskRecord, spec: &TaskSpec) -> Result<bool> {
        let what = || format!("cannot save task {}", rec.token);
        let conn = self.db()?;
        let tx = super::db::write(&conn).map_err(err(what))?;
        let queued = match &spec.pool {
            Some(pool) => {
                super::pools::full(&tx, &pool.name, pool.parallel.unwrap_or(crate::agents::DEFAULT_PARALLEL))?
            }
            None => false,
        };
        let saved = TaskRecord { queued, ..rec.clone() };
        tx.execute(
            "INSERT INTO tasks (token, created_at_ms, status, role, record, spec, pool, queue_seq) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, (SELECT coalesce(max(queue_seq), 0) + 1 FROM tasks))",
            params![
                saved.token.as_str(),
                saved.created_at_ms as i64,
                saved.status().as_str(),
                saved.role.as_str(),
                to_json(&saved)?,
                to_json(spec)?,
                spec.pool.as_ref().map(|p| p.name.as_str()),
            ],
        )
        .map_err(err(what))?;
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

    /// Load the record; `UnknownToken` if there is no such task.
    pub fn read_record(&self, t: Token) -> Result<TaskRecord> {
        self.read_json(t, "record")
    }

    /// Load the spec.
    pub fn read_spec(&self, t: Token) -> Result<TaskSpec> {
        self.read_json(t, "spec")
    }

    fn read_json<T: serde::de::DeserializeOwned>(&self, t: Token, column: &str) -> Result<T> {
        let what = || format!("cannot read task {t}");
        let conn = self.db()?;
        let sql = format!("SELECT {column} FROM tasks WHERE token = ?1");
        let text: Option<Option<String>> =
            conn.query_row(&sql, [t.as_str()], |r| r.get(0)).optional().map_err(err(what))?;
        match text.flatten() {
            Some(text) => from_json(t, &text),
            None => Err(Error::UnknownToken { token: t, home: self.home.clone() }),
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
        let dir = self.home.join("tasks");
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

/// A record or spec as stored.
pub(super) fn to_json<T: serde::Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Error::Internal(format!("cannot encode: {e}")))
}

pub(super) fn from_json<T: serde::de::DeserializeOwned>(t: Token, text: &str) -> Result<T> {
    serde_json::from_str(text)
        .map_err(|e| Error::Internal(format!("the stored record of task {t} is damaged ({e}); prune it")))
}
