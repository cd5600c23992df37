//! The home's events, in the `events` table: numbered in order (`seq`), each handed to one
//! waiter, and counted delivered only once that waiter's answer is known to have arrived.
//!
//! An event is waiting (0), handed out to a holder (1), or delivered (2). A holder names one
//! waiter: a process (pid, start time, boot) and a connection within it. What it holds goes
//! back to waiting when it lets go (`release`), or when its process is found dead; it becomes
//! delivered when the holder confirms it (`confirm`). Writers ring the session's bell in
//! `events/bells/` after each new event, so that its waiters, who watch it, look again.

use std::fs;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};

use super::db::{self, err};
use super::files::{self, Access};
use super::rows::insert;
use super::{Store, legacy};
use crate::error::{Error, IoContext, Result};
use crate::task::{Event, EventKind, Token};

/// How many bells the sessions share.
const BELLS: u64 = 64;

/// The events of one home.
pub struct EventLog<'a> {
    store: &'a Store,
}

/// An event and whether a waiter has received it.
#[derive(Clone, Debug, PartialEq)]
pub struct Logged {
    pub event: Event,
    pub delivered: bool,
}

impl Store {
    /// The home's events.
    pub fn events(&self) -> EventLog<'_> {
        EventLog::new(self)
    }
}

impl<'a> EventLog<'a> {
    pub(super) fn new(store: &'a Store) -> EventLog<'a> {
        EventLog { store }
    }

    /// The directory where an earlier release appends events (see `legacy`): watched too.
    pub fn dir(&self) -> PathBuf {
        self.store.home().join("events")
    }

    /// The directory of the bells, to watch for new events of any session.
    pub fn bells(&self) -> PathBuf {
        self.dir().join("bells")
    }

    /// The bell rung for new events of `session` (made if missing, so that it can be watched):
    /// one of `BELLS`, so that an event wakes the waiters of a few sessions, not all.
    pub fn bell(&self, session: &str) -> Result<PathBuf> {
        let path = self.bell_path(session);
        if fs::symlink_metadata(&path).is_err() {
            super::home::ensure_dir(self.store.home(), Path::new("events/bells"))?;
            files::open(&path, Access::ReadWriteCreate).ctx(|| format!("cannot create {}", path.display()))?;
        }
        Ok(path)
    }

    fn bell_path(&self, session: &str) -> PathBuf {
        // FNV-1a: the same bell for a session in every process.
        let hash =
            session.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        self.bells().join(format!("{:02x}", hash % BELLS))
    }

    /// Append `event`, giving it the next seq and the current time. Durable when this returns.
    pub fn append(&self, event: Event) -> Result<Event> {
        let mut one = self.append_all(vec![event])?;
        Ok(one.remove(0))
    }

    /// Append `events` in order, in one transaction: one sync for them all (a group commit),
    /// each bell rung once. All durable when this returns, or none appended.
    pub fn append_all(&self, events: Vec<Event>) -> Result<Vec<Event>> {
        let conn = self.store.db()?;
        let tx = db::write_durably(&conn).map_err(err(what_append))?;
        let events = events.into_iter().map(|e| insert(&tx, e)).collect::<Result<Vec<_>>>()?;
        tx.commit().map_err(err(what_append))?;
        let mut sessions: Vec<&str> = events.iter().map(|e| e.session.as_str()).collect();
        sessions.sort_unstable();
        sessions.dedup();
        for session in sessions {
            self.ring(session);
        }
        Ok(events)
    }

    /// Tell the waiters of `session` that something changed (a write to its bell).
    pub fn ring(&self, session: &str) {
        if let Ok(bell) = self.bell(session)
            && let Ok(f) = files::open(&bell, Access::ReadWriteCreate)
        {
            let _ = rustix::io::pwrite(&f, b"\n", 0);
        }
    }

    /// Take in the events an earlier release's supervisor appended after the upgrade (see
    /// `legacy`), and ring every bell if any came.
    fn take_in_late_events(&self) -> Result<()> {
        if legacy::import_late_events(self.store.home(), || self.store.db())? {
            self.ring_all();
        }
        Ok(())
    }

    /// Ring every bell (events of any session came in).
    pub fn ring_all(&self) {
        for i in 0..BELLS {
            if let Ok(f) = files::open(&self.bells().join(format!("{i:02x}")), Access::ReadWriteCreate) {
                let _ = rustix::io::pwrite(&f, b"\n", 0);
            }
        }
    }

    /// Hand the oldest waiting event of `session` of one of `kinds` (empty: any) to `holder`.
    /// An event held by a holder that `alive` says is gone counts as waiting.
    pub fn take(
        &self,
        session: &str,
        kinds: &[EventKind],
        holder: &str,
        alive: impl Fn(&str) -> bool,
    ) -> Result<Option<Event>> {
        self.take_in_late_events()?;
        let conn = self.store.db()?;
        // Look first without the write lock: most looks (a waiter woken by another session's
        // event) find nothing.
        let Some(seq) = candidate(&conn, session, kinds, holder, &alive)? else { return Ok(None) };
        let tx = db::write_durably(&conn).map_err(err(what_take))?;
        // Someone may have taken it meanwhile: look again under the lock.
        let seq = if still_waiting(&tx, seq, holder, &alive)? {
            seq
        } else {
            match candidate(&tx, session, kinds, holder, &alive)? {
                Some(s) => s,
                None => return Ok(None),
            }
        };
        tx.execute("UPDATE events SET state = 1, holder = ?2 WHERE seq = ?1", params![seq as i64, holder])
            .map_err(err(what_take))?;
        let body: String = tx
            .query_row("SELECT body FROM events WHERE seq = ?1", [seq as i64], |r| r.get(0))
            .map_err(err(what_take))?;
        tx.commit().map_err(err(what_take))?;
        parse(&body).map(Some)
    }

    /// Count what `holder` holds as delivered (its answers arrived); only `seq` if given.
    pub fn confirm(&self, holder: &str, seq: Option<u64>) -> Result<usize> {
        let conn = self.store.db()?;
        let n = match seq {
            None => {
                conn.execute("UPDATE events SET state = 2, holder = NULL WHERE state = 1 AND holder = ?1", [holder])
            }
            Some(s) => conn.execute(
                "UPDATE events SET state = 2, holder = NULL WHERE state = 1 AND holder = ?1 AND seq = ?2",
                params![holder, s as i64],
            ),
        }
        .map_err(err(|| "cannot record events as delivered".into()))?;
        Ok(n)
    }

    /// Put back what `holder` holds (its answers never arrived), or only event `seq` of it:
    /// the next waiter gets it.
    pub fn release(&self, holder: &str, seq: Option<u64>) -> Result<usize> {
        let what = || "cannot put events back".to_owned();
        let conn = self.store.db()?;
        let mut stmt = conn
            .prepare_cached(
                "UPDATE events SET state = 0, holder = NULL WHERE state = 1 AND holder = ?1 \
                 AND (?2 IS NULL OR seq = ?2) RETURNING session",
            )
            .map_err(err(what))?;
        let sessions: Vec<String> = stmt
            .query_map(params![holder, seq.map(|s| s as i64)], |r| r.get(0))
            .map_err(err(what))?
            .collect::<rusqlite::Result<_>>()
            .map_err(err(what))?;
        for s in &sessions {
            self.ring(s);
        }
        Ok(sessions.len())
    }

    /// Up to `limit` events of `session` (or of every session) after `after`, oldest first.
    pub fn read(&self, session: Option<&str>, after: u64, limit: usize) -> Result<Vec<Logged>> {
        self.take_in_late_events()?;
        let what = || "cannot read the events".to_owned();
        let conn = self.store.db()?;
        let (sql, session) = match session {
            Some(s) => ("SELECT body, state FROM events WHERE session = ?3 AND seq > ?1 ORDER BY seq LIMIT ?2", s),
            None => ("SELECT body, state FROM events WHERE seq > ?1 AND ?3 = ?3 ORDER BY seq LIMIT ?2", ""),
        };
        let mut stmt = conn.prepare_cached(sql).map_err(err(what))?;
        let rows = stmt
            .query_map(params![after as i64, limit as i64, session], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
            })
            .map_err(err(what))?;
        let mut out = Vec::new();
        for row in rows {
            let (body, state) = row.map_err(err(what))?;
            if let Ok(event) = parse(&body) {
                out.push(Logged { event, delivered: state == 2 });
            }
        }
        Ok(out)
    }

