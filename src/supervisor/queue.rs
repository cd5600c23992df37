//! A queued task's supervisor waiting for a place in its pool, without polling and without a
//! daemon: it sleeps on sockets, and looks again only when something that can free a place
//! happens, or move it up to where it watches the places.
//!
//! - The first `WATCHERS` (three) in line connect to the control socket of every task holding a
//!   place (`place`): the answer comes when one gives its place up (it ends, or goes back to
//!   wait after a rate-limited run), and the connection closes when one's supervisor dies. They
//!   also watch the agents file: a raised `parallel` lets them, and those behind them, start.
//!   And each connects to those ahead of it (`queue`: the answer comes when one leaves the line).
//! - A place free that those ahead of one do not take within `LATE` each (a stopped supervisor
//!   cannot) is its own: those passed keep their places in line, and take the next free places
//!   when they wake.
//! - Every other waiter connects to the `WATCHERS` waiters just ahead of it, asking each to say
//!   when this one is among the first `WATCHERS` (`front N`; the farthest, `queue`): any one of
//!   them alive tells it.
//!
//! So one end wakes the first three in line, and each that moves up wakes the few behind it: a
//! start costs the same at any length of the line. A stopped supervisor anywhere in line, or two
//! in a row, are passed; three stopped in a row hold the line once they are its first three, until
//! one wakes or ends. A holder or waiter found dead (its lock free) is recorded `lost` on the
//! spot, which frees its place; one that closes a request unanswered while alive (an earlier
//! release that does not know it) is asked a plainer one from then on; and a look that finds
//! nothing to sleep on is not taken again at once. The waiter meanwhile answers its own
//! clients: `wait`, `queue`, `front`, `place` (it holds none), and `halt`, which ends it
//! `cancelled` without ever starting the agent.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;
use nix::sys::signalfd::SignalFd;

use super::clients::Clients;
use super::control::{Request, socket_addr};
use super::pool_limit::{AgentsFile, Limit};
use crate::agents::DEFAULT_PARALLEL;
use crate::error::Result;
use crate::store::{Claim, FileLock, Store, WATCHERS};
use crate::task::{TaskRecord, TaskSpec, Token};

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

/// The first pause before looking again after a look that found nothing to sleep on (a
/// supervisor between states: a holder ending, a waiter not listening yet); each such look in a
/// row doubles it, up to `CALM_MAX`.
const SETTLE: Duration = Duration::from_millis(20);

/// The longest pause between looks that find nothing to sleep on (a store that says an ended
/// task holds a place, a supervisor that refuses every request): never a loop without one.
const CALM_MAX: Duration = Duration::from_secs(1);

/// How often a task waiting for memory looks at what is available.
const MEMORY_LOOK: Duration = Duration::from_secs(2);

/// How long each waiter ahead has to take a place freed for it before the one behind takes it
/// instead. Told at the same moment, a waiter that is alive takes it within milliseconds.
const LATE: Duration = Duration::from_secs(2);

