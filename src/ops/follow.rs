//! Follow-ups: `ask --to TOKEN QUESTION` goes on with an ended task's conversation as its next
//! turn, under the same token: its agent's session resumed with its kind's own flags, in the
//! same directory (or worktree), with the same template, limits and pool. `ask --fork TOKEN`
//! starts a new task from a copy of that conversation.

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::time::Duration;

use super::blocking::blocking;
use super::launch::{Fork, GoOn, HandBack, Launch, What, launch, launch_from};
use super::lost::refresh;
use crate::error::{Error, IoContext, Result};
use crate::store::{Durability, FileLock, Store, write_atomic};
use crate::supervisor;
use crate::task::{Budget, TaskRecord, Template, Token, one_line_preview};

/// How long a follow-up waits for the supervisor of the turn that just ended to exit.
const LET_GO: Duration = Duration::from_secs(10);

/// How long a follow-up waits for the last turn's hook to be taken by its own process.
const HOOK_TAKEN: std::time::Duration = std::time::Duration::from_secs(5);

/// Start what `req` asks for: a new task, the next turn of an ended one, or a fork of one.
/// Start what `req` asks; a new task is handed to `hand_back` the moment it is saved, where the
/// start can do that (see `HandBack`).
pub async fn start(store: &Store, req: Launch, hand_back: Option<HandBack>) -> Result<TaskRecord> {
    if let (Some(GoOn::Turn(t) | GoOn::Fork(t)), false) = (req.from, req.after.is_empty()) {
        return Err(Error::Usage(format!(
            "a follow-up or fork of task {t} goes on from its conversation at once: await the tasks first, or ask a new task with after"
        )));
    }
    match req.from {
        None => launch(store, req, hand_back).await,
        Some(GoOn::Fork(from)) => fork(store, from, req, hand_back).await,
        Some(GoOn::Turn(token)) => {
            if req.cwd.is_some()
                || req.session.is_some()
                || req.deadline.is_some()
                || req.worktree.is_some()
                || req.pool.is_some()
                || req.sandbox.is_some()
            {
                return Err(Error::Usage(format!(
                    "a follow-up of task {token} runs where, for whom, in the pool, sandbox and as long as the task \
                     did: leave out the directory, session, timeout, worktree, pool and sandbox"
                )));
            }
            let What::Ask { question, .. } = req.what else {
                return Err(Error::Usage(format!("a follow-up of task {token} asks its agent a question: use ask")));
            };
            follow_up(store, token, question, req.budget).await
        }
    }
}

/// Start the next turn of ended task `token`, asked `question`; its budget is `budget` over the
/// task's own. Returns its record once its agent runs (or waits for a place). Whatever cannot go
/// on (a task still running, a `run` task, an agent that never said its session) is refused
/// before anything changes, saying what works instead.
async fn follow_up(store: &Store, token: Token, question: String, budget: Budget) -> Result<TaskRecord> {
    if question.trim().is_empty() {
        return Err(Error::Usage(format!("the follow-up question for task {token} is empty: say what it should do")));
    }
    budget.check("the follow-up's budget").map_err(Error::Usage)?;
    let rec = refresh(store, token)?;
    let (mut spec, session) = resumable(store, &rec)?;
    let kind = crate::agent::kind(spec.agent_kind());
    let command = spec.template.clone().unwrap_or_default();
    let template = Template { command, ..Template::default() };
    let question_file = store.question_path(&rec.role, token);
    let argv = super::launch::command_of(store, &template, &rec.role, token, &question, "")?;
    let resumed = kind.resume(argv, &session, false);
    drop(kind);
    let mut argv = resumed.map_err(|why| {
        Error::Usage(format!(
            "task {token} cannot be followed up: {why}; ask a new task, giving it what it needs from its answer (`agentctl await {token}`)"
        ))
    })?;
    spec.input = crate::agent::first_message(spec.agent_kind(), &mut argv, &question);
    // Where it ran before: a Slurm task's turn is a job of its own, with the same options.
    (spec.argv, spec.backend) = spec
        .backend
        .again(&spec.argv, argv, token)
        .ok_or_else(|| Error::Internal(format!("task {token}'s command is not one its backend made")))?;
    spec.budget = budget.or(spec.budget);

    let Some(lock) = blocking(|| FileLock::take_again(&store.lock_path(token), LET_GO))? else {
        return Err(Error::Refused(format!(
            "task {token}'s supervisor has not let go of it yet; try the follow-up again in a moment"
        )));
    };
    // Under its lock: another follow-up may have begun a turn meanwhile.
    let mut rec = store.read_record(token)?;
    resumable(store, &rec)?;
    // The last turn's hook is taken by its own process (started now, if its supervisor died
    // before it could) before the record opens again: it runs for that turn's end.
    if rec.hook == Some(crate::task::HookState::Due) {
        super::hook_start::start_hook(store, &rec);
        let until = tokio::time::Instant::now() + HOOK_TAKEN;
        while rec.hook == Some(crate::task::HookState::Due) && tokio::time::Instant::now() < until {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            rec = store.read_record(token)?;
        }
    }
    // What a supervisor that died left (its socket) is in the new one's way; the last turn's
    // answer file is not this one's.
    let _ = std::fs::remove_file(store.socket_path(token));
    let _ = std::fs::remove_file(store.result_path(&rec.role, token));
    if template.uses_question_file() {
        write_atomic(&question_file, question.as_bytes(), Durability::Atomic)?;
    }
    let answer = store.or_saved_answer(token, std::fs::read(store.summary_path(&rec.role, token)));
    let answer = answer.map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    let run_start = begin_in_log(store, &rec, &question)?;
    rec.begin_turn(one_line_preview(&question, 160), &answer, run_start);
    // Each turn's end runs its hook.
    rec.hook = spec.on_end.as_ref().map(|_| crate::task::HookState::Due);
    rec.queued = blocking(|| supervisor::launch(store, &rec, &spec, lock, None))?;
    Ok(rec)
}

