//! What a pool's tasks spent over a window, for its `spend` limit: the costs of those that
//! ended in it (from their final records), and what those still running spent so far (from
//! what their supervisors last published).

use rusqlite::params;

use super::Store;
use super::db::err;
use crate::error::Result;
use crate::task::Token;

/// The pool's tasks that ended at or after `?2` with a known cost: when each ended, and the cost.
const ENDED: &str = "SELECT ended_at_ms, json_extract(record, '$.usage.cost_usd') FROM tasks \
     WHERE ended_at_ms >= ?2 AND pool = ?1 AND json_type(record, '$.usage.cost_usd') IN ('real', 'integer')";

/// The pool's tasks running now.
const RUNNING: &str = "SELECT token FROM tasks WHERE pool = ?1 AND ended_at_ms IS NULL AND status = 'running'";

/// What a pool spent: each task that ended in the window (when, and its cost), and its
/// running tasks' spend so far.
#[derive(Debug, Default)]
pub struct Spent {
    pub ended: Vec<(u64, f64)>,
    pub running: f64,
}

impl Store {
    /// What pool `pool` spent since `since_ms` (ms since the epoch).
    pub fn pool_spent(&self, pool: &str, since_ms: u64) -> Result<Spent> {
        let what = || format!("cannot add up what pool `{pool}` spent");
        let conn = self.db()?;
        let mut stmt = conn.prepare_cached(ENDED).map_err(err(what))?;
        let rows =
            stmt.query_map(params![pool, since_ms as i64], |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, f64>(1)?)));
        let ended = rows.map_err(err(what))?.flatten().filter(|e| e.1.is_finite() && e.1 >= 0.0).collect();
        let mut stmt = conn.prepare_cached(RUNNING).map_err(err(what))?;
        let tokens: Vec<Token> = stmt
            .query_map([pool], |r| r.get::<_, String>(0))
            .map_err(err(what))?
            .flatten()
            .filter_map(|t| Token::parse(&t).ok())
            .collect();
        let running = tokens
            .into_iter()
            .filter_map(|t| self.usage_so_far(t)?.cost_usd.filter(|c| c.is_finite() && *c >= 0.0))
            .sum();
        Ok(Spent { ended, running })
    }
}
