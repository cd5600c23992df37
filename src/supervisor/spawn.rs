//! The one step that starts an agent process. Another backend (remote execution) would stand
//! beside this function and keep the rest of the supervisor.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use nix::unistd::Pid;

use crate::store::Store;
use crate::task::{TaskRecord, TaskSpec};

/// Start the agent in its own process group, output to the log, nothing else inherited.
pub(super) fn spawn_agent(store: &Store, rec: &TaskRecord, spec: &TaskSpec) -> std::result::Result<Pid, String> {
    let log_path = store.log_path(&rec.role, rec.token);
    let log = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&log_path)
        .map_err(|e| format!("cannot open log {}: {e}", log_path.display()))?;
    let err = log.try_clone().map_err(|e| format!("cannot open log {}: {e}", log_path.display()))?;
    let mut cmd = match &spec.program {
        Some(program) => Command::new(program),
        None => Command::new(&spec.argv[0]),
    };
    cmd.arg0(&spec.argv[0])
        .args(&spec.argv[1..])
        .current_dir(&spec.cwd)
        .envs(&spec.env)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .process_group(0);
    let supervisor = std::process::id() as libc::pid_t;
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // The agent dies with its supervisor rather than running on unsupervised.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != supervisor {
                libc::_exit(1);
            }
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            reset_dispositions();
            Ok(())
        });
    }
    match cmd.spawn() {
        Ok(child) => Ok(Pid::from_raw(child.id() as i32)),
        Err(e) => Err(format!("cannot run `{}`: {e}", spec.argv[0])),
    }
}

/// Set every signal back to its default action. Exec resets caught signals but keeps ignored
/// ones, so an agentctl started under `nohup` (or a runner that ignores SIGTERM) would hand its
/// agents a SIGTERM they cannot receive. The raw system call also reaches the two real-time
/// signals libc reserves for itself. Async-signal-safe.
fn reset_dispositions() {
    // The kernel's `struct sigaction` all zero: SIG_DFL, no flags, no restorer, empty mask.
    let default = [0u64; 4];
    for sig in 1..=64 {
        if sig != libc::SIGKILL && sig != libc::SIGSTOP {
            // SAFETY: the kernel reads 32 bytes of `default` (8-byte mask); no old action is
            // returned.
            unsafe {
                libc::syscall(libc::SYS_rt_sigaction, sig, default.as_ptr(), std::ptr::null_mut::<u64>(), 8usize);
            }
        }
    }
}
