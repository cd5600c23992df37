//! Tasks handed back before they are in the database. The CLI's launcher writes a new task here
//! (`starting/<token>.json`: its record and spec) and forks its supervisor, which moves it into
//! the database at once (`settle_starting`): a start waits for no database, and the token it
//! hands back names a task from the moment it is printed. Whoever reads the task first moves it
//! (`read_record`, and `settle_all_starting` before a listing); the supervisor finds it moved.

use std::fs;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Store;
use super::home::ensure_dir;
use crate::error::{Error, IoContext, Result};
use crate::task::{TaskRecord, TaskSpec, Token};

/// The directory of the tasks not yet in the database, in the home.
const DIR: &str = "starting";

/// What the launcher writes.
#[derive(Serialize, Deserialize)]
struct Starting {
    record: TaskRecord,
    spec: TaskSpec,
}

impl Store {
    fn starting_path(&self, t: Token) -> PathBuf {
        self.home().join(DIR).join(format!("{t}.json"))
    }

    /// Write new task `rec` (with `spec`) where readers find it before it is in the database:
    /// whole or not at all (written aside, then renamed), never synced (a crash of the machine
    /// loses it, and the task's agent with it).
    pub fn write_starting(&self, rec: &TaskRecord, spec: &TaskSpec) -> Result<()> {
        let path = self.starting_path(rec.token);
        let temp = path.with_extension("tmp");
        let what = || format!("cannot save task {} in {}", rec.token, self.home().join(DIR).display());
        let body = serde_json::to_vec(&Starting { record: rec.clone(), spec: spec.clone() })
            .map_err(|e| Error::Internal(format!("cannot encode task {}: {e}", rec.token)))?;
        let create = || {
            fs::OpenOptions::new().write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(&temp)
        };
        let mut file = match create() {
            Err(e) if e.kind() == ErrorKind::NotFound => {
                ensure_dir(self.home(), Path::new(DIR))?;
                create()
            }
            other => other,
        }
        .ctx(what)?;
        let written = file.write_all(&body).and_then(|()| fs::rename(&temp, &path));
        if written.is_err() {
            let _ = fs::remove_file(&temp);
        }
        written.ctx(what)
    }

    /// Task `t` as its launcher wrote it, if it is not in the database yet (a damaged one, left
    /// by a launcher that died writing it before it handed anything back, counts as none).
    fn read_starting(&self, t: Token) -> Option<Starting> {
        let text = fs::read(self.starting_path(t)).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Forget task `t`'s starting file (it is in the database, or never will be).
    pub fn remove_starting(&self, t: Token) {
        let _ = fs::remove_file(self.starting_path(t));
    }

    /// Remove what a launcher of task `t` that died left in `starting/`: a file half written
    /// aside, or one damaged (a crash of the machine keeps a rename but not what was written).
    pub(super) fn remove_starting_leftovers(&self, t: Token) {
        let path = self.starting_path(t);
        let _ = fs::remove_file(path.with_extension("tmp"));
        if self.read_starting(t).is_none() {
            let _ = fs::remove_file(path);
        }
    }

    /// Save new task `rec` (of `spec`) in the database, after those started before it (see
    /// `settle_all_starting`), unless whoever read it first did. Whether it waits for a place (as
    /// whoever saved it found).
    pub fn settle_starting(&self, rec: &TaskRecord, spec: &TaskSpec) -> Result<bool> {
        match self.settle(Some(Starting { record: rec.clone(), spec: spec.clone() }))? {
            Some(queued) => Ok(queued),
            None => Ok(self.read_db_record(rec.token)?.queued),
        }
    }

    /// Task `t`, moved from its starting file into the database if it has one; its record as it
    /// then stands. `UnknownToken` if it has neither. A home that cannot be written gives the
    /// record as the file has it.
    pub(super) fn settle_read(&self, t: Token) -> Result<TaskRecord> {
        match self.settle(None) {
            Err(Error::Io { source, .. }) if source.kind() == ErrorKind::ReadOnlyFilesystem => self
                .read_starting(t)
                .map(|s| s.record)
                .ok_or_else(|| Error::UnknownToken { token: t, home: self.home().to_path_buf() }),
            Err(e) => Err(e),
            Ok(_) => self.read_db_record(t),
        }
    }

    /// Move every task still in a starting file into the database: a listing then shows them.
    pub fn settle_all_starting(&self) -> Result<()> {
        self.settle(None).map(drop)
    }

    /// Move the tasks in starting files (and `given`, whose file need not be read) into the
    /// database, in the order they were created: each takes its place in its pool's line as it
    /// would have, had its launcher saved it there. Whoever settles a task settles those before
    /// it, so that the order holds whoever comes first; each insert is the task's own, and one
    /// saved already is left as it is. Whether `given` waits for a place, if this saved it.
    fn settle(&self, given: Option<Starting>) -> Result<Option<bool>> {
        let given_token = given.as_ref().map(|g| g.record.token);
        let dir = self.home().join(DIR);
        let entries = match fs::read_dir(&dir) {
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            other => Some(other.ctx(|| format!("cannot list {}", dir.display()))?),
        };
        let mut pending: Vec<Starting> = Vec::new();
        for entry in entries.into_iter().flatten().flatten() {
            let name = entry.file_name();
            let Some(t) = name.to_str().and_then(|n| n.strip_suffix(".json")).and_then(|n| Token::parse(n).ok()) else {
                continue;
            };
            if Some(t) != given_token {
                pending.extend(self.read_starting(t));
            }
        }
        pending.extend(given);
        pending.sort_by_key(|s| (s.record.created_at_ms, s.record.token));
        let mut given_queued = None;
        for s in pending {
            match self.insert_task(&s.record, &s.spec) {
                Ok(queued) if Some(s.record.token) == given_token => given_queued = Some(queued),
                Ok(_) | Err(Error::Refused(_)) => {}
                Err(e) => return Err(e),
            }
            self.remove_starting(s.record.token);
        }
        Ok(given_queued)
    }
}
