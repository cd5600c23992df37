//! The supervisor's side of its control socket: the listener and the clients connected to it,
//! taken and read without blocking, and kept from spinning when descriptors run out.

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags};

use super::control::{ACK, CLOSED, DONE, MAX_SAY, Request, parse_say};

/// The listener's backlog (what std's `UnixListener::bind` asks for).
const LISTEN_BACKLOG: usize = 128;

/// How long the listener is left alone while the supervisor is out of descriptors.
const LISTEN_PAUSE: Duration = Duration::from_millis(250);

/// Descriptors kept in reserve: as many as recording the end holds open at once, and more.
const SPARE: usize = 4;

/// The listener and its clients.
pub(super) struct Clients {
    listener: UnixListener,
    list: Vec<Client>,
    /// Descriptors held in reserve (on /dev/null), given up when all others are in use: one to
    /// take a connection, all of them to record the end.
    spare: Vec<File>,
    /// Out of descriptors: when to look at the listener again (until then it is not polled).
    listen_again: Option<Instant>,
    /// Whether the agent takes messages (`say`) now: its input is open.
    pub takes_messages: bool,
    /// The messages taken for the agent, in order, for the supervisor to give it.
    pub said: Vec<String>,
}

/// Bind a task's control socket at `path` (however long its directory's path) and listen:
/// connections queue there until its supervisor takes them.
pub(super) fn bind(path: &Path) -> crate::error::Result<UnixListener> {
    use crate::error::IoContext;
    let what = || format!("cannot listen on {}", path.display());
    let addr = super::control::socket_addr(path).ctx(what)?;
    let listener = UnixListener::bind(&addr.path).ctx(what)?;
    // 0600 like every file of the home, by its name: the umask is the whole process's (the MCP
    // server's other threads make files meanwhile), and the task's directory (0700) keeps
    // everyone else out until then.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&addr.path, std::fs::Permissions::from_mode(0o600)).ctx(what)?;
    Ok(listener)
}

struct Client {
    stream: UnixStream,
    buf: Vec<u8>,
    want: Option<Request>,
}

impl Clients {
    /// Take connections on `listener` (bound by `bind`).
    pub fn new(listener: UnixListener) -> std::io::Result<Clients> {
        listener.set_nonblocking(true)?;
        let spare = (0..SPARE).filter_map(|_| File::open("/dev/null").ok()).collect();
        Ok(Clients { listener, list: Vec::new(), spare, listen_again: None, takes_messages: false, said: Vec::new() })
    }

    /// When the paused listener is to be looked at again, if it is paused.
    pub fn wake_at(&mut self) -> Option<Instant> {
        if self.listen_again.is_some_and(|t| Instant::now() >= t) {
            self.listen_again = None;
        }
        self.listen_again
    }

    /// What to poll: the listener (without POLLIN while paused, so that a connection it cannot
    /// take does not wake us in a loop), then each client.
    pub fn poll_fds(&self) -> Vec<PollFd<'_>> {
        let listening = if self.listen_again.is_some() { PollFlags::empty() } else { PollFlags::POLLIN };
        std::iter::once(PollFd::new(self.listener.as_fd(), listening))
            .chain(self.list.iter().map(|c| PollFd::new(c.stream.as_fd(), PollFlags::POLLIN)))
            .collect()
    }

    /// Serve what `poll_fds` found ready (`ready[0]` the listener, then the clients); returns
    /// the grace periods of the halts asked for.
    pub fn serve(&mut self, ready: &[bool]) -> Vec<Duration> {
        let mut halts = Vec::new();
        // Clients first: `ready` covers only those that were polled.
        for i in (0..ready.len().saturating_sub(1).min(self.list.len())).rev() {
            if ready[i + 1] && !self.read(i, &mut halts) {
                self.list.swap_remove(i);
                // A descriptor came free.
                self.listen_again = None;
            }
        }
        if ready.first() == Some(&true) {
            self.accept(&mut halts);
        }
        halts
    }

    fn accept(&mut self, halts: &mut Vec<Duration>) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if stream.set_nonblocking(true).is_ok() {
                        self.list.push(Client { stream, buf: Vec::new(), want: None });
                    }
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    return self.at_descriptor_limit(halts);
                }
                Err(_) => return,
            }
        }
    }

    /// Out of descriptors, with connections waiting: the listener stays readable, and polling
    /// it would return at once, forever. Take the waiting connections one by one with a spare
    /// descriptor, note a halt one asks for, close them (their clients come again), and leave
    /// the listener alone until a client goes or a moment has passed.
    fn at_descriptor_limit(&mut self, halts: &mut Vec<Duration>) {
        self.spare.pop();
        // At most a backlog's worth at a time: closed clients come again at once.
        for _ in 0..LISTEN_BACKLOG {
            let Ok((mut stream, _)) = self.listener.accept() else { break };
            // Its client wrote its request as it connected.
            let _ = stream.set_read_timeout(Some(Duration::from_millis(20)));
            let mut buf = [0u8; 64];
            let n = stream.read(&mut buf).unwrap_or(0);
            let line = String::from_utf8_lossy(&buf[..n]);
            if let Some(Request::Halt { grace }) = line.lines().next().and_then(Request::parse) {
                let _ = stream.write_all(ACK);
                halts.push(grace);
            }
        }
        self.spare.extend(File::open("/dev/null").ok());
        self.listen_again = Some(Instant::now() + LISTEN_PAUSE);
    }

    /// Read from client `i`; false when it should be dropped.
    fn read(&mut self, i: usize, halts: &mut Vec<Duration>) -> bool {
        let mut chunk = [0u8; 4096];
        let c = &mut self.list[i];
        match c.stream.read(&mut chunk) {
            Ok(0) => return false,
            Ok(n) => c.buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
            Err(_) => return false,
        }
        // Only a message may be long.
        let most = if c.buf.starts_with(b"say ") { MAX_SAY } else { 1024 };
        if c.want.is_some() || c.buf.len() > most {
            return c.buf.len() <= most;
        }
        let Some(end) = memchr::memchr(b'\n', &c.buf) else {
            return true;
        };
        if let Some(said) = parse_say(&c.buf[..end]) {
            // Answered at once, then dropped.
            let _ = c.stream.set_nonblocking(false);
            match said {
                Ok(text) if self.takes_messages => {
                    self.said.push(text);
                    let _ = c.stream.write_all(ACK);
                }
                _ => drop(c.stream.write_all(CLOSED)),
            }
            return false;
        }
        let req = Request::parse(&String::from_utf8_lossy(&c.buf[..end]));
        c.want = req;
        match req {
            Some(Request::Halt { grace }) => {
                // Taken: the halting client now knows this supervisor is at work on it.
                let _ = c.stream.write_all(ACK);
                halts.push(grace);
                true
            }
            Some(Request::Wait | Request::Queue | Request::Front { .. } | Request::Place) => true,
            None => false,
        }
    }

    /// Send `done` to (and drop) the clients whose request matches.
    pub fn answer(&mut self, matches: impl Fn(Option<Request>) -> bool) {
        self.list.retain_mut(|c| {
            if matches(c.want) {
                let _ = c.stream.set_nonblocking(false);
                let _ = c.stream.write_all(DONE);
                false
            } else {
                true
            }
        });
    }

    /// Give the reserved descriptors back, for recording the end.
    pub fn release_spares(&mut self) {
        self.spare.clear();
    }
}
