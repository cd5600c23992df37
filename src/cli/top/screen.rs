//! The live view's life: the terminal taken over and always given back (quit, error, panic,
//! SIGTERM, SIGHUP), and a loop that handles each key at once and shows the home's changes and
//! the selected task's output at most `FRAME` apart, with a one-second tick for elapsed times.

use std::io::{IsTerminal, Stdout};
use std::process::ExitCode;
use std::time::Duration;

use crossterm::event::{Event, KeyEvent, KeyEventKind};
use crossterm::{cursor, execute, terminal};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::app::{Action, App};
use crate::error::{Error, IoContext, Result};
use crate::ops::{self, LogScroll, Watch};
use crate::store::Store;

/// The most ended tasks the view loads (every open one is loaded).
const MOST_ENDED: usize = 500;
/// Changes are shown at most this often: an agent writing without pause costs a redraw per
/// `FRAME`, not one per write, and keys are handled at once meanwhile.
const FRAME: Duration = Duration::from_millis(100);

/// What to read again before the next drawing.
#[derive(Default)]
struct Stale {
    tasks: bool,
    log: bool,
}

/// Run the live view of `store` until the user quits.
pub async fn run(store: &Store) -> Result<ExitCode> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(Error::Usage("top needs a terminal; `agentctl list` prints the tasks".into()));
    }
    let mut signals = Vec::new();
    for kind in [SignalKind::terminate(), SignalKind::hangup(), SignalKind::interrupt(), SignalKind::quit()] {
        signals.push(signal(kind).ctx(|| "cannot watch the signals that end the view".into())?);
    }
    let mut resized = signal(SignalKind::window_change()).ctx(|| "cannot watch the terminal's size".into())?;
    let mut screen = Screen::enter()?;
    let mut app = App::new(store.home().display().to_string());
    let (notices, mut noticed) = mpsc::unbounded_channel::<String>();
    let mut keys = terminal_events()?;
    let mut home = Watch::home(store).ok();
    let mut log: Option<Watch> = None;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // The selected task's log, and the window the view has on it.
    let mut scroll: Option<LogScroll> = None;
    let mut selected_log = None;
    let mut stale = Stale { tasks: true, log: true };
    'view: loop {
        if std::mem::take(&mut stale.tasks) {
            // Every open task, and the newest `MOST_ENDED` others.
            match ops::live(store, MOST_ENDED) {
                Ok(tasks) => {
                    app.set_tasks(tasks);
                }
                Err(e) => app.notice = Some(format!("cannot read the tasks: {e}")),
            }
        }
        if app.selected().map(|t| t.log_path.clone()) != selected_log {
            selected_log = app.selected().map(|t| t.log_path.clone());
            log = selected_log.as_deref().and_then(|p| Watch::file(p).ok());
            scroll = selected_log.as_deref().map(LogScroll::new);
            stale.log = true;
        }
        // The rows the log view has room for; the pane under the table shows the last of them.
        let rows = screen.terminal.size().map_or(20, |s| s.height.saturating_sub(3)) as usize;
        if std::mem::take(&mut stale.log) {
            show_log(&mut app, scroll.as_mut(), |s| s.refresh(rows));
        }
        screen.terminal.draw(|f| super::ui::draw(f, &app)).ctx(|| "cannot draw".into())?;
        // Wait for a key, shown at once, or for changes, shown no sooner than a frame after
        // this drawing.
        let drawn = Instant::now();
        let mut due: Option<Instant> = None;
        loop {
            let frame = async {
                match due {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let ended = async {
                let waits = signals.iter_mut().map(|s| Box::pin(s.recv()));
                futures_util::future::select_all(waits).await;
            };
            tokio::select! {
                event = keys.recv() => match event {
                    Some(Event::Key(k)) if k.kind != KeyEventKind::Release => {
                        if !key(store, &mut app, k, scroll.as_mut(), &notices, &mut stale) {
                            break 'view;
                        }
                        break;
                    }
                    Some(_) => {}
                    // The terminal is gone (hung up, or it cannot be read).
                    None => break 'view,
                },
                _ = resized.recv() => {
                    stale.log = true;
                    break;
                }
                () = changed(&mut home) => {
                    // The selected log has a watch of its own, if it could have one.
                    stale.tasks = true;
                    stale.log |= log.is_none();
                    due.get_or_insert(drawn + FRAME);
                }
                () = changed(&mut log) => {
                    stale.log = true;
                    due.get_or_insert(drawn + FRAME);
                }
                Some(n) = noticed.recv() => {
                    app.notice = Some(n);
                    stale.tasks = true;
                    break;
                }
                _ = tick.tick() => {
                    // A terminal hung up while crossterm read it leaves its reader in a loop
                    // that never returns: the view ends all the same.
                    if rustix::termios::tcgetattr(std::io::stdin()).is_err() {
                        break 'view;
                    }
                    stale.tasks = true;
                    break;
                }
                () = frame => break,
                () = ended => break 'view,
            }
        }
    }
    screen.leave();
    Ok(ExitCode::SUCCESS)
}

/// Carry out key `k`: false to quit.
fn key(
    store: &Store,
    app: &mut App,
    k: KeyEvent,
    scroll: Option<&mut LogScroll>,
    notices: &mpsc::UnboundedSender<String>,
    stale: &mut Stale,
) -> bool {
    match app.key(k) {
        Action::Quit => return false,
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
            stale.tasks = true;
        }
        Action::Scroll(how) => show_log(app, scroll, |s| s.go(how)),
        // Another task's log is opened before the next drawing.
        Action::Selected | Action::None => {}
    }
    true
}

/// Do `what` to the window on the selected log, and show its rows.
fn show_log(app: &mut App, scroll: Option<&mut LogScroll>, what: impl FnOnce(&mut LogScroll) -> Result<()>) {
    let Some(scroll) = scroll else {
        (app.log, app.scrolled) = (Vec::new(), None);
        return;
    };
    if let Err(e) = what(scroll) {
        app.notice = Some(e.to_string());
    }
    app.log = scroll.lines();
    app.scrolled = (!scroll.following()).then(|| scroll.percent());
}

/// The terminal's keys, read on a thread of their own, which ends (closing the channel) when
/// the terminal hangs up or cannot be read. crossterm reads a hung-up terminal (a closed pty,
/// whose SIGHUP went to a shell that did not pass it on) in a loop that never returns: it is
/// asked for events only once stdin has input and no hang-up. (A resize comes as SIGWINCH.)
fn terminal_events() -> Result<mpsc::UnboundedReceiver<Event>> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let (tx, rx) = mpsc::unbounded_channel();
    let read = move || {
        let stdin = std::io::stdin();
        loop {
            let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => return,
            }
            let got = fds[0].revents().unwrap_or(PollFlags::empty());
            let gone = PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL;
            if got.intersects(gone) || !got.contains(PollFlags::POLLIN) {
                return;
            }
            // Every event of what came: crossterm reads all the terminal has, and keeps what
            // it has not handed out yet.
            loop {
                match crossterm::event::poll(Duration::ZERO) {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(_) => return,
                }
                let Ok(event) = crossterm::event::read() else { return };
                if tx.send(event).is_err() {
                    return;
                }
            }
        }
    };
    std::thread::Builder::new().name("agentctl-keys".into()).spawn(read).ctx(|| "cannot read the keys".into())?;
    Ok(rx)
}

/// The next change a watch sees; never, without one (the tick reloads then).
async fn changed(watch: &mut Option<Watch>) {
    match watch.as_mut() {
        Some(w) => w.changed().await,
        None => std::future::pending().await,
    }
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
