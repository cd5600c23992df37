//! A sandbox's network allow-list made real. The agent has a network namespace of its own,
//! with only a loopback; the supervisor, outside, is its only way out:
//! - each allowed `host:port` on this machine's loopback (`127.0.0.1:8080`, `localhost:8080`)
//!   is reached at the same address inside, forwarded to the real one outside;
//!   each other one through an HTTP proxy (CONNECT, or a plain `http://` request) at
//!   `127.0.0.1:3128` inside, which the agent's `HTTPS_PROXY` and `HTTP_PROXY` name, and which
//!   lets through only what the list names.
//!
//! The listening sockets are made inside, where nothing else can make them, by `inside::enter`
//! (agentctl itself, which bubblewrap runs before the agent: it listens, hands the sockets to
//! the supervisor over an inherited descriptor, and executes the agent), and accepted outside:
//! a socket belongs to the network it was made in, whoever holds it.

mod inside;
mod proxy;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{OwnedFd, RawFd};
use std::sync::Mutex;

pub use inside::{COMMAND, enter};

use super::slots::Slots;
use crate::task::{Endpoint, Network, Sandbox};

/// The first port a process without capabilities may listen on (a new network's
/// `net.ipv4.ip_unprivileged_port_start`).
const UNPRIVILEGED: u16 = 1024;

/// What a sandbox with an allow-list listens on inside, and where each goes.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The proxy's address inside.
    pub proxy: SocketAddr,
    /// Addresses forwarded as they are to the same address outside.
    forwards: Vec<SocketAddr>,
    allowed: Vec<Endpoint>,
    /// The list as the profile wrote it.
    entries: Vec<String>,
    /// Whether every loopback entry is forwarded (none is under 1024): then clients go to the
    /// loopback directly, not through the proxy.
    direct_loopback: bool,
}

impl Plan {
    /// The plan of `sandbox`'s network: none unless it has an allow-list.
    pub fn of(sandbox: &Sandbox) -> Option<Plan> {
        let Network::Allow(entries) = &sandbox.network else { return None };
        // Checked when the task was made.
        let allowed = crate::task::endpoints(entries).ok()?;
        // Not a port under 1024: the agent may not listen there in its network (it has no
        // capability over it), so those it reaches through the proxy alone.
        let loopback: Vec<SocketAddr> = allowed.iter().flat_map(Endpoint::on_loopback).collect();
        let direct_loopback = loopback.iter().all(|a| a.port() >= UNPRIVILEGED);
        let mut forwards: Vec<SocketAddr> = loopback.into_iter().filter(|a| a.port() >= UNPRIVILEGED).collect();
        forwards.sort();
        forwards.dedup();
        // The proxy's usual port, or the next one the list leaves free.
        let port = (3128..).find(|p| !forwards.iter().any(|f| f.port() == *p)).unwrap_or(3128);
        let proxy = SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port);
        Some(Plan { proxy, forwards, allowed, entries: entries.clone(), direct_loopback })
    }

    /// Every address to listen on inside, the proxy's first.
    pub fn listens(&self) -> Vec<SocketAddr> {
        std::iter::once(self.proxy).chain(self.forwards.iter().copied()).collect()
    }

    /// The variables that send the agent's HTTP clients to the proxy, and those for this
    /// machine's loopback straight to its forwards.
    pub fn environment(&self) -> Vec<(&'static str, String)> {
        let url = format!("http://{}", self.proxy);
        let proxied = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"];
        let mut vars: Vec<_> = proxied.map(|n| (n, url.clone())).into();
        if self.direct_loopback {
            vars.extend(["NO_PROXY", "no_proxy"].map(|n| (n, "localhost,127.0.0.1,::1".to_owned())));
        }
        vars
    }

    /// The list, for a refusal's words.
    fn allowed_line(&self) -> String {
        self.entries.join(", ")
    }

    /// Whether the list lets the agent reach `host:port`: by an entry naming it, or only by a
    /// wildcard (`*.example.com`), whose names may not lead to this machine's own addresses.
    fn admits(&self, host: &str, port: u16) -> Option<Admitted> {
        let mut by = self.allowed.iter().filter(|e| e.admits(host, port));
        let first = by.next()?;
        match first.is_wildcard() && by.all(Endpoint::is_wildcard) {
            true => Some(Admitted::ByWildcard),
            false => Some(Admitted::Named),
        }
    }

    /// Where a connection to the loopback address `at` inside goes outside: there, and for a
    /// `localhost` entry, the other loopback address after it (a service listening on one).
    fn targets(&self, at: SocketAddr) -> Vec<SocketAddr> {
        let mut to = vec![at];
        if self.allowed.iter().any(|e| e.is_localhost() && e.port == at.port()) {
            let other: IpAddr = match at.is_ipv4() {
                true => Ipv6Addr::LOCALHOST.into(),
                false => Ipv4Addr::LOCALHOST.into(),
            };
            to.push(SocketAddr::new(other, at.port()));
        }
        to
    }
}

