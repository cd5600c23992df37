//! Tool results a model reads: only what it can use (no nulls, paths or timestamps), within
//! a byte budget (`agentctl mcp --result-budget`, default 8 KB) counting both copies, the
//! structured one and the text one. A summary too long for it keeps its head and its tail,
//! with a marker that says how much was left out and the `logs` call that reads it.

use serde::Serialize;

use crate::error::without_paths;
use crate::ops::TaskView;
use crate::task::{Question, Status, Token};

/// The default budget of one result, both copies together.
pub const DEFAULT_BUDGET: usize = 8 * 1024;
/// The smallest budget a server accepts: room for a headline, a marker and some answer.
pub const MIN_BUDGET: usize = 2 * 1024;
/// The largest budget a server accepts: a result larger than this helps no model.
pub const MAX_BUDGET: usize = 1024 * 1024;
/// What a summary is never cut below, however many tasks share a result.
const MIN_KEPT: usize = 160;

/// One task as a tool result.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct TaskResult {
    pub token: String,
    pub role: String,
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    pub elapsed_ms: u64,
    pub line_count: u64,
    /// How many times the agent ran, when more than once (rate-limited runs run again).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// What it changed in its git worktree (`worktree = true`), once it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changes: Option<crate::worktree::Changes>,
    /// The wait ran out with the task still running.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// The question the task waits on you to answer with `reply`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub question: Option<AskedQuestion>,
    /// While it runs: the session whose `wait_for_event` gets its end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The final answer once the task has ended (its head and tail when long, with a marker
    /// naming the `logs` call for the rest); while it runs, a progress line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// What its agent spent (so far, while it runs), and the step it is on; left out of the
    /// published schema to keep the tool list small.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub usage: Option<crate::agent::Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub step: Option<String>,
    /// What to call next.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    /// The whole summary, before fitting.
    #[serde(skip)]
    #[schemars(skip)]
    full: Option<String>,
    /// The text copy's first line.
    #[serde(skip)]
    #[schemars(skip)]
    headline: String,
}

impl TaskResult {
    /// The result of `v`, with `next` saying what to call after it.
    pub fn of(v: &TaskView, next: Option<String>) -> TaskResult {
        let summary = v.summary.clone().filter(|s| !s.is_empty());
        // Only a final answer is cut to fit (the marker points into summary.md); a progress
        // line is short already.
        let (summary, full) = if v.status.is_final() { (None, summary) } else { (summary, None) };
        TaskResult {
            token: v.token.to_string(),
            role: v.role.to_string(),
            status: v.status,
            exit_code: v.exit_code,
            signal: v.signal,
            elapsed_ms: v.elapsed_ms,
            line_count: v.line_count,
            attempts: (v.attempts > 1).then_some(v.attempts),
            changes: v.changes.clone(),
            timed_out: v.timed_out,
            question: v.pending_question.as_ref().map(AskedQuestion::of),
            session: (!v.status.is_final()).then(|| v.session.clone()),
            full,
            summary,
            headline: v.headline(),
            // Stored as the CLI shows them, with the paths of the files involved.
            error: v.error.as_deref().map(without_paths),
            note: v.note.as_deref().map(without_paths),
            usage: v.usage.clone(),
            step: v.step.as_ref().filter(|_| !v.status.is_final()).map(|s| s.what.clone()),
            next,
        }
    }

    /// Add `note` to what the result notes already.
    pub fn add_note(&mut self, note: String) {
        self.note = Some(match self.note.take() {
            Some(n) => format!("{note}; {n}"),
            None => note,
        });
    }

    /// A short readable copy: a headline, error and note, the summary, what to do next.
    pub fn text(&self) -> String {
        let mut out = self.headline.clone();
        for (label, value) in [("error", &self.error), ("note", &self.note)] {
            if let Some(text) = value {
                out.push_str(&format!("\n{label}: {text}"));
            }
        }
        if let Some(c) = &self.changes {
            out.push_str(&format!("\nchanges: {}", c.line()));
        }
        // While it runs, the progress line says the step and spend.
        if let Some(u) = self.usage.as_ref().filter(|_| self.status.is_final()) {
            out.push_str(&format!("\nusage: {}", u.brief()));
        }
        if let Some(q) = &self.question {
            let choices = if q.choices.is_empty() { String::new() } else { format!(" [{}]", q.choices.join(", ")) };
            out.push_str(&format!("\nasks ({}): {}{choices}", q.id, q.text));
        }
        if let Some(s) = &self.summary {
            out.push_str(&format!("\n{s}"));
        }
        if let Some(n) = &self.next {
            out.push_str(&format!("\nnext: {n}"));
        }
        out
    }
}

