//! Starting a task's supervisor: detached (own session, double fork, nothing inherited but the
//! task's lock on fd 3), reporting "started" or the exec error before the launcher returns.
//! The CLI forks it from itself; the multi-threaded MCP server executes `__supervise`.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::unistd::{ForkResult, fork, pipe2, setsid};

use super::reach::resume;
use super::run::Task;
use super::unix::{name_supervisor, set_cmdline, single_threaded};
use crate::error::{Error, IoContext, Result};
use crate::store::{FileLock, Store};
use crate::task::{Started, TaskRecord, TaskSpec, Token};

/// The descriptor on which the supervisor finds its (already held) lock.
pub(super) const LOCK_FD: i32 = 3;

/// Start the supervisor of the new task `rec`, handing it `lock`; the task is saved before its
/// agent starts. Returns how the agent started, or `None` if the supervisor died (or stopped)
/// without saying: the task is then `lost`, and whoever looks at it next ends what it left. A
/// task that cannot be saved leaves nothing behind.
///
/// A single-threaded launcher (the CLI) forks the supervisor from itself, and the supervisor
/// saves the task and keeps its connection to the store: a start opens the store once. A
/// multi-threaded one (the MCP server), where a forked child may only exec, saves the task with
/// its own connections and runs this binary as `__supervise`. Both end the same: a detached
/// process in its own session, its lock on descriptor 3, the report pipe on stdout.
pub fn launch(store: &Store, rec: &TaskRecord, spec: &TaskSpec, lock: FileLock) -> Result<Option<Started>> {
    // A task's next turn keeps what it has (its earlier turns) when this one cannot start.
    let unsaved = |e| {
        if rec.turns.is_empty() {
            store.discard_task(&rec.role, rec.token);
        }
        e
    };
    let report = if single_threaded() {
        launch_in_place(store, rec, spec, lock).map_err(unsaved)?
    } else {
        store.save_start(rec, spec).map_err(unsaved)?;
        launch_by_exec(store, rec.token, lock)?
    };
    match report {
        Report::Started(started) => Ok(Some(started)),
        // It exists, and waits: its record says so.
        Report::Queued => Ok(None),
        Report::Failed(msg) => Err(Error::LaunchFailed(msg)),
        Report::Unsaved(e) => Err(unsaved(e)),
        Report::Silent => {
            // Gone (not stopped) before it saved the task: nothing of it exists.
            let gone = FileLock::try_take(&store.lock_path(rec.token))?.is_some();
            if gone && matches!(store.read_record(rec.token), Err(Error::UnknownToken { .. })) {
                return Err(unsaved(Error::Internal(format!(
                    "the supervisor of task {} died before it saved the task; nothing was started: try again",
                    rec.token
                ))));
            }
            Ok(None)
        }
    }
}

fn launch_by_exec(store: &Store, token: Token, lock: FileLock) -> Result<Report> {
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
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let lock_fd = lock.raw_fd();
    // SAFETY: only async-signal-safe calls (setsid, dup2, fcntl) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            if hand_over_lock(lock_fd) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let spawned = cmd.spawn();
    // The supervisor's descriptor shares the lock now; closing ours leaves it held.
    drop(lock);
    let mut child = spawned.ctx(|| "cannot start the task's supervisor".into())?;
    let report = child.stdout.take().expect("piped");
    // The first process exits as soon as it has forked the real supervisor.
    read_report(store, token, report.into(), || {
        let _ = child.wait();
    })
}

/// Fork the supervisor from this single-threaded process: one program start-up less than
/// `launch_by_exec`, the same detachment (new session, stdio and lock in place). One fork, not
/// two: the supervisor is this process's child, and the CLI that launched it exits (or returns
/// from its wait) long before a zombie could matter; init or a subreaper adopts it then.
/// Errors here come before anything is saved.
fn launch_in_place(store: &Store, rec: &TaskRecord, spec: &TaskSpec, lock: FileLock) -> Result<Report> {
    let token = rec.token;
    let (from_supervisor, to_launcher) =
        pipe2(OFlag::O_CLOEXEC).ctx(|| "cannot create the start-report pipe".into())?;
    let null = File::options().read(true).write(true).open("/dev/null").ctx(|| "cannot open /dev/null".into())?;
    // Nothing buffered may be written twice, by the child too; no database connection may be
    // shared with it (SQLite's locks and descriptors are per process).
    let _ = std::io::stdout().flush();
    store.close_db();
    // SAFETY: the process has one thread, so the child may run any code. It never returns into
    // the caller: it ends with _exit, after the supervisor's life or a failed step.
    match unsafe { fork() }.ctx(|| "cannot fork the task's supervisor".into())? {
        ForkResult::Parent { .. } => {
            drop(to_launcher);
            // The supervisor's descriptor shares the lock now; closing ours leaves it held.
            drop(lock);
            Ok(read_report(store, token, from_supervisor, || {}).unwrap_or(Report::Silent))
        }
        ForkResult::Child => {
            name_supervisor();
            let detached = setsid().is_ok()
                && [(null.as_raw_fd(), 0), (to_launcher.as_raw_fd(), 1), (null.as_raw_fd(), 2)]
                    // SAFETY: dup2 onto the standard descriptors of this child.
                    .iter()
                    .all(|&(from, to)| unsafe { libc::dup2(from, to) } != -1)
                && std::env::set_current_dir("/").is_ok()
                && hand_over_lock(lock.raw_fd()) != -1;
            let code = if detached {
                set_cmdline(&["agentctl", "__supervise", token.as_str()]);
                let task = Task::Unsaved(Box::new((rec.clone(), spec.clone())));
                if super::run::serve(store.detached(), task) == std::process::ExitCode::SUCCESS { 0 } else { 70 }
            } else {
                report(&format!("error cannot detach the supervisor: {}", std::io::Error::last_os_error()));
                70
            };
            // SAFETY: ends this child without unwinding into the caller or running its
            // destructors (the runtime, the launcher's buffers).
            unsafe { libc::_exit(code) }
        }
    }
}

