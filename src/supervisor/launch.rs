//! Starting a task's supervisor: detached (own session, nothing inherited but the task's lock on
//! fd 3 and its control socket, bound and listening, on fd 4), once the task is saved. The
//! launcher does not wait for it: the token it hands back names a saved task whose lock the
//! supervisor holds, and a supervisor that dies before its agent runs leaves a task the next
//! look records `lost`. The CLI saves a new task in a starting file (no database on the way:
//! see `store::starting`) and forks the supervisor from itself; the multi-threaded MCP server
//! saves it in the database and executes `__supervise`.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use nix::unistd::{ForkResult, fork, setsid};

use super::run::Task;
use super::unix::{name_supervisor, set_cmdline, single_threaded};
use crate::error::{IoContext, Result};
use crate::store::{FileLock, Store};
use crate::task::{TaskRecord, TaskSpec, Token};

/// The descriptor on which the supervisor finds its (already held) lock.
pub(super) const LOCK_FD: i32 = 3;
/// The descriptor on which it finds its control socket, bound and listening.
pub(super) const SOCKET_FD: i32 = 4;

/// Who hands a new task back the moment it is saved (`launch`).
pub type Announced<'a> = Box<dyn FnOnce(&TaskRecord) + 'a>;

/// Hand the new task `rec` back with `announce`, then leave the caller's pipes: stdout and
/// stderr point at /dev/null from then on. A supervisor forked while this process held them
/// would hold them until it first ran, and whoever reads them (a shell's `$(…)`, an agent's
/// tool) would wait for that: an idle core can take a millisecond to run a new process. Nothing
/// is said after it (a fork that fails leaves the task to be found `lost`).
fn announce(rec: &TaskRecord, announce: Announced<'_>) {
    announce(rec);
    use std::io::Write;
    let _ = std::io::stdout().flush();
    if let Ok(null) = File::options().write(true).open("/dev/null") {
        let _ = nix::unistd::dup2_stdout(&null);
        let _ = nix::unistd::dup2_stderr(&null);
    }
}

/// Save the new task `rec` (or its next turn) and start its supervisor, handing it `lock`.
/// Returns whether the task waits (for a place in its pool, or for other tasks) rather than
/// starting at once, as far as its launcher knows (a new task from the CLI is placed by its
/// supervisor: `false`). A task that cannot be saved, or whose supervisor cannot be started,
/// leaves nothing behind (a next turn keeps its earlier ones).
///
/// Its control socket is bound here, before the supervisor exists: whoever awaits or halts the
/// task connects at once, and the supervisor takes the connection when it looks. A new task
/// the CLI forks a supervisor for is handed to `announced` as soon as it is saved, before the
/// fork (see `announce`); elsewhere `announced` is not called.
pub fn launch(
    store: &Store,
    rec: &TaskRecord,
    spec: &TaskSpec,
    lock: FileLock,
    announced: Option<Announced<'_>>,
) -> Result<bool> {
    let unsaved = |e| {
        if rec.turns.is_empty() {
            store.remove_starting(rec.token);
            store.discard_task(&rec.role, rec.token);
        }
        e
    };
    let socket = super::clients::bind(&store.socket_path(rec.token)).map_err(unsaved)?;
    let new = rec.turns.is_empty();
    let mut handed_back = false;
    if single_threaded() {
        let (queued, task) = if new {
            // Its place in its pool is its supervisor's to take (it may wait for one).
            let queued = crate::store::waits_first(spec);
            let rec = TaskRecord { queued, ..rec.clone() };
            store.write_starting(&rec, spec).map_err(unsaved)?;
            crate::crash::point("launch.saved");
            if let Some(announced) = announced {
                announce(&rec, announced);
                handed_back = true;
            }
            (queued, Task::Starting(Box::new((rec, spec.clone()))))
        } else {
            let queued = store.save_start(rec, spec)?;
            (queued, Task::Saved(Box::new((TaskRecord { queued, ..rec.clone() }, spec.clone()))))
        };
        return match fork_supervisor(store, rec.token, task, lock, socket) {
            Ok(()) => Ok(queued),
            // Handed back already: its lock, free once we exit, has it found `lost`.
            Err(e) if handed_back => Err(e),
            Err(e) if new => Err(unsaved(e)),
            Err(e) => Err(unstarted(store, rec, spec, e)),
        };
    }
    let queued = store.save_start(rec, spec).map_err(unsaved)?;
    exec_supervisor(store, rec.token, lock, socket).map_err(|e| unstarted(store, rec, spec, e))?;
    Ok(queued)
}

/// A task saved in the database whose supervisor could not be started: it ends as failed,
/// saying why, rather than waiting for a supervisor that does not exist.
fn unstarted(store: &Store, rec: &TaskRecord, spec: &TaskSpec, e: crate::error::Error) -> crate::error::Error {
    let mut saved = store.read_record(rec.token).unwrap_or_else(|_| rec.clone());
    let outcome = crate::task::Outcome::Failed { exit_code: None, signal: None, error: Some(e.to_string()) };
    let _ = store.finish(&mut saved, outcome, None, None, Some(&spec.result));
    let _ = std::fs::remove_file(store.socket_path(rec.token));
    e
}

