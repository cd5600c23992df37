//! A queued task's supervisor waiting for a place in its pool, without polling and without a
//! daemon: it sleeps on sockets, and looks again only when something that can free a place
//! happens.
//!
//! - The first in line connects to the control socket of every task holding a place (`wait`):
//!   the answer comes when one ends, and the connection closes when one's supervisor dies.
//! - Every other waiter connects to the waiter just ahead of it (`queue`): the answer comes
//!   when that one leaves the line (it got its place, or it ended), and the connection closes
//!   if it dies.
//!
//! So one end wakes one waiter, and each wakes the next as it moves up. A holder or waiter
//! found dead (its lock free) is recorded `lost` on the spot, which frees its place. The
//! waiter meanwhile answers its own clients: `wait`, `queue`, and `halt`, which ends it
//! `cancelled` without ever starting the agent.

use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;
use nix::sys::signalfd::SignalFd;

use super::clients::Clients;
use super::control::{Request, socket_addr};
use super::launch::report;
use crate::agents::{Agents, DEFAULT_PARALLEL};
use crate::error::Result;
use crate::store::{Claim, FileLock, Store};
use crate::task::{TaskRecord, TaskSpec, Token};

/// How the wait ended.
pub(super) enum Waited {
    /// The task has its place: start the agent.
    Placed,
    /// It was halted (or its supervisor told to stop) while it waited: why.
    Halted(String),
}

/// How long to wait before looking again when no one could be watched (their supervisors
/// were between states: a holder ending, a waiter not listening yet).
const SETTLE: Duration = Duration::from_millis(20);

/// Wait until `rec` has a place in its pool. The first time it has to wait, the launcher is
/// told (`queued N`) and left.
pub(super) fn wait_for_place(
    store: &Store,
    rec: &mut TaskRecord,
    spec: &TaskSpec,
    signals: &SignalFd,
    clients: &mut Clients,
) -> Result<Waited> {
    let Some(pool) = &spec.pool else { return Ok(Waited::Placed) };
    let mut told = false;
    loop {
        // Read again each time: a changed `parallel` counts from the next look.
        let parallel = Agents::load(store.home(), pool.agents_file.as_deref())
            .map_or(DEFAULT_PARALLEL, |a| a.parallel(&pool.name));
        let (place, holders, ahead) = match store.claim(rec, &pool.name, parallel)? {
            Claim::Granted => {
                clients.answer(|want| want == Some(Request::Queue));
                return Ok(Waited::Placed);
            }
            Claim::Waiting { place, holders, ahead } => (place, holders, ahead),
        };
        // The ones it waits on must be alive: a dead one is recorded lost, freeing its place.
        let watched: Vec<Token> = if place == 1 { holders } else { ahead.into_iter().collect() };
        let dead: Vec<Token> = watched.iter().copied().filter(|&t| gone(store, t)).collect();
        if !dead.is_empty() {
            for t in dead {
                let _ = crate::ops::refresh(store, t);
            }
            continue;
        }
        if !told {
            report(&format!("queued {place}"));
            if let Ok(null) = std::fs::File::options().write(true).open("/dev/null") {
                let _ = nix::unistd::dup2_stdout(null);
            }
            told = true;
        }
        let request = if place == 1 { Request::Wait } else { Request::Queue };
        let streams: Vec<UnixStream> = watched.iter().filter_map(|&t| connect(store, t, request)).collect();
        if streams.is_empty() {
            // Nobody to watch right now (a holder was ending as we looked): look again soon.
            std::thread::sleep(SETTLE);
            continue;
        }
        if let Some(why) = sleep_on(&streams, signals, clients) {
            return Ok(Waited::Halted(why));
        }
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

/// Sleep until a watched connection has something (an answer, or its end), serving clients
/// meanwhile. `Some(why)` when a halt or a stop signal came instead.
fn sleep_on(streams: &[UnixStream], signals: &SignalFd, clients: &mut Clients) -> Option<String> {
    loop {
        let timeout = clients.wake_at().map_or(PollTimeout::NONE, |t| {
            let ms = t.saturating_duration_since(std::time::Instant::now()).as_millis().min(60_000) as u16;
            PollTimeout::from(ms)
        });
        let (watched, signalled, served): (bool, bool, Vec<bool>) = {
            let mut fds = vec![PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
            fds.extend(streams.iter().map(|s| PollFd::new(s.as_fd(), PollFlags::POLLIN)));
            fds.extend(clients.poll_fds());
            if poll(&mut fds, timeout).is_err() {
                continue;
            }
            let ready: Vec<bool> = fds.iter().map(|f| f.revents().is_some_and(|r| !r.is_empty())).collect();
            (ready[1..=streams.len()].iter().any(|&r| r), ready[0], ready[streams.len() + 1..].to_vec())
        };
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
        if watched {
            return None;
        }
    }
}
