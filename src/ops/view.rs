//! `TaskView`: the answer about one task that every command returns, with DESIGN.md's fields.

use std::io::ErrorKind;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::agent::usage::token_split;
use crate::error::Result;
use crate::store::files::{self, Access};
use crate::store::{Store, logfile};
use crate::task::{Containment, Question, Role, Status, TaskRecord, Token, unix_ms};

/// What is known about a task, as returned to users.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct TaskView {
    #[schemars(with = "String")]
    pub token: Token,
    #[schemars(with = "String")]
    pub role: Role,
    pub status: Status,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// The final summary; while running, a one-line progress report. Absent in listings (`list`):
    /// await the task for it.
    pub summary: Option<String>,
    pub line_count: u64,
    pub timed_out: bool,
    pub log_path: PathBuf,
    pub summary_path: PathBuf,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    pub elapsed_ms: u64,
    pub error: Option<String>,
    pub session: String,
    pub question: String,
    /// The question the task waits on its lead to answer (`reply`), while it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_question: Option<Question>,
    /// How many times its agent ran: more than once after rate-limited runs (`retry_on`).
    pub attempts: u32,
    /// Its git worktree (`--worktree`) while it exists (not in listings), and the bytes it takes (filled in by
    /// the `status` command only: walking a big tree would slow every other view).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree_bytes: Option<u64>,
    /// What it changed in its worktree, once it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changes: Option<crate::worktree::Changes>,
    /// The Slurm job its agent runs in, as Slurm says now (`status` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slurm: Option<crate::task::SlurmJob>,
    /// Why Slurm holds its job pending (`Resources`, `Priority`…), while it does (it is
    /// `queued` then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slurm_pending: Option<String>,
    /// The pool of an open task, and its place in the pool's line while it waits (1 is next):
    /// filled in by the live view (`ops::placed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_place: Option<usize>,
    /// What holds its processes together (`cgroup` or `process-group`), with its limits
    /// (`status` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub containment: Option<Containment>,
    /// The sandbox its agent runs in (`status` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub sandbox: Option<crate::task::Sandbox>,
    /// How many processes it has and the memory they use, while it runs (`status` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processes: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// What its agent spent, as its stream says: final once it ended, so far while it runs;
    /// absent when unknown (an agent that reports none, or none yet).
    /// (Left out of the tools' published schemas, as `containment` is, to keep them small.)
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub usage: Option<crate::agent::Usage>,
    /// What its agent is doing now (the tool it runs and its argument, the file it edits,
    /// `thinking`), and its todo list, while it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub step: Option<crate::agent::stream::Step>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schemars(skip)]
    pub todo: Vec<crate::agent::stream::Todo>,
    /// Its turn, once it was followed up (`ask --to`): 2 for its first follow-up.
    #[serde(skip_serializing_if = "is_first")]
    pub turn: u32,
    /// Its earlier turns: each one's question, end, first line of its answer and own usage.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schemars(skip)]
    pub turns: Vec<crate::task::Turn>,
    /// The tasks it waits for before it starts (`--after`), while it does.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<String>")]
    pub waiting_for: Vec<Token>,
    pub note: Option<String>,
    /// What to do next, when there is something to say.
    pub message: Option<String>,
}

impl TaskView {
    /// Whether its conversation can go on (`ask --to`): it ended, and its agent said its session.
    pub fn can_go_on(&self) -> bool {
        self.status.is_final() && self.usage.as_ref().is_some_and(|u| u.session_id.is_some())
    }

    /// The task as it was when its earlier turn `n` ended (`None`: `n` is not an earlier turn):
    /// that turn's question, end and usage, and the first line of its answer (the log keeps
    /// the rest).
    pub fn as_of_turn(&self, n: u32) -> Option<TaskView> {
        let t = self.turns.iter().find(|t| t.turn == n)?;
        let note = format!(
            "turn {n} of task {}, since followed up (now turn {}): its answer's first line; `logs` with the token reads it all",
            self.token, self.turn
        );
        Some(TaskView {
            status: t.status,
            exit_code: None,
            signal: None,
            summary: Some(t.answer.clone()),
            ended_at: Some(rfc3339(t.ended_at_ms)),
            error: None,
            question: t.question.clone(),
            pending_question: None,
            changes: None,
            usage: t.usage.clone(),
            step: None,
            todo: Vec::new(),
            turn: n,
            turns: self.turns.iter().filter(|e| e.turn < n).cloned().collect(),
            note: Some(note),
            message: None,
            ..self.clone()
        })
    }
}

fn is_first(turn: &u32) -> bool {
    *turn <= 1
}

/// More than any summary agentctl writes (its cap and a note).
const SUMMARY_MAX: u64 = crate::summary::DEFAULT_CAP as u64 + 4096;

fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

