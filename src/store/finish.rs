//! Recording the end of a task, even on a full disk, and removing what a finished task left.

use std::fs::{self, File};
use std::io::{self, ErrorKind};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::SystemTime;

use super::{Durability, Store, files, logfile, write_atomic};
use crate::error::{Error, IoContext, Result};
use crate::task::{Ended, Event, EventKind, Outcome, Role, TaskRecord, Token, summary_preview, unix_ms};

/// Space set aside per running task so that its end can be recorded when the disk is full.
const RESERVE: i64 = 256 * 1024;

/// ENOSPC or EDQUOT, also when wrapped (tempfile adds the path and keeps only the kind).
fn is_disk_full(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if matches!(source.kind(), ErrorKind::StorageFull | ErrorKind::QuotaExceeded))
}

impl Store {
    /// Set aside `RESERVE` bytes for the task's end (given back by `finish`).
    pub(super) fn reserve_space(&self, t: Token) -> Result<()> {
        let path = self.task_dir(t).join("reserve");
        let what = || {
            format!(
                "cannot set aside disk space for a new task in {} (is the home's disk full? free some space on it)",
                self.home().display()
            )
        };
        let file = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path).ctx(what)?;
        // SAFETY: posix_fallocate on a descriptor we own.
        match unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, RESERVE) } {
            0 => Ok(()),
            rc => Err(io::Error::from_raw_os_error(rc)).ctx(what),
        }
    }

    /// Record the end of a task: its summary file, its final record, then its `task_finished`
    /// event. The caller holds the task's lock, so the first end recorded is the only one. On a
    /// full disk the task's reserve is given back and the writes are tried again. `lines` is the
    /// log's line count and the open log when the caller holds them (the supervisor counts as
    /// the log grows); otherwise the log is read from its path.
    pub fn finish(
        &self,
        rec: &mut TaskRecord,
        outcome: Outcome,
        note: Option<String>,
        log: Option<(u64, &File)>,
    ) -> Result<()> {
        if rec.ended.is_some() {
            return Ok(());
        }
        let t = rec.token;
        let mut notes: Vec<String> = note.into_iter().collect();
        let read = match log {
            Some((lines, file)) => logfile::summary_of(file, Some(lines)),
            None => logfile::summary_and_lines(&self.log_path(&rec.role, t)),
        };
        let (summary, line_count) = read.unwrap_or_else(|e| {
            notes.push(format!("cannot read the log: {}", files::describe(&e)));
            (String::new(), 0)
        });
        let reserve = self.task_dir(t).join("reserve");
        let mut freed = false;
        let mut on_full_disk = |what: &dyn Fn() -> Result<()>, notes: &mut Vec<String>| -> Result<()> {
            match what() {
                Err(e) if is_disk_full(&e) && !freed => {
                    freed = true;
                    let _ = fs::remove_file(&reserve);
                    notes.push(format!("the home's disk is full ({e}); the log may be cut short"));
                    what()
                }
                other => other,
            }
        };
        let summary_path = self.summary_path(&rec.role, t);
        if let Err(e) =
            on_full_disk(&|| write_atomic(&summary_path, summary.as_bytes(), Durability::Durable), &mut notes)
        {
            notes.push(e.to_string());
        }
        let exit_code = outcome.exit_code();
        let note = (!notes.is_empty()).then(|| notes.join("; "));
        rec.ended = Some(Ended { outcome, at_ms: unix_ms(SystemTime::now()), line_count, note });
        let ended = rec.clone();
        on_full_disk(&|| self.write_record(&ended), &mut notes)?;
        // The event comes after the final record, so whoever it wakes reads the end.
        let mut event = Event::new(EventKind::TaskFinished, &rec.session);
        event.token = Some(t);
        event.role = Some(rec.role.clone());
        event.status = Some(rec.status());
        event.exit_code = exit_code;
        event.summary = Some(summary_preview(&summary));
        on_full_disk(&|| self.events().append(event.clone()).map(drop), &mut notes)?;
        let _ = fs::remove_file(&reserve);
        let _ = fs::remove_file(self.lines_path(t));
        self.clean_strays(rec);
        Ok(())
    }

    /// Remove temp files a crash between writing and renaming left behind for this task.
    fn clean_strays(&self, rec: &TaskRecord) {
        let task_dir = self.task_dir(rec.token);
        let history = self.log_path(&rec.role, rec.token).parent().map(Path::to_owned);
        let mine = format!(".tmp-{}", rec.token);
        for (dir, prefix) in [(Some(task_dir), ".tmp-"), (history, mine.as_str())] {
            let Some(dir) = dir else { continue };
            let Ok(entries) = fs::read_dir(&dir) else { continue };
            for e in entries.flatten() {
                if e.file_name().to_str().is_some_and(|n| n.starts_with(prefix)) {
                    let _ = fs::remove_file(e.path());
                }
            }
        }
    }

    /// Remove the task directories older than `age` that have no record and whose lock nobody
    /// holds: tasks whose launcher failed or died before writing the record. Returns how many
    /// were (or, with `dry_run`, would be) removed.
    pub fn remove_strays(&self, age: std::time::Duration, dry_run: bool) -> Result<usize> {
        let mut removed = 0;
        for t in self.tokens()? {
            let dir = self.task_dir(t);
            let old = fs::symlink_metadata(&dir)
                .and_then(|m| m.modified())
                .is_ok_and(|at| at.elapsed().is_ok_and(|a| a >= age));
            let no_record =
                fs::symlink_metadata(dir.join("record.json")).is_err_and(|e| e.kind() == ErrorKind::NotFound);
            if !old || !no_record {
                continue;
            }
            let Some(_lock) = super::FileLock::try_take(&self.lock_path(t))? else { continue };
            if !dry_run {
                // Its role is unknown: look for its files under every role.
                let roles = fs::read_dir(self.home().join("subagents")).into_iter().flatten().flatten();
                for role in roles.filter_map(|e| e.file_name().to_str().and_then(|r| Role::parse(r).ok())) {
                    self.remove_history(&role, t)?;
                }
                fs::remove_dir_all(&dir).ctx(|| format!("cannot remove {}", dir.display()))?;
            }
            removed += 1;
        }
        Ok(removed)
    }

    /// Remove what a task that was never started left (its launcher failed to prepare it).
    pub fn discard_task(&self, role: &Role, t: Token) {
        let _ = self.remove_history(role, t);
        let _ = fs::remove_dir_all(self.task_dir(t));
    }

    /// Remove the log, summary and question file of `t` under `role`, those there are.
    pub fn remove_history(&self, role: &Role, t: Token) -> Result<()> {
        for path in [self.log_path(role, t), self.summary_path(role, t), self.question_path(role, t)] {
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e).ctx(|| format!("cannot remove {}", path.display())),
            }
        }
        Ok(())
    }

    /// Remove everything a finished task left: log, summary, question file, record. The caller
    /// has checked it is finished and holds its lock.
    pub fn remove_task(&self, rec: &TaskRecord) -> Result<()> {
        self.clean_strays(rec);
        self.remove_history(&rec.role, rec.token)?;
        let dir = self.task_dir(rec.token);
        fs::remove_dir_all(&dir).ctx(|| format!("cannot remove {}", dir.display()))
    }
}
