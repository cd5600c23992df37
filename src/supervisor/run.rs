//! The supervisor's life: spawn the agent, serve `wait`/`halt` on the control socket, notice
//! the agent's exit, end what it left behind, record the outcome once, exit.

mod leftovers;

use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid, waitpid};
use nix::unistd::{ForkResult, Pid, fork};

use super::cgroup::{self, NoCgroup};
use super::clients::Clients;
use super::control::Request;
use super::launch::{LOCK_FD, report, started_report};
use super::logwatch::LogWatch;
use super::queue::{Waited, wait_for_place};
use super::reach::own_id;
use super::slurm::Slurm;
use super::spawn::spawn_agent;
use super::strays::Strays;
use super::unix::{
    close_fds_from, descendants, may_signal, name_supervisor, own_children, own_leftovers, signal_group, signal_pid,
};
use crate::error::{IoContext, Result};
use crate::store::Store;
use crate::task::{
    Backend, Containment, LockNote, OUTPUT_WINDOW, Outcome, SlurmJob, Started, StopReason, SupervisorId, TaskCgroup,
    TaskRecord, TaskSpec, Token, unix_ms,
};

/// How long Slurm may take to list a job srun submitted.
const SLURM_LISTS_IN: Duration = Duration::from_secs(10);
/// How often Slurm is asked whether a pending job runs yet: at first, then half as often each
/// time, down to `SLURM_LOOK_LAST` (each look is a query to the cluster's controller, whom a
/// thousand pending tasks must not flood). Output from the agent is looked at sooner.
const SLURM_LOOK_FIRST: Duration = Duration::from_secs(1);
const SLURM_LOOK_LAST: Duration = Duration::from_secs(30);

/// Entry point of `agentctl __supervise TOKEN`. Must run while the process has one thread.
pub fn supervise(home: &Path, token: Token) -> ExitCode {
    name_supervisor();
    // SAFETY: the process is single-threaded here (no runtime has been started).
    match unsafe { fork() } {
        // SAFETY: _exit skips destructors that would flush the start-report pipe twice.
        Ok(ForkResult::Parent { .. }) => unsafe { libc::_exit(0) },
        Ok(ForkResult::Child) => {}
        Err(e) => {
            report(&format!("error cannot fork the supervisor: {e}"));
            return ExitCode::from(70);
        }
    }
    match Store::at(home) {
        Ok(store) => serve(store, Task::Recorded(token)),
        Err(e) => {
            report(&format!("error {e}"));
            ExitCode::from(70)
        }
    }
}

/// The task a supervisor starts with.
pub(super) enum Task {
    /// Saved by its launcher (the MCP server, which keeps its store open).
    Recorded(Token),
    /// Not saved yet: the launcher that forked this supervisor (the CLI) left the store to it,
    /// so that a start opens the store once, and the supervisor keeps that connection.
    Unsaved(Box<(TaskRecord, TaskSpec)>),
}

/// The supervisor's whole life, in a detached process whose stdout is the start-report pipe and
/// whose descriptor 3 holds the task's lock.
pub(super) fn serve(store: Store, task: Task) -> ExitCode {
    match Supervisor::start(store, task) {
        Ok(Some(mut sup)) => {
            sup.run();
            ExitCode::SUCCESS
        }
        Ok(None) => ExitCode::SUCCESS,
        Err(e) => {
            report(&format!("error {e}"));
            ExitCode::from(70)
        }
    }
}

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

struct Supervisor {
    store: Store,
    rec: TaskRecord,
    spec: TaskSpec,
    signals: SignalFd,
    clients: Clients,
    child: Pid,
    /// The task's own cgroup; none: its process group and our subreaping hold it together.
    contained: Option<Contained>,
    /// Its Slurm job was cancelled (once is enough).
    slurm_cancelled: bool,
    /// The Slurm jobs of its earlier runs.
    slurm_seen: Vec<u64>,
    /// While Slurm holds its job pending: when it is next asked again, and how long after the
    /// last time that is.
    slurm_look: Option<(Instant, Duration)>,
    /// Who we are, as the lock file says.
    id: Option<SupervisorId>,
    /// The deadline waits for Slurm to run the job (as a pool's waits for a place): Slurm's
    /// time limit counts from then too.
    deadline_held: bool,
    deadline: Option<Instant>,
    stop: Option<StopReason>,
    note: Option<String>,
    kill_at: Option<Instant>,
    killed: bool,
    /// The log, counted as it grows so that its end costs no full read.
    log: LogWatch,
    lock: OwnedFd,
}

