//! The agent's stdin, for an agent that reads user messages while it runs (`TaskSpec::input`):
//! a pipe whose other end is its descriptor 0. The question goes first; each message `send`
//! brings after it. Writes never block the supervisor: what the pipe cannot take now waits
//! here until it can. The pipe is closed, which ends the agent's input, once its stream says
//! it took every message written and answered the last (`Seen::input`): an agent that reads
//! its stdin waits for more until then.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};

use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags};

use crate::agent::stream;

/// The supervisor's end of the agent's stdin.
pub(super) struct Input {
    /// None once closed.
    pipe: Option<File>,
    /// What the pipe has not taken yet.
    waiting: Vec<u8>,
    /// How many messages were given to it (the question counts).
    written: u64,
}

impl Input {
    /// A pipe holding `first`; the other end is for the agent.
    pub fn open(first: &str) -> io::Result<(Input, OwnedFd)> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        nix::fcntl::fcntl(&write, nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
        let mut input = Input { pipe: Some(File::from(write)), waiting: Vec::new(), written: 0 };
        input.say(first);
        Ok((input, read))
    }

    /// The input of a run of `spec`'s agent, if it reads messages: the supervisor's end, and the
    /// agent's.
    pub fn for_run(spec: &crate::task::TaskSpec) -> Result<(Option<Input>, Option<OwnedFd>), String> {
        match &spec.input {
            Some(first) => {
                let (input, read) = Input::open(first).map_err(|e| format!("cannot make the agent's stdin: {e}"))?;
                Ok((Some(input), Some(read)))
            }
            None => Ok((None, None)),
        }
    }

    /// Whether more messages may still be written.
    pub fn is_open(&self) -> bool {
        self.pipe.is_some()
    }

    /// Give the agent `line` (one message, as it reads it), after what it was given before.
    pub fn say(&mut self, line: &str) {
        if self.pipe.is_some() {
            self.waiting.extend_from_slice(line.as_bytes());
            self.written += 1;
            self.flush();
        }
    }

    /// Write what the pipe takes now. An agent that closed its stdin takes nothing more.
    pub fn flush(&mut self) {
        let Some(pipe) = self.pipe.as_mut() else { return };
        while !self.waiting.is_empty() {
            match pipe.write(&self.waiting) {
                Ok(n) => drop(self.waiting.drain(..n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return self.close(),
            }
        }
    }

    /// What to poll: the pipe, while it has something to take.
    pub fn poll_fd(&self) -> Option<PollFd<'_>> {
        let pipe = self.pipe.as_ref().filter(|_| !self.waiting.is_empty())?;
        Some(PollFd::new(pipe.as_fd(), PollFlags::POLLOUT))
    }

    /// Close the pipe once the agent has taken every message written and answered since. An
    /// agent that answered without saying it took anything (a version that does not write its
    /// messages back) is taken to have read all it was given.
    pub fn close_when_answered(&mut self, read: stream::Input) {
        let taken = read.taken >= self.written || read.taken == 0;
        if self.pipe.is_some() && self.waiting.is_empty() && taken && read.answered {
            self.close();
        }
    }

    /// End the agent's input.
    pub fn close(&mut self) {
        self.pipe = None;
        self.waiting.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn messages_wait_for_a_full_pipe_and_the_pipe_closes_once_all_are_answered() {
        let (mut input, read) = Input::open("first\n").unwrap();
        let mut agent = File::from(read);
        // More than a pipe holds: the rest waits, and the supervisor never blocks.
        let long = "x".repeat(200 * 1024) + "\n";
        input.say(&long);
        assert!(input.poll_fd().is_some());
        let mut got = Vec::new();
        let mut buf = vec![0; 64 * 1024];
        while got.len() < 6 + long.len() {
            let n = agent.read(&mut buf).unwrap();
            got.extend_from_slice(&buf[..n]);
            input.flush();
        }
        assert_eq!(got, [b"first\n".as_slice(), long.as_bytes()].concat());
        assert!(input.poll_fd().is_none());
        // One taken of two, or both taken but the last not answered: it stays open.
        input.close_when_answered(stream::Input { taken: 1, answered: true });
        input.close_when_answered(stream::Input { taken: 2, answered: false });
        input.close_when_answered(stream::Input { taken: 0, answered: false });
        assert!(input.is_open());
        input.close_when_answered(stream::Input { taken: 2, answered: true });
        assert!(!input.is_open());
        assert_eq!(agent.read(&mut buf).unwrap(), 0, "the agent reads the end of its input");
        // Closed: a message is not taken.
        input.say("late\n");
        assert_eq!(input.written, 2);
    }

    #[test]
    fn an_agent_that_closed_its_stdin_closes_the_input() {
        let (mut input, read) = Input::open("first\n").unwrap();
        drop(read);
        input.say("more\n");
        assert!(!input.is_open());
    }
}
