//! Waiting for and stopping tasks, and noticing supervisors that died (`lost`).

use std::time::Duration;

use tokio::time::{Instant, sleep, timeout_at};

use super::view::TaskView;
use crate::error::{Error, Result};
use crate::store::{FileLock, Store};
use crate::supervisor::control::{self, Request};
use crate::task::{Outcome, Status, TaskRecord, Token};

/// Time between SIGTERM and SIGKILL when halting, unless told otherwise.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// How long one `await` (or `wait` for an event) blocks, unless told otherwise: under the tool
/// timeouts of MCP clients; call again to keep waiting.
pub const AWAIT_TIMEOUT: Duration = Duration::from_secs(55);

/// What `await` says while the task goes on.
pub const STILL_RUNNING: &str = "Task still running. Call await again to continue waiting.";

/// How long to look again when a task's supervisor is between states (starting up).
const SETTLE: Duration = Duration::from_millis(20);

/// The task's record, after recording `lost` if its supervisor is gone without a final record.
pub fn refresh(store: &Store, token: Token) -> Result<TaskRecord> {
    let rec = store.read_record(token)?;
    if rec.status().is_final() {
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
    let note = match &rec.started {
        Some(s) => {
            // The agent died with its supervisor (PDEATHSIG); end what is left of its group.
            let ended = crate::supervisor::end_lost_group(s.pid, s.sid);
            format!(
                "the supervisor died; the agent was killed with it and {ended} other process(es) of its group were \
                 ended; processes that left the group (setsid) could not be traced"
            )
        }
        None => "the supervisor died before the agent started".to_owned(),
    };
    store.finish(&mut rec, Outcome::Lost, Some(note), None)?;
    Ok(rec)
}

/// Wait until the task ends or `limit` passes (`None`: no limit). Event-driven: blocks on the
/// supervisor's control socket, which answers when the final record is written or closes if
/// the supervisor dies.
pub async fn await_task(store: &Store, token: Token, limit: Option<Duration>) -> Result<TaskView> {
    let deadline = limit.map(|d| Instant::now() + d);
    loop {
        let rec = refresh(store, token)?;
        if rec.status().is_final() {
            return TaskView::of(store, &rec, true);
        }
        let wait = async {
            match control::send(&store.socket_path(token), Request::Wait).await {
                Ok(Some(pending)) => pending.finished().await,
                // Not listening yet (starting) or any more (just ended): look again.
                Ok(None) | Err(_) => sleep(SETTLE).await,
            }
        };
        match deadline {
            None => wait.await,
            Some(d) => {
                if timeout_at(d, wait).await.is_err() {
                    let mut v = TaskView::of(store, &refresh(store, token)?, true)?;
                    if !v.status.is_final() {
                        v.timed_out = true;
                        v.message = Some(STILL_RUNNING.into());
                    }
                    return Ok(v);
                }
            }
        }
    }
}

/// Stop the task: SIGTERM to everything it runs, SIGKILL after `grace`. Returns once nothing
/// of it is left alive, with its partial summary. `purge` also removes its log and summary.
pub async fn halt(store: &Store, token: Token, grace: Duration, purge: bool) -> Result<TaskView> {
    let give_up = Instant::now() + grace + Duration::from_secs(30);
    loop {
        let rec = refresh(store, token)?;
        let status = rec.status();
        if status.is_final() {
            return Err(Error::AlreadyFinished { token, status });
        }
        match control::send(&store.socket_path(token), Request::Halt { grace }).await {
            Ok(Some(pending)) => {
                if timeout_at(give_up, pending.finished()).await.is_err() {
                    return Err(Error::HaltTimedOut { token });
                }
                break;
            }
            Ok(None) | Err(_) if Instant::now() < give_up => sleep(SETTLE).await,
            _ => {
                return Err(Error::Internal(format!("cannot reach the supervisor of task {token}")));
            }
        }
    }
    let rec = refresh(store, token)?;
    match rec.status() {
        Status::Cancelled => {}
        status if status.is_final() => return Err(Error::AlreadyFinished { token, status }),
        status => {
            return Err(Error::Internal(format!("task {token} is still {status} after the halt")));
        }
    }
    let mut v = TaskView::of(store, &rec, true)?;
    if purge {
        for path in [&v.log_path, &v.summary_path, &store.question_path(&rec.role, token)] {
            let _ = std::fs::remove_file(path);
        }
        v.note = Some(format!("{}log and summary removed (--purge)", v.note.map(|n| n + "; ").unwrap_or_default()));
    }
    Ok(v)
}