impl Supervisor {
    /// Set up, spawn the agent and report to the launcher. `None` when the agent could not start
    /// (recorded as failed and reported).
    fn start(store: Store, task: Task) -> Result<Option<Supervisor>> {
        let token = match &task {
            Task::Unsaved(given) => given.0.token,
            Task::Recorded(token) => *token,
        };
        // SAFETY: the launcher placed the task's locked lock file on this descriptor.
        let lock = unsafe { OwnedFd::from_raw_fd(LOCK_FD) };
        nix::fcntl::fcntl(&lock, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC))
            .ctx(|| "the supervisor was started without its lock".into())?;
        close_fds_from(LOCK_FD + 1);
        // Who we are, in the lock file, before any process of the task exists: whoever finds us
        // dead (or stopped) can then find the task's processes, however early that happens.
        let id = own_id();
        mark_lock(&lock, &LockNote { id, ..LockNote::default() });
        raise_fd_limit();
        redirect_stderr(&store.task_dir(token).join("supervisor.err"));
        // Started by an agent: out of its task's cgroup, as its own task is not part of that one
        // (whose halt would end it too, and which the end notes).
        let stayed = cgroup::leave_task_cgroups().err();
        if let Some(why) = &stayed {
            eprintln!("agentctl supervisor: {why}");
        }
        nix::sys::prctl::set_child_subreaper(true).ctx(|| "cannot become a child subreaper".into())?;

        let mut mask = SigSet::empty();
        for s in [Signal::SIGCHLD, Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
            mask.add(s);
        }
        mask.thread_block().ctx(|| "cannot block signals".into())?;
        let signals = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
            .ctx(|| "cannot create a signalfd".into())?;

        let (mut rec, spec) = match task {
            Task::Unsaved(given) => match store.insert_task(&given.0, &given.1) {
                Ok(queued) => {
                    let (mut rec, spec) = *given;
                    rec.queued = queued;
                    (rec, spec)
                }
                Err(e) => {
                    // Nothing of the task exists: its launcher removes what it made.
                    report(&format!("unsaved {}", e.to_line()));
                    return Ok(None);
                }
            },
            Task::Recorded(token) => (store.read_record(token)?, store.read_spec(token)?),
        };
        let socket_path = store.socket_path(token);
        let mut clients = match Clients::listen(&socket_path) {
            Ok(l) => l,
            Err(e) => {
                refuse_start(&store, &mut rec, &spec, format!("cannot listen on {}: {e}", socket_path.display()))?;
                return Ok(None);
            }
        };
        // Its place in its pool first; a halt while it waits ends it without a run.
        // Its deadline counts from its start.
        match wait_for_place(&store, &mut rec, &spec, &signals, &mut clients, None) {
            Ok(Waited::Placed) => {}
            Ok(waited @ (Waited::Halted(_) | Waited::Expired)) => {
                let (outcome, why) = match waited {
                    Waited::Halted(why) => (Outcome::Cancelled { exit_code: None, signal: None }, why),
                    _ => (Outcome::Expired { exit_code: None, signal: None }, "its deadline passed".to_owned()),
                };
                if let Err(e) = store.finish(&mut rec, outcome, Some(why), None, Some(&spec.result)) {
                    eprintln!("cannot record the end of task {token}: {e}");
                }
                let _ = std::fs::remove_file(&socket_path);
                clients.answer(|_| true);
                return Ok(None);
            }
            Err(e) => {
                let _ = std::fs::remove_file(&socket_path);
                refuse_start(&store, &mut rec, &spec, format!("cannot wait for a place in its pool: {e}"))?;
                clients.answer(|_| true);
                return Ok(None);
            }
        }