/// Wait until `rec` has a place in its pool (one saved with its place has it already), or
/// `deadline`.
pub(super) fn wait_for_place(
    store: &Store,
    rec: &mut TaskRecord,
    spec: &TaskSpec,
    signals: &SignalFd,
    clients: &mut Clients,
    deadline: Option<Instant>,
) -> Result<Waited> {
    let Some(pool) = spec.pool.as_ref().filter(|_| rec.queued) else { return Ok(Waited::Placed) };
    let mut limit = Limit {
        parallel: pool.parallel.unwrap_or(DEFAULT_PARALLEL),
        spend: pool.spend.clone(),
        min_memory: pool.min_memory.map(crate::task::Bytes),
    };
    // Watched from when it is among the first in line, before each read of the limit.
    let mut agents: Option<AgentsFile> = None;
    // Those ahead of it while a place is free that they have not taken, and when they are late.
    let mut late: Option<(Vec<Token>, Instant)> = None;
    let mut passing = Vec::new();
    // Supervisors that closed a request unanswered while alive: what to ask them instead.
    let mut plainer: HashMap<Token, Request> = HashMap::new();
    let mut calm = Calm::default();
    // Its place in line, while it is among the first `WATCHERS`.
    let mut place = None;
    loop {
        if let Some(pause) = calm.pause() {
            let until = Some(Instant::now() + pause);
            if let Slept::Halted(why) = sleep_on(&[], None, signals, clients, place, until, A_PLACE) {
                return Ok(Waited::Halted(why));
            }
        }
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
        // A pool that spent its window's limit holds every new task back until the window frees.
        let held = match &limit.spend {
            Some(spend) => super::spend_hold::held(store, &pool.name, spend)?,
            None => None,
        };
        super::spend_hold::note(store, rec, held.as_ref())?;
        if let Some(held) = held {
            if agents.is_none()
                && let Some(file) = pool.agents_file.as_deref()
            {
                agents = Some(AgentsFile::watch(file));
            }
            store.close_db();
            let until = [Some(held.look_at), deadline].into_iter().flatten().min();
            if let Slept::Halted(why) = sleep_on(&[], agents.as_mut(), signals, clients, place, until, A_PLACE) {
                return Ok(Waited::Halted(why));
            }
            continue;
        }
        // Too little memory for one more: look again every few seconds (or when the file changes).
        let short = |settling| super::memory::short(limit.min_memory?, settling);
        let admit = limit.min_memory.map(|_| (&short as &dyn Fn(usize) -> Option<String>, super::memory::SETTLING_MS));
        let claimed = store.claim_with(rec, &pool.name, limit.parallel, &std::mem::take(&mut passing), admit)?;
        if let Claim::Short(why) = claimed {
            if rec.memory_short.as_ref() != Some(&why) {
                rec.memory_short = Some(why);
                store.write_record(rec)?;
            }
            if agents.is_none()
                && let Some(file) = pool.agents_file.as_deref()
            {
                agents = Some(AgentsFile::watch(file));
            }
            store.close_db();
            let until = [Some(Instant::now() + MEMORY_LOOK), deadline].into_iter().flatten().min();
            if let Slept::Halted(why) = sleep_on(&[], agents.as_mut(), signals, clients, place, until, A_PLACE) {
                return Ok(Waited::Halted(why));
            }
            continue;
        }
        let (ahead, holders, free) = match claimed {
            // Taken above.
            Claim::Short(_) => continue,
            Claim::Granted => {
                if rec.limit_kept.take().is_some() | rec.memory_short.take().is_some() {
                    store.write_record(rec)?;
                }
                clients.answer(|want| matches!(want, Some(Request::Queue | Request::Front { .. })));
                return Ok(Waited::Placed);
            }
            Claim::Waiting { ahead, holders, free } => (ahead, holders, free),
        };
        let now_at = (ahead.len() < WATCHERS).then_some(ahead.len() + 1);
        if now_at != place {
            // Moved up: those behind it that asked to hear it do.
            place = now_at;
            clients.answer(|want| reached(want, place));
        }
        if place.is_some()
            && agents.is_none()
            && let Some(file) = pool.agents_file.as_deref()
        {
            // Watched first, then read again: a change in between is not missed.
            agents = Some(AgentsFile::watch(file));
            continue;
        }
        late = match (place, free) {
            (Some(p), true) if p > 1 => {
                let by = Instant::now() + LATE * (p as u32 - 1);
                Some(late.filter(|(was, _)| *was == ahead).unwrap_or((ahead.clone(), by)))
            }
            _ => None,
        };
        if late.as_ref().is_some_and(|&(_, at)| Instant::now() >= at) {
            // A place is free, and those ahead have not taken it in time: this one goes first, once.
            (passing, late) = (ahead, None);
            continue;
        }
        let watched = watches(place.is_some(), &ahead, &holders, &plainer);
        plainer.retain(|t, _| watched.iter().any(|&(w, _)| w == *t));
        // The ones it waits on must be alive: a dead one is recorded lost, freeing its place.
        let dead: Vec<Token> = watched.iter().map(|&(t, _)| t).filter(|&t| gone(store, t)).collect();
        if !dead.is_empty() {
            for t in dead {
                // Not again at once, should its end not be written (a full disk, say), or the
                // store say an ended task holds a place.
                let _ = crate::ops::refresh(store, t);
            }
            calm.more();
            continue;
        }
        let connected: Option<Vec<UnixStream>> = watched.iter().map(|&(t, asked)| connect(store, t, asked)).collect();
        let Some(streams) = connected else {
            // One of them was ending as we looked (its socket gone): look again, soon, rather
            // than sleep on the others while its place stays free.
            calm.more();
            continue;
        };
        // Thousands may wait: none keeps the store open (its locks) or memory it does not need.
        store.close_db();
        trim_heap();
        let until = [late.as_ref().map(|&(_, at)| at), deadline].into_iter().flatten().min();
        match sleep_on(&streams, agents.as_mut(), signals, clients, place, until, A_PLACE) {
            Slept::Halted(why) => return Ok(Waited::Halted(why)),
            Slept::Woke { closed } if closed.is_empty() => calm = Calm::default(),
            Slept::Woke { closed } => {
                for (t, asked) in closed.into_iter().map(|i| watched[i]) {
                    if !gone(store, t) {
                        plainer.insert(t, asked.plainer());
                    }
                }
                calm.more();
            }
        }
    }
}