impl TaskView {
    /// Build the view of `rec`. `with_summary` reads the summary file (or, while running, the
    /// log's last line); listings skip it.
    pub fn of(store: &Store, rec: &TaskRecord, with_summary: bool) -> Result<TaskView> {
        Self::build(store, rec, with_summary, false)
    }

    /// The view of a task its launcher has just saved, as the launcher knows it: nothing of it
    /// on disk yet to look at (no output, no question, no place in line: its supervisor takes
    /// that).
    pub fn of_new(store: &Store, rec: &TaskRecord) -> Result<TaskView> {
        Self::build(store, rec, true, true)
    }

    fn build(store: &Store, rec: &TaskRecord, with_summary: bool, new: bool) -> Result<TaskView> {
        let status = rec.status();
        let pending_question =
            if status.is_final() || new { None } else { super::converse::pending(store, rec.token)? };
        // A task whose agent has asked runs, whether or not its supervisor has recorded so yet:
        // it records the start just after the spawn, and a quick agent may ask first.
        let status = match (status, &pending_question) {
            (Status::Starting, Some(_)) => Status::Running,
            _ => status,
        };
        let log_path = store.log_path(&rec.role, rec.token);
        let summary_path = store.summary_path(&rec.role, rec.token);
        let elapsed_ms = rec.elapsed_ms(unix_ms(SystemTime::now()));
        // A file that cannot be read (refused, say) costs its part of the view, not the view.
        let mut problems = Vec::new();
        let mut note = |r: std::io::Result<()>| {
            if let Err(e) = r.or_else(|e| if e.kind() == ErrorKind::NotFound { Ok(()) } else { Err(e) }) {
                problems.push(files::describe(&e));
            }
        };
        let line_count = match &rec.ended {
            Some(e) => e.line_count,
            None if new => 0,
            None => {
                let counted = logfile::line_count(&log_path, &store.lines_path(rec.token));
                let n = counted.as_ref().copied().unwrap_or(0);
                note(counted.map(drop));
                n
            }
        };
        // While it runs, what its supervisor last read of its stream.
        let seen = if status.is_final() || new { None } else { store.read_seen(rec.token) };
        let (live_usage, step, todo) = match seen {
            Some(s) => (Some(s.usage).filter(|u| u.is_known()), s.step, s.todo),
            None => (None, None, Vec::new()),
        };
        let usage = rec.usage.clone().or(live_usage);
        let summary = if !with_summary {
            None
        } else if status.is_final() {
            let read = store.or_saved_answer(rec.token, files::read(&summary_path, SUMMARY_MAX));
            let text = read.as_ref().ok().map(|b| String::from_utf8_lossy(b).into_owned());
            note(read.map(drop));
            text
        } else {
            let read = match new {
                true => Ok(None),
                false => files::open(&log_path, Access::Read).and_then(|mut f| crate::summary::last_line(&mut f)),
            };
            let last = read.as_ref().ok().cloned().flatten();
            note(read.map(drop));
            let mut line =
                progress_line(status, elapsed_ms, line_count, step.as_ref(), usage.as_ref(), last.as_deref());
            if let (Status::Queued, Some(reason)) = (status, &rec.slurm_pending) {
                let job = rec.slurm_job.map(|j| format!("job {j}")).unwrap_or_else(|| "its job".into());
                line = format!("queued for {}: Slurm holds {job} pending ({reason})", human_duration(elapsed_ms));
            } else if status == Status::Queued {
                let pool = (!new).then(|| store.read_spec(rec.token).ok().and_then(|s| s.pool).map(|p| p.name));
                let pool = pool.flatten();
                let place = pool.as_deref().and_then(|p| store.queue_place(rec.token, p).ok().flatten());
                line = match (pool, place) {
                    (Some(p), Some(n)) => {
                        format!("queued for {}: place {n} in line for pool `{p}`", human_duration(elapsed_ms))
                    }
                    _ => format!("queued for {}", human_duration(elapsed_ms)),
                };
                if let Some(kept) = &rec.limit_kept {
                    line = format!("{line} ({kept})");
                }
                if !rec.waiting_for.is_empty() {
                    let tokens: Vec<&str> = rec.waiting_for.iter().map(Token::as_str).collect();
                    line = format!(
                        "queued for {}: waiting for task(s) {} to end",
                        human_duration(elapsed_ms),
                        tokens.join(", ")
                    );
                }
                if let Some(why) = &rec.memory_short {
                    line = format!("queued for {}: {why}", human_duration(elapsed_ms));
                }
                if let Some(why) = &rec.spend_held {
                    let left = rec.frees_at_ms.map(|at| at.saturating_sub(unix_ms(SystemTime::now())));
                    let left = left.map(|ms| format!(" (in {})", human_duration(ms))).unwrap_or_default();
                    line = format!("queued for {}: {why}{left}", human_duration(elapsed_ms));
                }
            }
            if let Some(at) = rec.retry_at_ms {
                let left = at.saturating_sub(unix_ms(SystemTime::now()));
                line = format!("rate-limited: run {} starts in {}; {line}", rec.retries + 2, human_duration(left));
            }
            Some(line)
        };
        // Not in listings: a look at the disk per row.
        let worktree = Some(store.worktree_path(rec.token)).filter(|p| with_summary && p.is_dir());
        let note = rec.ended.as_ref().and_then(|e| e.note.clone()).into_iter().chain(problems).collect::<Vec<_>>();
        let outcome = rec.ended.as_ref().map(|e| &e.outcome);
        Ok(TaskView {
            token: rec.token,
            role: rec.role.clone(),
            status,
            exit_code: outcome.and_then(|o| o.exit_code()),
            signal: outcome.and_then(|o| o.signal()),
            summary,
            line_count,
            timed_out: false,
            log_path,
            summary_path,
            started_at: rec.started.as_ref().map(|s| rfc3339(s.at_ms)),
            ended_at: rec.ended.as_ref().map(|e| rfc3339(e.at_ms)),
            elapsed_ms,
            error: outcome.and_then(|o| o.error()),
            session: rec.session.clone(),
            question: rec.preview.clone(),
            pending_question,
            attempts: rec.retries + u32::from(rec.started.is_some() || rec.retries > 0),
            worktree_bytes: None,
            worktree,
            changes: rec.changes.clone(),
            slurm: None,
            slurm_pending: rec.slurm_pending.clone().filter(|_| status == Status::Queued),
            pool: None,
            queue_place: None,
            containment: None,
            sandbox: None,
            processes: None,
            memory_bytes: None,
            usage,
            step,
            todo,
            turn: rec.turn(),
            turns: rec.turns.clone(),
            waiting_for: rec.waiting_for.clone(),
            note: (!note.is_empty()).then(|| note.join("; ")),
            message: None,
        })
    }
}