    /// Remove the events of `tasks` (delivered or not) and delivered events of no task that
    /// happened at or before `cutoff_ms`; with `dry_run`, only count them.
    pub fn remove(&self, tasks: &[Token], cutoff_ms: Option<u64>, dry_run: bool) -> Result<usize> {
        let what = || "cannot remove events".to_owned();
        let conn = self.store.db()?;
        let tx = db::write(&conn).map_err(err(what))?;
        let cutoff = cutoff_ms.map_or(i64::MAX, |c| c as i64);
        let (by_task, orphans) = if dry_run {
            (
                "SELECT count(*) FROM events WHERE token = ?1",
                "SELECT count(*) FROM events WHERE token IS NULL AND state = 2 AND at_ms <= ?1",
            )
        } else {
            (
                "DELETE FROM events WHERE token = ?1",
                "DELETE FROM events WHERE token IS NULL AND state = 2 AND at_ms <= ?1",
            )
        };
        let mut n = 0;
        let count = |sql: &str, arg: &dyn rusqlite::ToSql| -> rusqlite::Result<usize> {
            if dry_run {
                tx.query_row(sql, [arg], |r| r.get::<_, i64>(0)).map(|c| c as usize)
            } else {
                tx.execute(sql, [arg])
            }
        };
        for t in tasks {
            n += count(by_task, &t.as_str()).map_err(err(what))?;
        }
        n += count(orphans, &cutoff).map_err(err(what))?;
        tx.commit().map_err(err(what))?;
        Ok(n)
    }
}

