//! `list` as a table: running tasks first, a start column, the cost, fitted to the terminal's
//! width, statuses in colour; a running task's current step where its question would be.

use std::io::{self, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::term::{Paint, columns, fit, paint, status_paint};
use crate::ops::{TaskView, human_duration};

/// The widest a role is shown; longer ones are cut.
const ROLE_MAX: usize = 12;
/// The narrowest question column worth showing.
const QUESTION_MIN: usize = 10;
/// The most of a question shown off a terminal (a question a task asks may be long).
const QUESTION_MOST: usize = 200;

/// The first line of `text`.
fn one_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// Print `views` (newest first) as a table on `w`: the tasks not yet ended first, then the
/// ended ones, each newest first; each row cut to `width` characters when given, coloured when `colour`.
pub fn write(w: &mut dyn Write, views: &[TaskView], width: Option<usize>, colour: bool) -> io::Result<()> {
    let (active, ended): (Vec<&TaskView>, Vec<&TaskView>) = views.iter().partition(|v| !v.status.is_final());
    let rows: Vec<&TaskView> = active.into_iter().chain(ended).collect();
    let now = SystemTime::now();
    let starts: Vec<String> = rows.iter().map(|v| start_column(v, now)).collect();
    let role_w = rows.iter().map(|v| columns(v.role.as_str())).max().unwrap_or(0).clamp(4, ROLE_MAX);
    let start_w = starts.iter().map(|s| s.chars().count()).max().unwrap_or(0).max(5);
    let costs: Vec<String> = rows.iter().map(|v| super::spend::cost(v.usage.as_ref())).collect();
    let cost_w = costs.iter().map(String::len).max().unwrap_or(0).max(4);
    let fixed = 6 + 2 + role_w + 2 + 9 + 2 + start_w + 2 + 8 + 2 + 6 + 2 + cost_w + 2;
    let question_w = width.map(|w| w.saturating_sub(fixed).max(QUESTION_MIN));
    let header = format!(
        "{:<6}  {:<role_w$}  {:<9}  {:<start_w$}  {:>8}  {:>6}  {:>cost_w$}  {}",
        "TOKEN", "ROLE", "STATUS", "START", "ELAPSED", "LINES", "COST", "QUESTION"
    );
    writeln!(w, "{}", paint(colour, Paint::Bold, &cut(&header, width)))?;
    for ((v, start), cost) in rows.iter().zip(&starts).zip(&costs) {
        // What a lead most needs of a running task: the question it waits on, else its step.
        let question = match (&v.pending_question, super::spend::step(v)) {
            (Some(q), _) => format!("ASKS ({}): {}", q.id, one_line(&q.text)),
            (None, Some(step)) => format!("[{step}] {}", v.question),
            (None, None) => v.question.clone(),
        };
        let question = fit(&question, question_w.unwrap_or(QUESTION_MOST));
        let head = format!("{:<6}  {:<role_w$}  ", v.token, fit(v.role.as_str(), role_w));
        let status = format!("{:<9}", v.status.as_str());
        let elapsed = human_duration(v.elapsed_ms);
        let tail = format!("  {start:<start_w$}  {elapsed:>8}  {:>6}  {cost:>cost_w$}  {question}", v.line_count);
        // Cut as a whole to the width (a terminal narrower than the fixed columns), then the
        // status coloured where it is still whole.
        let row = cut(&format!("{head}{status}{tail}"), width);
        let line = match row.strip_prefix(&format!("{head}{status}")) {
            Some(rest) if colour => format!("{head}{}{rest}", paint(true, status_paint(v.status), &status)),
            _ => row,
        };
        writeln!(w, "{}", line.trim_end())?;
    }
    Ok(())
}

/// `line` cut to `width` characters (no escapes in it).
fn cut(line: &str, width: Option<usize>) -> String {
    width.map_or(line.to_owned(), |w| fit(line, w))
}

/// When it started, in local time: the time alone today, the date too before; `-` before it
/// starts.
fn start_column(v: &TaskView, now: SystemTime) -> String {
    let Some(at) = v.started_at.as_deref().and_then(|s| humantime::parse_rfc3339(s).ok()) else {
        return "-".into();
    };
    let (Some(start), Some(today)) = (local(at), local(now)) else { return "-".into() };
    if (start.tm_year, start.tm_yday) == (today.tm_year, today.tm_yday) {
        format!("{:02}:{:02}:{:02}", start.tm_hour, start.tm_min, start.tm_sec)
    } else {
        const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
        let month = MONTHS[start.tm_mon.clamp(0, 11) as usize];
        format!("{month} {:>2} {:02}:{:02}", start.tm_mday, start.tm_hour, start.tm_min)
    }
}

/// `t` broken down in the local time zone.
fn local(t: SystemTime) -> Option<libc::tm> {
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs() as libc::time_t;
    // SAFETY: localtime_r writes only into the `tm` we own.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        (!libc::localtime_r(&secs, &mut tm).is_null()).then_some(tm)
    }
}
