//! The hybrid wait after a start: the result if the task ends within the wait, else its token
//! and how to follow it up.

use std::time::Duration;

use super::lost::refresh;
use super::view::TaskView;
use super::wait::{AWAIT_TIMEOUT, await_end, await_task};
use crate::error::Result;
use crate::store::Store;
use crate::task::TaskRecord;

/// The hybrid switch's default: a task still running after this gets its token handed back.
pub const HYBRID_WAIT: Duration = Duration::from_secs(10);

/// How long the launcher waits before handing back a token.
#[derive(Clone, Copy, Debug)]
pub enum Wait {
    /// Return the token at once.
    Async,
    /// Wait until the task ends.
    Sync,
    /// Wait up to this long, then return the token (the hybrid default is 10 s).
    For(Duration),
}

/// The hybrid switch: the result if the task ends within the wait, else its token and how to
/// follow it up.
pub async fn settle(store: &Store, rec: TaskRecord, wait: Wait) -> Result<TaskView> {
    let token = rec.token;
    match wait {
        // As it was saved a moment ago: no need to read it back.
        Wait::Async => handed_back(store, &rec, true),
        Wait::Sync => await_end(store, token, None).await,
        Wait::For(d) => {
            let v = await_task(store, token, Some(d)).await?;
            if v.status.is_final() { Ok(v) } else { handed_back(store, &refresh(store, token)?, false) }
        }
    }
}

/// The answer for a task left running in the background (`new`: as its launcher saved it).
pub(super) fn handed_back(store: &Store, rec: &TaskRecord, new: bool) -> Result<TaskView> {
    let token = rec.token;
    let mut v = if new { TaskView::of_new(store, rec)? } else { TaskView::of(store, rec, true)? };
    let state = match (&v.slurm_pending, v.status) {
        (Some(why), _) => format!("waits for Slurm to run its job ({why}), and runs in the background once it does"),
        (None, crate::task::Status::Queued) => {
            "waits for a place in its pool, and runs in the background once it has one".to_owned()
        }
        (None, crate::task::Status::Starting) => {
            "is starting in the background (or waits for a place, if its pool is full)".to_owned()
        }
        _ => "is running in the background".to_owned(),
    };
    v.message = Some(format!(
        "Task {token} {state}. Await it to get its result (await blocks up to {} s; call it again to keep waiting), \
         or halt it to stop it.",
        AWAIT_TIMEOUT.as_secs()
    ));
    Ok(v)
}
