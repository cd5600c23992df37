//! Rendering answers as human text or one JSON object, and the exit code each answer means.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::json;

use super::term::printable;
use crate::error::Error;
use crate::ops::{self, Awaited, LoggedEvent, Pruned, TaskView, human_duration};
use crate::task::{Event, EventKind, Question, Status, Token};

/// How to print: `--json` or text, and the `--home` to repeat in suggested commands.
#[derive(Clone)]
pub struct Out {
    pub json: bool,
    pub home_flag: Option<PathBuf>,
    /// Colour the text (`--color`, `NO_COLOR`, a terminal).
    pub colour: bool,
}

/// The exit code of a running task that waits for the lead's answer (`reply`).
pub const ASKS: u8 = 3;

/// The exit code for a task answer (DESIGN.md §4).
pub fn exit_code(v: &TaskView) -> ExitCode {
    ExitCode::from(exit_status(v))
}

fn exit_status(v: &TaskView) -> u8 {
    if v.timed_out {
        124
    } else if v.pending_question.is_some() {
        ASKS
    } else if v.status.is_final() && v.status != Status::Completed {
        1
    } else {
        0
    }
}

/// 124 for a wait that found nothing in time.
fn timeout_code(e: &Event) -> ExitCode {
    ExitCode::from(if e.kind == EventKind::Timeout { 124 } else { 0 })
}

/// Text the lead sent (an answer, a message) as printed: as it is for the script that reads it,
/// shown inert (`printable`) where a terminal would obey what it holds.
fn on_screen(text: &str) -> String {
    use std::io::IsTerminal;
    if io::stdout().is_terminal() { printable(text).into_owned() } else { text.to_owned() }
}

fn print_json(value: &serde_json::Value) {
    let mut stdout = io::stdout().lock();
    let _ = writeln!(stdout, "{value}");
}

impl Out {
    /// Print a task answer; returns its exit code.
    pub fn task(&self, v: &TaskView) -> ExitCode {
        if self.json {
            print_json(&serde_json::to_value(v).unwrap_or_default());
        } else {
            let _ = self.task_text(v, &mut io::stdout().lock());
        }
        exit_code(v)
    }

    fn command(&self, verb: &str, what: impl std::fmt::Display) -> String {
        match &self.home_flag {
            Some(h) => format!("agentctl --home {} {verb} {what}", h.display()),
            None => format!("agentctl {verb} {what}"),
        }
    }

    /// Print what an await of several tasks found: each ended task as `task` prints it, then
    /// those still running and the command that awaits them. Exits as the first task to end
    /// would alone, 124 if none ended.
    pub fn awaited(&self, a: &Awaited) -> ExitCode {
        let asking = a.running.iter().any(|v| v.pending_question.is_some());
        let code = ExitCode::from(a.ended.first().map_or(if asking { ASKS } else { 124 }, exit_status));
        if self.json {
            print_json(&serde_json::to_value(a).unwrap_or_default());
            return code;
        }
        let mut w = io::stdout().lock();
        for v in &a.ended {
            let _ = self.task_text(v, &mut w);
            let _ = writeln!(w);
        }
        if !a.running.is_empty() {
            let head = if a.timed_out { "none has ended yet; still running" } else { "still running" };
            let _ = writeln!(w, "{head}:");
            for v in &a.running {
                let (token, role, elapsed) = (v.token, v.role.as_str(), human_duration(v.elapsed_ms));
                let doing = super::spend::step(v).map(|s| format!("; now: {s}")).unwrap_or_default();
                let _ = writeln!(w, "  {token} ({role}) for {elapsed}, {} line(s) of output{doing}", v.line_count);
                let _ = self.question(v, "    ", &mut w);
            }
            let tokens: Vec<String> = a.running.iter().map(|v| v.token.to_string()).collect();
            let _ = writeln!(w, "await them: {}", self.command("await", tokens.join(" ")));
        }
        code
    }

    fn task_text(&self, v: &TaskView, w: &mut dyn Write) -> io::Result<()> {
        // The CLI shows its own commands instead of the front-end-neutral message.
        let quiet = TaskView { message: v.message.clone().filter(|_| v.timed_out), ..v.clone() };
        // Agents' words (summary, question, note) are shown, never obeyed by the terminal.
        w.write_all(printable(&quiet.text()).as_bytes())?;
        self.question(v, "", w)?;
        if !v.status.is_final() {
            writeln!(w, "await it: {}", self.command("await", v.token))?;
            writeln!(w, "halt it:  {}", self.command("halt", v.token))?;
        } else if v.can_go_on() {
            writeln!(w, "follow up: {}", self.command("ask", format!("--to {} QUESTION", v.token)))?;
        }
        Ok(())
    }

