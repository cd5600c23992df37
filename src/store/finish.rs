//! Recording the end of a task, even on a full disk, and removing what a finished task left.

use std::fs;
use std::io::{self, ErrorKind};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::time::SystemTime;

use super::db::{self, err};
use super::{Durability, Store, atomic, files, logfile, write_atomic};
use crate::error::{Error, IoContext, Result};
use crate::task::{Ended, Event, EventKind, Outcome, ResultFrom, Role, TaskRecord, Token, summary_preview, unix_ms};

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
    /// full disk the task's reserve is given back and the writes are tried again. `log` is the
    /// open log, counted, when the caller holds it (the supervisor counts as the log grows);
    /// otherwise the log is read from its path. `from` says where the answer
    /// is (read from the task's spec when not given).
    pub fn finish(
        &self,
        rec: &mut TaskRecord,
        outcome: Outcome,
        note: Option<String>,
        log: Option<logfile::Counted<'_>>,
        from: Option<&ResultFrom>,
    ) -> Result<()> {
        if rec.ended.is_some() {
            return Ok(());
        }
        let t = rec.token;
        // What its supervisor last published of its usage, when it did not say it (it died): a
        // later turn's record holds the earlier turns' usage, which that includes.
        if (rec.usage.is_none() || log.is_none())
            && let Some(so_far) = self.usage_so_far(t)
        {
            rec.usage = Some(so_far);
        }
        // The rate-limited runs first, whoever records the end (the lost path too).
        let mut notes: Vec<String> = rec.rate_limited.iter().cloned().chain(note).collect();
        rec.retry_at_ms = None;
        let from = match from {
            Some(f) => f.clone(),
            None => self.read_spec(t).map(|s| s.result).unwrap_or_default(),
        };
        // The agent's own answer file, when its kind writes one and it did; else what its
        // output says.
        let answer = match crate::agent::of(&from).answer_in_file() {
            true => logfile::answer_file(&self.result_path(&rec.role, t)).unwrap_or_else(|e| {
                notes.push(format!("cannot read the answer file: {}", files::describe(&e)));
                None
            }),
            false => None,
        };
        let log_path = self.log_path(&rec.role, t);
        let read = match (log, &answer) {
            // The answer is the agent's file: the log is only counted.
            (Some(log), Some(_)) => Ok((String::new(), log.lines)),
            (None, Some(_)) => match logfile::line_count(&log_path, &self.lines_path(t)) {
                Err(e) if e.kind() == ErrorKind::NotFound => Ok((String::new(), 0)),
                counted => counted.map(|n| (String::new(), n)),
            },
            (Some(log), None) => logfile::summary_of(log.file, Some(log.lines), &from, rec.run_start, Some(log.end)),
            (None, None) => logfile::summary_and_lines(&log_path, &from, rec.run_start),
        };
        let (summary, line_count) = read.unwrap_or_else(|e| {
            notes.push(format!("cannot read the log: {}", files::describe(&e)));
            (String::new(), 0)
        });
        let summary = answer.unwrap_or(summary);
        let reserve = self.task_dir(t).join("reserve");
        let freed = std::cell::Cell::new(false);
        let on_full_disk = |what: &dyn Fn() -> Result<()>, notes: &mut Vec<String>| -> Result<()> {
            match what() {
                Err(e) if is_disk_full(&e) && !freed.get() => {
                    freed.set(true);
                    let _ = fs::remove_file(&reserve);
                    notes.push(format!("the home's disk is full ({e}); the log may be cut short"));
                    what()
                }
                other => other,
            }
        };
        let summary_path = self.summary_path(&rec.role, t);
        // On a full disk, the end of the summary that fits in the task's reserve with room to spare.
        let short = || crate::summary::keep_end(&summary, RESERVE as usize / 4);
        let write = || {
            let body = if freed.get() { short() } else { summary.clone() };
            // Not synced: the answer is synced with the final record (`or_saved_answer`).
            write_atomic(&summary_path, body.as_bytes(), Durability::Atomic)
        };
        if let Err(e) = on_full_disk(&write, &mut notes) {
            notes.push(e.to_string());
        }
        crate::crash::point_of("end.summary", t.as_str());
        let exit_code = outcome.exit_code();
        let note = (!notes.is_empty()).then(|| notes.join("; "));
        rec.ended = Some(Ended { outcome, at_ms: unix_ms(SystemTime::now()), line_count, note });
        let mut event = Event::new(EventKind::TaskFinished, &rec.session);
        event.token = Some(t);
        event.role = Some(rec.role.clone());
        event.status = Some(rec.status());
        event.exit_code = exit_code;
        event.summary = Some(summary_preview(&summary));
        event.changes = rec.changes.clone();
        event.usage = rec.usage.clone();
        let ended = rec.clone();
        // The final record and its event in one transaction: whoever the event wakes reads the
        // end, and a crash leaves both or neither.
        let first = std::cell::Cell::new(true);
        let body = || if freed.get() { short() } else { summary.clone() };
        let recorded =
            on_full_disk(&|| self.record_end(&ended, Some(event.clone()), &body()).map(|f| first.set(f)), &mut notes);
        // Not recorded (a read-only home, say): the caller still learns how the task ended.
        recorded?;
        crate::crash::point_of("end.recorded", t.as_str());
        if !first.get() {
            // Someone recorded the end first (they held the lock before us): theirs stands.
            *rec = self.read_record(t)?;
        }
        let _ = fs::remove_file(&reserve);
        let _ = fs::remove_file(self.seen_path(t));
        let lines = self.lines_path(t);
        let _ = fs::remove_file(atomic::temp_path(&lines));
        let _ = fs::remove_file(lines);
        Ok(())
    }

    /// Write the final record `rec` (and its event) unless the task already has one; true if
    /// this was the first. The event wakes waiters once committed.
    pub(super) fn record_end(&self, rec: &TaskRecord, event: Option<Event>, summary: &str) -> Result<bool> {
        let what = || format!("cannot record the end of task {}", rec.token);
        let conn = self.db()?;
        let tx = db::write_durably(&conn).map_err(err(what))?;
        let ended_at = rec.ended.as_ref().map(|e| e.at_ms as i64);
        let text = super::rows::to_json(rec)?;
        let changed = tx
            .execute(
                "UPDATE tasks SET record = ?2, status = ?3, ended_at_ms = ?4, summary = ?5 \
                 WHERE token = ?1 AND ended_at_ms IS NULL",
                rusqlite::params![rec.token.as_str(), text, rec.status().as_str(), ended_at, summary],
            )
            .map_err(err(what))?;
        if changed == 0 {
            return Ok(false);
        }
        let session = event.as_ref().map(|e| e.session.clone());
        if let Some(e) = event {
            super::rows::insert(&tx, e)?;
        }
        // A question the task still waited on can no longer be answered.
        let withdrawn = Store::withdraw_questions(&tx, rec.token)?;
        tx.commit().map_err(err(what))?;
        if withdrawn > 0 {
            self.events().ring(rec.token.as_str());
        }
        if let Some(s) = session {
            self.events().ring(&s);
        }
        Ok(true)
    }

    /// Take in a final record that an earlier release's supervisor wrote in its file after the
    /// upgrade (see `legacy`); its event comes in with that release's event log. The caller
    /// holds the task's lock.
    pub fn adopt_late_end(&self, t: Token) -> Result<Option<TaskRecord>> {
        let Some((rec, file)) = super::legacy::late_record(&self.task_dir(t), t) else { return Ok(None) };
        let summary = fs::read_to_string(self.summary_path(&rec.role, t)).unwrap_or_default();
        self.record_end(&rec, None, &summary)?;
        let _ = fs::remove_file(file);
        self.read_record(t).map(Some)
    }

    /// Remove the task directories older than `age` that have no record and whose lock nobody
    /// holds: tasks whose launcher failed or died before saving the record. Returns how many
    /// were (or, with `dry_run`, would be) removed.
    pub fn remove_strays(&self, age: std::time::Duration, dry_run: bool) -> Result<usize> {
        let known: std::collections::HashSet<Token> = self.tokens_where("1")?.into_iter().collect();
        let mut removed = 0;
        for t in self.tokens()?.into_iter().filter(|t| !known.contains(t)) {
            let dir = self.task_dir(t);
            let old = fs::symlink_metadata(&dir)
                .and_then(|m| m.modified())
                .is_ok_and(|at| at.elapsed().is_ok_and(|a| a >= age));
            if !old {
                continue;
            }
            let Some(_lock) = super::FileLock::try_take(&self.lock_path(t))? else { continue };
            // Saved meanwhile (a launcher slowed down for a minute): a task after all.
            if !matches!(self.read_record(t), Err(Error::UnknownToken { .. })) {
                continue;
            }
            if !dry_run {
                // Its role is unknown: look for its files under every role.
                let roles = fs::read_dir(self.home().join("subagents")).into_iter().flatten().flatten();
                for role in roles.filter_map(|e| e.file_name().to_str().and_then(|r| Role::parse(r).ok())) {
                    self.remove_history(&role, t)?;
                }
                self.remove_starting_leftovers(t);
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

    /// Remove the log, summary, question and answer files of `t` under `role`, those there are.
    pub fn remove_history(&self, role: &Role, t: Token) -> Result<()> {
        let summary = self.summary_path(role, t);
        let temp = atomic::temp_path(&summary);
        for path in [self.log_path(role, t), summary, temp, self.question_path(role, t), self.result_path(role, t)] {
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e).ctx(|| format!("cannot remove {}", path.display())),
            }
        }
        Ok(())
    }

    /// Remove everything the finished tasks `recs` left: logs, summaries, question files, then
    /// their records and events in one transaction (one commit for many tasks: pruning ten
    /// thousand costs ten thousand file removals, not as many commits). The caller has checked
    /// they are finished and holds their locks. Returns how many events went with them. A file
    /// that cannot be removed stops it there: the tasks before it are removed whole, the rest
    /// are kept.
    pub fn remove_tasks<'a>(&self, recs: impl IntoIterator<Item = &'a TaskRecord>) -> Result<usize> {
        let mut gone = Vec::new();
        let mut failed = None;
        for rec in recs {
            let dir = self.task_dir(rec.token);
            let files = self.remove_history(&rec.role, rec.token).and_then(|()| match fs::remove_dir_all(&dir) {
                Err(e) if e.kind() != ErrorKind::NotFound => Err(e).ctx(|| format!("cannot remove {}", dir.display())),
                _ => Ok(()),
            });
            match files {
                Ok(()) => gone.push(rec.token),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if gone.is_empty() {
            return failed.map_or(Ok(0), Err);
        }
        let what = || format!("cannot remove {} tasks from the store", gone.len());
        let conn = self.db()?;
        // Each removed event is looked up in every index of a big table: a page cache of
        // 64 MiB instead of 2 keeps those pages between batches (prune ends the process soon).
        let _ = conn.pragma_update(None, "cache_size", -65536);
        let tx = db::write(&conn).map_err(err(what))?;
        let mut events = 0;
        {
            let mut del_events = tx.prepare_cached("DELETE FROM events WHERE token = ?1").map_err(err(what))?;
            let mut del_task = tx.prepare_cached("DELETE FROM tasks WHERE token = ?1").map_err(err(what))?;
            let mut del_spec = tx.prepare_cached("DELETE FROM specs WHERE token = ?1").map_err(err(what))?;
            for t in &gone {
                events += del_events.execute([t.as_str()]).map_err(err(what))?;
                del_task.execute([t.as_str()]).map_err(err(what))?;
                del_spec.execute([t.as_str()]).map_err(err(what))?;
            }
        }
        Store::remove_questions(&tx, &gone)?;
        Store::remove_mcp_tasks(&tx, &gone)?;
        tx.commit().map_err(err(what))?;
        match failed {
            Some(e) => Err(e),
            None => Ok(events),
        }
    }

    /// Give the space of removed tasks and events back to the file system (best effort).
    pub fn compact(&self) {
        let Ok(conn) = self.db() else { return };
        // Each row it steps through is a page given back.
        if let Ok(mut stmt) = conn.prepare("PRAGMA incremental_vacuum")
            && let Ok(mut rows) = stmt.query([])
        {
            while let Ok(Some(_)) = rows.next() {}
        }
        let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    }
}