fn what_append() -> String {
    "cannot record an event".into()
}

fn what_take() -> String {
    "cannot take an event".into()
}

/// The seq of the oldest event of `session` of `kinds` that `holder` may take.
fn candidate(
    conn: &Connection,
    session: &str,
    kinds: &[EventKind],
    holder: &str,
    alive: &impl Fn(&str) -> bool,
) -> Result<Option<u64>> {
    let kinds_sql = if kinds.is_empty() {
        String::new()
    } else {
        // The kinds are our own names, never user text.
        let names: Vec<String> = kinds.iter().map(|k| format!("'{}'", k.as_str())).collect();
        format!(" AND kind IN ({})", names.join(", "))
    };
    let sql = format!("SELECT seq, state, holder FROM events WHERE session = ?1 AND state < 2{kinds_sql} ORDER BY seq");
    let mut stmt = conn.prepare_cached(&sql).map_err(err(what_take))?;
    let mut rows = stmt.query([session]).map_err(err(what_take))?;
    while let Some(row) = rows.next().map_err(err(what_take))? {
        let (seq, state, held_by): (i64, i64, Option<String>) = (
            row.get(0).map_err(err(what_take))?,
            row.get(1).map_err(err(what_take))?,
            row.get(2).map_err(err(what_take))?,
        );
        if takeable(state, held_by.as_deref(), holder, alive) {
            return Ok(Some(seq as u64));
        }
    }
    Ok(None)
}

/// Whether event `seq` may still be taken by `holder`.
fn still_waiting(conn: &Connection, seq: u64, holder: &str, alive: &impl Fn(&str) -> bool) -> Result<bool> {
    let row: Option<(i64, Option<String>)> = conn
        .query_row("SELECT state, holder FROM events WHERE seq = ?1", [seq as i64], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .map_err(err(what_take))?;
    Ok(row.is_some_and(|(state, held_by)| takeable(state, held_by.as_deref(), holder, alive)))
}

/// Waiting, or held by someone else who is gone. (What `holder` holds itself is out, on its way.)
fn takeable(state: i64, held_by: Option<&str>, holder: &str, alive: &impl Fn(&str) -> bool) -> bool {
    match (state, held_by) {
        (0, _) => true,
        (1, Some(h)) => h != holder && !alive(h),
        (1, None) => true,
        _ => false,
    }
}

fn parse(body: &str) -> Result<Event> {
    serde_json::from_str(body).map_err(|e| Error::Internal(format!("a stored event is damaged ({e})")))
}

#[cfg(test)]
mod tests;
