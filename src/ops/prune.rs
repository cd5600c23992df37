//! Retention: removing finished tasks (record, log, summary, events), never a running one.

use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::query::refresh_open;
use super::view::TaskView;
use super::wait::DEFAULT_GRACE;
use crate::error::{Error, Result};
use crate::store::{FileLock, Store};
use crate::task::{TaskRecord, Token, unix_ms};

/// Which finished tasks to remove.
#[derive(Clone, Copy, Debug, Default)]
pub struct PruneRule {
    /// Only tasks that ended longer ago than this.
    pub older_than: Option<Duration>,
    /// Always keep this many of the most recently ended tasks.
    pub keep: Option<usize>,
    /// Only say what would be removed.
    pub dry_run: bool,
    /// Also delete the branches (`agentctl/TOKEN`) of the removed tasks' worktrees.
    pub purge: bool,
}

/// What `prune` removed (or would remove).
#[derive(Clone, Debug, Serialize)]
pub struct Pruned {
    pub removed: Vec<TaskView>,
    pub count: usize,
    /// Events removed: every event of the removed tasks, and delivered events of no task as
    /// old as the rule says.
    pub events_removed: usize,
    /// Leftovers of tasks that were never started (their launcher failed or died while
    /// creating them), removed whatever the rule.
    pub strays_removed: usize,
    pub dry_run: bool,
}

/// How old a task directory without a record must be to count as a stray: a launcher takes
/// milliseconds between creating it and writing the record.
const STRAY_AGE: Duration = Duration::from_secs(60);

/// How many tasks `prune` removes in one transaction (holding their locks meanwhile).
const BATCH: usize = 256;

/// Remove the finished tasks `rule` selects. Running tasks are never selected.
pub fn prune(store: &Store, rule: PruneRule) -> Result<Pruned> {
    if rule.older_than.is_none() && rule.keep.is_none() {
        return Err(Error::Usage(
            "say which finished tasks to remove: --older-than D (e.g. 7d), --keep N (keep the N newest), or both"
                .into(),
        ));
    }
    let now = unix_ms(SystemTime::now());
    // Tasks whose supervisor died unnoticed are finished too (lost).
    refresh_open(store)?;
    let cutoff = rule.older_than.map(|d| now.saturating_sub(d.as_millis() as u64));
    let mut removed = Vec::new();
    let mut events_removed = 0;
    // Tasks whose lock is held, removed together once there are `BATCH` of them.
    let mut batch: Vec<(TaskRecord, FileLock)> = Vec::new();
    for rec in store.finished(rule.keep.unwrap_or(0), cutoff)? {
        let view = TaskView::of(store, &rec, false)?;
        if !rule.dry_run {
            // Its supervisor may still be ending what the agent left (up to the grace period)
            // before it exits and lets go of the lock: wait for it, bounded, so that a dry run
            // and the real one agree.
            let lock = match FileLock::try_take(&store.lock_path(rec.token))? {
                Some(lock) => Some(lock),
                None => {
                    let grace = store.read_spec(rec.token).map_or(DEFAULT_GRACE, |s| Duration::from_millis(s.grace_ms));
                    FileLock::take_within(&store.lock_path(rec.token), grace + Duration::from_secs(1))?
                }
            };
            let Some(lock) = lock else { continue };
            batch.push((rec, lock));
            if batch.len() == BATCH {
                remove_worktrees(store, batch.iter().map(|(r, _)| r.token), rule.purge);
                events_removed += store.remove_tasks(batch.iter().map(|(r, _)| r))?;
                batch.clear();
            }
        }
        removed.push(view);
    }
    if !batch.is_empty() {
        remove_worktrees(store, batch.iter().map(|(r, _)| r.token), rule.purge);
        events_removed += store.remove_tasks(batch.iter().map(|(r, _)| r))?;
    }
    drop(batch);
    // A dry run counts the removed tasks' events; a real one removed them with each task.
    let counted: Vec<Token> = if rule.dry_run { removed.iter().map(|v| v.token).collect() } else { Vec::new() };
    events_removed += store.events().remove(&counted, cutoff.or(rule.keep.map(|_| now)), rule.dry_run)?;
    if !rule.dry_run {
        store.compact();
    }
    let strays_removed = store.remove_strays(STRAY_AGE, rule.dry_run)?;
    Ok(Pruned { count: removed.len(), removed, events_removed, strays_removed, dry_run: rule.dry_run })
}

/// Remove the worktrees of `tasks` (each task's own: no other task's is touched), and with
/// `branches` their branches too.
fn remove_worktrees(store: &Store, tasks: impl Iterator<Item = Token>, branches: bool) {
    for t in tasks {
        if !store.worktree_path(t).is_dir() && !branches {
            continue;
        }
        if let Ok(Some(wt)) = store.read_spec(t).map(|s| s.worktree) {
            crate::worktree::remove(&wt, branches);
        }
    }
}
