//! `Store`: a home, where each of its files lives, and its database connections.
//!
//! ```text
//! <home>/agentctl.db                 records, specs, events (SQLite, see `connect`)
//! <home>/events/bell                 written after each new event: waiters watch `events/`
//! <home>/tasks/<token>/lock          flock held by the supervisor
//! <home>/tasks/<token>/ctl.sock      the supervisor's control socket
//! <home>/tasks/<token>/reserve       disk space set aside to record the end on a full disk
//! <home>/subagents/<role>/data/history/<token>.log | .summary.md | .question.md | .result.md
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::connect::{Conn, Pool};
use super::files;
use super::home::{check_home, check_owner, create_home, ensure_dir, locate_home};
use crate::error::{Error, Result};
use crate::task::{LockNote, Role, SupervisorId, Token};

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

    /// The answers of the tasks task `t` waited for (`{after_file}`).
    pub fn after_path(&self, t: Token) -> PathBuf {
        self.task_dir(t).join("after.md")
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

    /// Refuse a store a newer release wrote, as opening it would, without opening it when its
    /// schema mark says it is this release's; else open it (bringing an older one up to date)
    /// and mark it.
    pub fn check_schema(&self) -> Result<()> {
        if super::connect::schema_marked(&self.home) {
            return Ok(());
        }
        drop(self.db()?);
        super::connect::mark_schema(&self.home);
        Ok(())
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

    /// What a running task's agent stream says so far (usage, current step), as JSON, published
    /// by its supervisor.
    pub fn seen_path(&self, t: Token) -> PathBuf {
        self.task_dir(t).join("seen.json")
    }

    /// What running task `t`'s supervisor last published of its agent's stream, if it did.
    pub fn read_seen(&self, t: Token) -> Option<crate::agent::Seen> {
        let bytes = super::files::read(&self.seen_path(t), 1 << 20).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// What task `t`'s agent spent as its supervisor last published it, if it reported any.
    pub fn usage_so_far(&self, t: Token) -> Option<crate::agent::Usage> {
        self.read_seen(t).map(|s| s.usage).filter(|u| u.is_known())
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
}
