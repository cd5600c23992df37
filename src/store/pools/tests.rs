//! Tests of a pool's line: claims, places, and what each start reads.

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
    let first =
        steps(&store, || assert!(matches!(store.claim(&mut tasks[2], "p", 2, &[]).unwrap(), Claim::Waiting { .. })));
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
    conn.execute("UPDATE tasks SET record = ?2, status = 'starting' WHERE token = ?1", [first.token.as_str(), &text])
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
    let undo = "UPDATE tasks SET spec = (SELECT spec FROM specs WHERE specs.token = tasks.token); \
                DROP TABLE specs; ALTER TABLE tasks DROP COLUMN summary; \
                DROP TRIGGER tasks_pool_state_saved; DROP TRIGGER tasks_pool_state_written; \
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