/// A question a task asks, as a result shows it.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct AskedQuestion {
    pub id: String,
    pub text: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<String>,
}

impl AskedQuestion {
    fn of(q: &Question) -> AskedQuestion {
        AskedQuestion { id: q.id.clone(), text: q.text.clone(), choices: q.choices.clone() }
    }
}

/// Cut the summaries of `tasks` until `size(tasks)` fits `budget`: every summary longer than
/// one limit keeps its head and tail, the limit as high as the budget allows (and never below
/// `MIN_KEPT`, so a result of many tasks may stay over budget rather than say nothing).
pub fn fit(tasks: &mut [TaskResult], budget: usize, size: impl Fn(&[TaskResult]) -> usize) {
    let restore = |tasks: &mut [TaskResult], limit: usize| {
        for t in tasks.iter_mut() {
            if let Some(full) = &t.full {
                t.summary = Some(elide(full, limit, &t.token));
            }
        }
    };
    // No summary longer than the budget can fit: the search starts there.
    let longest = tasks.iter().filter_map(|t| t.full.as_ref().map(String::len)).max().unwrap_or(0);
    let top = longest.min(budget);
    restore(tasks, top);
    if top <= MIN_KEPT || size(tasks) <= budget {
        return;
    }
    // The largest limit that fits, found by halving.
    let (mut lo, mut hi) = (MIN_KEPT, top);
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        restore(tasks, mid);
        if size(tasks) <= budget { lo = mid } else { hi = mid }
    }
    restore(tasks, lo);
}

/// `text` if it is at most `max` bytes; else its head (three fifths) and tail, each at line
/// ends where the lines allow, and between them a marker naming the `logs` call that reads
/// what was left out of task `token`'s summary.
pub fn elide(text: &str, max: usize, token: &str) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let head_max = max * 3 / 5;
    let tail_max = max - head_max;
    // The head: whole lines while they fit, unless that leaves most of its room empty (a long
    // line next): then it ends inside that line.
    let mut head_end = text.as_bytes()[..=head_max].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    if head_end < head_max / 2 {
        head_end = floor_char(text, head_max);
    }
    let line_start = text[..head_end].rfind('\n').map_or(0, |i| i + 1);
    let (line, column) = (text[..line_start].matches('\n').count(), text[line_start..head_end].chars().count());
    // The tail, alike: whole lines at the end while they fit, else the end of the last one.
    let from = ceil_char(text, text.len() - tail_max);
    let mut tail_start = text[from..].find('\n').map_or(text.len(), |i| from + i + 1);
    if text.len() - tail_start < tail_max / 2 {
        tail_start = from;
    }
    let tail_start = tail_start.max(head_end);
    let left_out = &text[head_end..tail_start];
    if left_out.is_empty() {
        return text.to_owned();
    }
    let lines = left_out.matches('\n').count() + usize::from(!left_out.ends_with('\n'));
    let call = format!(r#"logs {{"token":"{token}","summary":true,"offset":{line},"column":{column}}}"#);
    format!(
        "{}\n[agentctl: {} bytes ({lines} line(s)) left out here; read them with {call}, then follow next_offset \
         and next_column]\n{}",
        text[..head_end].strip_suffix('\n').unwrap_or(&text[..head_end]),
        left_out.len(),
        &text[tail_start..]
    )
}

