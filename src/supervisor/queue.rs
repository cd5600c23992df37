//! A queued task's supervisor waiting for a place in its pool, without polling and without a
//! daemon: it sleeps on sockets, and looks again only when something that can free a place
//! happens, or move it up to where it watches the places.
//!
//! - The first and second in line connect to the control socket of every task holding a place
//!   (`place`): the answer comes when one gives its place up (it ends, or goes back to wait
//!   after a rate-limited run), and the connection closes when one's supervisor dies. They
//!   also watch the agents file's directory: a raised `parallel` lets them, and those behind
//!   them, start.
//! - The second also connects to the first (`queue`: the answer comes when it leaves the line).
//!   A place free that the first does not take within `LATE` (a stopped supervisor cannot) is
//!   the second's: the first keeps its place in line, and takes the next free place when it
//!   wakes.
//! - Every other waiter connects to the waiter just ahead of it (`front`): the answer comes when
//!   that one is first in line, or leaves the line; the connection closes if it dies.
//!
//! So one end wakes the first two in line, and each that moves up wakes the one behind it: a
//! start costs the same at any length of the line. A holder or waiter found dead (its lock
//! free) is recorded `lost` on the spot, which frees its place. The waiter meanwhile answers
//! its own clients: `wait`, `queue`, `front`, `place` (it holds none), and `halt`, which ends
//! it `cancelled` without ever starting the agent.

use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use nix::sys::signal::Signal;
use nix::sys::signalfd::SignalFd;

use super::clients::Clients;
use super::control::{Request, socket_addr};
use super::launch::report;
use crate::agents::{Agents, DEFAULT_PARALLEL, DEFAULT_POOL};
use crate::error::Result;
use crate::store::{Claim, FileLock, Store};
use crate::task::{PoolRef, TaskRecord, TaskSpec, Token};

/// How the wait ended.
pub(super) enum Waited {
    /// The task has its place: start the agent.
    Placed,
    /// It was halted (or its supervisor told to stop) while it waited: why.
    Halted(String),
    /// Its deadline passed while it waited (a rate-limited run's next one, whose deadline
    /// counts from the first run).
    Expired,
}

/// How long to wait before looking again when no one could be watched (their supervisors
/// were between states: a holder ending, a waiter not listening yet).
const SETTLE: Duration = Duration::from_millis(20);

/// How long the first in line has to take a place freed for it before the second takes it
/// instead. Told at the same moment, a first that is alive takes it within milliseconds.
const LATE: Duration = Duration::from_secs(2);

