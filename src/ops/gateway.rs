//! The client's side of a sandboxed agent's road to its lead: the agent sees nothing of the
//! home, so its `agentctl ask-lead`, `notify` and `inbox` ask its supervisor instead, outside
//! the sandbox (`supervisor::gateway` serves them). The road is a `SOCK_SEQPACKET` socket the
//! agent inherits (descriptor `AGENTCTL_GATEWAY_FD`): each call sends it one end of a fresh
//! `socketpair` (which the sandbox allows, where it refuses `socket(AF_UNIX)`), writes its
//! request on the other end, and reads the answer there.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::task::Event;

/// The variable that names the agent's end of the road.
pub const FD_VARIABLE: &str = "AGENTCTL_GATEWAY_FD";

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
fn call(call: &Call) -> Result<Answer> {
    let var = std::env::var(FD_VARIABLE).unwrap_or_default();
    let fd: RawFd = var.parse().map_err(|_| Error::Usage(format!("{FD_VARIABLE}={var} names no descriptor")))?;
    let lost = |e: &dyn std::fmt::Display| {
        Error::Usage(format!(
            "cannot reach this task's supervisor through its sandbox's descriptor {fd} ({e}): the agent \
             may have closed it for the commands it runs"
        ))
    };
    let (mut mine, give) = UnixStream::pair().map_err(|e| lost(&e))?;
    crate::supervisor::road::send(fd, b"c", &[give.as_raw_fd()]).map_err(|e| lost(&e))?;
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

/// `ops::ask_lead`, through the road.
pub fn ask_lead(text: String, choices: Vec<String>, limit: Option<std::time::Duration>) -> Result<super::Asked> {
    let timeout_ms = limit.map(|d| d.as_millis() as u64);
    match call(&Call::AskLead { text, choices, timeout_ms })? {
        Answer::Answered(answer) => Ok(super::Asked::Answered(answer)),
        Answer::TimedOut => Ok(super::Asked::TimedOut),
        other => Err(unexpected("ask-lead", &other)),
    }
}

/// `ops::notify`, through the road: the event posted.
pub fn notify(session: Option<String>, question: bool, text: String) -> Result<Event> {
    event("notify", &Call::Notify { session, question, text })
}

/// `ops::inbox`, through the road: the message read (delivered once written to the caller).
pub fn inbox(wait: std::time::Duration) -> Result<Event> {
    event("inbox", &Call::Inbox { wait_ms: wait.as_millis() as u64 })
}

fn event(what: &str, c: &Call) -> Result<Event> {
    match call(c)? {
        Answer::Event(e) => Ok(*e),
        other => Err(unexpected(what, &other)),
    }
}

fn unexpected(what: &str, answer: &Answer) -> Error {
    Error::Internal(format!("the sandbox's supervisor answered {what} with {answer:?}"))
}
