//! Starting a task's supervisor: detached (own session, double fork, nothing inherited but the
//! task's lock on fd 3), reporting "started" or the exec error before the launcher returns.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use crate::error::{Error, IoContext, Result};
use crate::store::{FileLock, Store};
use crate::task::Token;

/// The descriptor on which the supervisor finds its (already held) lock.
pub(super) const LOCK_FD: i32 = 3;

/// Start the supervisor of `token`, handing it `lock`. Returns the agent's pid once it runs.
pub fn launch(store: &Store, token: Token, lock: FileLock) -> Result<i32> {
    let exe = if cfg!(target_os = "linux") {
        // Works even when the binary was replaced on disk since this process started.
        std::path::PathBuf::from("/proc/self/exe")
    } else {
        std::env::current_exe().ctx(|| "cannot find the agentctl binary".into())?
    };
    let mut cmd = Command::new(exe);
    cmd.arg("--home")
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
            let rc =
                if lock_fd == LOCK_FD { libc::fcntl(LOCK_FD, libc::F_SETFD, 0) } else { libc::dup2(lock_fd, LOCK_FD) };
            if rc == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let spawned = cmd.spawn();
    // The supervisor's descriptor shares the lock now; closing ours leaves it held.
    drop(lock);
    let mut child = spawned.ctx(|| "cannot start the task's supervisor".into())?;
    let mut report = String::new();
    let read = child.stdout.take().expect("piped").read_to_string(&mut report);
    // The first process exits as soon as it has forked the real supervisor.
    let _ = child.wait();
    read.ctx(|| "cannot read the supervisor's start report".into())?;
    parse_report(&report, token)
}

/// `ok <pid>` or `error <message>`, one line, from the supervisor.
fn parse_report(report: &str, token: Token) -> Result<i32> {
    let line = report.trim_end();
    if let Some(pid) = line.strip_prefix("ok ") {
        return pid.parse().map_err(|_| Error::Internal(format!("bad start report from supervisor: {line:?}")));
    }
    if let Some(msg) = line.strip_prefix("error ") {
        return Err(Error::LaunchFailed(msg.to_owned()));
    }
    Err(Error::Internal(format!(
        "the supervisor of task {token} exited without reporting a start; see tasks/{token}/supervisor.err in the home"
    )))
}

/// Write the start report on the supervisor's stdout (a pipe to the launcher).
pub(super) fn report(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_parse() {
        let t = Token::parse("abcdef").unwrap();
        assert_eq!(parse_report("ok 42\n", t).unwrap(), 42);
        assert!(
            matches!(parse_report("error cannot run `x`: not found\n", t), Err(Error::LaunchFailed(m)) if m.contains("`x`"))
        );
        assert!(matches!(parse_report("", t), Err(Error::Internal(_))));
    }
}