/// How the list admitted a host.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Admitted {
    Named,
    ByWildcard,
}

/// The most connections of the agent's served at once (each two threads and four descriptors).
static CONNECTIONS: Slots = Slots::new(256);

/// Open the road `inside::enter` hands its listening sockets back on: the end the agent's
/// process inherits; a thread takes them at the other and serves each from then on.
pub(super) fn open(plan: Plan) -> std::io::Result<OwnedFd> {
    let (ours, theirs) = super::road::open()?;
    std::thread::Builder::new().name("network".into()).spawn(move || take(&plan, &ours))?;
    Ok(theirs)
}

/// Take the sockets `inside::enter` made (its one message: their addresses, comma-separated,
/// and the descriptors in the same order) and accept on each.
fn take(plan: &Plan, ours: &OwnedFd) {
    let mut text = vec![0u8; 16 * 1024];
    let mut space = nix::cmsg_space!([RawFd; inside::MAX_LISTENS]);
    let Some((length, sockets)) = super::road::receive(ours, &mut text, &mut space) else { return };
    let text = String::from_utf8_lossy(&text[..length]).into_owned();
    for (addr, socket) in text.split(',').zip(sockets) {
        let Ok(addr) = addr.parse::<SocketAddr>() else { continue };
        let listener = TcpListener::from(socket);
        let plan = plan.clone();
        let to = match addr == plan.proxy {
            true => None,
            false if plan.forwards.contains(&addr) => Some(addr),
            false => continue,
        };
        let _ = std::thread::Builder::new().name("network".into()).spawn(move || accept(&plan, &listener, to));
    }
}

/// Accept the agent's connections on `listener` for as long as it has any: each forwarded
/// to `to`, or served by the proxy.
fn accept(plan: &Plan, listener: &TcpListener, to: Option<SocketAddr>) {
    loop {
        let conn = match listener.accept() {
            Ok((conn, _)) => conn,
            // Not a listener any more: nothing more comes.
            Err(e) if [libc::EBADF, libc::EINVAL, libc::ENOTSOCK].map(Some).contains(&e.raw_os_error()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // Out of descriptors or memory, or a connection gone before it was taken: later.
            Err(_) => {
                std::thread::sleep(std::time::Duration::from_millis(50));
                continue;
            }
        };
        // Over the limit, it is closed at once.
        let plan = plan.clone();
        CONNECTIONS.spawn("network", move || match to {
            Some(at) => {
                if let Ok(out) = TcpStream::connect(&plan.targets(at)[..]) {
                    proxy::relay(conn, out, &[]);
                }
            }
            None => proxy::serve(&plan, conn),
        });
    }
}

/// The connections the proxy refused: how many, and the first few places they were for.
static REFUSED: Mutex<(usize, Vec<String>)> = Mutex::new((0, Vec::new()));

fn refused(target: &str) {
    let mut r = REFUSED.lock().unwrap_or_else(|e| e.into_inner());
    r.0 += 1;
    if r.1.len() < 3 && !r.1.iter().any(|t| t == target) {
        r.1.push(target.to_owned());
    }
}

/// The task's note on what its allow-list refused, if it refused anything.
pub fn refusals() -> Option<String> {
    let r = REFUSED.lock().unwrap_or_else(|e| e.into_inner());
    (r.0 > 0).then(|| format!("its sandbox's network allow-list refused {} connection(s), to {}", r.0, r.1.join(", ")))
}