        let (containment, contained) = match cgroup::create(token, std::process::id(), &spec.limits) {
            Ok(made) => {
                // Beside our id in the lock file: whoever finds us dead ends the task through it.
                mark_lock(&lock, &LockNote { id, cgroup: Some(made.cgroup.clone()), slurm_job: None });
                let containment = Containment::Cgroup { cgroup: made.cgroup.clone(), limits: spec.limits.clone() };
                let events = cgroup::Events::open(&made.cgroup);
                // A new cgroup's limits have done nothing yet.
                let since = cgroup::Counters::default();
                let strays = Strays::of(id, made.cgroup.clone());
                (containment, Some(Contained { since, made, events, strays }))
            }
            Err(NoCgroup::Fallback(why)) => (Containment::ProcessGroup { why }, None),
            Err(NoCgroup::Refused(why)) => {
                let _ = std::fs::remove_file(&socket_path);
                refuse_start(&store, &mut rec, &spec, format!("cannot contain the task: {why}"))?;
                clients.answer(|_| true);
                return Ok(None);
            }
        };
        rec.containment = Some(containment);
        rec.slurm_pending = spec.backend.pending_at_start();
        let log_path = store.log_path(&rec.role, rec.token);
        let opened = LogWatch::open(&log_path, store.lines_path(token)).and_then(|l| Ok((l.open_for_agent()?, l)));
        let spawned = match opened {
            Ok((output, log)) => {
                spawn_agent(&output, &spec, contained.as_ref().map(|c| &c.made.cgroup)).map(|pid| (pid, log))
            }
            Err(e) => Err(format!("cannot open log {}: {}", log_path.display(), crate::store::files::describe(&e))),
        };
        let (child, log) = match spawned {
            Ok(started) => started,
            Err(msg) => {
                let _ = std::fs::remove_file(&socket_path);
                if let Some(c) = &contained {
                    cgroup::remove(&c.made.cgroup);
                }
                refuse_start(&store, &mut rec, &spec, msg)?;
                return Ok(None);
            }
        };
        let started = Started {
            pid: child.as_raw(),
            supervisor_pid: std::process::id() as i32,
            sid: nix::unistd::getsid(None).map(|s| s.as_raw()).unwrap_or(0),
            at_ms: unix_ms(SystemTime::now()),
        };
        rec.started = Some(started.clone());
        store.write_record(&rec)?;
        report(&started_report(&started));
        // Nothing more for the launcher: close our end by pointing stdout at /dev/null.
        if let Ok(null) = File::options().write(true).open("/dev/null") {
            let _ = nix::unistd::dup2_stdout(null);
        }
        let deadline = spec.deadline_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
        let mut sup = Supervisor {
            store,
            rec,
            spec,
            signals,
            clients,
            child,
            contained,
            slurm_cancelled: false,
            slurm_seen: Vec::new(),
            slurm_look: None,
            id,
            deadline_held: false,
            deadline,
            stop: None,
            note: stayed,
            kill_at: None,
            killed: false,
            log,
            lock,
        };
        sup.find_slurm_job();
        Ok(Some(sup))
    }

    /// The Slurm job the agent's srun just submitted, for a halt, `status` and the lost path (in
    /// the lock file for the latter). Until Slurm says it runs (or the agent writes output),
    /// the task is `queued`, with Slurm's reason, and Slurm is asked again now and then.
    fn find_slurm_job(&mut self) {
        if !matches!(self.spec.backend, Backend::Slurm { .. }) {
            return;
        }
        // A run after a rate-limited one submits a job of the same name: the earlier ones, which
        // Slurm lists for a while after their end, are not it.
        self.slurm_seen.extend(self.rec.slurm_job.take());
        self.slurm_cancelled = false;
        // Until a look finds it running (the run's record says it is pending already).
        self.slurm_look = Some((Instant::now() + SLURM_LOOK_FIRST, SLURM_LOOK_FIRST));
        // Only a first run's: a later one's deadline is the task's, already counting.
        if self.rec.retries == 0 && self.deadline.is_some() {
            (self.deadline, self.deadline_held) = (None, true);
        }
        match self.look_for_job(SLURM_LISTS_IN) {
            Ok(Some(job)) => self.saw_slurm_job(Some(job), false),
            Ok(None) => {}
            // The job runs or waits all the same; halts reach it through srun meanwhile (a
            // signalled srun cancels its step).
            Err(why) => self.add_note(format!("cannot find the task's Slurm job yet: {why}")),
        }
        if let Err(e) = self.store.write_record(&self.rec) {
            eprintln!("agentctl supervisor: cannot record the Slurm job: {e}");
        }
    }

    /// Look (for up to `limit`) for the job srun submitted, and once found keep its id in the
    /// record and the lock file.
    fn look_for_job(&mut self, limit: Duration) -> Result<Option<SlurmJob>, String> {
        let Backend::Slurm { job_name } = &self.spec.backend else { return Ok(None) };
        let child = self.child;
        let srun_runs = || {
            let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
            matches!(waitid(Id::Pid(child), flags), Ok(WaitStatus::StillAlive))
        };
        let job = Slurm::of(&self.spec).find(job_name, limit, srun_runs, &self.slurm_seen)?;
        if let Some(job) = &job {
            self.rec.slurm_job = Some(job.job_id);
            let note = LockNote { id: self.id, cgroup: self.cgroup().cloned(), slurm_job: self.rec.slurm_job };
            mark_lock(&self.lock, &note);
        }
        Ok(job)
    }

    /// Slurm's commands, beside the task's srun.
    fn slurm(&self) -> Slurm {
        Slurm::of(&self.spec)
    }

    /// The task's Slurm job and its name, once known.
    fn slurm_job(&self) -> Option<(u64, &str)> {
        match (&self.spec.backend, self.rec.slurm_job) {
            (Backend::Slurm { job_name }, Some(id)) => Some((id, job_name)),
            _ => None,
        }
    }

    /// Ask Slurm whether the job runs yet (looking for it first, if it was not found yet):
    /// its reason while it waits, the task `running` once it does. No answer changes nothing
    /// but the time of the next look. `output`: the agent wrote some, so it runs.
    fn look_at_slurm_job(&mut self, output: bool) {
        let Some((_, every)) = self.slurm_look else { return };
        // Less often each time, but often enough for a deadline that waits for the start.
        let held = Duration::from_millis(self.spec.deadline_ms.unwrap_or(0) / 4).max(SLURM_LOOK_FIRST);
        let next = (every * 2).min(if self.deadline_held { held.min(SLURM_LOOK_LAST) } else { SLURM_LOOK_LAST });
        self.slurm_look = Some((Instant::now() + next, next));
        let job = match self.rec.slurm_job {
            Some(id) => self.slurm().describe(id),
            None => {
                let found = self.look_for_job(Duration::ZERO).ok().flatten();
                if found.is_some() {
                    let _ = self.store.write_record(&self.rec);
                }
                found
            }
        };
        self.saw_slurm_job(job, output);
    }

    /// What a look at the job found (`None`: no answer): pending, or running from then on.
    fn saw_slurm_job(&mut self, job: Option<SlurmJob>, output: bool) {
        let pending = match &job {
            _ if output => None,
            Some(job) => job.pending_reason(),
            None => self.rec.slurm_pending.clone(),
        };
        if pending.is_none() {
            self.release_deadline(job.as_ref().and_then(|j| j.started_s));
            // Once it runs, nothing more to look at but a job not found yet.
            if self.rec.slurm_job.is_some() {
                self.slurm_look = None;
            }
        }
        if pending != self.rec.slurm_pending {
            self.rec.slurm_pending = pending;
            let _ = self.store.write_record(&self.rec);
        }
    }

    /// The deadline held while Slurm held the job counts from when Slurm started it
    /// (`started_s`, seconds since the epoch; unknown: now).
    fn release_deadline(&mut self, started_s: Option<u64>) {
        if !std::mem::take(&mut self.deadline_held) {
            return;
        }
        let ran = started_s.map_or(0, |s| (unix_ms(SystemTime::now()) / 1000).saturating_sub(s));
        let left = Duration::from_millis(self.spec.deadline_ms.unwrap_or(0)).saturating_sub(Duration::from_secs(ran));
        self.deadline = Some(Instant::now() + left);
    }

    fn run(&mut self) {
        let (code, signal) = loop {
            if let Some(exit) = self.agent_exit() {
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
                self.slurm_look.map(|(at, _)| at),
            ];
            self.poll_once(wake.into_iter().flatten().min());
            self.on_timers();
        };
        self.finish(code, signal);
    }

    /// After a run that the template's `retry_on` calls rate-limited (and retries are left):
    /// end what the run left, wait out the back-off while answering clients, and start the
    /// agent again. False when the task ends with this run instead: no policy, no match, no
    /// retries left, halted or past its deadline (before or during the back-off), or the agent
    /// could not start again.
    fn run_again(&mut self, (code, signal): (Option<i32>, Option<i32>)) -> bool {
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
        // Its job ran (it ended): whatever the last look at it said.
        if self.slurm_look.take().is_some() {
            let started = self.slurm_job().and_then(|(id, _)| self.slurm().describe(id)).and_then(|j| j.started_s);
            self.release_deadline(started);
        }
        self.rec.slurm_pending = None;
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
        let pid = match out.and_then(|out| spawn_agent(&out, &self.spec, self.cgroup())) {
            Ok(pid) => pid,
            Err(msg) => {
                self.add_note(format!("run {} could not start: {msg}", n + 1));
                let _ = self.store.write_record(&self.rec);
                return false;
            }
        };
        let _ = waitpid(self.child, None);
        self.child = pid;
        self.rec.slurm_pending = self.spec.backend.pending_at_start();
        (self.killed, self.kill_at) = (false, None);
        self.rec.run_start = start;
        self.rec.retries = n;
        if let Some(started) = self.rec.started.as_mut() {
            started.pid = pid.as_raw();
        }
        let _ = self.store.write_record(&self.rec);
        // A new run is a new job.
        self.find_slurm_job();
        true
    }

    /// The task's cgroup, if it has one.
    fn cgroup(&self) -> Option<&TaskCgroup> {
        self.contained.as_ref().map(|c| &c.made.cgroup)
    }

    /// Add `note` to what the end will note.
    fn add_note(&mut self, note: String) {
        self.note = Some(match self.note.take() {
            Some(n) => format!("{n}; {note}"),
            None => note,
        });
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
        let ready: Vec<bool> = {
            let mut fds = vec![PollFd::new(self.signals.as_fd(), PollFlags::POLLIN)];
            fds.extend(events.map(|e| PollFd::new(e.fd(), PollFlags::POLLPRI)));
            fds.extend(self.clients.poll_fds());
            match poll(&mut fds, timeout) {
                Ok(_) => fds.iter().map(|f| f.revents().is_some_and(|r| !r.is_empty())).collect(),
                Err(_) => vec![false; fds.len()],
            }
        };
        let clients_at = 1 + usize::from(events.is_some());
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

    /// SIGTERM (and SIGCONT, for stopped ones) to the agent's group and every descendant; arm
    /// the SIGKILL timer. The first reason to stop is the one recorded.
    fn begin_stop(&mut self, why: StopReason, grace: Duration) {
        // Only the first looks for processes that left the cgroup (a walk through all of
        // `/proc`), unless that look found some: each halt request, SIGTERM and the deadline
        // comes here.
        let first = self.stop.is_none();
        self.stop.get_or_insert(why);
        let kill_at = Instant::now() + grace;
        self.kill_at = Some(self.kill_at.map_or(kill_at, |k| k.min(kill_at)));
        if let Some((id, name)) = self.slurm_job() {
            let slurm = self.slurm();
            // Nothing of a pending job runs yet: it needs no grace. The agent's processes of a
            // running one are the job's, on its node: Slurm signals them. (srun, signalled
            // here, would cancel the step at once, without a grace.)
            let sent = slurm
                .cancel(id, name, true)
                .and_then(|_| slurm.signal(id, name, "CONT"))
                .and_then(|_| slurm.signal(id, name, "TERM"));
            match sent {
                Ok(()) => return,
                // Cancelled while pending (or ended meanwhile): nothing left to signal.
                Err(_) if slurm.describe(id).is_some_and(|j| !j.is_active()) => {
                    self.slurm_cancelled = true;
                    return;
                }
                // srun cancels the step itself then (at once).
                Err(why) => eprintln!("agentctl supervisor: cannot signal Slurm job {id}: {why}"),
            }
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
            // Output while Slurm was said to hold the job pending: it runs.
            if self.rec.slurm_pending.is_some() && self.log.size() > self.rec.run_start {
                self.look_at_slurm_job(true);
            }
        }
        if self.slurm_look.is_some_and(|(at, _)| now >= at) {
            self.look_at_slurm_job(false);
        }
        if self.log.due.is_some_and(|d| now >= d) {
            self.log.publish();
        }
    }

    /// SIGKILL the cgroup (and what left it), the group and our direct children. All are safe
    /// from pid reuse: the kernel kills a cgroup's members, those that left it are held by
    /// pidfds, and the group's leader and our children stay unreaped until we reap them.
    fn kill_all(&mut self) {
        let first = !std::mem::replace(&mut self.killed, true);
        if !self.slurm_cancelled
            && let Some((id, name)) = self.slurm_job()
        {
            if let Err(why) = self.slurm().cancel(id, name, false) {
                eprintln!("agentctl supervisor: cannot cancel Slurm job {id}: {why}");
            }
            self.slurm_cancelled = true;
        }
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

    fn finish(&mut self, code: Option<i32>, signal: Option<i32>) {
        // How the agent ended decides the outcome: a halt that comes while what it left goes
        // finds the task ended on its own.
        let stop = self.stop;
        // The answer is what the agent wrote: what it left may write on as it goes.
        let answer_end = self.log.size();
        self.clear_for_the_end();
        let mut outcome = Outcome::from_exit(code, signal, stop);
        // Slurm may have ended the job itself (its time limit, its node, someone's scancel).
        self.rec.slurm_pending = None;
        if let (None, Some(id)) = (stop, self.rec.slurm_job)
            && let Some(end) = self.slurm().how_it_ended(id, &self.log.tail(self.rec.run_start, OUTPUT_WINDOW))
        {
            let note;
            (outcome, note) = end.outcome(code, signal);
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
        if let Some(wt) = &self.spec.worktree {
            match crate::worktree::changes(wt) {
                Ok(c) => self.rec.changes = Some(c),
                Err(e) => self.add_note(format!("cannot count what changed in the worktree: {e}")),
            }
        }
        // Recording the end takes a few descriptors, which a supervisor at its limit would not have.
        self.clients.release_spares();
        // Counted and summarized from the file the agent wrote, whatever became of its name.
        let log = self.log.finish(answer_end);
        if let Err(e) = self.store.finish(&mut self.rec, outcome, self.note.clone(), Some(log), Some(&self.spec.result))
        {
            eprintln!("cannot record the end of task {}: {e}", self.rec.token);
        }
        self.clients.answer(|want| want == Some(Request::Wait));
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
        self.store.checkpoint();
    }
}

/// Write `note` into the task's lock file for whoever finds this supervisor dead (each write
/// holds what the last did, and more, but for a later run's job).
fn mark_lock(lock: &OwnedFd, note: &LockNote) {
    if *note == LockNote::default() {
        return;
    }
    let text = note.to_text();
    // A later run's job replaces the earlier one's: nothing of a longer text is left after.
    if rustix::io::pwrite(lock, text.as_bytes(), 0).is_ok() {
        let _ = rustix::fs::ftruncate(lock, text.len() as u64);
    }
}

/// Record that the agent could not be started, then tell the launcher why (the record is
/// final by the time the launcher returns).
fn refuse_start(store: &Store, rec: &mut TaskRecord, spec: &TaskSpec, error: String) -> Result<()> {
    let outcome = Outcome::Failed { exit_code: None, signal: None, error: Some(error.clone()) };
    let saved = store.finish(rec, outcome, None, None, Some(&spec.result));
    report(&format!("error {error}"));
    saved
}

/// Reap exited children other than the agent, whose zombie we keep until the end.
fn reap_others(agent: Pid) {
    for pid in own_children().into_iter().filter(|&p| p != agent) {
        let _ = waitpid(pid, Some(WaitPidFlag::WNOHANG));
    }
}

/// Take the descriptor limit up to its hard maximum: each waiting client holds one descriptor,
/// and a thousand waiters must not leave a halt unable to connect. (The agent gets the limit
/// it would have had: see `spawn`.)
fn raise_fd_limit() {
    // SAFETY: getrlimit/setrlimit on this process with a limit struct we own.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max {
            super::spawn::AGENT_NOFILE.store(limit.rlim_cur, std::sync::atomic::Ordering::Relaxed);
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

fn redirect_stderr(path: &Path) {
    if let Ok(f) = OpenOptions::new().append(true).create(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(path) {
        let _ = nix::unistd::dup2_stderr(f);
    }
}
