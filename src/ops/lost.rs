//! A task's record as it stands: a task whose supervisor died without recording its end is
//! recorded `lost` first, and what the dead supervisor left is ended.

use crate::error::Result;
use crate::store::{FileLock, Store};
use crate::supervisor::{cgroup, reach};
use crate::task::{LockNote, Outcome, TaskRecord, Token};

/// The task's record, after recording `lost` if its supervisor is gone without a final record.
pub fn refresh(store: &Store, token: Token) -> Result<TaskRecord> {
    let rec = store.read_record(token)?;
    if rec.status().is_final() {
        // Its end recorded, and its supervisor gone before it started the hook: start it.
        super::hook_start::start_orphaned_hook(store, &rec);
        return Ok(rec);
    }
    // The supervisor holds this lock for its whole life: getting it means it is gone.
    let Some(_lock) = FileLock::try_take(&store.lock_path(token))? else {
        return Ok(rec);
    };
    let mut rec = store.read_record(token)?;
    if rec.status().is_final() {
        return Ok(rec);
    }
    // A supervisor of an earlier release writes its end in a file of its own.
    if let Some(ended) = store.adopt_late_end(token)? {
        return Ok(ended);
    }
    // The agent dies with its supervisor (PDEATHSIG) unless it changed its credentials (a
    // setuid program); whatever of the task is left in its session is ended here.
    let untraced = "processes that left the task's session (setsid) could not be traced";
    let written = lock_note(store, token);
    let cgroup = written.cgroup;
    let note = match (written.id, &rec.started, &cgroup) {
        (Some(id), started, _) => {
            let when = match (started, rec.queued) {
                (Some(_), _) => "",
                (None, true) => " while the task waited for a place in its pool (it never ran)",
                (None, false) => " before it recorded that the agent started",
            };
            match reach::end_lost(id, token, cgroup.as_ref()) {
                // Whatever left its cgroup is looked for in its session only: below its dead
                // supervisor nothing is left.
                Some(reached) if cgroup.is_some() => {
                    format!("the supervisor died{when}; {}; {}", reached.describe(), reach::untraced(false))
                }
                Some(reached) => format!("the supervisor died{when}; {}; {untraced}", reached.describe()),
                None => format!("the supervisor died{when}, before the machine restarted: nothing of it can still run"),
            }
        }
        // No id (its /proc could not be read): its cgroup, if it wrote one, still says it all.
        (None, _, Some(cg)) => format!(
            "the supervisor died; {}; it left no trace of its session: processes that left its cgroup could not be \
             traced",
            reach::end_cgroup(cg).describe()
        ),
        (None, None, None) => "the supervisor died before it started the agent".to_owned(),
        (None, Some(_), None) => format!("the supervisor died; it left no trace of its session: {untraced}"),
    };
    // A Slurm job is ended by its id and name, which no other job has.
    let note = match written.slurm_job {
        Some(job) => format!("{note}; {}", crate::supervisor::backend::slurm::cancel_for_task(store, token, job)),
        None => note,
    };
    if let Err(e) = store.finish(&mut rec, Outcome::Lost, Some(note), None, None) {
        // A home we may read but not write (read-only, say): the answer is still `lost`.
        let Some(ended) = rec.ended.as_mut() else { return Err(e) };
        let note = ended.note.get_or_insert_with(String::new);
        note.push_str(&format!("; this could not be recorded in the home: {e}"));
        return Ok(rec);
    }
    super::hook_start::start_hook(store, &rec);
    Ok(rec)
}

/// What task `token`'s lock file says, with its cgroup only if that is truly the task's: a lock
/// file naming another task's cgroup is not followed.
pub(super) fn lock_note(store: &Store, token: Token) -> LockNote {
    let mut note = store.lock_note(token);
    note.cgroup = note.cgroup.filter(|cg| cgroup::is_tasks(cg, token));
    note
}
