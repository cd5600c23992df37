//! `Store`: the layout of a home and the reading and writing of task records.
//!
//! ```text
//! <home>/tasks/<token>/record.json   the TaskRecord (atomic writes)
//! <home>/tasks/<token>/spec.json     the TaskSpec
//! <home>/tasks/<token>/lock          flock held by the supervisor
//! <home>/tasks/<token>/ctl.sock      the supervisor's control socket
//! <home>/subagents/<role>/data/history/<token>.log | .summary.md | .question.md
//! ```

use std::fs::{self, DirBuilder};
use std::io::ErrorKind;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{EventLog, FileLock, write_atomic};
use crate::error::{Error, IoContext, Result};
use crate::task::{Ended, Event, EventKind, Outcome, Role, TaskRecord, TaskSpec, Token, summary_preview, unix_ms};

/// A home directory, created 0700, with absolute paths.
#[derive(Clone, Debug)]
pub struct Store {
    home: PathBuf,
}

fn mkdir_0700(path: &Path) -> Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(path).ctx(|| format!("cannot create {}", path.display()))
}

impl Store {
    /// Open (creating if needed) the home at `home`.
    pub fn open(home: &Path) -> Result<Store> {
        mkdir_0700(&home.join("tasks"))?;
        mkdir_0700(&home.join("events"))?;
        let home = home.canonicalize().ctx(|| format!("cannot resolve home {}", home.display()))?;
        Ok(Store { home })
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

    /// The supervisor's control socket.
    pub fn socket_path(&self, t: Token) -> PathBuf {
        self.task_dir(t).join("ctl.sock")
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

    /// Create a task with a fresh unique token and take its lock.
    pub fn create_task(&self, role: &Role) -> Result<(Token, FileLock)> {
        mkdir_0700(&self.history_dir(role))?;
        for _ in 0..1000 {
            let t = Token::random();
            let dir = self.task_dir(t);
            match DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => {
                    let lock = FileLock::try_take(&self.lock_path(t))?
                        .ok_or_else(|| Error::Internal(format!("fresh task {t} was locked by someone else")))?;
                    return Ok((t, lock));
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e).ctx(|| format!("cannot create {}", dir.display())),
            }
        }
        Err(Error::Internal("could not find a free token after 1000 tries; prune old tasks".into()))
    }

    /// Save the record (atomically).
    pub fn write_record(&self, rec: &TaskRecord) -> Result<()> {
        self.write_json(&self.task_dir(rec.token).join("record.json"), rec)
    }

    /// Load the record; `UnknownToken` if there is no such task.
    pub fn read_record(&self, t: Token) -> Result<TaskRecord> {
        self.read_json(t, "record.json")
    }

    /// Save the spec (once, before the supervisor starts).
    pub fn write_spec(&self, t: Token, spec: &TaskSpec) -> Result<()> {
        self.write_json(&self.task_dir(t).join("spec.json"), spec)
    }

    /// Load the spec.
    pub fn read_spec(&self, t: Token) -> Result<TaskSpec> {
        self.read_json(t, "spec.json")
    }

    fn write_json<T: Serialize>(&self, path: &Path, value: &T) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(value).map_err(|e| Error::Internal(format!("cannot encode: {e}")))?;
        write_atomic(path, &bytes)
    }

    fn read_json<T: DeserializeOwned>(&self, t: Token, name: &str) -> Result<T> {
        let path = self.task_dir(t).join(name);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(Error::UnknownToken { token: t, home: self.home.clone() });
            }
            Err(e) => return Err(e).ctx(|| format!("cannot read {}", path.display())),
        };
        serde_json::from_slice(&bytes)
            .map_err(|e| Error::Internal(format!("{} is damaged ({e}); remove that task's directory", path.display())))
    }

    /// Record the end of a task: its summary file, its final record, then its `task_finished`
    /// event. The caller holds the task's lock, so the first end recorded is the only one.
    pub fn finish(&self, rec: &mut TaskRecord, outcome: Outcome, note: Option<String>) -> Result<()> {
        if rec.ended.is_some() {
            return Ok(());
        }
        let log = self.log_path(&rec.role, rec.token);
        let mut note = note;
        let (summary, line_count) = match super::logfile::summary_and_lines(&log) {
            Ok(found) => found,
            Err(e) => {
                note = Some(format!("{}cannot read the log: {e}", note.map(|n| n + "; ").unwrap_or_default()));
                (String::new(), 0)
            }
        };
        if let Err(e) = write_atomic(&self.summary_path(&rec.role, rec.token), summary.as_bytes()) {
            note = Some(format!("{}{e}", note.map(|n| n + "; ").unwrap_or_default()));
        }
        let exit_code = outcome.exit_code();
        rec.ended = Some(Ended { outcome, at_ms: unix_ms(std::time::SystemTime::now()), line_count, note });
        self.write_record(rec)?;
        // The event comes after the final record, so whoever it wakes reads the end.
        let mut event = Event::new(EventKind::TaskFinished, &rec.session);
        event.token = Some(rec.token);
        event.role = Some(rec.role.clone());
        event.status = Some(rec.status());
        event.exit_code = exit_code;
        event.summary = Some(summary_preview(&summary));
        self.events().append(event).map(drop)
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
