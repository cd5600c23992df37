//! Pools: a task waits (`queued`) until its pool has a place for it. Places are counted in
//! the store, in one write transaction at a time, so two tasks never take the last one: the
//! pool's open tasks that were given a place (`starting`, `running`) against its `parallel`,
//! and the queued ones in the order they were saved (`queue_seq`).

use std::time::SystemTime;

use rusqlite::params;

use super::Store;
use super::db::{self, err};
use crate::error::Result;
use crate::task::{Status, TaskRecord, Token, unix_ms};

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

impl Store {
    /// Take a place in `pool` (at most `parallel` held at once) for the queued task `rec`, if
    /// one is free and no queued task is ahead of it; its record says `starting` then.
    pub fn claim(&self, rec: &mut TaskRecord, pool: &str, parallel: u32) -> Result<Claim> {
        let conn = self.db()?;
        let tx = db::write(&conn).map_err(err(what))?;
        // With each, when a rate-limited one runs again (until then it is not in line).
        let open: Vec<(String, String, Option<i64>)> = {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT token, status, json_extract(record, '$.retry_at_ms') FROM tasks \
                     WHERE pool = ?1 AND ended_at_ms IS NULL ORDER BY queue_seq",
                )
                .map_err(err(what))?;
            stmt.query_map([pool], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .map_err(err(what))?
                .collect::<rusqlite::Result<_>>()
                .map_err(err(what))?
        };
        let me = rec.token.as_str();
        let now = unix_ms(SystemTime::now()) as i64;
        let is = |s: &str, st: Status| s == st.as_str();
        let holders: Vec<Token> = open
            .iter()
            .filter(|(t, s, _)| t != me && (is(s, Status::Starting) || is(s, Status::Running)))
            .filter_map(|(t, _, _)| Token::parse(t).ok())
            .collect();
        let queued: Vec<&str> = open
            .iter()
            .filter(|(t, s, retry_at)| is(s, Status::Queued) && (t == me || retry_at.is_none_or(|at| at <= now)))
            .map(|(t, _, _)| t.as_str())
            .collect();
        let Some(place) = queued.iter().position(|t| *t == me) else {
            // Not waiting (it never was, or it has its place already).
            rec.queued = false;
            return Ok(Claim::Granted);
        };
        if holders.len() + place < parallel as usize {
            rec.queued = false;
            tx.execute(
                "UPDATE tasks SET record = ?2, status = ?3 WHERE token = ?1 AND ended_at_ms IS NULL",
                params![me, serde_json::to_string(rec).unwrap_or_default(), rec.status().as_str()],
            )
            .map_err(err(what))?;
            tx.commit().map_err(err(what))?;
            return Ok(Claim::Granted);
        }
        let ahead = place.checked_sub(1).and_then(|i| Token::parse(queued[i]).ok());
        Ok(Claim::Waiting { place: place + 1, holders, ahead })
    }

    /// The place in line of queued task `token` of `pool` (1 is next), if it is queued.
    pub fn queue_place(&self, token: Token, pool: &str) -> Result<Option<usize>> {
        let conn = self.db()?;
        let mut stmt = conn
            .prepare_cached(
                "SELECT token FROM tasks WHERE pool = ?1 AND ended_at_ms IS NULL AND status = 'queued' \
                 ORDER BY queue_seq",
            )
            .map_err(err(what))?;
        let queued: Vec<String> = stmt
            .query_map([pool], |r| r.get(0))
            .map_err(err(what))?
            .collect::<rusqlite::Result<_>>()
            .map_err(err(what))?;
        Ok(queued.iter().position(|t| t == token.as_str()).map(|i| i + 1))
    }
}
