//! Waiting for tasks to end (or ask a question), and halting them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;
use tokio::time::{Instant, sleep, timeout_at};

use super::converse::pending;
use super::lost::{lock_note, refresh};
use super::view::TaskView;
use super::watch::Changes;
use crate::error::{Error, Result};
use crate::store::{FileLock, Store};
use crate::supervisor::control::{self, Reply, Request};
use crate::supervisor::reach;
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

/// Wait until the task ends, asks its lead a question, or `limit` passes (`None`: no limit).
/// Event-driven: blocks on the supervisor's control socket, which answers when the final record
/// is written or closes if the supervisor dies, and on the task's bell, which a question rings.
pub async fn await_task(store: &Store, token: Token, limit: Option<Duration>) -> Result<TaskView> {
    wait_for(store, token, limit, true).await
}

/// `await_task` that goes on waiting while the task asks a question: for what must see the
/// end (`ask --sync`, `logs --follow`).
pub async fn await_end(store: &Store, token: Token, limit: Option<Duration>) -> Result<TaskView> {
    wait_for(store, token, limit, false).await
}

async fn wait_for(store: &Store, token: Token, limit: Option<Duration>, on_question: bool) -> Result<TaskView> {
    let deadline = limit.map(|d| Instant::now() + d);
    // Made once the task is known to run. Best effort: a home that cannot be written has no
    // bell, and then no task in it can ask anything either.
    let mut asked: Option<Option<Changes>> = None;
    loop {
        let rec = refresh(store, token)?;
        if rec.status().is_final() {
            return TaskView::of(store, &rec, true);
        }
        let bell = asked.get_or_insert_with(|| {
            let watch = || store.events().bell(token.as_str()).and_then(|b| Changes::watch(&b));
            on_question.then(watch).and_then(Result::ok)
        });
        // Watching, then looking: a question asked in between still wakes us.
        if on_question && pending(store, token)?.is_some() {
            return TaskView::of(store, &rec, true);
        }
        let rung = async {
            match bell.as_mut() {
                Some(b) => b.next().await,
                None => std::future::pending().await,
            }
        };
        let wait = async {
            let answered = match control::send(&store.socket_path(token), Request::Wait).await {
                Ok(Some(pending)) => pending.finished().await,
                Ok(None) | Err(_) => false,
            };
            // Not listening any more, or closed without an answer: most often the task has just
            // ended (its supervisor was leaving as we connected), so look again at once. Not
            // listening yet (starting), or out of descriptors: look again in a moment.
            if !answered && !refresh(store, token).is_ok_and(|r| r.status().is_final()) {
                sleep(SETTLE).await;
            }
        };
        let wait = async {
            tokio::select! {
                () = wait => {}
                () = rung => {}
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

/// What an `await` of several tasks found: the tasks that had ended when it returned, earliest
/// end first, and the ones still running, in the order asked.
#[derive(Clone, Debug, Serialize)]
pub struct Awaited {
    pub ended: Vec<TaskView>,
    pub running: Vec<TaskView>,
    /// Nothing ended before the limit.
    pub timed_out: bool,
}

/// Wait until any of `tokens` ends or `limit` passes: every one ended by then, and the rest,
/// so that a caller never waits for one task while another is done. Unknown tokens are refused
/// before any waiting; a token given twice counts once.
pub async fn await_any(store: &Store, tokens: &[Token], limit: Option<Duration>) -> Result<Awaited> {
    let mut unique: Vec<Token> = Vec::with_capacity(tokens.len());
    for t in tokens {
        if !unique.contains(t) {
            unique.push(*t);
        }
    }
    let look = || unique.iter().map(|&t| refresh(store, t)).collect::<Result<Vec<_>>>();
    let mut recs = look()?;
    if !recs.iter().any(|r| r.status().is_final()) {
        let first = futures_util::future::select_all(unique.iter().map(|&t| Box::pin(await_task(store, t, None))));
        let done = match limit {
            None => Some(first.await),
            Some(d) => timeout_at(Instant::now() + d, first).await.ok(),
        };
        if let Some((ended, _, _)) = done {
            ended?;
        }
        recs = look()?;
    }
    let (mut ended, running): (Vec<_>, Vec<_>) = recs.into_iter().partition(|r| r.status().is_final());
    ended.sort_by_key(|r| r.ended.as_ref().map(|e| e.at_ms));
    let views = |recs: Vec<TaskRecord>| recs.iter().map(|r| TaskView::of(store, r, true)).collect::<Result<Vec<_>>>();
    let (ended, running) = (views(ended)?, views(running)?);
    let asking = running.iter().any(|v| v.pending_question.is_some());
    Ok(Awaited { timed_out: ended.is_empty() && !asking, ended, running })
}

/// How long past the grace period a halt waits for a supervisor that has not taken its
/// request (or is stopped) before it ends the task itself.
const TAKE_OVER_AFTER: Duration = Duration::from_millis(500);

/// How long past the grace period a halt waits for a supervisor that took its request and
/// runs (writing the end on a slow disk, say) before it ends the task itself all the same.
const PATIENCE: Duration = Duration::from_secs(30);

/// How often a halt looks whether an agent stopped its supervisor (SIGSTOP).
const ROUSE_EVERY: Duration = Duration::from_millis(100);

/// Stop the task: SIGTERM to everything it runs, SIGKILL after `grace`. Returns once nothing
/// of it is left alive, with its partial summary. `purge` also removes its log and summary.
///
/// The supervisor does the work. One that an agent stopped (SIGSTOP) is woken as often as it
/// is stopped. One that has not taken the request half a second after the grace period, or is
/// stopped then, is past saving: the halt ends the task's processes and the supervisor itself,
/// and records the end. One that took it and runs gets `PATIENCE` more.
pub async fn halt(store: &Store, token: Token, grace: Duration, purge: bool) -> Result<TaskView> {
    let status = refresh(store, token)?.status();
    if status.is_final() {
        return Err(Error::AlreadyFinished { token, status });
    }
    let started = Instant::now();
    let taken = AtomicBool::new(false);
    let wake = async {
        loop {
            if let Some(id) = store.supervisor_id(token) {
                reach::resume(id);
            }
            sleep(ROUSE_EVERY).await;
        }
    };
    tokio::pin!(wake);
    let at_work = || taken.load(Ordering::Relaxed) && !store.supervisor_id(token).is_some_and(reach::is_stopped);
    let give_up = || started + grace + if at_work() { PATIENCE } else { TAKE_OVER_AFTER };
    let mut took_over = false;
    let rec = loop {
        let asked = async {
            if let Ok(Some(mut pending)) = control::send(&store.socket_path(token), Request::Halt { grace }).await {
                loop {
                    match pending.next().await {
                        Reply::Taken => taken.store(true, Ordering::Relaxed),
                        Reply::Done => return,
                        Reply::Closed => {}
                        Reply::Gone => break,
                    }
                }
            }
            // Not listening yet (starting), any more (ending), or out of descriptors.
            sleep(SETTLE).await;
        };
        tokio::select! {
            () = asked => {}
            () = &mut wake => {}
            // Looked at again when the time comes: the supervisor may have taken it since.
            () = tokio::time::sleep_until(give_up()) => if Instant::now() >= give_up() {
                took_over = take_over(store, token).await?;
                break refresh(store, token)?;
            } else {
                // It took the request meanwhile: its answer comes once nothing of the task is
                // left, which may be after its record says how the task ended.
                continue;
            }
        }
        let rec = refresh(store, token)?;
        if rec.status().is_final() {
            break rec;
        }
    };
    match rec.status() {
        Status::Cancelled => {}
        // Whoever recorded it, the halt ended the task.
        status if status.is_final() && took_over => {}
        status if status.is_final() => return Err(Error::AlreadyFinished { token, status }),
        status => {
            return Err(Error::Internal(format!("task {token} is still {status} after the halt")));
        }
    }
    let mut v = TaskView::of(store, &rec, true)?;
    if purge {
        store.remove_history(&rec.role, token)?;
        v.note = Some(format!("{}log and summary removed (--purge)", v.note.map(|n| n + "; ").unwrap_or_default()));
    }
    Ok(v)
}

/// End a task whose supervisor did not carry out a halt: stop the supervisor; unless the task
/// had ended after all (then it goes on to record and announce the end), kill the task's
/// processes and the supervisor, and record `cancelled`. True if it ended the task itself.
async fn take_over(store: &Store, token: Token) -> Result<bool> {
    let written = lock_note(store, token);
    let Some(id) = written.id else { return Ok(false) };
    let Some(stopped) = reach::stop(id, written.cgroup) else {
        // Already gone: `refresh` finds the task lost or ended.
        return Ok(false);
    };
    // Stopped, it can write nothing more: what the record says now is what it will say.
    if store.read_record(token)?.status().is_final() {
        stopped.resume();
        return Ok(false);
    }
    let reached = tokio::task::spawn_blocking(move || stopped.kill_all())
        .await
        .map_err(|e| Error::Internal(format!("cannot end task {token}: {e}")))?;
    // The supervisor lets go of the lock as it dies.
    let lock_path = store.lock_path(token);
    let lock = tokio::task::spawn_blocking(move || FileLock::take_within(&lock_path, Duration::from_secs(2)))
        .await
        .map_err(|e| Error::Internal(format!("cannot end task {token}: {e}")))??;
    let Some(_lock) = lock else { return Err(Error::HaltTimedOut { token }) };
    let mut rec = store.read_record(token)?;
    if !rec.status().is_final() {
        let mut note = format!(
            "the supervisor did not carry out the halt (it was stopped, out of descriptors, or waiting on Slurm); \
             agentctl ended the task itself: {}, then its supervisor",
            reached.describe()
        );
        if reached.outside > 0 {
            note.push_str(&format!("; {}", reach::untraced(true)));
        }
        // Its srun went with the rest; the job it submitted goes by its id.
        if let Some(job) = written.slurm_job {
            let store = store.clone();
            let cancel = move || crate::supervisor::backend::slurm::cancel_for_task(&store, token, job);
            if let Ok(cancelled) = tokio::task::spawn_blocking(cancel).await {
                note.push_str(&format!("; {cancelled}"));
            }
        }
        store.finish(&mut rec, Outcome::Cancelled { exit_code: None, signal: None }, Some(note), None, None)?;
        super::hook_start::start_hook(store, &rec);
    }
    Ok(true)
}
