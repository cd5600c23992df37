//! What a pool's tasks spent over a window, for its `spend` limit: the costs of those that
//! ended in it (from their final records), and what those still running spent so far (from
//! what their supervisors last published).

use rusqlite::params;

use super::Store;
use super::db::err;
use crate::agent::Usage;
use crate::error::Result;
use crate::task::{Token, usage_since};

/// The pool's tasks that ended at or after `?2` with a known cost: when each ended, its usage
/// (its conversation's) and its earlier turns, if it was followed up.
const ENDED: &str = "SELECT ended_at_ms, json_extract(record, '$.usage'), json_extract(record, '$.turns') FROM tasks \
     WHERE ended_at_ms >= ?2 AND pool = ?1 AND json_type(record, '$.usage.cost_usd') IN ('real', 'integer')";

/// The pool's tasks running now, and their earlier turns.
const RUNNING: &str = "SELECT token, json_extract(record, '$.turns') FROM tasks WHERE pool = ?1 AND ended_at_ms IS NULL AND status = 'running'";

/// What a pool spent: each task that ended in the window (when, and its cost), and its
/// running tasks' spend so far.
#[derive(Debug, Default)]
pub struct Spent {
    pub ended: Vec<(u64, f64)>,
    pub running: f64,
}

impl Store {
    /// The open tasks of each pool: how many hold a place, and how many wait for one (those
    /// resting or waiting for other tasks count as waiting).
    pub fn pool_counts(&self) -> Result<std::collections::HashMap<String, (u32, u32)>> {
        let what = || "cannot count the pools' tasks".to_owned();
        let conn = self.db()?;
        let mut stmt = conn
            .prepare_cached(
                "SELECT pool, sum(pool_state = 'held'), sum(pool_state <> 'held') FROM tasks \
                 WHERE pool_state IS NOT NULL AND ended_at_ms IS NULL GROUP BY pool",
            )
            .map_err(err(what))?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, (r.get::<_, u32>(1)?, r.get::<_, u32>(2)?))));
        Ok(rows.map_err(err(what))?.flatten().collect())
    }

    /// What pool `pool` spent since `since_ms` (ms since the epoch).
    pub fn pool_spent(&self, pool: &str, since_ms: u64) -> Result<Spent> {
        let what = || format!("cannot add up what pool `{pool}` spent");
        let conn = self.db()?;
        let mut stmt = conn.prepare_cached(ENDED).map_err(err(what))?;
        // A followed-up task's turns that ended before the window were counted in theirs.
        let cost = |usage: Usage, turns: Option<String>| {
            usage_since(usage, turns.as_deref(), since_ms).cost_usd.filter(|c| c.is_finite() && *c >= 0.0)
        };
        let rows = stmt.query_map(params![pool, since_ms as i64], |r| {
            Ok((r.get::<_, i64>(0)? as u64, r.get::<_, String>(1)?, r.get::<_, Option<String>>(2)?))
        });
        let ended = rows
            .map_err(err(what))?
            .flatten()
            .filter_map(|(at, usage, turns)| Some((at, cost(serde_json::from_str(&usage).ok()?, turns)?)))
            .collect();
        let mut stmt = conn.prepare_cached(RUNNING).map_err(err(what))?;
        let open: Vec<(Token, Option<String>)> = stmt
            .query_map([pool], |r| Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?)))
            .map_err(err(what))?
            .flatten()
            .filter_map(|(t, turns)| Some((Token::parse(&t).ok()?, turns)))
            .collect();
        let running = open.into_iter().filter_map(|(t, turns)| cost(self.usage_so_far(t)?, turns)).sum();
        Ok(Spent { ended, running })
    }
}
