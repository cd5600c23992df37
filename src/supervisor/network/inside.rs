//! What runs first in a sandbox with an allow-list, inside its network, before the agent:
//! `agentctl __sandbox-net FD ADDR,ADDR… -- PROGRAM ARGS…` listens on each address, hands the
//! sockets to the supervisor over descriptor FD (one message: the addresses, comma-separated,
//! with the descriptors in the same order), closes its own copies and FD, and executes the
//! agent in its place (the same process, so that a halt reaches it as it reaches any agent).

use std::ffi::{CString, OsString};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStringExt;

/// The hidden command's name.
pub const COMMAND: &str = "__sandbox-net";

/// The most sockets one message hands over (the kernel's `SCM_MAX_FD`).
pub const MAX_LISTENS: usize = 253;

/// Do it, with `args` the words after the command's name; never returns (a failure says why
/// on stderr, the task's output, and exits 126, as a program that cannot start does).
pub fn enter(args: Vec<OsString>) -> ! {
    let Err(why) = listen_and_exec(args);
    eprintln!("agentctl: cannot set up the sandbox's network: {why}");
    std::process::exit(126)
}

fn listen_and_exec(args: Vec<OsString>) -> Result<std::convert::Infallible, String> {
    let usage = || format!("usage: agentctl {COMMAND} FD ADDR,ADDR… -- PROGRAM ARGS…");
    let mut words = args.into_iter();
    let fd: RawFd = words.next().and_then(|w| w.into_string().ok()?.parse().ok()).ok_or_else(usage)?;
    let addrs = words.next().and_then(|w| w.into_string().ok()).ok_or_else(usage)?;
    if words.next().is_none_or(|w| w != "--") {
        return Err(usage());
    }
    let program: Vec<CString> = words
        .map(|w| CString::new(w.into_vec()).map_err(|_| "a NUL byte in an argument".to_owned()))
        .collect::<Result<_, _>>()?;
    let Some(name) = program.first() else { return Err(usage()) };
    let mut bound = Vec::new();
    let mut said = Vec::new();
    for addr in addrs.split(',').filter(|a| !a.is_empty()).take(MAX_LISTENS) {
        let at: SocketAddr = addr.parse().map_err(|_| format!("`{addr}` is no address"))?;
        match TcpListener::bind(at) {
            Ok(l) => {
                bound.push(l);
                said.push(addr);
            }
            // A loopback without IPv6: `localhost` is then 127.0.0.1 alone.
            Err(_) if at.is_ipv6() => {}
            Err(e) => return Err(format!("cannot listen on {at}: {e}")),
        }
    }
    let fds: Vec<RawFd> = bound.iter().map(|l| l.as_raw_fd()).collect();
    let text = said.join(",");
    crate::supervisor::road::send(fd, text.as_bytes(), &fds)
        .map_err(|e| format!("cannot hand its sockets to the supervisor: {e}"))?;
    drop(bound);
    let _ = nix::unistd::close(fd);
    let Err(e) = nix::unistd::execvp(name, &program);
    Err(format!("cannot run `{}`: {e}", name.to_string_lossy()))
}
