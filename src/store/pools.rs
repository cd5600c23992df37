//! Pools: a task waits (`queued`) until its pool has a place for it. Places are counted in
//! the store, in one write transaction at a time, so two tasks never take the last one: the
//! pool's open tasks that hold a place against its `parallel`, and the queued ones in the order
//! they were saved (`queue_seq`). Where each open task stands is its `pool_state`, kept by the
//! store from its record whoever writes it (see `db`), and indexed with the pool and the order:
//! a start reads the pool's holders and at most the few tasks just ahead of it, however long
//! the line.

use rusqlite::{Connection, OptionalExtension, params};

use super::Store;
use super::db::{self, err};
use crate::error::Result;
use crate::task::{TaskRecord, Token};

fn what() -> String {
    "cannot count the places of a pool in the store".to_owned()
}

/// What a claim asks before it takes a place: why the task may not start now, given how many of
/// the pool's tasks are settling, and how long after its start a task settles (ms).
pub type Admit<'a> = (&'a dyn Fn(usize) -> Option<String>, u64);

/// What a queued task found when it looked for a place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// It has one: it is `starting` now.
    Granted,
    /// A place is free, but it may not take it now (too little memory available): why.
    Short(String),
    /// It waits.
    Waiting {
        /// The queued tasks just ahead of it, nearest first, at most `WATCHERS`: as many as
        /// are ahead of it while it is among the first `WATCHERS` in line.
        ahead: Vec<Token>,
        /// The pool's tasks that hold places.
        holders: Vec<Token>,
        /// A place is free for the first in line (which has not taken it yet).
        free: bool,
    },
}

/// How many of a line's first waiters watch its places: a start reads at most that many tasks
/// ahead of it.
pub const WATCHERS: usize = 3;

/// Save a record that is not final: `?1` token, `?2` record, `?3` status. (Where it stands
/// in its pool, `pool_state`, follows: the store keeps it, see `db`.)
pub(super) const WRITE_RECORD: &str =
    "UPDATE tasks SET record = ?2, status = ?3 WHERE token = ?1 AND ended_at_ms IS NULL";

/// The open tasks of pool `?1` that hold a place: given one (`starting`, `running`), or
/// `queued` by Slurm, which holds their job pending.
pub(super) const HOLDERS: &str =
    "SELECT token FROM tasks WHERE pool = ?1 AND pool_state = 'held' AND ended_at_ms IS NULL";

/// How many tasks of any pool hold a place but started at `?1` or later, or not yet: their
/// memory is not yet seen in what is available. (Asked only where a pool admits by memory.)
pub(super) const SETTLING: &str = "SELECT count(*) FROM tasks WHERE pool_state = 'held' \
     AND ended_at_ms IS NULL AND coalesce(json_extract(record, '$.started.at_ms'), ?1) >= ?1";

/// Where task `?1` stands, and its place in the order tasks came.
pub(super) const OWN: &str = "SELECT pool_state, queue_seq FROM tasks WHERE token = ?1";

/// The (at most `?5`) tasks of pool `?1` in line ahead of the one saved `?2`th, but `?3` and `?4`.
pub(super) const BEFORE: &str = "SELECT count(*) FROM (SELECT 1 FROM tasks \
     WHERE pool = ?1 AND pool_state = 'waiting' AND ended_at_ms IS NULL AND queue_seq < ?2 \
     AND token IS NOT ?3 AND token IS NOT ?4 LIMIT ?5)";

/// The `?3` tasks of pool `?1` in line just ahead of the one saved `?2`th, nearest first.
pub(super) const AHEAD: &str = "SELECT token FROM tasks \
     WHERE pool = ?1 AND pool_state = 'waiting' AND ended_at_ms IS NULL AND queue_seq < ?2 \
     ORDER BY queue_seq DESC LIMIT ?3";

/// The (at most `?2`) tasks of pool `?1` that hold a place or wait for one.
pub(super) const TAKEN: &str = "SELECT count(*) FROM (SELECT 1 FROM tasks \
     WHERE pool = ?1 AND pool_state IN ('held', 'waiting') AND ended_at_ms IS NULL LIMIT ?2)";

/// The place in line of task `?2` of pool `?1` (0: not in line). Counts the line ahead of
/// it, through the index alone: for a view, not for a start.
const PLACE: &str = "SELECT count(*) FROM tasks \
     WHERE pool = ?1 AND pool_state = 'waiting' AND ended_at_ms IS NULL \
     AND queue_seq <= (SELECT queue_seq FROM tasks WHERE token = ?2 AND pool_state = 'waiting')";

/// The tokens a statement with `values` lists.
fn tokens(conn: &Connection, sql: &str, values: impl rusqlite::Params) -> Result<Vec<Token>> {
    let mut stmt = conn.prepare_cached(sql).map_err(err(what))?;
    let mut rows = stmt.query(values).map_err(err(what))?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(err(what))? {
        out.extend(Token::parse(&row.get::<_, String>(0).map_err(err(what))?).ok());
    }
    Ok(out)
}

