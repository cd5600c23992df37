//! What a task's agent leaves running when it exits (or a run of it, before the next): ending
//! it (SIGTERM, SIGKILL after the grace, also what left the task's cgroup), waiting for it to go
//! before the end is recorded, and what the note says of it.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use super::{Supervisor, reap_others};
use crate::supervisor::cgroup;
use crate::supervisor::control::Request;
use crate::supervisor::reach::refused_clause;
use crate::supervisor::unix::{descendants, may_signal, own_leftovers, signal_group, signal_pid};

/// How long bubblewrap's init (in a sandbox's PID namespace) may take to go after the agent:
/// bubblewrap, the supervisor's child, reports the agent's exit a moment before it.
const SANDBOX_GOES: Duration = Duration::from_millis(500);

/// How long after SIGKILL the end of a run waits for its processes to go before it goes on all
/// the same (the kernel holds one blocked in an uninterruptible wait; a loaded machine takes its
/// time to end the others).
pub(super) const LINGER: Duration = Duration::from_secs(5);

impl Supervisor {
    /// SIGTERM (and SIGCONT) to what the agent left running, in its group and beyond (we are
    /// their subreaper): the count of those signalled (another user's, refused, are not).
    pub(super) fn end_what_is_left(&mut self) -> usize {
        if self.spec.sandbox.is_some() {
            self.let_sandbox_go();
        }
        // A child of ours already dead is nothing left (bubblewrap's init, whose parent does not
        // reap it, is one after every sandboxed run): reaped, it costs no look through /proc.
        reap_others(self.child);
        let sig = if self.killed { Signal::SIGKILL } else { Signal::SIGTERM };
        if let Some(c) = self.contained.as_mut() {
            let cg = &c.made.cgroup;
            // Exactly what is left: the agent's zombie is in no cgroup.
            let left = cgroup::procs(cg).len();
            if left > 0 {
                signal_group(self.child, sig);
                cgroup::signal_all(cg, &[sig, Signal::SIGCONT]);
            }
            // What left the cgroup is below us (orphans come to us): without children of ours,
            // nothing did.
            let (found, refused) = (c.strays.count(), c.strays.refused());
            if !own_leftovers(self.child).is_empty() {
                c.strays.signal(&[sig, Signal::SIGCONT], true);
            }
            // Those of another user are named apart: no signal reached them.
            return left + (c.strays.count() - found).saturating_sub(c.strays.refused() - refused);
        }
        // Anything the agent left behind has been reparented to us, so the cheap look at our
        // own children decides whether /proc needs scanning at all.
        let children = own_leftovers(self.child);
        if children.is_empty() {
            return 0;
        }
        // Those of another user are named apart: no signal reaches them.
        let (left, refused): (Vec<Pid>, Vec<Pid>) =
            descendants(Pid::this()).into_iter().filter(|&p| p != self.child).partition(|&p| may_signal(p));
        if !refused.is_empty() {
            self.add_note(refused_clause(&refused.iter().map(|p| p.as_raw()).collect::<Vec<_>>()));
        }
        signal_group(self.child, sig);
        signal_group(self.child, Signal::SIGCONT);
        for pid in children.into_iter().filter(|&p| may_signal(p)) {
            signal_pid(pid, sig);
            signal_pid(pid, Signal::SIGCONT);
        }
        left.len()
    }

    /// Before the task's end is recorded: end what the agent left (after a stop everything was
    /// signalled already: only an agent that exited on its own can be said to have left
    /// processes running), wait for it to go, and note what became of it. The end is then
    /// recorded once nothing of the task runs, so that whoever it wakes finds what the note
    /// says: at most the grace period and `LINGER` later.
    pub(super) fn clear_for_the_end(&mut self) {
        let leftovers = if self.stop.is_none() { self.end_what_is_left() } else { 0 };
        let gone = self.wait_leftovers(false, Some(LINGER));
        let still = format!(
            "some of the task's processes were still there {}s after SIGKILL, when its end was recorded \
             (blocked in the kernel); they go when the kernel lets them",
            LINGER.as_secs()
        );
        match (leftovers, gone) {
            (0, true) => {}
            (0, false) => self.add_note(still),
            (n, true) => self.add_note(format!("ended {n} process(es) the agent left running")),
            (n, false) => {
                self.add_note(format!("sent SIGTERM, then SIGKILL, to {n} process(es) the agent left running; {still}"))
            }
        }
        if let Some(strays) = self.contained.as_ref().and_then(|c| c.strays.describe()) {
            self.add_note(strays);
        }
    }

    /// After the final record: wait for whatever is still left to go (SIGKILL after the grace
    /// period), reaping it and answering whoever connects meanwhile, so that the cgroup can go.
    pub(super) fn end_leftovers(&mut self) {
        self.wait_leftovers(true, None);
    }

    /// Wait for leftover processes to go (SIGKILL after the grace period), reaping them and
    /// serving anyone who connects meanwhile; `ended` (the final record is written) answers
    /// their waits too. Gives up `linger` after SIGKILL is due (on processes blocked in the
    /// kernel): true when nothing is left. Another user's processes, which no signal of ours
    /// reaches, are not waited for.
    pub(super) fn wait_leftovers(&mut self, ended: bool, linger: Option<Duration>) -> bool {
        let grace_end = Instant::now() + Duration::from_millis(self.spec.grace_ms);
        loop {
            // A halt's grace (before or meanwhile) holds for what the agent left too.
            let kill_at = self.kill_at.map_or(grace_end, |k| k.min(grace_end));
            reap_others(self.child);
            // Other tasks' supervisors below us go on; we leave them to whoever adopts them next
            // (they left our cgroup as they started).
            let left = match &self.contained {
                Some(c) => cgroup::populated(&c.made.cgroup) || c.strays.running() > 0,
                None => own_leftovers(self.child).into_iter().any(may_signal),
            };
            if !left {
                return true;
            }
            if linger.is_some_and(|l| Instant::now() >= kill_at + l) {
                return false;
            }
            if Instant::now() >= kill_at && !self.killed {
                self.kill_all();
            }
            if self.killed {
                // Orphans of killed leftovers keep arriving; each gets the same end.
                self.kill_all();
            }
            self.poll_once(Some(if self.killed { Instant::now() + Duration::from_millis(20) } else { kill_at }));
            if ended {
                self.clients.answer(|want| want == Some(Request::Wait));
            }
        }
    }
}

impl Supervisor {
    /// Wait (briefly) for what bubblewrap leaves for a moment after the agent to go by itself,
    /// so that it is not taken for something the agent left running.
    fn let_sandbox_go(&self) {
        let end = Instant::now() + SANDBOX_GOES;
        // `cgroup.procs`, not `wait_empty`'s notice: `populated` stays 1 for some milliseconds
        // more while the PID namespace's last processes finish exiting (a fenced start took 20
        // ms with it, against 12).
        let gone = || match &self.contained {
            Some(c) => cgroup::procs(&c.made.cgroup).is_empty(),
            None => own_leftovers(self.child).is_empty(),
        };
        // Without a cgroup, bubblewrap's init comes to us (its subreaper) to be reaped.
        while !gone() && Instant::now() < end {
            reap_others(self.child);
            if gone() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
