//! A supervisor's start: from its fork to the agent's first run (its place in its pool, its
//! cgroup, its backend), or the record of why it could not.

use std::fs::OpenOptions;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::unistd::{ForkResult, fork};

use super::{Contained, Supervisor};
use crate::error::{IoContext, Result};
use crate::store::Store;
use crate::supervisor::after::wait_for_tasks;
use crate::supervisor::backend;
use crate::supervisor::cgroup::{self, NoCgroup};
use crate::supervisor::clients::Clients;
use crate::supervisor::follow::Follow;
use crate::supervisor::input::Input;
use crate::supervisor::launch::{LOCK_FD, SOCKET_FD};
use crate::supervisor::lock::Lock;
use crate::supervisor::logwatch::LogWatch;
use crate::supervisor::queue::{Waited, wait_for_place};
use crate::supervisor::reach::own_id;
use crate::supervisor::spawn::{AGENT_NOFILE, spawn_agent};
use crate::supervisor::strays::Strays;
use crate::supervisor::unix::{close_fds_from, name_supervisor};
use crate::task::{Containment, Outcome, Started, TaskRecord, TaskSpec, Token, unix_ms};

/// Entry point of `agentctl __supervise TOKEN`. Must run while the process has one thread.
pub fn supervise(home: &Path, token: Token) -> ExitCode {
    name_supervisor();
    // SAFETY: the process is single-threaded here (no runtime has been started).
    match unsafe { fork() } {
        // SAFETY: _exit skips destructors of a process that did nothing else.
        Ok(ForkResult::Parent { .. }) => unsafe { libc::_exit(0) },
        Ok(ForkResult::Child) => {}
        Err(e) => {
            eprintln!("agentctl supervisor: cannot fork: {e}");
            return ExitCode::from(70);
        }
    }
    match Store::at(home) {
        Ok(store) => serve(store, Task::Recorded(token)),
        Err(e) => {
            eprintln!("agentctl supervisor: {e}");
            ExitCode::from(70)
        }
    }
}

/// The task a supervisor starts with.
pub(in crate::supervisor) enum Task {
    /// Saved in the database by its launcher (the MCP server, which keeps its store open).
    Recorded(Token),
    /// A next turn its launcher (the CLI) saved in the database before forking this supervisor.
    Saved(Box<(TaskRecord, TaskSpec)>),
    /// A new task its launcher (the CLI) left in a starting file: this supervisor moves it into
    /// the database (unless a reader did first), and keeps that connection.
    Starting(Box<(TaskRecord, TaskSpec)>),
}

/// The supervisor's whole life, in a detached process whose descriptor 3 holds the task's lock
/// and 4 its control socket.
pub(in crate::supervisor) fn serve(store: Store, task: Task) -> ExitCode {
    match Supervisor::start(store, task) {
        Ok(Some(mut sup)) => {
            sup.run();
            ExitCode::SUCCESS
        }
        Ok(None) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agentctl supervisor: {e}");
            ExitCode::from(70)
        }
    }
}