/// Whether `pool` has no place free for a task saved now: `parallel` held, or as many held
/// and in line together.
pub(super) fn full(conn: &Connection, pool: &str, parallel: u32) -> Result<bool> {
    let mut stmt = conn.prepare_cached(TAKEN).map_err(err(what))?;
    let taken: i64 = stmt.query_row(params![pool, parallel], |r| r.get(0)).map_err(err(what))?;
    Ok(taken >= i64::from(parallel))
}

impl Store {
    /// Take a place in `pool` (at most `parallel` held at once) for the queued task `rec`, if
    /// one is free and no queued task but those `passing` (late to take a place freed for
    /// them: at most `WATCHERS - 1`) is ahead of it; its record says `starting` then.
    pub fn claim(&self, rec: &mut TaskRecord, pool: &str, parallel: u32, passing: &[Token]) -> Result<Claim> {
        self.claim_with(rec, pool, parallel, passing, None)
    }

    /// `claim`, asking `admit` too before it takes a place, with how many of the pool's tasks
    /// took theirs less than `settling_ms` ago (or have not started yet): why it may not start
    /// now, if it may not (`Claim::Short`). Claims are one at a time, so each sees those before.
    pub fn claim_with(
        &self,
        rec: &mut TaskRecord,
        pool: &str,
        parallel: u32,
        passing: &[Token],
        admit: Option<Admit<'_>>,
    ) -> Result<Claim> {
        let conn = self.db()?;
        let tx = db::write(&conn).map_err(err(what))?;
        let own: Option<(Option<String>, Option<i64>)> = tx
            .prepare_cached(OWN)
            .and_then(|mut s| s.query_row([rec.token.as_str()], |r| Ok((r.get(0)?, r.get(1)?))).optional())
            .map_err(err(what))?;
        // Still `resting` if the write that ended its back-off failed: it has no place either.
        let in_line = |state: &Option<String>| matches!(state.as_deref(), Some("waiting" | "resting"));
        let Some((_, Some(seq))) = own.filter(|(state, _)| in_line(state)) else {
            // Not waiting (it never was, or it has its place already).
            rec.queued = false;
            return Ok(Claim::Granted);
        };
        let holders = tokens(&tx, HOLDERS, [pool])?;
        let free = (parallel as usize).saturating_sub(holders.len());
        let passed = |i: usize| passing.get(i).map(|t| t.as_str().to_owned());
        let before: i64 = tx
            .prepare_cached(BEFORE)
            .and_then(|mut s| s.query_row(params![pool, seq, passed(0), passed(1), free as i64], |r| r.get(0)))
            .map_err(err(what))?;
        if let (true, Some((admit, settling_ms))) = ((before as usize) < free, admit) {
            let since = crate::task::unix_ms(std::time::SystemTime::now()).saturating_sub(settling_ms) as i64;
            let settling: i64 = tx
                .prepare_cached(SETTLING)
                .and_then(|mut s| s.query_row(params![since], |r| r.get(0)))
                .map_err(err(what))?;
            if let Some(why) = admit(settling as usize) {
                return Ok(Claim::Short(why));
            }
        }
        if (before as usize) < free {
            rec.queued = false;
            let text = super::rows::to_json(rec)?;
            tx.execute(WRITE_RECORD, params![rec.token.as_str(), text, rec.status().as_str()]).map_err(err(what))?;
            tx.commit().map_err(err(what))?;
            return Ok(Claim::Granted);
        }
        let ahead = tokens(&tx, AHEAD, params![pool, seq, WATCHERS as i64])?;
        Ok(Claim::Waiting { ahead, free: free > 0, holders })
    }

    /// The place in line of queued task `token` of `pool` (1 is next), if it is in line.
    pub fn queue_place(&self, token: Token, pool: &str) -> Result<Option<usize>> {
        let conn = self.db()?;
        let mut stmt = conn.prepare_cached(PLACE).map_err(err(what))?;
        let n: i64 = stmt.query_row(params![pool, token.as_str()], |r| r.get(0)).map_err(err(what))?;
        Ok((n > 0).then_some(n as usize))
    }

    /// The pools of the open tasks (those of earlier releases have none), and where each
    /// queued one is in its pool's line (1 is next): one look for a whole view.
    pub fn open_places(&self) -> Result<Vec<(Token, String, Option<usize>)>> {
        let conn = self.db()?;
        let mut stmt = conn
            .prepare_cached(
                "SELECT token, pool, pool_state IS 'waiting' FROM tasks \
                 WHERE pool_state IS NOT NULL AND ended_at_ms IS NULL ORDER BY pool, queue_seq",
            )
            .map_err(err(what))?;
        let open: Vec<(String, String, bool)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(err(what))?
            .collect::<rusqlite::Result<_>>()
            .map_err(err(what))?;
        let mut out = Vec::new();
        let (mut pool, mut place) = (None, 0);
        for (token, name, waiting) in open {
            if pool.as_ref() != Some(&name) {
                (pool, place) = (Some(name.clone()), 0);
            }
            place += usize::from(waiting);
            let Ok(token) = Token::parse(&token) else { continue };
            out.push((token, name, waiting.then_some(place)));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