/// Run this binary as `__supervise TOKEN` (a multi-threaded process may only exec after a
/// fork); it forks the real supervisor and exits at once, which is waited for.
fn exec_supervisor(store: &Store, token: Token, lock: FileLock, socket: UnixListener) -> Result<()> {
    let exe = if cfg!(target_os = "linux") {
        // Works even when the binary was replaced on disk since this process started.
        std::path::PathBuf::from("/proc/self/exe")
    } else {
        std::env::current_exe().ctx(|| "cannot find the agentctl binary".into())?
    };
    let mut cmd = Command::new(exe);
    cmd.arg0("agentctl")
        .arg("--home")
        .arg(store.home())
        .arg("__supervise")
        .arg(token.as_str())
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let fds = (lock.raw_fd(), socket.as_raw_fd());
    // SAFETY: only async-signal-safe calls (setsid, dup2, fcntl) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() == -1 || hand_over(fds) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let spawned = cmd.spawn();
    // The supervisor's descriptors share the lock and the socket now; closing ours leaves both.
    drop((lock, socket));
    let mut child = spawned.ctx(|| "cannot start the task's supervisor".into())?;
    // The first process exits as soon as it has forked the real supervisor.
    let _ = child.wait();
    Ok(())
}

/// Fork the supervisor from this single-threaded process: one program start-up less than
/// `exec_supervisor`, the same detachment (new session, stdio on /dev/null, lock and socket in
/// place). One fork, not two: the supervisor is this process's child, and the CLI that launched
/// it exits (or returns from its wait) long before a zombie could matter; init or a subreaper
/// adopts it then.
fn fork_supervisor(store: &Store, token: Token, task: Task, lock: FileLock, socket: UnixListener) -> Result<()> {
    let null = File::options().read(true).write(true).open("/dev/null").ctx(|| "cannot open /dev/null".into())?;
    // Nothing buffered may be written twice, by the child too; no database connection may be
    // shared with it (SQLite's locks and descriptors are per process).
    use std::io::Write;
    let _ = std::io::stdout().flush();
    store.close_db();
    // SAFETY: the process has one thread, so the child may run any code. It never returns into
    // the caller: it ends with _exit, after the supervisor's life or a failed step.
    match unsafe { fork() }.ctx(|| "cannot fork the task's supervisor".into())? {
        ForkResult::Parent { child } => {
            crate::crash::point("launch.forked");
            // The supervisor's descriptors share the lock and the socket now.
            drop((lock, socket));
            // Started by an agent: out of its task's cgroup before that agent can end, and its
            // task's end with it (the supervisor tries too, and notes a failure).
            if std::env::var_os("AGENTCTL_TOKEN").is_some_and(|t| !t.is_empty()) {
                let _ = super::cgroup::leave_task_cgroups(child.as_raw() as u32);
            }
            Ok(())
        }
        ForkResult::Child => {
            name_supervisor();
            let detached = setsid().is_ok()
                && [0, 1, 2]
                    .iter()
                    // SAFETY: dup2 onto the standard descriptors of this child.
                    .all(|&to| unsafe { libc::dup2(null.as_raw_fd(), to) } != -1)
                && std::env::set_current_dir("/").is_ok()
                && hand_over((lock.raw_fd(), socket.as_raw_fd())) != -1;
            let code = if detached {
                set_cmdline(&["agentctl", "__supervise", token.as_str()]);
                if super::run::serve(store.detached(), task) == std::process::ExitCode::SUCCESS { 0 } else { 70 }
            } else {
                70
            };
            // SAFETY: ends this child without unwinding into the caller or running its
            // destructors (the runtime, the launcher's buffers).
            unsafe { libc::_exit(code) }
        }
    }
}

/// Put the held lock on `LOCK_FD` and the listening socket on `SOCKET_FD`, inheritable.
/// Async-signal-safe; -1 on failure.
fn hand_over((lock, socket): (i32, i32)) -> i32 {
    // SAFETY: fcntl and dup2 on descriptors this process owns.
    unsafe {
        // The socket first, should it sit where the lock goes.
        let socket = if socket == LOCK_FD {
            let moved = libc::fcntl(socket, libc::F_DUPFD_CLOEXEC, SOCKET_FD + 1);
            if moved == -1 {
                return -1;
            }
            moved
        } else {
            socket
        };
        let onto =
            |from: i32, to: i32| if from == to { libc::fcntl(to, libc::F_SETFD, 0) } else { libc::dup2(from, to) };
        if onto(lock, LOCK_FD) == -1 {
            return -1;
        }
        onto(socket, SOCKET_FD)
    }
}
