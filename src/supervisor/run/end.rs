//! A task's end: a stop's SIGTERM (passed on by its backend where the agent runs elsewhere)
//! and its grace, the SIGKILL after it, and the outcome recorded once, after the log is counted.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::Supervisor;
use crate::supervisor::backend::Run;
use crate::supervisor::cgroup;
use crate::supervisor::control::Request;
use crate::supervisor::unix::{descendants, may_signal, own_leftovers, signal_group, signal_pid};
use crate::task::{OUTPUT_WINDOW, Outcome, StopReason};

impl Supervisor {
    /// SIGTERM (and SIGCONT, for stopped ones) to the agent's group and every descendant; arm
    /// the SIGKILL timer. The first reason to stop is the one recorded.
    pub(super) fn begin_stop(&mut self, why: StopReason, grace: Duration) {
        // Only the first looks for processes that left the cgroup (a walk through all of
        // `/proc`), unless that look found some: each halt request, SIGTERM and the deadline
        // comes here.
        let first = self.stop.is_none();
        self.stop.get_or_insert(why);
        let kill_at = Instant::now() + grace;
        self.kill_at = Some(self.kill_at.map_or(kill_at, |k| k.min(kill_at)));
        // Where the agent runs elsewhere, its backend passes the stop on (with the grace there).
        let (backend, mut run) = self.parts();
        if backend.stop(&mut run) {
            return;
        }
        signal_group(self.child, Signal::SIGTERM);
        signal_group(self.child, Signal::SIGCONT);
        match self.contained.as_mut() {
            Some(c) => {
                cgroup::signal_all(&c.made.cgroup, &[Signal::SIGTERM, Signal::SIGCONT]);
                c.strays.stop(first);
            }
            None => {
                for pid in descendants(Pid::this()) {
                    signal_pid(pid, Signal::SIGTERM);
                    signal_pid(pid, Signal::SIGCONT);
                }
            }
        }
    }

    /// SIGKILL the cgroup (and what left it), the group and our direct children. All are safe
    /// from pid reuse: the kernel kills a cgroup's members, those that left it are held by
    /// pidfds, and the group's leader and our children stay unreaped until we reap them.
    pub(super) fn kill_all(&mut self) {
        let first = !std::mem::replace(&mut self.killed, true);
        let (backend, mut run) = self.parts();
        backend.kill(&mut run);
        if let Some(c) = self.contained.as_mut() {
            cgroup::kill(&c.made.cgroup);
            c.strays.kill(first);
        }
        signal_group(self.child, Signal::SIGKILL);
        signal_pid(self.child, Signal::SIGKILL);
        // Another user's refuse it (and would fill the error log, each pass).
        for pid in own_leftovers(self.child).into_iter().filter(|&p| may_signal(p)) {
            signal_pid(pid, Signal::SIGKILL);
        }
    }

    pub(super) fn finish(&mut self, code: Option<i32>, signal: Option<i32>) {
        // How the agent ended decides the outcome: a halt that comes while what it left goes
        // finds the task ended on its own.
        let stop = self.stop;
        // The answer is what the agent wrote: what it left may write on as it goes.
        let answer_end = self.log.size();
        self.clear_for_the_end();
        let mut outcome = Outcome::from_exit(code, signal, stop);
        // Where the agent ran may have ended the run itself (a time limit of its own, say).
        let (log, start) = (&self.log, self.rec.run_start);
        let mut run = Run {
            rec: &mut self.rec,
            store: &self.store,
            process: self.child,
            lock: &mut self.lock,
            note: &mut self.note,
        };
        if let Some((ended, note)) =
            self.backend.ended(&mut run, stop.is_some(), (code, signal), &|| log.tail(start, OUTPUT_WINDOW))
        {
            outcome = ended;
            if let Some(note) = note {
                self.add_note(note);
            }
        }
        if let Some(c) = &self.contained {
            let mut reached = cgroup::limits_reached(&c.made.cgroup, &self.spec.limits, c.since).into_iter();
            // The first is why a failed task ended; the others, and those of a task that went
            // on, are noted.
            if let Outcome::Failed { error: error @ None, .. } = &mut outcome {
                *error = reached.next();
            }
            for why in reached {
                self.add_note(why);
            }
        }
        if self.spec.sandbox.is_some()
            && let Some(refused) = crate::supervisor::sandbox::refusals(&self.log.tail(start, OUTPUT_WINDOW))
        {
            self.add_note(refused);
        }
        if let Some(refused) = crate::supervisor::network::refusals() {
            self.add_note(refused);
        }
        if let Some(wt) = &self.spec.worktree {
            match crate::worktree::changes(wt) {
                Ok(c) => self.rec.changes = Some(c),
                Err(e) => self.add_note(format!("cannot count what changed in the worktree: {e}")),
            }
        }
        // Recording the end takes a few descriptors, which a supervisor at its limit would not have.
        self.clients.release_spares();
        // Counted and summarized from the file the agent wrote, whatever became of its name.
        self.log.read_all();
        // What its agent spent, as far as its stream says (none: unknown).
        let seen = self.log.follow.as_ref().map(|f| f.seen());
        self.rec.usage = seen.map(|s| s.usage).filter(|u| u.is_known());
        if stop.is_none()
            && let Some(why) = self.rec.usage.as_ref().and_then(|u| self.spec.budget.crossed(u))
        {
            // Its end said it: the agent had ended on its own by then.
            self.add_note(format!("{why} (reported as it ended)"));
        }
        let log = self.log.finish(answer_end);
        if let Err(e) = self.store.finish(&mut self.rec, outcome, self.note.clone(), Some(log), Some(&self.spec.result))
        {
            eprintln!("cannot record the end of task {}: {e}", self.rec.token);
        }
        self.clients.answer(|want| want == Some(Request::Wait));
        crate::crash::point("end.cleaned");
        self.end_leftovers();
        let _ = waitpid(self.child, None);
        while let Ok(status) = waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
            if status == WaitStatus::StillAlive {
                break;
            }
        }
        if let Some(cg) = self.cgroup() {
            cgroup::remove(cg);
        }
        let _ = std::fs::remove_file(self.store.socket_path(self.rec.token));
        self.clients.answer(|_| true);
        crate::ops::start_hook(&self.store, &self.rec);
        self.store.checkpoint();
    }
}