/// What to ask of whom. Among the first in line: of each waiter ahead, when it leaves the
/// line, and of each holder, when it gives its place up. Further back: of each of the
/// `WATCHERS` ahead, when this one is among the first `WATCHERS` (the `i`th ahead is then
/// among the first `WATCHERS - 1 - i`; the farthest, out of the line). Asked plainer where one
/// refused.
fn watches(
    among_first: bool,
    ahead: &[Token],
    holders: &[Token],
    plainer: &HashMap<Token, Request>,
) -> Vec<(Token, Request)> {
    let asked: Vec<(Token, Request)> = if among_first {
        let waiters = ahead.iter().map(|&t| (t, Request::Queue));
        waiters.chain(holders.iter().map(|&t| (t, Request::Place))).collect()
    } else {
        let within = |i: usize| WATCHERS.saturating_sub(1 + i) as u32;
        let ask = |i: usize| if within(i) == 0 { Request::Queue } else { Request::Front { within: within(i) } };
        ahead.iter().enumerate().map(|(i, &t)| (t, ask(i))).collect()
    };
    asked.into_iter().map(|(t, r)| (t, plainer.get(&t).copied().unwrap_or(r))).collect()
}

impl Request {
    /// What an earlier release that closed this request unanswered understands instead:
    /// `queue` (every release with pools), then `wait` (every release).
    fn plainer(self) -> Request {
        match self {
            Request::Front { .. } => Request::Queue,
            Request::Queue | Request::Place => Request::Wait,
            other => other,
        }
    }
}

/// Whether a client asking `want` is answered by a waiter at `place` in line (if known).
fn reached(want: Option<Request>, place: Option<usize>) -> bool {
    matches!((want, place), (Some(Request::Front { within }), Some(p)) if p <= within as usize)
}

/// The pause before the next look, after looks in a row that found nothing to sleep on.
#[derive(Default)]
pub(super) struct Calm {
    next: Option<Duration>,
    last: Duration,
}

impl Calm {
    /// The look found nothing to sleep on: pause before the next, longer than last time.
    pub(super) fn more(&mut self) {
        self.last = if self.last.is_zero() { SETTLE } else { (self.last * 2).min(CALM_MAX) };
        self.next = Some(self.last);
    }