/// Start a new task asked `req`'s question from a copy of ended task `from`'s conversation
/// (`ask --fork`): the same role and template, in its directory; `from` goes on unchanged. A task
/// that ran in a worktree is forked into a new one, from the original's files as they are now
/// (its edits and new files too): the conversation remembers making them.
async fn fork(store: &Store, from: Token, mut req: Launch, hand_back: Option<HandBack>) -> Result<TaskRecord> {
    let rec = refresh(store, from)?;
    let (spec, session) = resumable(store, &rec)?;
    let kind = spec.agent_kind();
    crate::agent::kind(kind).resume(vec![String::new()], &session, true).map_err(|why| {
        Error::Usage(format!("task {from} cannot be forked: {why}; ask a new task, giving it what it needs from its answer (`agentctl await {from}`)"))
    })?;
    req.role = rec.role.clone();
    req.cwd = Some(spec.cwd.clone());
    if let Some(wt) = &spec.worktree {
        let state = blocking(|| crate::worktree::snapshot(wt))?;
        req.worktree = Some(Some(state));
    }
    let command = spec.template.clone().unwrap_or_default();
    launch_from(store, req, Some(Fork { session, command, kind, cwd: spec.cwd }), hand_back).await
}

/// What a follow-up of `rec` needs (its spec, and its agent's session id), or why it cannot
/// have it.
fn resumable(store: &Store, rec: &TaskRecord) -> Result<(crate::task::TaskSpec, String)> {
    let token = rec.token;
    let status = rec.status();
    if !status.is_final() {
        return Err(Error::Usage(format!(
            "task {token} is still {status}: await it (`agentctl await {token}`), or send it a message (`agentctl send {token} TEXT`)"
        )));
    }
    let spec = store.read_spec(token)?;
    if spec.template.is_none() {
        return Err(Error::Usage(format!(
            "task {token} ran a command (`agentctl run`), not a role's agent: it has no conversation to go on with; start a new task"
        )));
    }
    if !spec.cwd.is_dir() {
        return Err(Error::Usage(format!(
            "task {token}'s directory {} is gone, and its agent's conversation lives there; ask a new task",
            spec.cwd.display()
        )));
    }
    let kind = spec.agent_kind();
    match rec.usage.as_ref().and_then(|u| u.session_id.clone()) {
        Some(session) => Ok((spec, session)),
        None => Err(Error::Usage(format!(
            "task {token}'s agent ({kind}) never reported a session id, so its conversation cannot be resumed; \
             ask a new task, giving it what it needs from its answer (`agentctl await {token}`)"
        ))),
    }
}

/// Mark the next turn in the task's log (on a line of its own) and say where its output begins.
fn begin_in_log(store: &Store, rec: &TaskRecord, question: &str) -> Result<u64> {
    let path = store.log_path(&rec.role, rec.token);
    let what = || format!("cannot write to {}", path.display());
    let mut log = std::fs::OpenOptions::new().read(true).append(true).open(&path).ctx(what)?;
    let len = log.metadata().ctx(what)?.len();
    let mut last = [0u8];
    let ends_a_line = len == 0 || (log.read_exact_at(&mut last, len - 1).is_ok() && last[0] == b'\n');
    let mark = format!(
        "{}──── turn {}: {} ────\n",
        if ends_a_line { "" } else { "\n" },
        rec.turn() + 1,
        one_line_preview(question, 100)
    );
    log.write_all(mark.as_bytes()).ctx(what)?;
    Ok(len + mark.len() as u64)
}
