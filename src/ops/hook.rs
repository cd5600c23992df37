//! A task's `on_end` hook: started by whoever records the task's end (its supervisor, the lost
//! path, a halt that took over), in a process of its own (`agentctl __hook TOKEN`) that
//! outlives them, a supervisor killed mid-hook included. That process takes the hook in the
//! store first, so that it runs exactly once; it runs the command with the task in its
//! environment and its result as JSON on stdin, its output in `TOKEN.hook.log` beside the task's
//! log, kills it past its limit, and notes in the task how it failed, if it did (never changing
//! the task's outcome).

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::store::Store;
use crate::task::{TaskRecord, Token};

/// `agentctl __hook TOKEN`: detach, then run the task's hook if this process is the one to.
/// Must run while the process has one thread.
pub fn run_detached(home: &std::path::Path, token: Token) -> ExitCode {
    // SAFETY: single-threaded (no runtime yet); the parent only exits.
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Parent { .. }) => return ExitCode::SUCCESS,
        Ok(nix::unistd::ForkResult::Child) => {}
        Err(_) => return ExitCode::from(70),
    }
    let _ = nix::unistd::setsid();
    // Started from inside a task (an agent's own agentctl): out of that task's cgroup, whose end
    // would end the hook too.
    let _ = crate::supervisor::cgroup::leave_task_cgroups(0);
    let ran = Store::at(home).and_then(|store| run(&store, token));
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(70),
    }
}

/// Take and run task `token`'s hook (nothing if another process took it).
fn run(store: &Store, token: Token) -> Result<()> {
    let Some(turn) = store.take_hook(token)? else { return Ok(()) };
    let rec = store.read_record(token)?;
    let Some(hook) = store.read_spec(token)?.on_end else { return store.hook_done(token, turn, None) };
    let view = super::status(store, token)?;
    let log = store.log_path(&rec.role, token).with_extension("hook.log");
    let note = ran(&hook.argv, Duration::from_millis(hook.limit_ms), &rec, &view, store, &log);
    store.hook_done(token, turn, note.as_deref())
}

/// Run `argv` for the task `rec` (its view `view`) with `limit`; how it failed, if it did.
fn ran(
    argv: &[String],
    limit: Duration,
    rec: &TaskRecord,
    view: &super::TaskView,
    store: &Store,
    log: &PathBuf,
) -> Option<String> {
    let output = std::fs::OpenOptions::new().create(true).append(true).open(log);
    let (out, err) = match output.and_then(|f| Ok((f.try_clone()?, f))) {
        Ok((a, b)) => (Stdio::from(a), Stdio::from(b)),
        Err(_) => (Stdio::null(), Stdio::null()),
    };
    let exit = rec.ended.as_ref().and_then(|e| e.outcome.exit_code()).map(|c| c.to_string()).unwrap_or_default();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env("AGENTCTL_TOKEN", rec.token.as_str())
        .env("AGENTCTL_STATUS", rec.status().as_str())
        .env("AGENTCTL_ROLE", rec.role.as_str())
        .env("AGENTCTL_SUMMARY_FILE", store.summary_path(&rec.role, rec.token))
        .env("AGENTCTL_EXIT_CODE", exit)
        .env("AGENTCTL_HOME", store.home())
        .stdin(Stdio::piped())
        .stdout(out)
        .stderr(err)
        .process_group(0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Some(format!("its on_end hook `{}` could not start: {e}", argv[0])),
    };
    let deadline = Instant::now() + limit;
    if let Some(mut stdin) = child.stdin.take() {
        // Written aside: a hook that does not read it must not hold the limit off. One that
        // reads nothing closes its end: that is no failure.
        let mut json = serde_json::to_vec(view).unwrap_or_default();
        json.push(b'\n');
        std::thread::spawn(move || stdin.write_all(&json));
    }
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ =
                    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::SIGKILL);
                let _ = child.wait();
                return Some(format!(
                    "its on_end hook ran past its limit of {} and was killed (its output: {})",
                    super::human_duration(limit.as_millis() as u64),
                    log.display()
                ));
            }
        }
    };
    match status.code() {
        Some(0) => None,
        Some(code) => Some(format!("its on_end hook exited {code} (its output: {})", log.display())),
        None => Some(format!("its on_end hook was killed by a signal (its output: {})", log.display())),
    }
}