    /// The pause due before this look, if any.
    pub(super) fn pause(&mut self) -> Option<Duration> {
        self.next.take()
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
pub(super) fn connect(store: &Store, t: Token, request: Request) -> Option<UnixStream> {
    let addr = socket_addr(&store.socket_path(t)).ok()?;
    let mut stream = UnixStream::connect(&addr.path).ok()?;
    stream.write_all(request.line().as_bytes()).ok()?;
    Some(stream)
}

/// What a waiter in a pool's line waits for, as a halt's note says it.
const A_PLACE: &str = "a place";

/// How a sleep ended.
pub(super) enum Slept {
    /// Something came: an answer or the end of a watched connection (those that closed
    /// unanswered, by index), a change to the agents file, or the time given.
    Woke { closed: Vec<usize> },
    /// A halt or a stop signal came: why.
    Halted(String),
}

/// What came on a watched connection.
#[derive(PartialEq, Eq)]
enum Heard {
    Answered,
    Closed,
}

/// Read what a watched connection that polled ready has.
fn hear(stream: &UnixStream) -> Heard {
    let mut buf = [0u8; 64];
    let _ = stream.set_nonblocking(true);
    match (&*stream).read(&mut buf) {
        Ok(n) if n > 0 => Heard::Answered,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Heard::Answered,
        _ => Heard::Closed,
    }
}

/// Sleep until a watched connection has something (an answer, or its end), the agents file
/// changes, or `until`, serving clients meanwhile (as a waiter at `place` in line, if known).
pub(super) fn sleep_on(
    streams: &[UnixStream],
    mut agents: Option<&mut AgentsFile>,
    signals: &SignalFd,
    clients: &mut Clients,
    place: Option<usize>,
    until: Option<Instant>,
    waits_for: &str,
) -> Slept {
    loop {
        // A waiter holds no place: asked, it says so at once.
        clients.answer(|want| want == Some(Request::Place) || reached(want, place));
        let now = Instant::now();
        if until.is_some_and(|t| now >= t) {
            return Slept::Woke { closed: Vec::new() };
        }
        let look_at = agents.as_ref().and_then(|a| a.look_at());
        let timeout = [clients.wake_at(), until, look_at].into_iter().flatten().min().map_or(PollTimeout::NONE, |t| {
            // Rounded up, so that a timer is never found not yet due on waking.
            let ms = t.saturating_duration_since(now).as_micros().div_ceil(1000).min(60_000) as u16;
            PollTimeout::from(ms)
        });
        let (heard, file_ready, signalled, served): (Vec<Option<Heard>>, bool, bool, Vec<bool>) = {
            let file = agents.as_ref().and_then(|a| a.fd());
            let mut fds = vec![PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
            fds.extend(streams.iter().map(|s| PollFd::new(s.as_fd(), PollFlags::POLLIN)));
            fds.extend(file.map(|f| PollFd::new(f, PollFlags::POLLIN)));
            fds.extend(clients.poll_fds());
            if poll(&mut fds, timeout).is_err() {
                continue;
            }
            let ready: Vec<bool> = fds.iter().map(|f| f.revents().is_some_and(|r| !r.is_empty())).collect();
            let n = streams.len();
            let watched = n + usize::from(file.is_some());
            let heard = streams.iter().zip(&ready[1..=n]).map(|(s, &r)| r.then(|| hear(s))).collect();
            (heard, file.is_some() && ready[watched], ready[0], ready[watched + 1..].to_vec())
        };
        let changed = agents.as_mut().is_some_and(|a| a.changed(file_ready));
        if signalled {
            while let Ok(Some(info)) = signals.read_signal() {
                if let Ok(s @ (Signal::SIGTERM | Signal::SIGINT)) = Signal::try_from(info.ssi_signo as i32) {
                    return Slept::Halted(format!("the supervisor received {s} while the task waited for {waits_for}"));
                }
            }
        }
        if !clients.serve(&served).is_empty() {
            return Slept::Halted(format!("halted while it waited for {waits_for}; it never ran"));
        }
        if changed || heard.iter().any(Option::is_some) {
            let closed = heard.iter().enumerate().filter(|(_, h)| **h == Some(Heard::Closed)).map(|(i, _)| i);
            return Slept::Woke { closed: closed.collect() };
        }
    }
}