    /// The question task `v` waits on an answer to, if any, and how to answer it; each line
    /// after `indent`.
    fn question(&self, v: &TaskView, indent: &str, w: &mut dyn Write) -> io::Result<()> {
        let Some(q) = &v.pending_question else { return Ok(()) };
        let choices = if q.choices.is_empty() { String::new() } else { format!(" [{}]", q.choices.join(", ")) };
        writeln!(w, "{indent}asks ({}): {}", q.id, printable(&format!("{}{choices}", q.text)))?;
        writeln!(w, "{indent}answer it: {}", self.command("reply", format!("{} ANSWER", v.token)))
    }

    /// After Ctrl-C: the tasks waited on go on; each one's state and how to get back to it
    /// (with `--json`, one object holding them). Exit 130.
    pub fn interrupted(&self, views: &[TaskView]) -> ExitCode {
        if self.json {
            print_json(&json!({ "interrupted": true, "tasks": views }));
        } else {
            eprintln!("agentctl: {}", interrupted_note(views));
            let mut w = io::stdout().lock();
            for v in views {
                let _ = self.task_text(v, &mut w);
            }
        }
        super::progress::end_by_sigint()
    }

    /// `--quiet`'s interruption: the tokens alone on stdout, what goes on on stderr.
    pub fn interrupted_quietly(&self, views: &[TaskView]) -> ExitCode {
        for v in views {
            println!("{}", v.token);
        }
        eprintln!("agentctl: {}", interrupted_note(views));
        super::progress::end_by_sigint()
    }

    /// Print a page of tasks; `next` is the offset of the next (older) page, if there is one,
    /// and `again` the command that shows it.
    pub fn list(&self, views: &[TaskView], pools: &[ops::PoolCapacity], next: Option<usize>, again: &str) {
        if self.json {
            print_json(&json!({ "tasks": views, "count": views.len(), "next_offset": next, "pools": pools }));
            return;
        }
        if next.is_some() {
            eprintln!("hint: older tasks match too; `{again}` shows the next page");
        }
        let mut w = io::stdout().lock();
        if views.is_empty() {
            let _ = writeln!(w, "no tasks");
            return;
        }
        let _ = super::table::write(&mut w, views, super::term::width(), self.colour);
        for p in pools.iter().filter(|p| p.running + p.queued > 0 || p.spend.is_some()) {
            let _ = writeln!(w, "{}", p.line());
        }
    }

    /// Print what the tasks of a window spent.
    pub fn usage(&self, t: &crate::ops::UsageTotals) {
        if self.json {
            print_json(&serde_json::to_value(t).unwrap_or_default());
        } else {
            let _ = super::totals::write(&mut io::stdout().lock(), t);
        }
    }

    /// Print the roles `ask` knows.
    pub fn roles(&self, r: &crate::ops::Roles) {
        if self.json {
            print_json(&serde_json::to_value(r).unwrap_or_default());
        } else {
            let _ = super::roles::write(&mut io::stdout().lock(), r, super::term::width());
        }
    }

    /// Print one line, `json()` with --json, else `text()` (nothing if it is `None`).
    fn line(&self, json: impl FnOnce() -> serde_json::Value, text: impl FnOnce() -> Option<String>) -> io::Result<()> {
        let mut w = io::stdout().lock();
        let line = if self.json { Some(json().to_string()) } else { text() };
        if let Some(line) = line {
            writeln!(w, "{line}")?;
        }
        w.flush()
    }

    /// Print an event a wait returned; a `timeout` exits 124.
    pub fn event(&self, e: &Event) -> io::Result<ExitCode> {
        self.line(|| serde_json::to_value(e).unwrap_or_default(), || Some(printable(&e.describe()).into_owned()))?;
        Ok(timeout_code(e))
    }

    /// Print the lead's answer, alone on stdout (`ask-lead`).
    pub fn answer(&self, answer: &str) -> io::Result<()> {
        self.line(|| json!({ "answer": answer }), || Some(on_screen(answer)))
    }

