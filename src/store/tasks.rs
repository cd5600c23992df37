//! `Store`: the layout of a home and the reading and writing of task records.
//!
//! ```text
//! <home>/tasks/<token>/record.json   the TaskRecord (atomic writes)
//! <home>/tasks/<token>/spec.json     the TaskSpec
//! <home>/tasks/<token>/lock          flock held by the supervisor
//! <home>/tasks/<token>/ctl.sock      the supervisor's control socket
//! <home>/tasks/<token>/reserve       disk space set aside to record the end on a full disk
//! <home>/subagents/<role>/data/history/<token>.log | .summary.md | .question.md
//! ```

use std::fs::{self, DirBuilder};
use std::io::ErrorKind;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::home::{check_home, create_home, ensure_dir, locate_home};
use super::{Durability, EventLog, FileLock, files, write_atomic};
use crate::error::{Error, IoContext, Result};
use crate::task::{Role, SupervisorId, TaskRecord, TaskSpec, Token};

/// The largest record or spec agentctl writes (a spec holds the agent's argv).
const MAX_RECORD: u64 = 64 << 20;

/// A home directory, created 0700, with a canonical path (no symlinks in it).
#[derive(Clone, Debug)]
pub struct Store {
    home: PathBuf,
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
        Ok(Store { home })
    }

    /// The home at `home`, which must exist: for commands that only read (a mistyped --home is
    /// said to be one, not created).
    pub fn existing(home: &Path) -> Result<Store> {
        let (home, found) = locate_home(home)?;
        // `tasks/` marks a home; an unrelated directory is not made private.
        if !found || !home.join("tasks").is_dir() {
            return Err(Error::NoHome(home));
        }
        check_home(&home)?;
        Ok(Store { home })
    }

    /// Create the home and its layout; nothing happens to what is already there.
    pub fn create(&self) -> Result<()> {
        create_home(&self.home)?;
        ensure_dir(&self.home, Path::new("tasks"))?;
        ensure_dir(&self.home, Path::new("events"))?;
        Ok(())
    }

    /// The absolute home directory.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// `tasks/<token>/`: the record, spec, lock and control socket of one task.
    pub fn task_dir(&self, t: Token) -> PathBuf {
        self.home.join("tasks").join(t.as_str())
    }

    /// The home's event log.
    pub fn events(&self) -> EventLog {
        EventLog::new(self.home.join("events"))
    }

    /// The task's lock file.
    pub fn lock_path(&self, t: Token) -> PathBuf {
        self.task_dir(t).join("lock")
    }

    /// Who supervises (or supervised) task `t`, as its supervisor wrote in the task's lock file.
    pub fn supervisor_id(&self, t: Token) -> Option<SupervisorId> {
        let bytes = files::read(&self.lock_path(t), 128).ok()?;
        SupervisorId::parse(&String::from_utf8_lossy(&bytes))
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

    /// Save the record: atomically, and durably once it is final. A crash that loses a
    /// starting or running record loses nothing true: the task would be `lost` anyway.
    pub fn write_record(&self, rec: &TaskRecord) -> Result<()> {
        let how = if rec.ended.is_some() { Durability::Durable } else { Durability::Atomic };
        self.write_json(&self.task_dir(rec.token).join("record.json"), rec, how)
    }

    /// Load the record; `UnknownToken` if there is no such task.
    pub fn read_record(&self, t: Token) -> Result<TaskRecord> {
        self.read_json(t, "record.json")
    }

    /// Save the spec (once, before the supervisor starts).
    pub fn write_spec(&self, t: Token, spec: &TaskSpec) -> Result<()> {
        self.write_json(&self.task_dir(t).join("spec.json"), spec, Durability::Atomic)
    }

    /// Load the spec.
    pub fn read_spec(&self, t: Token) -> Result<TaskSpec> {
        self.read_json(t, "spec.json")
    }

    fn write_json<T: Serialize>(&self, path: &Path, value: &T, how: Durability) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(value).map_err(|e| Error::Internal(format!("cannot encode: {e}")))?;
        write_atomic(path, &bytes, how)
    }

    fn read_json<T: DeserializeOwned>(&self, t: Token, name: &str) -> Result<T> {
        let path = self.task_dir(t).join(name);
        let bytes = match files::read(&path, MAX_RECORD) {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(Error::UnknownToken { token: t, home: self.home.clone() });
            }
            Err(e) => return Err(e).ctx(|| format!("cannot read {}", path.display())),
        };
        serde_json::from_slice(&bytes)
            .map_err(|e| Error::Internal(format!("{} is damaged ({e}); remove that task's directory", path.display())))
    }

    /// Every task token in the home, sorted.
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