impl Supervisor {
    /// Set up and spawn the agent. `None` when the agent could not start (recorded as failed),
    /// or the task ended while it waited.
    pub(super) fn start(store: Store, task: Task) -> Result<Option<Supervisor>> {
        let token = match &task {
            Task::Saved(given) | Task::Starting(given) => given.0.token,
            Task::Recorded(token) => *token,
        };
        // SAFETY: the launcher placed the task's locked lock file and its bound control socket
        // on these descriptors.
        let (lock, socket) = unsafe { (OwnedFd::from_raw_fd(LOCK_FD), OwnedFd::from_raw_fd(SOCKET_FD)) };
        for (fd, what) in [(&lock, "lock"), (&socket, "control socket")] {
            nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC))
                .ctx(|| format!("the supervisor was started without its {what}"))?;
        }
        close_fds_from(SOCKET_FD + 1);
        crate::crash::supervising(token.as_str());
        crate::crash::point("supervisor.begun");
        // Who we are, in the lock file, before any process of the task exists.
        let id = own_id();
        let mut lock = Lock::new(lock, id);
        raise_fd_limit();
        redirect_stderr(&store.task_dir(token).join("supervisor.err"));
        // Started by an agent: out of its task's cgroup, as its own task is not part of that one
        // (whose halt would end it too, and which the end notes).
        let stayed = cgroup::leave_task_cgroups(0).err();
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

        let (mut rec, mut spec) = match task {
            Task::Saved(given) => *given,
            Task::Starting(given) => {
                // Not saved: its starting file stays, and whoever reads the task next records
                // it `lost` with this error (our lock is free by then).
                let queued = store.settle_starting(&given.0, &given.1)?;
                crate::crash::point("supervisor.settled");
                let (rec, spec) = *given;
                (TaskRecord { queued, ..rec }, spec)
            }
            Task::Recorded(token) => (store.read_record(token)?, store.read_spec(token)?),
        };
        let socket_path = store.socket_path(token);
        let mut clients = match Clients::new(UnixListener::from(socket)) {
            // Messages sent while it waits for a place are its agent's to read once it runs.
            Ok(mut l) => {
                l.takes_messages = spec.input.is_some();
                l
            }
            Err(e) => {
                refuse_start(&store, &mut rec, &spec, format!("cannot listen on {}: {e}", socket_path.display()))?;
                return Ok(None);
            }
        };
        // The tasks it waits for first, then its place in its pool; a halt while it waits ends
        // it without a run. Its deadline counts from its start.
        let waited = wait_for_tasks(&store, &mut rec, &mut spec, &signals, &mut clients).and_then(|w| match w {
            Waited::Placed => wait_for_place(&store, &mut rec, &spec, &signals, &mut clients, None),
            ended => Ok(ended),
        });
        match waited {
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
                crate::ops::start_hook(&store, &rec);
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
                lock.mark(|note| note.cgroup = Some(made.cgroup.clone()));
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
        let backend = backend::of(&spec);
        backend.at_start(&mut rec);
        let log_path = store.log_path(&rec.role, rec.token);
        let follow = Follow::of(&spec, store.seen_path(token)).map(|f| f.for_turn(rec.run_start, rec.earlier_usage()));
        let opened =
            LogWatch::open(&log_path, store.lines_path(token), follow).and_then(|l| Ok((l.open_for_agent()?, l)));
        // Taken before the agent runs: its run time is never counted short.
        let spawning_at = unix_ms(SystemTime::now());
        let spawned = match opened {
            Ok((output, log)) => Input::for_run(&spec).and_then(|(input, stdin)| {
                let cgroup = contained.as_ref().map(|c| &c.made.cgroup);
                let roads = crate::supervisor::sandbox::roads(&store, token, &spec)?;
                spawn_agent(&output, stdin.as_ref(), &spec, cgroup, &*backend, roads).map(|pid| (pid, log, input))
            }),
            Err(e) => Err(format!("cannot open log {}: {}", log_path.display(), crate::store::files::describe(&e))),
        };
        let (child, log, input) = match spawned {
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
            at_ms: spawning_at,
        };
        rec.started = Some(started);
        crate::crash::point("supervisor.spawned");
        store.write_record(&rec)?;
        let deadline = spec.deadline_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
        let mut sup = Supervisor {
            store,
            rec,
            spec,
            backend,
            signals,
            clients,
            input,
            child,
            contained,
            pending: None,
            deadline_held: false,
            deadline,
            stop: None,
            note: stayed,
            kill_at: None,
            killed: false,
            log,
            lock,
        };
        sup.run_started();
        Ok(Some(sup))
    }
}

/// Record that the agent could not be started, and why.
fn refuse_start(store: &Store, rec: &mut TaskRecord, spec: &TaskSpec, error: String) -> Result<()> {
    let outcome = Outcome::Failed { exit_code: None, signal: None, error: Some(error) };
    let saved = store.finish(rec, outcome, None, None, Some(&spec.result));
    crate::ops::start_hook(store, rec);
    saved
}

/// Take the descriptor limit up to its hard maximum: each waiting client holds one descriptor,
/// and a thousand waiters must not leave a halt unable to connect. (The agent gets the limit
/// it would have had: see `spawn`.)
fn raise_fd_limit() {
    // SAFETY: getrlimit/setrlimit on this process with a limit struct we own.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max {
            AGENT_NOFILE.store(limit.rlim_cur, std::sync::atomic::Ordering::Relaxed);
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
