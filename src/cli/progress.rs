//! While the CLI waits (the hybrid window, `--sync`, `await`, `wait`): a one-line spinner on a
//! terminal, and Ctrl-C, which leaves the tasks running and says how to get back to them.

use std::future::Future;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use super::term::fit;
use crate::error::Result;
use crate::ops::{self, TaskView, human_duration};
use crate::store::Store;
use crate::task::Token;

/// The exit code after Ctrl-C, as shells give a command SIGINT ended.
pub const INTERRUPTED: u8 = 130;

/// How a wait ended.
pub enum Watched<T> {
    Done(T),
    /// Ctrl-C: what is waited for goes on.
    Interrupted,
}

impl<T> Watched<T> {
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Watched<U> {
        match self {
            Watched::Done(t) => Watched::Done(f(t)),
            Watched::Interrupted => Watched::Interrupted,
        }
    }
}

const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const TICK: Duration = Duration::from_millis(100);
/// How often the task is looked at for the line (the frames turn faster).
const LOOK: Duration = Duration::from_millis(250);
/// A wait shorter than this shows nothing (a quick answer would only flicker).
const QUIET: Duration = Duration::from_millis(300);

/// Run `wait`; meanwhile, when stderr is a terminal and `spin`, show a spinner line about
/// `tasks` (or, with none, how long it has waited), and stop at Ctrl-C.
pub async fn watch<T>(
    store: &Store,
    tasks: &[Token],
    spin: bool,
    wait: impl Future<Output = Result<T>>,
) -> Result<Watched<T>> {
    let spin = spin && std::io::stderr().is_terminal() && in_foreground();
    let started = Instant::now();
    let mut line = Spinner { shown: false, text: String::new() };
    let ticker = async {
        if !spin {
            // Nothing to show: a thousand waiting CLIs must not each wake ten times a second.
            return std::future::pending().await;
        }
        let mut looked: Option<Instant> = None;
        for frame in FRAMES.iter().cycle() {
            if started.elapsed() >= QUIET {
                if looked.is_none_or(|t| t.elapsed() >= LOOK) {
                    line.text = describe(store, tasks, started.elapsed());
                    looked = Some(Instant::now());
                }
                line.show(*frame);
            }
            tokio::time::sleep(TICK).await;
        }
    };
    // A SIGINT the caller set to be ignored (a background job, nohup) stays ignored.
    let interrupt = async {
        if sigint_ignored() || tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let outcome = tokio::select! {
        done = wait => Some(done),
        () = interrupt => None,
        () = ticker => None,
    };
    line.clear();
    match outcome {
        Some(done) => done.map(Watched::Done),
        None => Ok(Watched::Interrupted),
    }
}

/// Whether SIGINT is ignored, as a shell leaves it for a background job.
fn sigint_ignored() -> bool {
    // SAFETY: reads the current action into a struct we own; installs nothing.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGINT, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

/// End as Ctrl-C ends a program, by SIGINT itself (a shell running a loop of agentctl then
/// stops the loop, which an exit code would not tell it to); 130 should that not happen.
pub fn end_by_sigint() -> std::process::ExitCode {
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: the default action back, then the signal to ourselves.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
        libc::raise(libc::SIGINT);
    }
    std::process::ExitCode::from(INTERRUPTED)
}

/// The spinner's line on stderr.
struct Spinner {
    shown: bool,
    text: String,
}

impl Spinner {
    fn show(&mut self, frame: char) {
        let width = super::term::width_of(&std::io::stderr()).unwrap_or(80).saturating_sub(1);
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{}", fit(&format!("{frame} {}", self.text), width));
        let _ = err.flush();
        self.shown = true;
    }

    /// Erase the line, if it was drawn.
    fn clear(&self) {
        if self.shown {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}

/// Whether this process is in the terminal's foreground (not a background job, which would
/// draw over the user's prompt).
fn in_foreground() -> bool {
    rustix::termios::tcgetpgrp(std::io::stderr()).is_ok_and(|pg| pg == rustix::process::getpgrp())
}

/// `a3f2c1 (reviewer) running 12.3s, 45 line(s) · Bash: sleep 5 · $0.0200`, or `…: last
/// line` for an agent whose steps are not known, for the first task waited on.
fn describe(store: &Store, tasks: &[Token], waited: Duration) -> String {
    let Some(&first) = tasks.first() else {
        return format!("waiting for an event, {}", human_duration(waited.as_millis() as u64));
    };
    let more = if tasks.len() > 1 { format!(" (and {} more)", tasks.len() - 1) } else { String::new() };
    let Ok(v) = store.read_record(first).and_then(|r| TaskView::of(store, &r, true)) else {
        return format!("{first}{more}: waiting, {}", human_duration(waited.as_millis() as u64));
    };
    let mut text = format!(
        "{} ({}) {} {}, {} line(s){more}",
        v.token,
        v.role,
        v.status,
        human_duration(v.elapsed_ms),
        v.line_count
    );
    let cost = super::spend::cost(v.usage.as_ref());
    match super::spend::step(&v) {
        Some(step) => text.push_str(&format!(" · {step}")),
        None => {
            let last = v.summary.as_deref().and_then(|s| s.split_once("; last: ").map(|(_, l)| l.to_owned()));
            if let Some(l) = last {
                text.push_str(&format!(": {l}"));
            }
        }
    }
    if cost != "-" {
        text.push_str(&format!(" · {cost}"));
    }
    text
}

/// What Ctrl-C leaves behind: each task still running, and how to get back to it (the
/// `await`/`halt` lines `Out::task` prints).
pub fn interrupted_views(store: &Store, tasks: &[Token]) -> Vec<TaskView> {
    tasks
        .iter()
        .filter_map(|&t| ops::refresh(store, t).ok())
        .filter_map(|r| TaskView::of(store, &r, true).ok())
        .collect()
}
