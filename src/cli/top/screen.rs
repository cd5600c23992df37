//! The live view's life: the terminal taken over and always given back (quit, error, panic,
//! SIGTERM, SIGHUP), and a loop woken by keys, the home's changes, the selected task's output
//! and a one-second tick for elapsed times.

use std::io::{IsTerminal, Stdout};
use std::process::ExitCode;
use std::time::Duration;

use crossterm::event::{Event, EventStream, KeyEventKind};
use crossterm::{cursor, execute, terminal};
use futures_util::StreamExt;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use super::app::{Action, App, Mode};
use crate::error::{Error, IoContext, Result};
use crate::ops::{self, PageRequest, Watch, Window};
use crate::store::Store;

/// The most ended tasks the view loads (every open one is loaded).
const MOST_ENDED: usize = 500;
/// Lines of output read for the table's pane, and for the log view.
const PANE_LINES: u64 = 100;
const LOG_LINES: u64 = ops::MAX_PAGE_LINES;
/// Changes closer together than this are shown together: an agent writing without pause
/// costs a redraw per `SETTLE`, not one per write.
const SETTLE: Duration = Duration::from_millis(50);

/// Run the live view of `store` until the user quits.
pub async fn run(store: &Store) -> Result<ExitCode> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(Error::Usage("top needs a terminal; `agentctl list` prints the tasks".into()));
    }
    let mut signals = Vec::new();
    for kind in [SignalKind::terminate(), SignalKind::hangup(), SignalKind::interrupt(), SignalKind::quit()] {
        signals.push(signal(kind).ctx(|| "cannot watch the signals that end the view".into())?);
    }
    let mut screen = Screen::enter()?;
    let mut app = App::new(store.home().display().to_string());
    let (notices, mut noticed) = mpsc::unbounded_channel::<String>();
    let mut keys = EventStream::new();
    let mut home = Watch::home(store).ok();
    let mut log: Option<Watch> = None;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut selected_log = None;
    // What to read again before the next drawing.
    let (mut tasks_stale, mut log_stale) = (true, true);
    loop {
        if tasks_stale {
            // Every open task, and the newest `MOST_ENDED` others.
            match ops::live(store, MOST_ENDED) {
                Ok(tasks) => {
                    log_stale |= app.set_tasks(tasks);
                }
                Err(e) => app.notice = Some(format!("cannot read the tasks: {e}")),
            }
        }
        if app.selected().map(|t| t.log_path.clone()) != selected_log {
            selected_log = app.selected().map(|t| t.log_path.clone());
            log = selected_log.as_deref().and_then(|p| Watch::file(p).ok());
            log_stale = true;
        }
        if log_stale {
            app.log = read_log(&app);
        }
        (tasks_stale, log_stale) = (false, false);
        screen.terminal.draw(|f| super::ui::draw(f, &app)).ctx(|| "cannot draw".into())?;
        let ended = async {
            let waits = signals.iter_mut().map(|s| Box::pin(s.recv()));
            futures_util::future::select_all(waits).await;
        };
        tokio::select! {
            event = keys.next() => match event {
                Some(Ok(Event::Key(k))) if k.kind != KeyEventKind::Release => {
                    let mode = app.mode.clone();
                    let action = app.key(k);
                    // The log view reads more of the output than the pane.
                    log_stale |= matches!(action, Action::Selected) || mode != app.mode;
                    match action {
                        Action::Quit => break,
                        Action::Halt(token) => {
                            app.notice = Some(format!("halting {token}…"));
                            let (store, notices) = (store.clone(), notices.clone());
                            tokio::spawn(async move {
                                let said = match ops::halt(&store, token, ops::DEFAULT_GRACE, false).await {
                                    Ok(v) => format!("task {token} {}", v.status),
                                    Err(e) => format!("cannot halt {token}: {e}"),
                                };
                                let _ = notices.send(said);
                            });
                        }
                        Action::Reply(token, answer) => {
                            app.notice = Some(match ops::reply(store, token.as_str(), &answer) {
                                Ok(q) => format!("answered {}: {answer}", q.id),
                                Err(e) => format!("cannot answer: {e}"),
                            });
                            tasks_stale = true;
                        }
                        Action::Selected | Action::None => {}
                    }
                }
                Some(Ok(_)) => {}
                // The terminal is gone.
                None | Some(Err(_)) => break,
            },
            () = changed(&mut home) => {
                tokio::time::sleep(SETTLE).await;
                // The selected log has a watch of its own, if it could have one.
                (tasks_stale, log_stale) = (true, log_stale || log.is_none());
            }
            () = changed(&mut log) => {
                tokio::time::sleep(SETTLE).await;
                log_stale = true;
            }
            Some(n) = noticed.recv() => {
                app.notice = Some(n);
                tasks_stale = true;
            }
            _ = tick.tick() => tasks_stale = true,
            () = ended => break,
        }
    }
    screen.leave();
    Ok(ExitCode::SUCCESS)
}

/// The selected task's last lines: enough for the pane, or for the log view.
fn read_log(app: &App) -> Vec<String> {
    let Some(t) = app.selected() else { return Vec::new() };
    let lines = if matches!(app.mode, Mode::Log { .. }) { LOG_LINES } else { PANE_LINES };
    let req = PageRequest { window: Window::Tail(lines), raw: false, summary: false, max_bytes: 4 << 20 };
    ops::page_of(t, req).map(|p| p.lines).unwrap_or_default()
}

/// The next change a watch sees; never, without one (the tick reloads then).
async fn changed(watch: &mut Option<Watch>) {
    if let Some(w) = watch.as_mut()
        && w.changed().await.is_ok()
    {
        return;
    }
    *watch = None;
    std::future::pending::<()>().await
}

/// The terminal in raw mode on the alternate screen, given back as it was on drop, or if the
/// process panics meanwhile. stderr goes to /dev/null meanwhile: a warning written there
/// would land in the middle of the view.
struct Screen {
    terminal: Terminal<CrosstermBackend<Stdout>>,
    left: bool,
    /// stderr as it was.
    stderr: Option<std::os::fd::OwnedFd>,
}

impl Screen {
    fn enter() -> Result<Screen> {
        let terminal =
            Terminal::new(CrosstermBackend::new(std::io::stdout())).ctx(|| "cannot draw on the terminal".into())?;
        terminal::enable_raw_mode().ctx(|| "cannot put the terminal in raw mode".into())?;
        // From here on, whatever happens gives the terminal back.
        let mut screen = Screen { terminal, left: false, stderr: None };
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            hook(info);
        }));
        execute!(std::io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)
            .ctx(|| "cannot take over the terminal".into())?;
        if let (Ok(saved), Ok(null)) =
            (rustix::io::dup(std::io::stderr()), std::fs::File::options().write(true).open("/dev/null"))
        {
            let _ = nix::unistd::dup2_stderr(null);
            screen.stderr = Some(saved);
        }
        Ok(screen)
    }

    fn leave(&mut self) {
        if !self.left {
            self.left = true;
            if let Some(saved) = self.stderr.take() {
                let _ = nix::unistd::dup2_stderr(saved);
            }
            restore();
        }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        self.leave();
    }
}

/// The terminal as it was: main screen, cursor shown, cooked mode.
fn restore() {
    let _ = execute!(std::io::stdout(), terminal::LeaveAlternateScreen, cursor::Show);
    let _ = terminal::disable_raw_mode();
}
