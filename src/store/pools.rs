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
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;
    use crate::task::TaskSpec;

    /// A task of pool `p` (of `parallel` places) saved now: held if a place was free, else in line.
    fn save(store: &Store, n: usize, parallel: u32) -> TaskRecord {
        let rec: TaskRecord = serde_json::from_value(serde_json::json!({
            "token": format!("{n:06x}"), "role": "w", "session": "", "preview": "",
            "created_at_ms": 0, "started": null, "ended": null,
        }))
        .unwrap();
        let spec: TaskSpec = serde_json::from_value(serde_json::json!({
            "argv": ["true"], "cwd": "/", "env": {}, "deadline_ms": null, "grace_ms": 0,
            "pool": { "name": "p", "agents_file": null, "parallel": parallel },
        }))
        .unwrap();
        let queued = store.insert_task(&rec, &spec).unwrap();
        TaskRecord { queued, ..rec }
    }

    /// A pool of 2 places, both held, and `line` tasks in line behind them.
    fn line_of(line: usize) -> (tempfile::TempDir, Store, Vec<TaskRecord>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let tasks: Vec<TaskRecord> = (1..=line + 2).map(|n| save(&store, n, 2)).collect();
        assert_eq!(tasks.iter().filter(|t| t.queued).count(), line);
        (dir, store, tasks)
    }

    /// How many SQLite virtual machine steps `f` takes on the store's one connection.
    fn steps(store: &Store, f: impl FnOnce()) -> u64 {
        let count = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&count);
        store
            .db()
            .unwrap()
            .progress_handler(
                1,
                Some(move || {
                    counted.fetch_add(1, Ordering::Relaxed);
                    false
                }),
            )
            .unwrap();
        f();
        store.db().unwrap().progress_handler(1, None::<fn() -> bool>).unwrap();
        count.load(Ordering::Relaxed)
    }

    /// What the starts from a line cost, in SQLite's steps: the first in line finding no place,
    /// one more task saved at the end of the line, the last in line looking, and the first
    /// taking a place freed.
    fn costs(line: usize) -> [u64; 4] {
        let (_dir, store, mut tasks) = line_of(line);
        let first = steps(&store, || {
            assert!(matches!(store.claim(&mut tasks[2], "p", 2, &[]).unwrap(), Claim::Waiting { .. }))
        });
        let saved = steps(&store, || assert!(save(&store, line + 3, 2).queued));
        let last = line + 2;
        let behind = steps(&store, || {
            let Claim::Waiting { ahead, .. } = store.claim(&mut tasks[last - 1], "p", 2, &[]).unwrap() else {
                panic!("the last in line has no place")
            };
            assert_eq!(ahead, [tasks[last - 2].token, tasks[last - 3].token, tasks[last - 4].token]);
        });
        store.finish(&mut tasks[0], crate::task::Outcome::Completed, None, None, None).unwrap();
        let taken = steps(&store, || assert_eq!(store.claim(&mut tasks[2], "p", 2, &[]).unwrap(), Claim::Granted));
        [first, saved, behind, taken]
    }

    #[test]
    fn a_start_from_the_line_costs_the_same_at_any_length() {
        let (short, long) = (costs(20), costs(600));
        // The same statements over the same few rows: a step or two of slack for the B-tree.
        for (s, l) in short.iter().zip(&long) {
            assert!(l.abs_diff(*s) <= 2, "steps at a line of 20: {short:?}; of 600: {long:?}");
        }
    }

    #[test]
    fn a_claim_that_admits_by_memory_counts_the_tasks_still_settling() {
        let (_dir, store, mut tasks) = line_of(3);
        store.finish(&mut tasks[0], crate::task::Outcome::Completed, None, None, None).unwrap();
        // One holder left, which has not started yet: it has not taken its memory.
        let short = |n: usize| (n >= 1).then(|| format!("{n} settling"));
        let claimed = store.claim_with(&mut tasks[2], "p", 2, &[], Some((&short, 15_000))).unwrap();
        assert_eq!(claimed, Claim::Short("1 settling".into()));
        assert!(tasks[2].queued, "nothing was taken");
        let roomy = |n: usize| (n >= 2).then(String::new);
        assert_eq!(store.claim_with(&mut tasks[2], "p", 2, &[], Some((&roomy, 15_000))).unwrap(), Claim::Granted);
    }

    #[test]
    fn the_statements_of_a_start_search_one_index() {
        let (_dir, store, _) = line_of(3);
        let conn = store.db().unwrap();
        for sql in [HOLDERS, OWN, BEFORE, AHEAD, TAKEN, PLACE] {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let n = stmt.parameter_count();
            let values: Vec<rusqlite::types::Value> = (0..n).map(|_| rusqlite::types::Value::Integer(1)).collect();
            let plan: Vec<String> =
                stmt.query_map(rusqlite::params_from_iter(values), |r| r.get(3)).unwrap().map(|r| r.unwrap()).collect();
            let scans = plan.iter().filter(|p| p.contains("SCAN tasks") || p.contains("TEMP B-TREE")).count();
            let searched = plan.iter().any(|p| p.starts_with("SEARCH tasks USING"));
            assert!(scans == 0 && searched, "{sql}: {plan:?}");
            // What counts a line reads the index alone, never the records in it.
            if [BEFORE, TAKEN, PLACE].contains(&sql) {
                assert!(plan.iter().any(|p| p.contains("COVERING INDEX")), "{sql}: {plan:?}");
            }
        }
    }

    #[test]
    fn the_line_keeps_its_order_and_late_waiters_can_be_passed() {
        let (_dir, store, mut tasks) = line_of(4);
        let tokens: Vec<Token> = tasks.iter().map(|t| t.token).collect();
        assert_eq!(store.queue_place(tokens[3], "p").unwrap(), Some(2));
        assert_eq!(store.queue_place(tokens[0], "p").unwrap(), None);
        let Claim::Waiting { ahead, holders, free } = store.claim(&mut tasks[3], "p", 2, &[]).unwrap() else {
            panic!("a full pool gave a place")
        };
        assert_eq!((ahead, holders, free), (vec![tokens[2]], vec![tokens[0], tokens[1]], false));
        store.finish(&mut tasks[0], crate::task::Outcome::Completed, None, None, None).unwrap();
        // The place freed is the first in line's: those behind wait, unless they pass those ahead.
        assert!(matches!(store.claim(&mut tasks[3], "p", 2, &[]).unwrap(), Claim::Waiting { free: true, .. }));
        assert!(matches!(store.claim(&mut tasks[4], "p", 2, &[tokens[3]]).unwrap(), Claim::Waiting { .. }));
        assert_eq!(store.claim(&mut tasks[4], "p", 2, &[tokens[3], tokens[2]]).unwrap(), Claim::Granted);
        // Those passed keep their places: first and second in line still.
        let Claim::Waiting { ahead, .. } = store.claim(&mut tasks[3], "p", 2, &[]).unwrap() else {
            panic!("no place was free")
        };
        assert_eq!(ahead, [tokens[2]]);
        let places = store.open_places().unwrap();
        let waiting: Vec<_> = places.iter().filter_map(|(t, _, p)| p.map(|p| (*t, p))).collect();
        assert_eq!(waiting, [(tokens[2], 1), (tokens[3], 2), (tokens[5], 3)]);
    }

    /// Where the store says task `t` stands.
    fn state(store: &Store, t: Token) -> Option<String> {
        let conn = store.db().unwrap();
        conn.query_row("SELECT pool_state FROM tasks WHERE token = ?1", [t.as_str()], |r| r.get(0)).unwrap()
    }

    #[test]
    fn where_a_task_stands_follows_its_record() {
        let (_dir, store, mut tasks) = line_of(1);
        let started = serde_json::json!({ "pid": 2, "supervisor_pid": 1, "at_ms": 5 });
        for (queued, started, slurm_pending, retry_at_ms, want) in [
            (true, None, None, None, "waiting"),
            (false, None, None, None, "held"),
            (false, Some(&started), None, None, "held"),
            // Slurm holds its job pending: queued, with its place.
            (false, Some(&started), Some("Priority"), None, "held"),
            // A rate-limited run's back-off, then back in line.
            (true, Some(&started), None, Some(9), "resting"),
            (true, Some(&started), None, None, "waiting"),
        ] {
            let mut rec = serde_json::to_value(&tasks[2]).unwrap();
            rec["queued"] = queued.into();
            rec["started"] = started.cloned().into();
            rec["slurm_pending"] = slurm_pending.into();
            rec["retry_at_ms"] = retry_at_ms.into();
            let rec: TaskRecord = serde_json::from_value(rec).unwrap();
            store.write_record(&rec).unwrap();
            assert_eq!(state(&store, rec.token).as_deref(), Some(want), "{rec:?}");
        }
        store.finish(&mut tasks[2], crate::task::Outcome::Completed, None, None, None).unwrap();
        assert_eq!(state(&store, tasks[2].token), None);
    }

    #[test]
    fn a_task_whose_back_off_did_not_end_in_the_store_still_waits_for_its_place() {
        let (_dir, store, mut tasks) = line_of(0);
        let mut rec = tasks[1].clone();
        // Its back-off as saved; the write that ended it failed.
        rec.retry_at_ms = Some(9);
        rec.queued = true;
        store.write_record(&rec).unwrap();
        rec.retry_at_ms = None;
        assert!(matches!(store.claim(&mut rec, "p", 1, &[]).unwrap(), Claim::Waiting { free: false, .. }));
        store.finish(&mut tasks[0], crate::task::Outcome::Completed, None, None, None).unwrap();
        assert_eq!(store.claim(&mut rec, "p", 1, &[]).unwrap(), Claim::Granted);
        assert_eq!(state(&store, rec.token).as_deref(), Some("held"));
    }

    #[test]
    fn a_record_written_by_an_earlier_release_or_a_tool_moves_its_task_as_any() {
        let (_dir, store, mut tasks) = line_of(2);
        let conn = store.db().unwrap();
        // An earlier release's supervisor takes the place freed, then ends; neither write says
        // where it stands.
        store.finish(&mut tasks[0], crate::task::Outcome::Completed, None, None, None).unwrap();
        let mut first = tasks[2].clone();
        first.queued = false;
        let text = serde_json::to_string(&first).unwrap();
        conn.execute(
            "UPDATE tasks SET record = ?2, status = 'starting' WHERE token = ?1",
            [first.token.as_str(), &text],
        )
        .unwrap();
        assert_eq!(state(&store, first.token).as_deref(), Some("held"));
        conn.execute(
            "UPDATE tasks SET record = ?2, status = 'completed', ended_at_ms = 5 WHERE token = ?1",
            [first.token.as_str(), &text],
        )
        .unwrap();
        assert_eq!(state(&store, first.token), None);
        // A tool that marks an ended task as holding a place does not take it.
        conn.execute("UPDATE tasks SET pool_state = 'held' WHERE token = ?1", [tasks[0].token.as_str()]).unwrap();
        drop(conn);
        assert_eq!(store.claim(&mut tasks[3], "p", 2, &[]).unwrap(), Claim::Granted);
    }

    #[test]
    fn a_store_of_schema_5_or_6_learns_where_its_open_tasks_stand() {
        let (dir, store, mut tasks) = line_of(2);
        store.finish(&mut tasks[0], crate::task::Outcome::Completed, None, None, None).unwrap();
        let states = |store: &Store| -> Vec<Option<String>> {
            let conn = store.db().unwrap();
            let mut stmt = conn.prepare("SELECT pool_state FROM tasks ORDER BY queue_seq").unwrap();
            stmt.query_map([], |r| r.get(0)).unwrap().map(|r| r.unwrap()).collect()
        };
        let before = states(&store);
        assert_eq!(before, [None, Some("held".into()), Some("waiting".into()), Some("waiting".into())]);
        drop(store);
        let undo = "DROP TRIGGER tasks_pool_state_saved; DROP TRIGGER tasks_pool_state_written; \
                    DROP INDEX tasks_in_pools; ALTER TABLE mcp_tasks DROP COLUMN turn;";
        for older in [
            "ALTER TABLE tasks DROP COLUMN pool_state; \
             CREATE INDEX tasks_open_by_pool ON tasks(pool, queue_seq) WHERE ended_at_ms IS NULL; \
             PRAGMA user_version = 5;",
            // The end of a task written by a release before it, left as it held a place.
            "CREATE INDEX tasks_in_pools ON tasks(pool, pool_state, queue_seq) WHERE pool_state IS NOT NULL; \
             UPDATE tasks SET pool_state = 'held' WHERE ended_at_ms IS NOT NULL; PRAGMA user_version = 6;",
        ] {
            let conn = rusqlite::Connection::open(db::path(dir.path())).unwrap();
            conn.execute_batch(&format!("{undo} {older}")).unwrap();
            drop(conn);
            let store = Store::open(dir.path()).unwrap();
            assert_eq!(states(&store), before, "{older}");
            // The place the ended task held is free, for the first in line.
            let mut second = tasks[3].clone();
            let Claim::Waiting { ahead, free: true, .. } = store.claim(&mut second, "p", 2, &[]).unwrap() else {
                panic!("the second in line took the place freed for the first")
            };
            assert_eq!(ahead, [tasks[2].token]);
        }
    }
}