mod text;

/// A task's cost as people read it: `$0.0123`, `~$0.0123` when estimated; `None` when unknown.
pub fn cost_text(usage: Option<&crate::agent::Usage>) -> Option<String> {
    let u = usage?;
    u.cost_usd.map(|c| format!("{}{}", if u.cost_estimated { "~" } else { "" }, crate::agent::usage::dollars(c)))
}

/// Human-readable duration: 0.2s, 4m05s, 2h03m.
pub fn human_duration(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{:.1}s", ms as f64 / 1000.0),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// A size as people read it: `512 B`, `3.4 KB`, `12.0 MB`, `1.2 GB`.
pub fn human_bytes(b: u64) -> String {
    match b {
        0..1000 => format!("{b} B"),
        1000..1_000_000 => format!("{:.1} KB", b as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", b as f64 / 1e6),
        _ => format!("{:.1} GB", b as f64 / 1e9),
    }
}

/// One line saying how a running task is doing: its agent's step and spend when its stream
/// says them (they say more than the stream's last event), else its last line.
fn progress_line(
    status: Status,
    elapsed_ms: u64,
    lines: u64,
    step: Option<&crate::agent::stream::Step>,
    usage: Option<&crate::agent::Usage>,
    last: Option<&str>,
) -> String {
    if status == Status::Starting && lines == 0 {
        return "starting: its supervisor is starting its agent".to_owned();
    }
    let mut s = format!("{status} for {:.1}s, {lines} line(s) of output so far", elapsed_ms as f64 / 1000.0);
    if let Some(step) = step {
        s.push_str(&format!("; now: {}", step.what));
    }
    if let Some(cost) = cost_text(usage) {
        s.push_str(&format!("; spent {cost}"));
    }
    if let Some(l) = last.filter(|_| step.is_none()) {
        let short: String = l.chars().take(120).collect();
        s.push_str(&format!("; last: {short}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_whose_agent_asked_before_its_start_was_recorded_shows_running() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let rec: TaskRecord = serde_json::from_value(serde_json::json!({
            "token": "abc123", "role": "w", "session": "s", "preview": "",
            "created_at_ms": 0, "started": null, "ended": null,
        }))
        .unwrap();
        let spec: crate::task::TaskSpec = serde_json::from_value(serde_json::json!({
            "argv": ["true"], "cwd": "/", "env": {}, "deadline_ms": null, "grace_ms": 0,
        }))
        .unwrap();
        store.insert_task(&rec, &spec).unwrap();
        assert_eq!(TaskView::of(&store, &rec, true).unwrap().status, Status::Starting);
        store.ask(rec.token, &rec.role, &rec.session, "Which branch?", &[], "1 0 0 0").unwrap();
        let v = TaskView::of(&store, &rec, true).unwrap();
        assert_eq!((v.status, v.pending_question.map(|q| q.text)), (Status::Running, Some("Which branch?".into())));
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(human_duration(200), "0.2s");
        assert_eq!(human_duration(59_900), "59.9s");
        assert_eq!(human_duration(245_000), "4m05s");
        assert_eq!(human_duration(7_380_000), "2h03m");
    }
}
