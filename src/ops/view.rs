//! `TaskView`: the answer about one task that every command returns, with DESIGN.md's fields.

use std::fs::File;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::error::Result;
use crate::store::{Store, logfile};
use crate::task::{Role, Status, TaskRecord, Token, unix_ms};

/// What is known about a task, as returned to users.
#[derive(Clone, Debug, Serialize)]
pub struct TaskView {
    pub token: Token,
    pub role: Role,
    pub status: Status,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// The final summary; while running, a one-line progress report.
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
    pub note: Option<String>,
    /// What to do next, when there is something to say.
    pub message: Option<String>,
}

fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

impl TaskView {
    /// Build the view of `rec`. `with_summary` reads the summary file (or, while running, the
    /// log's last line); listings skip it.
    pub fn of(store: &Store, rec: &TaskRecord, with_summary: bool) -> Result<TaskView> {
        let status = rec.status();
        let log_path = store.log_path(&rec.role, rec.token);
        let summary_path = store.summary_path(&rec.role, rec.token);
        let elapsed_ms = rec.elapsed_ms(unix_ms(SystemTime::now()));
        let line_count = match &rec.ended {
            Some(e) => e.line_count,
            None => logfile::line_count(&log_path).unwrap_or(0),
        };
        let summary = if !with_summary {
            None
        } else if status.is_final() {
            std::fs::read_to_string(&summary_path).ok()
        } else {
            let last = File::open(&log_path).ok().and_then(|mut f| crate::summary::last_line(&mut f).ok().flatten());
            Some(progress_line(status, elapsed_ms, line_count, last.as_deref()))
        };
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
            note: rec.ended.as_ref().and_then(|e| e.note.clone()),
            message: None,
        })
    }
}

/// One line saying how a running task is doing.
fn progress_line(status: Status, elapsed_ms: u64, lines: u64, last: Option<&str>) -> String {
    let mut s = format!("{status} for {:.1}s, {lines} line(s) of output so far", elapsed_ms as f64 / 1000.0);
    if let Some(l) = last {
        let short: String = l.chars().take(120).collect();
        s.push_str(&format!("; last: {short}"));
    }
    s
}