/// Wait until `rec` has a place in its pool (one saved with its place has it already), or
/// `deadline`. The first time it has to wait, the launcher is told (`queued`) and left.
pub(super) fn wait_for_place(
    store: &Store,
    rec: &mut TaskRecord,
    spec: &TaskSpec,
    signals: &SignalFd,
    clients: &mut Clients,
    deadline: Option<Instant>,
) -> Result<Waited> {
    let Some(pool) = spec.pool.as_ref().filter(|_| rec.queued) else { return Ok(Waited::Placed) };
    let mut told = false;
    let mut limit = Limit { parallel: pool.parallel.unwrap_or(DEFAULT_PARALLEL) };
    let mut first = false;
    // The first in line while a place is free for it, and when it is late to take it.
    let mut late: Option<(Token, Instant)> = None;
    let mut passing = None;
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(Waited::Expired);
        }
        let kept = limit.read(store, pool);
        if kept != rec.limit_kept {
            if let Some(why) = &kept {
                eprintln!("agentctl supervisor: {why}");
            }
            rec.limit_kept = kept;
            store.write_record(rec)?;
        }
        let (ahead, holders, free) = match store.claim(rec, &pool.name, limit.parallel, passing.take().as_slice())? {
            Claim::Granted => {
                if rec.limit_kept.take().is_some() {
                    store.write_record(rec)?;
                }
                clients.answer(|want| matches!(want, Some(Request::Queue | Request::Front)));
                return Ok(Waited::Placed);
            }
            Claim::Waiting { ahead, holders, free } => (ahead, holders, free),
        };
        // Moved up to the front: the one behind it now watches the places too.
        if ahead.is_empty() && !first {
            clients.answer(|want| want == Some(Request::Front));
        }
        first = ahead.is_empty();
        late = match (ahead.as_slice(), free) {
            (&[one], true) => Some(late.filter(|&(t, _)| t == one).unwrap_or((one, Instant::now() + LATE))),
            _ => None,
        };
        if let Some((t, at)) = late
            && Instant::now() >= at
        {
            // Its place is free, and it has not taken it: this one goes first, once.
            (passing, late) = (Some(t), None);
            continue;
        }
        // The ones it waits on must be alive: a dead one is recorded lost, freeing its place.
        let watches_places = ahead.len() < 2;
        let mut watched: Vec<(Token, Request)> = match ahead.as_slice() {
            [] => Vec::new(),
            &[one] => vec![(one, Request::Queue)],
            &[next, ..] => vec![(next, Request::Front)],
        };
        if watches_places {
            watched.extend(holders.iter().map(|&t| (t, Request::Place)));
        }
        let dead: Vec<Token> = watched.iter().map(|&(t, _)| t).filter(|&t| gone(store, t)).collect();
        if !dead.is_empty() {
            let mut recorded = true;
            for t in dead {
                recorded &= crate::ops::refresh(store, t).is_ok_and(|r| r.status().is_final());
            }
            if !recorded {
                // Its end could not be written (a full disk, say): not again at once.
                std::thread::sleep(SETTLE);
            }
            continue;
        }
        if !told {
            report("queued");
            if let Ok(null) = std::fs::File::options().write(true).open("/dev/null") {
                let _ = nix::unistd::dup2_stdout(null);
            }
            told = true;
        }
        let streams: Vec<UnixStream> = watched.iter().filter_map(|&(t, request)| connect(store, t, request)).collect();
        if streams.len() < watched.len() {
            // One of them was ending as we looked (its socket gone): look again, soon, rather
            // than sleep on the others while its place stays free.
            std::thread::sleep(SETTLE);
            continue;
        }
        // Those that watch the places also wake when the agents file changes: a raised `parallel`.
        let file = if watches_places { pool.agents_file.as_deref().and_then(watch_file) } else { None };
        let name = pool.agents_file.as_deref().and_then(Path::file_name);
        // Thousands may wait: none keeps the store open (its locks) or memory it does not need.
        store.close_db();
        trim_heap();
        let until = [late.map(|(_, at)| at), deadline].into_iter().flatten().min();
        if let Some(why) = sleep_on(&streams, file.as_ref().zip(name), signals, clients, first, until) {
            return Ok(Waited::Halted(why));
        }
    }
}

/// The pool's limit as last read from the agents file.
struct Limit {
    parallel: u32,
}

impl Limit {
    /// Read the limit again (a changed `parallel` counts from the next look). A file that
    /// cannot be read now, or has no section for the pool (an editor saving it in place leaves
    /// it empty for a moment), leaves the last limit read: why, then.
    fn read(&mut self, store: &Store, pool: &PoolRef) -> Option<String> {
        let name = &pool.name;
        let why = match Agents::load(store.home(), pool.agents_file.as_deref()) {
            Ok(agents) => match agents.defined_parallel(name) {
                Some(n) => {
                    self.parallel = n;
                    return None;
                }
                // No section is the default pool's own limit, unless one said otherwise.
                None if name == DEFAULT_POOL && self.parallel == DEFAULT_PARALLEL => return None,
                None => match agents.path() {
                    Some(file) if agents.is_empty() => format!("agents file {} is empty now", file.display()),
                    Some(file) => format!("agents file {} has no [pools.{name}] now", file.display()),
                    None => "no agents file is found now".to_owned(),
                },
            },
            Err(e) => e.to_string(),
        };
        Some(format!(
            "{why}: pool `{name}` keeps its last limit, parallel = {}, until the file defines [pools.{name}] again",
            self.parallel
        ))
    }
}

