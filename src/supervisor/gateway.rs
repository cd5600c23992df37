//! A sandboxed agent's road to its lead. The agent sees nothing of the home, so its `agentctl
//! ask-lead`, `notify` and `inbox` cannot reach the store: they come to its supervisor instead,
//! outside the sandbox, which asks, posts and reads for that task alone. The road is a
//! `SOCK_SEQPACKET` socket the agent inherits (descriptor `AGENTCTL_GATEWAY_FD`): each call
//! sends it one end of a fresh `socketpair` (which the sandbox allows, where it refuses
//! `socket(AF_UNIX)`), writes its request on the other end, and reads the answer there.

use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg, sendmsg, socketpair,
};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::ops;
use crate::store::Store;
use crate::task::{Event, Token};

/// The variable that names the agent's end of the road.
pub const FD_VARIABLE: &str = "AGENTCTL_GATEWAY_FD";

/// The largest request taken (a message is at most `ops::MAX_MESSAGE`).
const MAX_REQUEST: u64 = 1 << 20;

/// What an agent in a sandbox asks of its supervisor.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "call", rename_all = "snake_case")]
pub enum Call {
    AskLead { text: String, choices: Vec<String>, timeout_ms: Option<u64> },
    Notify { session: Option<String>, question: bool, text: String },
    Inbox { wait_ms: u64 },
}

/// Its answer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    Answered(String),
    TimedOut,
    Event(Box<Event>),
    Refused(String),
}

/// Whether this process runs in a sandbox with a road to its supervisor.
pub fn inside() -> bool {
    std::env::var_os(FD_VARIABLE).is_some()
}

/// Ask the supervisor (from inside the sandbox).
pub fn call(call: &Call) -> Result<Answer> {
    let var = std::env::var(FD_VARIABLE).unwrap_or_default();
    let fd: RawFd = var.parse().map_err(|_| Error::Usage(format!("{FD_VARIABLE}={var} names no descriptor")))?;
    let lost = |e: &dyn std::fmt::Display| {
        Error::Usage(format!(
            "cannot reach this task's supervisor through its sandbox's descriptor {fd} ({e}): the agent \
             may have closed it for the commands it runs"
        ))
    };
    let (mut mine, give) = UnixStream::pair().map_err(|e| lost(&e))?;
    sendmsg::<()>(
        fd,
        &[IoSlice::new(b"c")],
        &[ControlMessage::ScmRights(&[give.as_raw_fd()])],
        MsgFlags::empty(),
        None,
    )
    .map_err(|e| lost(&e))?;
    drop(give);
    let body = serde_json::to_vec(call).map_err(|e| Error::Internal(e.to_string()))?;
    mine.write_all(&body).and_then(|()| mine.shutdown(std::net::Shutdown::Write)).map_err(|e| lost(&e))?;
    let mut answer = Vec::new();
    mine.read_to_end(&mut answer).map_err(|e| lost(&e))?;
    match serde_json::from_slice(&answer).map_err(|e| lost(&e))? {
        Answer::Refused(why) => Err(Error::Usage(why)),
        a => Ok(a),
    }
}

/// The road of a task whose spec has a sandbox (none otherwise), for `spawn_agent`.
pub(super) fn for_run(
    store: &Store,
    token: Token,
    spec: &crate::task::TaskSpec,
) -> std::result::Result<Option<OwnedFd>, String> {
    match spec.sandbox {
        Some(_) => open(store, token).map(Some).map_err(|e| format!("cannot open its sandbox's road to the lead: {e}")),
        None => Ok(None),
    }
}

/// Open task `token`'s road: the end its agent inherits (the supervisor closes its own copy once
/// the agent has it); a thread serves the other until every copy of it is closed.
pub(super) fn open(store: &Store, token: Token) -> std::io::Result<OwnedFd> {
    let (ours, theirs) = socketpair(AddressFamily::Unix, SockType::SeqPacket, None, SockFlag::SOCK_CLOEXEC)?;
    nix::fcntl::fcntl(&theirs, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()))?;
    let store = store.clone();
    std::thread::Builder::new().name("gateway".into()).spawn(move || serve(&store, token, &ours))?;
    Ok(theirs)
}

fn serve(store: &Store, token: Token, ours: &OwnedFd) {
    loop {
        let mut byte = [0u8; 1];
        let mut iov = [IoSliceMut::new(&mut byte)];
        let mut space = nix::cmsg_space!([RawFd; 1]);
        let received = match recvmsg::<()>(ours.as_raw_fd(), &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC) {
            Ok(m) => m,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
        };
        if received.bytes == 0 {
            return;
        }
        let fds: Vec<RawFd> = received
            .cmsgs()
            .into_iter()
            .flatten()
            .filter_map(|c| match c {
                ControlMessageOwned::ScmRights(fds) => Some(fds),
                _ => None,
            })
            .flatten()
            .collect();
        // SAFETY: each descriptor was just received, so it is ours alone.
        let mut conns = fds.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) });
        let Some(conn) = conns.next() else { continue };
        let store = store.clone();
        std::thread::spawn(move || answer(&store, token, UnixStream::from(conn)));
    }
}

/// Read one call from `conn`, do it for task `token`, and write the answer.
fn answer(store: &Store, token: Token, mut conn: UnixStream) {
    let mut body = Vec::new();
    if (&conn).take(MAX_REQUEST).read_to_end(&mut body).is_err() {
        return;
    }
    // Timers only: building an I/O driver fails in the supervisor (EPERM), and the waits here
    // need none (the store's bells are watched by a thread of their own).
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_time().build() else { return };
    let holder = ops::Holder::new(0);
    let answer = match serde_json::from_slice::<Call>(&body) {
        Ok(call) => rt.block_on(run(store, token, call, &holder)),
        Err(e) => Err(Error::Usage(format!("the sandbox's supervisor cannot read that call: {e}"))),
    };
    let answer = answer.unwrap_or_else(|e| Answer::Refused(e.message(crate::error::Frontend::Cli)));
    let sent = serde_json::to_vec(&answer).map_err(std::io::Error::other).and_then(|b| conn.write_all(&b));
    // A message the inbox took reached its reader only if its answer was written.
    if let Answer::Event(_) = &answer {
        let _ = match sent {
            Ok(()) => ops::delivered(store, &holder, None),
            Err(_) => ops::undelivered(store, &holder, None),
        };
    }
}

async fn run(store: &Store, token: Token, call: Call, holder: &ops::Holder) -> Result<Answer> {
    let rec = ops::running_task(store, token)?;
    Ok(match call {
        Call::AskLead { text, choices, timeout_ms } => {
            match ops::ask_lead_as(store, rec, &text, &choices, timeout_ms.map(Duration::from_millis)).await? {
                ops::Asked::Answered(a) => Answer::Answered(a),
                ops::Asked::TimedOut => Answer::TimedOut,
            }
        }
        Call::Notify { session, question, text } => {
            let notice = ops::notice_from(Some(rec), session.as_deref(), question)?;
            Answer::Event(Box::new(store.events().append(ops::worded(notice, &text)?)?))
        }
        Call::Inbox { wait_ms } => {
            Answer::Event(Box::new(ops::inbox_of(store, token, Duration::from_millis(wait_ms), holder).await?))
        }
    })
}
