//! Talking to Slurm about a task's job: its id (by its unique name), its state, a signal to
//! its processes, its cancellation. Slurm's own commands do it (`squeue`, `scancel`), found on
//! `PATH` as for the user.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::task::SlurmJob;

/// What `squeue` is asked to print of a job: id, state, reason, node, start time (in seconds
/// since the epoch, by `SLURM_TIME_FORMAT`).
const FORMAT: &str = "--format=%i|%T|%r|%N|%S";

/// The job named `name` (other than `not`), once Slurm lists it (srun submits it as it
/// starts); `None` after `limit`, or once `submitting` says srun gave up (it exited).
pub fn find(name: &str, limit: Duration, submitting: impl Fn() -> bool, not: Option<u64>) -> Option<SlurmJob> {
    let end = Instant::now() + limit;
    loop {
        let out = squeue(&["--name", name]);
        if let Some(job) = out.lines().filter_map(parse).find(|j| Some(j.job_id) != not) {
            return Some(job);
        }
        if Instant::now() >= end || !submitting() {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What Slurm says of job `id` now, ended or not (an empty state once it has forgotten the job).
pub fn describe(id: u64) -> SlurmJob {
    let out = squeue(&["--states=all", "--jobs", &id.to_string()]);
    out.lines().find_map(parse).filter(|j| j.job_id == id).unwrap_or(SlurmJob { job_id: id, ..SlurmJob::default() })
}

/// What Slurm says of job `id` once its step has ended: its final state, with a `COMPLETING`
/// job (its processes still being ended, an epilog running) waited for up to `limit`.
pub fn ended(id: u64, limit: Duration) -> SlurmJob {
    let end = Instant::now() + limit;
    loop {
        let job = describe(id);
        if job.state != "COMPLETING" || Instant::now() >= end {
            return job;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
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

/// `squeue`'s lines for `filter`, without a header (nothing if it cannot be run).
fn squeue(filter: &[&str]) -> String {
    quiet(Command::new("squeue").arg("--noheader").args(filter).arg(FORMAT).env("SLURM_TIME_FORMAT", "%s"))
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// One line of `FORMAT`.
fn parse(line: &str) -> Option<SlurmJob> {
    let mut f = line.split('|').map(|s| s.trim().to_owned());
    let job_id = f.next()?.parse().ok()?;
    let (state, reason, node) = (f.next()?, f.next().unwrap_or_default(), f.next().unwrap_or_default());
    // A pending job's is when Slurm expects to start it, if it knows.
    let started_s = f.next().and_then(|s| s.parse().ok()).filter(|_| state != "PENDING");
    Some(SlurmJob { job_id, state, reason, node, started_s })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeue_lines_are_read() {
        let job = parse("12|PENDING|Resources||1795409999").unwrap();
        assert_eq!(
            (job.job_id, job.state.as_str(), job.reason.as_str(), job.node.as_str()),
            (12, "PENDING", "Resources", "")
        );
        assert_eq!(job.started_s, None);
        let job = parse("13|RUNNING|None|vm|1795409561").unwrap();
        assert_eq!((job.node.as_str(), job.started_s), ("vm", Some(1_795_409_561)));
        assert_eq!(parse("14|RUNNING|None|vm|N/A").unwrap().started_s, None);
        assert_eq!(parse("garbage"), None);
        assert_eq!(parse(""), None);
    }
}