/// Give the allocator's free pages back to the system.
fn trim_heap() {
    // SAFETY: malloc_trim only hands memory the allocator holds free back to the system.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Whether task `t`'s supervisor is gone (its lock is free).
fn gone(store: &Store, t: Token) -> bool {
    matches!(FileLock::try_take(&store.lock_path(t)), Ok(Some(_)))
}

/// Ask `request` of task `t`'s supervisor; the connection, if one listens.
fn connect(store: &Store, t: Token, request: Request) -> Option<UnixStream> {
    let addr = socket_addr(&store.socket_path(t)).ok()?;
    let mut stream = UnixStream::connect(&addr.path).ok()?;
    stream.write_all(request.line().as_bytes()).ok()?;
    Some(stream)
}

/// An inotify watch on the directory of `file` (editors replace files rather than write them),
/// if one can be had.
fn watch_file(file: &Path) -> Option<Inotify> {
    let dir = file.parent()?;
    let inotify = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK).ok()?;
    let mask = AddWatchFlags::IN_CLOSE_WRITE | AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_CREATE;
    inotify.add_watch(dir, mask).ok()?;
    Some(inotify)
}

/// Sleep until a watched connection has something (an answer, or its end), the watched
/// agents file's directory changes, or `until`, serving clients meanwhile (`front`: this one is
/// first in line). `Some(why)` when a halt or a stop signal came instead.
fn sleep_on(
    streams: &[UnixStream],
    file: Option<(&Inotify, &std::ffi::OsStr)>,
    signals: &SignalFd,
    clients: &mut Clients,
    front: bool,
    until: Option<Instant>,
) -> Option<String> {
    loop {
        // A waiter holds no place, and the first is at the front: either is answered at once.
        clients.answer(|want| want == Some(Request::Place) || (front && want == Some(Request::Front)));
        let now = Instant::now();
        if until.is_some_and(|t| now >= t) {
            return None;
        }
        let timeout = [clients.wake_at(), until].into_iter().flatten().min().map_or(PollTimeout::NONE, |t| {
            // Rounded up, so that a timer is never found not yet due on waking.
            let ms = t.saturating_duration_since(now).as_micros().div_ceil(1000).min(60_000) as u16;
            PollTimeout::from(ms)
        });
        let (answered, changed, signalled, served): (bool, bool, bool, Vec<bool>) = {
            let mut fds = vec![PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
            fds.extend(streams.iter().map(|s| PollFd::new(s.as_fd(), PollFlags::POLLIN)));
            fds.extend(file.map(|(f, _)| PollFd::new(f.as_fd(), PollFlags::POLLIN)));
            fds.extend(clients.poll_fds());
            if poll(&mut fds, timeout).is_err() {
                continue;
            }
            let ready: Vec<bool> = fds.iter().map(|f| f.revents().is_some_and(|r| !r.is_empty())).collect();
            let n = streams.len();
            let watched = n + usize::from(file.is_some());
            (ready[1..=n].iter().any(|&r| r), file.is_some() && ready[watched], ready[0], ready[watched + 1..].to_vec())
        };
        // Other files of that directory (the store's, say) change all the time: only the
        // agents file counts.
        let changed = changed
            && file.is_some_and(|(f, name)| {
                f.read_events().is_ok_and(|events| events.iter().any(|e| e.name.as_deref() == Some(name)))
            });
        if signalled {
            while let Ok(Some(info)) = signals.read_signal() {
                if let Ok(s @ (Signal::SIGTERM | Signal::SIGINT)) = Signal::try_from(info.ssi_signo as i32) {
                    return Some(format!("the supervisor received {s} while the task waited for a place"));
                }
            }
        }
        if !clients.serve(&served).is_empty() {
            return Some("halted while it waited for a place; it never ran".to_owned());
        }
        if answered || changed {
            return None;
        }
    }
}