    /// Say that question `q` is answered.
    pub fn replied(&self, q: &Question) -> io::Result<()> {
        self.line(
            || serde_json::to_value(q).unwrap_or_default(),
            || Some(format!("answered {} of task {}", q.id, q.token)),
        )
    }

    /// Print a message a task read from its inbox (its text alone, unless --json); a `timeout`
    /// exits 124.
    pub fn message(&self, e: &Event) -> io::Result<ExitCode> {
        self.line(|| serde_json::to_value(e).unwrap_or_default(), || e.text.as_deref().map(on_screen))?;
        Ok(timeout_code(e))
    }

    /// Say that `e` was posted, without echoing its text (the poster has it).
    pub fn posted(&self, e: &Event) -> io::Result<()> {
        let bytes = e.text.as_ref().map_or(0, String::len);
        self.line(
            || json!({ "type": e.kind, "seq": e.seq, "time": e.time, "session": e.session, "bytes": bytes }),
            || {
                let seq = e.seq.map(|s| format!(" #{s}")).unwrap_or_default();
                Some(format!("posted {}{seq} to session {} ({bytes} bytes)", e.kind, e.session))
            },
        )
    }

    /// Say where a message sent to task `token` went.
    pub fn sent(&self, token: Token, sent: &ops::Sent, bytes: usize) -> io::Result<()> {
        match sent {
            ops::Sent::ToInbox(e) => self.line(
                || json!({ "to": "inbox", "type": e.kind, "seq": e.seq, "time": e.time, "session": e.session, "bytes": bytes }),
                || {
                    let seq = e.seq.map(|s| format!(" #{s}")).unwrap_or_default();
                    Some(format!("posted message{seq} to task {token}'s inbox ({bytes} bytes): {}", sent.meaning()))
                },
            ),
            ops::Sent::ToAgent => self.line(
                || json!({ "to": "agent", "type": "message", "token": token, "bytes": bytes }),
                || Some(format!("sent to task {token}'s agent ({bytes} bytes): {}", sent.meaning())),
            ),
        }
    }

    /// Print one event of a followed log (one JSON object per line with --json).
    pub fn logged_event(&self, e: &LoggedEvent) -> io::Result<()> {
        self.line(
            || serde_json::to_value(e).unwrap_or_default(),
            || Some(format!("{}{}", printable(&e.event.describe()), if e.consumed { " (consumed)" } else { "" })),
        )
    }

    /// Print the events of a log.
    pub fn events(&self, events: &[LoggedEvent]) {
        if self.json {
            print_json(&json!({ "events": events, "count": events.len() }));
        } else if events.is_empty() {
            let _ = writeln!(io::stdout().lock(), "no events");
        } else {
            for e in events {
                let _ = self.logged_event(e);
            }
        }
    }

    /// Print what prune removed.
    pub fn pruned(&self, p: &Pruned) {
        if self.json {
            print_json(&serde_json::to_value(p).unwrap_or_default());
            return;
        }
        let mut w = io::stdout().lock();
        let verb = if p.dry_run { "would remove" } else { "removed" };
        for v in &p.removed {
            let _ = writeln!(w, "{verb} {} ({}) {} {}", v.token, v.role, v.status, v.question);
        }
        let _ = writeln!(w, "{verb} {} finished task(s) and {} event(s)", p.count, p.events_removed);
        if p.strays_removed > 0 {
            let _ = writeln!(w, "{verb} {} task(s) that never started (their launcher failed)", p.strays_removed);
        }
    }

    /// Print an error (to stderr; with `--json` also as an object on stdout); returns its code.
    pub fn error(&self, e: &Error) -> ExitCode {
        eprintln!("agentctl: error: {e}");
        self.error_quietly(e)
    }

    /// `error` for an error already shown on stderr: only the `--json` object, and the code.
    pub fn error_quietly(&self, e: &Error) -> ExitCode {
        if self.json {
            print_json(&json!({ "error": e.to_string(), "kind": e.kind(), "exit_code": e.exit_code() }));
        }
        ExitCode::from(e.exit_code())
    }
}

/// What an interruption leaves: the tasks of `views` that keep running.
fn interrupted_note(views: &[TaskView]) -> String {
    match views.iter().filter(|v| !v.status.is_final()).count() {
        0 => "interrupted".to_owned(),
        1 => "interrupted; the task keeps running".to_owned(),
        n => format!("interrupted; the {n} tasks keep running"),
    }
}
