//! The supervisor's life: spawn the agent, serve `wait`/`halt` on the control socket, notice
//! the agent's exit, end what it left behind, record the outcome once, exit. Where the agent
//! runs is its backend's business: the loop holds one (`super::backend`) and names none.

mod end;
mod leftovers;
mod pending;
mod retry;
mod start;

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;
use nix::sys::signalfd::SignalFd;
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid, waitpid};
use nix::unistd::Pid;

pub use start::supervise;
pub(super) use start::{Task, serve};

use super::backend::{self, Backend, Run};
use super::cgroup;
use super::clients::Clients;
use super::control::Request;
use super::input::Input;
use super::lock::Lock;
use super::logwatch::LogWatch;
use super::strays::Strays;
use super::unix::own_children;
use crate::store::Store;
use crate::task::{StopReason, TaskCgroup, TaskRecord, TaskSpec};

/// A task's cgroup as its supervisor holds it.
struct Contained {
    made: cgroup::Made,
    /// Its `cgroup.events`, polled: the last process leaving wakes the supervisor.
    events: Option<cgroup::Events>,
    /// What its limits had done when the current run started.
    since: cgroup::Counters,
    /// The task's processes found outside it, which `cgroup.kill` does not reach.
    strays: Strays,
}

/// A task's supervisor, for the task's whole life.
struct Supervisor {
    store: Store,
    rec: TaskRecord,
    spec: TaskSpec,
    /// Where the agent runs.
    backend: Box<dyn Backend>,
    signals: SignalFd,
    clients: Clients,
    /// The agent's stdin, while it reads messages there.
    input: Option<Input>,
    /// The run's process: the agent, or what runs it elsewhere.
    child: Pid,
    /// The task's own cgroup; none: its process group and our subreaping hold it together.
    contained: Option<Contained>,
    /// While its backend may hold the run pending.
    pending: Option<pending::Pending>,
    /// The deadline waits for the backend to run the agent (as a pool's waits for a place), as
    /// the place's own time limit does.
    deadline_held: bool,
    deadline: Option<Instant>,
    stop: Option<StopReason>,
    note: Option<String>,
    kill_at: Option<Instant>,
    killed: bool,
    /// The log, counted as it grows so that its end costs no full read.
    log: LogWatch,
    /// The task's lock, held for our whole life.
    lock: Lock,
}

impl Supervisor {
    fn run(&mut self) {
        let (code, signal) = loop {
            if let Some(exit) = self.agent_exit() {
                // It reads nothing more.
                self.input = None;
                self.clients.takes_messages = false;
                if self.run_again(exit) {
                    continue;
                }
                break exit;
            }
            let wake = [
                self.kill_at.filter(|_| !self.killed),
                self.deadline.filter(|_| self.stop.is_none()),
                self.log.due,
                self.log.look_at,
                self.pending.as_ref().map(|p| p.at),
            ];
            self.poll_once(wake.into_iter().flatten().min());
            self.on_timers();
        };
        self.finish(code, signal);
    }

    /// The backend, and the run as it is handed to it.
    fn parts(&mut self) -> (&mut dyn Backend, Run<'_>) {
        let run = Run {
            rec: &mut self.rec,
            store: &self.store,
            process: self.child,
            lock: &mut self.lock,
            note: &mut self.note,
        };
        (&mut *self.backend, run)
    }

    /// The task's cgroup, if it has one.
    fn cgroup(&self) -> Option<&TaskCgroup> {
        self.contained.as_ref().map(|c| &c.made.cgroup)
    }

    /// Add `note` to what the end will note.
    fn add_note(&mut self, note: String) {
        backend::add_note(&mut self.note, note);
    }

    /// The agent's exit code or signal, once it has exited (left unreaped, so its process group
    /// id cannot be reused while leftovers are signalled).
    fn agent_exit(&self) -> Option<(Option<i32>, Option<i32>)> {
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
        match waitid(Id::Pid(self.child), flags) {
            Ok(WaitStatus::Exited(_, code)) => Some((Some(code), None)),
            Ok(WaitStatus::Signaled(_, sig, _)) => Some((None, Some(sig as i32))),
            Ok(_) => None,
            Err(e) => {
                eprintln!("waitid({}): {e}", self.child);
                Some((None, None))
            }
        }
    }

