//! Pools: a task waits (`queued`) until its pool has a place for it. Places are counted in
//! the store, in one write transaction at a time, so two tasks never take the last one: the
//! pool's open tasks that were given a place (`starting`, `running`) against its `parallel`,
//! and the queued ones in the order they were saved (`queue_seq`).

use std::time::SystemTime;

use rusqlite::{Connection, params};

use super::Store;
use super::db::{self, err};
use crate::error::Result;
use crate::task::{TaskRecord, Token, unix_ms};

fn what() -> String {
    "cannot count the places of a pool in the store".to_owned()
}

/// What a queued task found when it looked for a place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// It has one: it is `starting` now.
    Granted,
    /// It waits: its place in line (1 is next), the pool's tasks that hold places, and the
    /// queued task just ahead of it.
    Waiting { place: usize, holders: Vec<Token>, ahead: Option<Token> },
}

/// The open tasks of pool `?1` that hold a place: those given one (`starting`, `running`, or
/// `queued` by Slurm, which holds their job pending).
const HOLDING: &str = "pool = ?1 AND ended_at_ms IS NULL \
                       AND (status IN ('starting', 'running') OR json_extract(record, '$.slurm_pending') IS NOT NULL)";

/// The open tasks of pool `?1` in line for a place: queued, and not in a rate-limited run's
/// back-off (which ends after `?2`, now).
const IN_LINE: &str = "pool = ?1 AND ended_at_ms IS NULL AND status = 'queued' \
                       AND json_extract(record, '$.slurm_pending') IS NULL \
                       AND coalesce(json_extract(record, '$.retry_at_ms'), 0) <= ?2";

fn now_ms() -> i64 {
    unix_ms(SystemTime::now()) as i64
}

/// The tokens of `pool`'s tasks where `condition` (`HOLDING`, `IN_LINE`) holds, in the order
/// they were saved.
fn tokens(conn: &Connection, condition: &str, pool: &str) -> Result<Vec<Token>> {
    let sql = format!("SELECT token FROM tasks WHERE {condition} ORDER BY queue_seq");
    let mut stmt = conn.prepare_cached(&sql).map_err(err(what))?;
    let now = now_ms();
    let values: [&dyn rusqlite::ToSql; 2] = [&pool, &now];
    // `HOLDING` does not need the time.
    let needed = stmt.parameter_count();
    let mut rows = stmt.query(&values[..needed]).map_err(err(what))?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(err(what))? {
        out.extend(Token::parse(&row.get::<_, String>(0).map_err(err(what))?).ok());
    }
    Ok(out)
}

/// Whether `pool` has no place free for a task saved now: `parallel` held, or as many held
/// and in line together.
pub(super) fn full(conn: &Connection, pool: &str, parallel: u32) -> Result<bool> {
    let sql =
        format!("SELECT (SELECT count(*) FROM tasks WHERE {HOLDING}) + (SELECT count(*) FROM tasks WHERE {IN_LINE})");
    let taken: i64 = conn.query_row(&sql, params![pool, now_ms()], |r| r.get(0)).map_err(err(what))?;
    Ok(taken >= i64::from(parallel))
}

impl Store {
    /// Take a place in `pool` (at most `parallel` held at once) for the queued task `rec`, if
    /// one is free and no queued task is ahead of it; its record says `starting` then.
    pub fn claim(&self, rec: &mut TaskRecord, pool: &str, parallel: u32) -> Result<Claim> {
        let conn = self.db()?;
        let tx = db::write(&conn).map_err(err(what))?;
        let queued = tokens(&tx, IN_LINE, pool)?;
        let Some(place) = queued.iter().position(|&t| t == rec.token) else {
            // Not waiting (it never was, or it has its place already).
            rec.queued = false;
            return Ok(Claim::Granted);
        };
        let holders = tokens(&tx, HOLDING, pool)?;
        if holders.len() + place < parallel as usize {
            rec.queued = false;
            tx.execute(
                "UPDATE tasks SET record = ?2, status = ?3 WHERE token = ?1 AND ended_at_ms IS NULL",
                params![rec.token.as_str(), serde_json::to_string(rec).unwrap_or_default(), rec.status().as_str()],
            )
            .map_err(err(what))?;
            tx.commit().map_err(err(what))?;
            return Ok(Claim::Granted);
        }
        let ahead = place.checked_sub(1).map(|i| queued[i]);
        Ok(Claim::Waiting { place: place + 1, holders, ahead })
    }

    /// The place in line of queued task `token` of `pool` (1 is next), if it is in line.
    pub fn queue_place(&self, token: Token, pool: &str) -> Result<Option<usize>> {
        let conn = self.db()?;
        Ok(tokens(&conn, IN_LINE, pool)?.iter().position(|&t| t == token).map(|i| i + 1))
    }

    /// The pools of the open tasks (those of earlier releases have none), and where each
    /// queued one is in its pool's line (1 is next): one look for a whole view.
    pub fn open_places(&self) -> Result<Vec<(Token, String, Option<usize>)>> {
        let conn = self.db()?;
        let mut stmt = conn
            .prepare_cached("SELECT token, pool FROM tasks WHERE ended_at_ms IS NULL AND pool IS NOT NULL")
            .map_err(err(what))?;
        let open: Vec<(String, String)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(err(what))?
            .collect::<rusqlite::Result<_>>()
            .map_err(err(what))?;
        let mut lines: std::collections::HashMap<String, Vec<Token>> = std::collections::HashMap::new();
        let mut out = Vec::new();
        for (token, pool) in open {
            let Ok(token) = Token::parse(&token) else { continue };
            if !lines.contains_key(&pool) {
                lines.insert(pool.clone(), tokens(&conn, IN_LINE, &pool)?);
            }
            let place = lines[&pool].iter().position(|&t| t == token).map(|i| i + 1);
            out.push((token, pool, place));
        }
        Ok(out)
    }
}