/// Put the held lock on `LOCK_FD`, inheritable. Async-signal-safe; -1 on failure.
fn hand_over_lock(fd: i32) -> i32 {
    // SAFETY: fcntl and dup2 on descriptors this process owns.
    unsafe { if fd == LOCK_FD { libc::fcntl(LOCK_FD, libc::F_SETFD, 0) } else { libc::dup2(fd, LOCK_FD) } }
}

/// How long a launcher waits for the start report once the task is saved. A supervisor reports
/// within milliseconds; one that has not by then is being stopped by its own agent (SIGSTOP),
/// or the machine is drowning: the task exists, and is handed back as it stands.
const REPORT_WAIT: Duration = Duration::from_secs(5);
/// How long it waits, at most, for a live supervisor to save the task at all: a token handed
/// back before that would name a task nobody knows yet. A hang guard; it saves in milliseconds.
const SAVE_WAIT: Duration = Duration::from_secs(120);

/// Read the supervisor's start report line, reap the first child with `reap`, and parse it.
/// While it has not come, a supervisor that was stopped is woken.
fn read_report(store: &Store, token: Token, pipe: OwnedFd, reap: impl FnOnce()) -> Result<Report> {
    let began = Instant::now();
    let mut pipe = File::from(pipe);
    let mut report = Vec::new();
    let mut chunk = [0u8; 512];
    let read = loop {
        let mut fds = [PollFd::new(pipe.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(100u8)) {
            Ok(0) => {
                let waited = began.elapsed();
                if waited >= SAVE_WAIT || (waited >= REPORT_WAIT && saved(store, token)) {
                    break Ok(());
                }
                if let Some(id) = store.supervisor_id(token) {
                    resume(id);
                }
                continue;
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => break Err(std::io::Error::from(e)),
            Ok(_) => {}
        }
        match pipe.read(&mut chunk) {
            Ok(0) => break Ok(()),
            Ok(n) => {
                report.extend_from_slice(&chunk[..n]);
                if report.contains(&b'\n') {
                    break Ok(());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => break Err(e),
        }
    };
    reap();
    read.ctx(|| "cannot read the supervisor's start report".into())?;
    parse_report(&String::from_utf8_lossy(&report))
}

/// Whether task `token` is in the store (an error reading it says it is: it is not unknown).
fn saved(store: &Store, token: Token) -> bool {
    !matches!(store.read_record(token), Err(Error::UnknownToken { .. }))
}

/// What a supervisor says at its start, in one line on the report pipe.
#[derive(Debug)]
enum Report {
    /// `ok <pid> <supervisor pid> <session id> <at_ms>`: the agent runs.
    Started(Started),
    /// `error <message>`: the agent could not start; the task is recorded as failed.
    Failed(String),
    /// `unsaved <error line>`: the task could not be saved; nothing of it exists.
    Unsaved(Error),
    /// `queued`: the task waits for a place in its pool; its supervisor starts the agent when
    /// it has one.
    Queued,
    /// Nothing: the supervisor died (or was stopped) first.
    Silent,
}

/// The report of an agent that runs (read by `parse_report`).
pub(super) fn started_report(s: &Started) -> String {
    format!("ok {} {} {} {}", s.pid, s.supervisor_pid, s.sid, s.at_ms)
}

fn parse_report(report: &str) -> Result<Report> {
    let line = report.trim_end();
    if let Some(fields) = line.strip_prefix("ok ") {
        let n: Vec<i64> = fields.split(' ').map_while(|f| f.parse().ok()).collect();
        return match n[..] {
            [pid, supervisor_pid, sid, at_ms] => Ok(Report::Started(Started {
                pid: pid as i32,
                supervisor_pid: supervisor_pid as i32,
                sid: sid as i32,
                at_ms: at_ms as u64,
            })),
            _ => Err(Error::Internal(format!("bad start report from supervisor: {line:?}"))),
        };
    }
    if let Some(msg) = line.strip_prefix("error ") {
        return Ok(Report::Failed(msg.to_owned()));
    }
    if let Some(e) = line.strip_prefix("unsaved ") {
        return Ok(Report::Unsaved(Error::from_line(e)));
    }
    if line == "queued" {
        return Ok(Report::Queued);
    }
    Ok(Report::Silent)
}

/// Write the start report on the supervisor's stdout (a pipe to the launcher).
pub(super) fn report(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_parse() {
        let started = Started { pid: 42, supervisor_pid: 41, sid: 41, at_ms: 1_700_000_000_123 };
        assert!(matches!(
            parse_report(&format!("{}\n", started_report(&started))).unwrap(),
            Report::Started(Started { pid: 42, supervisor_pid: 41, sid: 41, at_ms: 1_700_000_000_123 })
        ));
        assert!(parse_report("ok 42\n").is_err());
        assert!(
            matches!(parse_report("error cannot run `x`: not found\n").unwrap(), Report::Failed(m) if m.contains("`x`"))
        );
        let full =
            Error::Io { context: "cannot save task a3f2c1".into(), source: std::io::ErrorKind::StorageFull.into() };
        assert!(matches!(
            parse_report(&format!("unsaved {}\n", full.to_line())).unwrap(),
            Report::Unsaved(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::StorageFull
        ));
        assert!(matches!(parse_report("").unwrap(), Report::Silent));
    }
}
