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
use crate::ops::{self, ListFilter, PageRequest, Watch, Window};
use crate::store::Store;

/// The most tasks the view loads.
const MOST_TASKS: usize = 500;
/// Lines of output read for the table's pane, and for the log view.
const PANE_LINES: u64 = 100;
const LOG_LINES: u64 = 2000;
/// Changes closer together than this are shown together.
const SETTLE: Duration = Duration::from_millis(30);

/// Run the live view of `store` until the user quits.
pub async fn run(store: &Store) -> Result<ExitCode> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(Error::Usage("top needs a terminal; `agentctl list` prints the tasks".into()));
    }
    let mut screen = Screen::enter()?;
    let mut app = App::new(store.home().display().to_string());
    let (notices, mut noticed) = mpsc::unbounded_channel::<String>();
    let mut keys = EventStream::new();
    let mut home = Watch::home(store).ok();
    let mut log: Option<Watch> = None;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut term = signal(SignalKind::terminate()).ctx(|| "cannot watch SIGTERM".into())?;
    let mut hup = signal(SignalKind::hangup()).ctx(|| "cannot watch SIGHUP".into())?;
    let mut selected_log = None;
    loop {
        // What changed is read again: the tasks, and the selected one's output.
        if app.set_tasks(load(store)) || app.selected().map(|t| t.log_path.clone()) != selected_log {
            selected_log = app.selected().map(|t| t.log_path.clone());
            log = selected_log.as_deref().and_then(|p| Watch::file(p).ok());
        }
        app.log = read_log(store, &app);
        screen.terminal.draw(|f| super::ui::draw(f, &app)).ctx(|| "cannot draw".into())?;
        tokio::select! {
            event = keys.next() => match event {
                Some(Ok(Event::Key(k))) if k.kind != KeyEventKind::Release => {
                    match app.key(k) {
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
                        }
                        Action::Selected | Action::None => {}
                    }
                }
                Some(Ok(_)) => {}
                // The terminal is gone.
                None | Some(Err(_)) => break,
            },
            () = changed(&mut home) => tokio::time::sleep(SETTLE).await,
            () = changed(&mut log) => tokio::time::sleep(SETTLE).await,
            Some(n) = noticed.recv() => app.notice = Some(n),
            _ = tick.tick() => {}
            _ = term.recv() => break,
            _ = hup.recv() => break,
        }
    }
    screen.leave();
    Ok(ExitCode::SUCCESS)
}

/// The tasks of the home, at most `MOST_TASKS` of the newest.
fn load(store: &Store) -> Vec<ops::TaskView> {
    let filter = ListFilter { limit: Some(MOST_TASKS), ..ListFilter::default() };
    let mut tasks = ops::list(store, &filter).map(|l| l.tasks).unwrap_or_default();
    let _ = ops::placed(store, &mut tasks);
    tasks
}

/// The selected task's last lines: enough for the pane, or for the log view.
fn read_log(store: &Store, app: &App) -> Vec<String> {
    let Some(t) = app.selected() else { return Vec::new() };
    let lines = if matches!(app.mode, Mode::Log { .. }) { LOG_LINES } else { PANE_LINES };
    let req = PageRequest { window: Window::Tail(lines), raw: false, summary: false, max_bytes: 1 << 20 };
    ops::log_page(store, t.token, req).map(|p| p.lines).unwrap_or_default()
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
/// process panics meanwhile.
struct Screen {
    terminal: Terminal<CrosstermBackend<Stdout>>,
    left: bool,
}

impl Screen {
    fn enter() -> Result<Screen> {
        terminal::enable_raw_mode().ctx(|| "cannot put the terminal in raw mode".into())?;
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            hook(info);
        }));
        let mut out = std::io::stdout();
        if let Err(e) = execute!(out, terminal::EnterAlternateScreen, cursor::Hide) {
            restore();
            return Err(e).ctx(|| "cannot take over the terminal".into());
        }
        let terminal = Terminal::new(CrosstermBackend::new(out)).ctx(|| "cannot draw on the terminal".into())?;
        Ok(Screen { terminal, left: false })
    }

    fn leave(&mut self) {
        if !self.left {
            self.left = true;
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