    /// Wait for a signal, a connection, a client's request or `until`; handle what came, and
    /// count more of a log the last pass left behind.
    fn poll_once(&mut self, until: Option<Instant>) {
        let until = [until, self.clients.wake_at()].into_iter().flatten().min();
        let behind = self.log.behind;
        let timeout = if behind {
            PollTimeout::ZERO
        } else {
            until.map_or(PollTimeout::NONE, |t| {
                // Rounded up, so that a timer is never found not yet due on waking.
                let ms = t.saturating_duration_since(Instant::now()).as_micros().div_ceil(1000).min(60_000) as u16;
                PollTimeout::from(ms)
            })
        };
        // The signals, the cgroup's events (its last process leaving), then the listener and clients.
        let events = self.contained.as_ref().and_then(|c| c.events.as_ref());
        // The agent's stdin, while it has messages the pipe could not take yet.
        let input = self.input.as_ref().and_then(Input::poll_fd);
        let writing = input.is_some();
        let ready: Vec<bool> = {
            let mut fds = vec![PollFd::new(self.signals.as_fd(), PollFlags::POLLIN)];
            fds.extend(events.map(|e| PollFd::new(e.fd(), PollFlags::POLLPRI)));
            fds.extend(input);
            fds.extend(self.clients.poll_fds());
            match poll(&mut fds, timeout) {
                Ok(_) => fds.iter().map(|f| f.revents().is_some_and(|r| !r.is_empty())).collect(),
                Err(_) => vec![false; fds.len()],
            }
        };
        let clients_at = 1 + usize::from(events.is_some()) + usize::from(writing);
        // Read, which takes the notice (the loop looks at what is left); a cgroup removed behind
        // our back is polled no more.
        if let (Some(e), true) = (events, clients_at > 1 && ready[1])
            && e.populated().is_none()
            && let Some(c) = self.contained.as_mut()
        {
            c.events = None;
        }
        if ready[0] {
            self.on_signals();
        }
        if behind {
            self.log.count_some();
        }
        for grace in self.clients.serve(&ready[clients_at..]) {
            self.begin_stop(StopReason::Halted, grace);
        }
        self.give_input();
        // It has its place: whoever waits behind it in the queue looks again.
        self.clients.answer(|want| matches!(want, Some(Request::Queue | Request::Front { .. })));
    }

    fn on_signals(&mut self) {
        while let Ok(Some(info)) = self.signals.read_signal() {
            match Signal::try_from(info.ssi_signo as i32) {
                Ok(Signal::SIGCHLD) => reap_others(self.child),
                Ok(s @ (Signal::SIGTERM | Signal::SIGINT)) => {
                    if self.stop.is_none() {
                        self.add_note(format!("the supervisor received {s}"));
                    }
                    self.begin_stop(StopReason::Halted, Duration::from_millis(self.spec.grace_ms));
                }
                _ => {}
            }
        }
    }

    fn on_timers(&mut self) {
        let now = Instant::now();
        if self.deadline.is_some_and(|d| now >= d) && self.stop.is_none() {
            self.add_note("the task's deadline passed".into());
            self.begin_stop(StopReason::DeadlinePassed, Duration::from_millis(self.spec.grace_ms));
        }
        if self.kill_at.is_some_and(|k| now >= k) && !self.killed {
            self.kill_all();
        }
        if self.log.look_at.is_some_and(|t| now >= t) {
            self.log.look();
            // Output while its backend said the run waits: it runs.
            if self.pending.as_ref().is_some_and(|p| p.waits) && self.log.size() > self.rec.run_start {
                self.look_again(true);
            }
        }
        if self.pending.as_ref().is_some_and(|p| now >= p.at) {
            self.look_again(false);
        }
        if self.log.due.is_some_and(|d| now >= d) {
            self.log.publish();
        }
        self.check_budget();
        self.give_input();
    }

    /// Give the agent the messages taken for it and what its pipe could not take before; end
    /// its input once it has answered them all (or is being stopped).
    fn give_input(&mut self) {
        let Some(input) = self.input.as_mut() else { return };
        if !self.clients.said.is_empty() {
            let agent = crate::agent::kind(self.spec.agent_kind());
            for text in self.clients.said.drain(..) {
                input.say(&agent.message_line(&text));
            }
        }
        input.flush();
        match self.log.follow.as_ref() {
            _ if self.stop.is_some() => input.close(),
            Some(f) => input.close_when_answered(f.input()),
            // Nothing says what it took: it has what it was given.
            None => input.close_when_answered(crate::agent::stream::Input { taken: u64::MAX, answered: true }),
        }
        self.clients.takes_messages = input.is_open();
    }

    /// Halt the task (`over_budget`) once what its agent spent passes its budget, and only then
    /// publish what its stream said: whoever acts on figures past the budget (a lead, an agent
    /// that waits on them) finds the halt begun.
    fn check_budget(&mut self) {
        let Some(f) = self.log.follow.as_mut() else { return };
        if !f.changed() {
            return;
        }
        let crossed = (self.stop.is_none() && !self.spec.budget.is_empty())
            .then(|| self.spec.budget.crossed(&f.turn_seen().usage))
            .flatten();
        if let Some(why) = crossed {
            self.add_note(why);
            self.begin_stop(StopReason::OverBudget, Duration::from_millis(self.spec.grace_ms));
        }
        self.log.publish_seen();
    }
}

/// Reap exited children other than the agent, whose zombie we keep until the end.
fn reap_others(agent: Pid) {
    for pid in own_children().into_iter().filter(|&p| p != agent) {
        let _ = waitpid(pid, Some(WaitPidFlag::WNOHANG));
    }
}
