//! Talking to Slurm about a task's job: its id (by its unique name), its state, a signal to
//! its processes, its cancellation. Slurm's own commands do it (`squeue`, `scancel`), found on
//! `PATH` as for the user.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::task::SlurmJob;

/// The id of the job named `name`, once Slurm lists it (srun submits it as it starts); `None`
/// after `limit`, or once `submitting` says srun gave up (it exited).
pub fn job_id(name: &str, limit: Duration, submitting: impl Fn() -> bool) -> Option<u64> {
    let end = Instant::now() + limit;
    loop {
        let out = quiet(Command::new("squeue").args(["--noheader", "--name", name, "--format=%i"])).output().ok()?;
        if let Some(id) = String::from_utf8_lossy(&out.stdout).lines().find_map(|l| l.trim().parse().ok()) {
            return Some(id);
        }
        if Instant::now() >= end || !submitting() {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What Slurm says of job `id` now (an empty state once it has forgotten the job).
pub fn describe(id: u64) -> SlurmJob {
    let out = quiet(Command::new("squeue").args(["--noheader", "--jobs", &id.to_string(), "--format=%T|%r|%N"]))
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let mut f = out.lines().next().unwrap_or("").split('|').map(|s| s.trim().to_owned());
    let (state, reason, node) =
        (f.next().unwrap_or_default(), f.next().unwrap_or_default(), f.next().unwrap_or_default());
    SlurmJob { job_id: id, state, reason, node }
}

/// Send `signal` (`TERM`, `CONT`…) to the processes of job `id`, leaving the job to end as
/// they do: what a halt's grace needs (srun itself would cancel the step at once).
pub fn signal(id: u64, signal: &str) {
    run(Command::new("scancel").args([&format!("--signal={signal}"), &id.to_string()]));
}

/// Cancel job `id`: Slurm ends its processes (SIGTERM, SIGKILL after its KillWait) and its
/// allocation.
pub fn cancel(id: u64) {
    run(Command::new("scancel").arg(id.to_string()));
}

fn quiet(c: &mut Command) -> &mut Command {
    c.stdin(Stdio::null()).stderr(Stdio::null())
}

fn run(c: &mut Command) {
    match quiet(c).stdout(Stdio::null()).status() {
        Ok(s) if s.success() => {}
        Ok(s) => eprintln!("agentctl supervisor: {c:?} exited {s}"),
        Err(e) => eprintln!("agentctl supervisor: cannot run {c:?}: {e}"),
    }
}
