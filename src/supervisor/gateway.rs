//! The supervisor's side of a sandboxed agent's road to its lead (`ops::gateway` is the
//! agent's): it serves the calls of the agent's `ask-lead`, `notify` and `inbox`, outside the
//! sandbox, asking, posting and reading for that task alone.

use std::io::{Read, Write};
use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use super::slots::Slots;
use crate::error::{Error, Result};
use crate::ops;
use crate::ops::gateway::{Answer, Call};
use crate::store::Store;
use crate::task::Token;

/// The largest request taken (a message is at most `ops::MAX_MESSAGE`).
const MAX_REQUEST: u64 = 1 << 20;

/// Open task `token`'s road: the end its agent inherits (the supervisor closes its own copy once
/// the agent has it); a thread serves the other until every copy of it is closed.
pub(super) fn open(store: &Store, token: Token) -> std::io::Result<OwnedFd> {
    let (ours, theirs) = super::road::open()?;
    let store = store.clone();
    std::thread::Builder::new().name("gateway".into()).spawn(move || serve(&store, token, &ours))?;
    Ok(theirs)
}

fn serve(store: &Store, token: Token, ours: &OwnedFd) {
    loop {
        let mut byte = [0u8; 1];
        let mut space = nix::cmsg_space!([RawFd; 1]);
        let Some((length, fds)) = super::road::receive(ours, &mut byte, &mut space) else { return };
        if length == 0 {
            return;
        }
        let mut conns = fds.into_iter();
        let Some(conn) = conns.next() else { continue };
        // Over the limit, it is closed at once (its `agentctl` says it cannot reach the lead).
        let store = store.clone();
        CALLS.spawn("gateway", move || answer(&store, token, UnixStream::from(conn)));
    }
}

/// The most calls of the agent's served at once, and how long one may take to say what it asks.
static CALLS: Slots = Slots::new(64);
const REQUEST_TIME: Duration = Duration::from_secs(30);

/// Read one call from `conn`, do it for task `token`, and write the answer.
fn answer(store: &Store, token: Token, mut conn: UnixStream) {
    let mut body = Vec::new();
    let _ = conn.set_read_timeout(Some(REQUEST_TIME));
    if (&conn).take(MAX_REQUEST).read_to_end(&mut body).is_err() {
        return;
    }
    // Timers only: building an I/O driver fails in the supervisor (EPERM), and the waits here
    // need none (the store's bells are watched by a thread of their own).
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_time().build() else { return };
    let holder = ops::Holder::new(0);
    // The process that made the connection: the agent's agentctl.
    let peer = nix::sys::socket::getsockopt(&conn, nix::sys::socket::sockopt::PeerCredentials);
    let asker = peer.map_or_else(|_| ops::Holder::new(0), |c| ops::Holder::of_process(c.pid()));
    let answer = match serde_json::from_slice::<Call>(&body) {
        Ok(call) => rt.block_on(run(store, token, call, &holder, asker)),
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

async fn run(store: &Store, token: Token, call: Call, holder: &ops::Holder, asker: ops::Holder) -> Result<Answer> {
    let rec = ops::running_task(store, token)?;
    Ok(match call {
        Call::AskLead { text, choices, timeout_ms } => {
            // Asked by the agent's `ask-lead` (its pid as this side sees it): killed, it leaves
            // its question withdrawn, as outside a sandbox.
            let limit = timeout_ms.map(Duration::from_millis);
            match ops::ask_lead_as(store, rec, (&text, &choices), limit, asker).await? {
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
