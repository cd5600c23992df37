//! A rate-limited run (as the template's `retry_on` says): what it left ended, the back-off
//! waited out while clients are answered, its pool's place given up and taken again, and the
//! agent started anew.

use std::time::{Instant, SystemTime};

use nix::sys::wait::waitpid;

use super::{Supervisor, leftovers};
use crate::supervisor::cgroup;
use crate::supervisor::control::Request;
use crate::supervisor::input::Input;
use crate::supervisor::queue::{Waited, wait_for_place};
use crate::supervisor::spawn::spawn_agent;
use crate::task::{OUTPUT_WINDOW, StopReason, unix_ms};

impl Supervisor {
    /// After a run that the template's `retry_on` calls rate-limited (and retries are left):
    /// end what the run left, wait out the back-off while answering clients, and start the
    /// agent again. False when the task ends with this run instead: no policy, no match, no
    /// retries left, halted or past its deadline (before or during the back-off), or the agent
    /// could not start again.
    pub(super) fn run_again(&mut self, (code, signal): (Option<i32>, Option<i32>)) -> bool {
        let Some(policy) = self.spec.retry.clone() else { return false };
        if self.stop.is_some()
            || signal.is_some()
            || self.rec.retries >= policy.max_retries
            || !policy.matches(code, &self.log.tail(self.rec.run_start, OUTPUT_WINDOW))
        {
            return false;
        }
        let n = self.rec.retries + 1;
        let mut line = format!("run {n} was rate-limited (exit {})", code.unwrap_or(-1));
        // It ran (it ended): a deadline held while it waited counts from when it began to run.
        let looked = self.pending.take().is_some();
        let (backend, mut run) = self.parts();
        let since = backend.rerun(&mut run, looked);
        if looked {
            self.release_deadline(since);
        }
        // What this run left goes first, as at a task's end (its zombie keeps its group id).
        let left = self.end_what_is_left();
        if left > 0 {
            line.push_str(&format!(" and left {left} process(es) running, ended"));
        }
        if let Some(c) = &self.contained {
            for why in cgroup::limits_reached(&c.made.cgroup, &self.spec.limits, c.since) {
                line.push_str(&format!("; {why}"));
            }
        }
        self.rec.rate_limited.push(line);
        // At most `LINGER` after SIGKILL: one the kernel holds must not keep a halt or the
        // deadline from being carried out (the end notes it, if it is still there then).
        self.wait_leftovers(false, Some(leftovers::LINGER));
        let delay = policy.delay(n);
        let at = Instant::now() + delay;
        self.rec.retry_at_ms = Some(unix_ms(SystemTime::now()) + delay.as_millis() as u64);
        // It gives its pool's place up for the back-off (another task may run meanwhile), then
        // waits at the head of the line: it came before those behind it.
        let pooled = self.spec.pool.is_some();
        self.rec.queued = pooled;
        let _ = self.store.write_record(&self.rec);
        self.clients.answer(|want| want == Some(Request::Place));
        while self.stop.is_none() && Instant::now() < at {
            let wake = [Some(at), self.deadline, self.log.due, self.log.look_at];
            self.poll_once(wake.into_iter().flatten().min());
            // It holds no place: whoever asks to hear when it gives one up hears it now.
            self.clients.answer(|want| want == Some(Request::Place));
            self.on_timers();
        }
        self.rec.retry_at_ms = None;
        if self.stop.is_none() && pooled {
            let _ = self.store.write_record(&self.rec);
            // Its deadline holds meanwhile: no run after it.
            let deadline = self.deadline;
            match wait_for_place(&self.store, &mut self.rec, &self.spec, &self.signals, &mut self.clients, deadline) {
                Ok(Waited::Placed) => {}
                Ok(Waited::Halted(why)) => {
                    self.add_note(why);
                    self.stop = Some(StopReason::Halted);
                }
                Ok(Waited::Expired) => {
                    self.add_note("the task's deadline passed while it waited for a place".into());
                    self.stop = Some(StopReason::DeadlinePassed);
                }
                Err(e) => self.add_note(format!("cannot wait for a place in its pool: {e}")),
            }
            if self.rec.queued {
                // Not placed (halted, or the store failed): it ends here.
                self.stop.get_or_insert(StopReason::Halted);
            }
        }
        if self.stop.is_some() {
            self.rec.queued = false;
            let _ = self.store.write_record(&self.rec);
            return false;
        }
        // The next run starts on a line of its own, and writes its own answer file.
        let start = self.log.size();
        let out = self.log.open_for_agent().map_err(|e| e.to_string());
        let start = match &out {
            Ok(f) if start > 0 && self.log.tail(start - 1, 1) != b"\n" => {
                use std::io::Write;
                let _ = (&*f).write_all(b"\n");
                start + 1
            }
            _ => start,
        };
        let _ = std::fs::remove_file(self.store.result_path(&self.rec.role, self.rec.token));
        if let Some(c) = self.contained.as_mut() {
            c.since = cgroup::counters(&c.made.cgroup, &self.spec.limits);
        }
        // Its input anew: the question first again.
        let spawned = out.and_then(|out| {
            let (input, stdin) = Input::for_run(&self.spec)?;
            let roads = crate::supervisor::sandbox::roads(&self.store, self.rec.token, &self.spec)?;
            spawn_agent(&out, stdin.as_ref(), &self.spec, self.cgroup(), &*self.backend, roads).map(|pid| (pid, input))
        });
        let pid = match spawned {
            Ok((pid, input)) => {
                self.input = input;
                pid
            }
            Err(msg) => {
                self.add_note(format!("run {} could not start: {msg}", n + 1));
                let _ = self.store.write_record(&self.rec);
                return false;
            }
        };
        let _ = waitpid(self.child, None);
        self.child = pid;
        self.backend.at_start(&mut self.rec);
        (self.killed, self.kill_at) = (false, None);
        self.rec.run_start = start;
        self.rec.retries = n;
        if let Some(f) = self.log.follow.as_mut() {
            f.next_run();
        }
        if let Some(started) = self.rec.started.as_mut() {
            started.pid = pid.as_raw();
        }
        let _ = self.store.write_record(&self.rec);
        // A new run, which its backend may hold pending again.
        self.run_started();
        true
    }
}