fn floor_char(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// What to call after a task's answer.
pub fn next_step(v: &TaskView, max_wait: &str) -> Option<String> {
    let t: Token = v.token;
    if let Some(q) = &v.pending_question {
        return Some(format!(
            "the task waits for your answer: call `reply` with token {t} (or question_id {}) and the answer; it goes \
             on from there",
            q.id
        ));
    }
    let go_on = v.can_go_on();
    Some(match v.status {
        Status::Completed if go_on => {
            format!("to go on with its conversation, call `ask` with to: {t} and your next question")
        }
        Status::Completed => return None,
        s if !s.is_final() => format!(
            "call `await` with token {t} (waits up to {max_wait} a call; again while it runs), or `wait_for_event` \
             for whichever task of session {} ends first; `halt` stops it",
            v.session
        ),
        _ if go_on => format!("call `logs` with token {t} to read its output; `ask` with to: {t} to go on from there"),
        _ => format!("call `logs` with token {t} to read its output; `ask` again to retry"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_text_keeps_head_and_tail_and_names_the_call_for_the_rest() {
        let text: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        let text = text.trim_end();
        let short = elide(text, 1000, "abc123");
        assert!(short.len() < 1300, "{}", short.len());
        assert!(short.starts_with("line 0\nline 1\n"), "{short}");
        assert!(short.ends_with("line 999"), "{short}");
        let marker = short.lines().find(|l| l.starts_with("[agentctl:")).unwrap();
        // The head ends at a line end: the rest begins at the next line, column 0.
        let head_lines = short.lines().take_while(|l| !l.starts_with("[agentctl:")).count();
        assert!(marker.contains(&format!(r#""offset":{head_lines},"column":0"#)), "{marker}");
        assert_eq!(elide("short", 1000, "abc123"), "short");
    }

    #[test]
    fn one_long_line_is_cut_inside_with_a_column() {
        let text = format!("{}é{}", "a".repeat(3000), "b".repeat(3000));
        let short = elide(&text, 1000, "abc123");
        assert!(short.starts_with(&"a".repeat(600)));
        assert!(short.ends_with(&"b".repeat(400)));
        assert!(short.contains(r#""offset":0,"column":600"#), "{}", &short[600..800]);
        assert!(short.contains("5002 bytes (1 line(s)) left out"), "{}", &short[600..800]);
    }

    /// What `logs` with `summary: true` reads from `line`, character `column`, to the end.
    fn read_from(text: &str, line: usize, column: usize) -> String {
        let lines: Vec<&str> = text.split('\n').collect();
        let first: String = lines[line].chars().skip(column).collect();
        std::iter::once(first.as_str()).chain(lines[line + 1..].iter().copied()).collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn the_head_and_what_the_marker_reads_give_back_the_whole_text() {
        let texts = [
            (0..300).map(|i| format!("line {i} é€\n")).collect::<String>(),
            format!("short\n{}\nend", "é".repeat(5000)),
            format!("{}\n{}", "€".repeat(3000), "x\n".repeat(2000)),
            "\n".repeat(5000),
            format!("a\n{}", "€".repeat(999)),
        ];
        for text in &texts {
            for max in [200, 999, 1000, 1001, 4096] {
                let short = elide(text, max, "abc123");
                if short == *text {
                    continue;
                }
                let at = short.find("\n[agentctl: ").unwrap();
                let call = &short[short.find("logs {").unwrap() + 5..];
                let call: serde_json::Value = serde_json::from_str(&call[..=call.find('}').unwrap()]).unwrap();
                let (line, column) =
                    (call["offset"].as_u64().unwrap() as usize, call["column"].as_u64().unwrap() as usize);
                let rest = read_from(text, line, column);
                let head = &short[..at];
                let joined = if column > 0 { format!("{head}{rest}") } else { format!("{head}\n{rest}") };
                assert_eq!(&joined, text, "max {max}");
                assert!(short.len() <= max + 300, "{} for {max}", short.len());
                assert!(!short.contains(" 0 bytes"), "{short}");
            }
        }
    }

    #[test]
    fn fit_cuts_only_as_much_as_the_budget_needs() {
        let v = |s: &str| TaskResult {
            token: "abc123".into(),
            role: "r".into(),
            status: Status::Completed,
            exit_code: Some(0),
            signal: None,
            elapsed_ms: 1,
            line_count: 1,
            attempts: None,
            changes: None,
            timed_out: false,
            question: None,
            session: None,
            summary: Some(s.into()),
            error: None,
            note: None,
            usage: None,
            step: None,
            next: None,
            full: Some(s.into()),
            headline: String::new(),
        };
        let size =
            |ts: &[TaskResult]| ts.iter().map(|t| serde_json::to_string(t).unwrap().len() + t.text().len()).sum();
        let mut tasks = vec![v(&"x\n".repeat(10_000)), v("short answer")];
        fit(&mut tasks, 8192, size);
        let used = size(&tasks);
        assert!(used <= 8192 && used > 7000, "{used}");
        assert_eq!(tasks[1].summary.as_deref(), Some("short answer"));
    }
}
