//! Talking to Slurm about a task's job: its id (by its unique name), its state, a signal to
//! its processes, its cancellation. Slurm's own commands do it (`squeue`, `scancel`), each
//! given a time limit: a controller that does not answer delays a halt, never stops it.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::task::{SlurmEnd, SlurmJob, TaskSpec};

/// What `squeue` is asked to print of a job: id, state, reason, node, start time (in seconds
/// since the epoch, by `SLURM_TIME_FORMAT`), name (last: it may hold a `|`).
const FORMAT: &str = "--format=%i|%T|%r|%N|%S|%j";

/// How long a job whose step ended may stay `COMPLETING` (an epilog running) before its state
/// is taken as it is.
const COMPLETES_IN: Duration = Duration::from_secs(5);

/// The longest one of Slurm's commands may take (its own default for a message is 10 s).
const ANSWER_IN: Duration = Duration::from_secs(15);

/// Slurm's commands of a task: those beside the `srun` that submitted its job (a template's
/// PATH may name a Slurm that the caller's does not), else those on PATH, with the task's
/// variables (its template's `SLURM_CONF`, say) as srun had them.
pub struct Commands {
    dir: Option<PathBuf>,
    env: BTreeMap<String, String>,
}

impl Commands {
    /// The commands of the task whose spec is `spec`.
    pub fn of(spec: &TaskSpec) -> Commands {
        Commands { dir: spec.program.as_deref().and_then(Path::parent).map(Path::to_owned), env: spec.env.clone() }
    }

    /// The job named `name`, once Slurm lists it among the user's (srun submits it as it
    /// starts; a job that ended at once is listed too): the newest but those `seen` (earlier
    /// runs'). `None` after `limit`, or once `submitting` says srun gave up (it exited).
    pub fn find(
        &self,
        name: &str,
        limit: Duration,
        submitting: impl Fn() -> bool,
        seen: &[u64],
    ) -> Result<Option<SlurmJob>, String> {
        let end = Instant::now() + limit;
        loop {
            let out = self.squeue(&["--me", "--states=all", "--name", name]);
            let jobs = out.as_deref().unwrap_or("").lines().filter_map(parse);
            if let Some(job) = jobs.filter(|j| !seen.contains(&j.job_id)).max_by_key(|j| j.job_id) {
                return Ok(Some(job));
            }
            if Instant::now() >= end || !submitting() {
                return out.map(|_| None);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What Slurm says of job `id` now, ended or not; `None` if it cannot say (squeue failed,
    /// or the job is forgotten).
    pub fn describe(&self, id: u64) -> Option<SlurmJob> {
        let out = self.squeue(&["--states=all", "--jobs", &id.to_string()]).ok()?;
        out.lines().filter_map(parse).find(|j| j.job_id == id)
    }

    /// What Slurm says of job `id` once its step has ended, with a `COMPLETING` job (its
    /// processes still being ended, an epilog running: its final state is not shown yet) looked
    /// at again, less often each time, for up to `limit`.
    fn ended(&self, id: u64, limit: Duration) -> Option<SlurmJob> {
        let end = Instant::now() + limit;
        let mut every = Duration::from_millis(20);
        loop {
            let job = self.describe(id);
            if job.as_ref().is_none_or(|j| j.state != "COMPLETING") || Instant::now() + every > end {
                return job;
            }
            std::thread::sleep(every);
            every = (every * 2).min(Duration::from_millis(500));
        }
    }

    /// How Slurm ended job `id` itself, if it did, its agent's `output` at hand: srun passes on
    /// Slurm's word of such an end (`*** STEP 7.0 ON n1 CANCELLED AT … ***`), and only then is
    /// the final state (shown once the job is no longer `COMPLETING`) worth a wait.
    pub fn how_it_ended(&self, id: u64, output: &[u8]) -> Option<SlurmEnd> {
        let said = SlurmEnd::said_in(id, output);
        let job = self.ended(id, if said.is_some() { COMPLETES_IN } else { Duration::ZERO });
        match &job {
            Some(j) if j.state != "COMPLETING" => j.end(),
            _ => job.as_ref().and_then(SlurmJob::end).or(said),
        }
    }

    /// Send `signal` (`TERM`, `CONT`…) to the processes of job `id` named `name`, leaving the
    /// job to end as they do: what a halt's grace needs (srun itself would cancel the step at
    /// once).
    pub fn signal(&self, id: u64, name: &str, signal: &str) -> Result<(), String> {
        self.scancel(&[&format!("--signal={signal}")], id, name)
    }

    /// Cancel job `id` named `name` (both must match: an id Slurm has since given another job
    /// is spared): Slurm ends its processes (SIGTERM, SIGKILL after its KillWait) and its
    /// allocation. `pending_only`: only if Slurm still holds it pending.
    pub fn cancel(&self, id: u64, name: &str, pending_only: bool) -> Result<(), String> {
        self.scancel(if pending_only { &["--state=PENDING"] } else { &[] }, id, name)
    }

    fn scancel(&self, opts: &[&str], id: u64, name: &str) -> Result<(), String> {
        let mut c = self.command("scancel");
        c.args(opts).arg(format!("--name={name}")).arg(id.to_string());
        output_within(&mut c, ANSWER_IN).map(drop)
    }

    /// `squeue`'s lines for `filter`, without a header.
    fn squeue(&self, filter: &[&str]) -> Result<String, String> {
        let mut c = self.command("squeue");
        c.arg("--noheader").args(filter).arg(FORMAT).env("SLURM_TIME_FORMAT", "%s");
        output_within(&mut c, ANSWER_IN)
    }

    fn command(&self, name: &str) -> Command {
        let mut c = match self.dir.as_ref().map(|d| d.join(name)).filter(|p| p.is_file()) {
            Some(path) => Command::new(path),
            None => Command::new(name),
        };
        c.envs(&self.env);
        c
    }
}

/// One line of `FORMAT`.
fn parse(line: &str) -> Option<SlurmJob> {
    let mut f = line.split('|').map(|s| s.trim().to_owned());
    let job_id = f.next()?.parse().ok()?;
    let (state, reason, node) = (f.next()?, f.next().unwrap_or_default(), f.next().unwrap_or_default());
    // A pending job's is when Slurm expects to start it, if it knows.
    let started_s = f.next().and_then(|s| s.parse().ok()).filter(|_| state != "PENDING");
    let name = f.collect::<Vec<_>>().join("|");
    Some(SlurmJob { job_id, state, reason, node, started_s, name })
}

/// Run `c` to its end within `limit`: its stdout, or what went wrong (its stderr's last line).
/// One that takes longer is killed, with whatever it started (its own process group).
fn output_within(c: &mut Command, limit: Duration) -> Result<String, String> {
    let what = c.get_program().to_string_lossy().into_owned();
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    let deadline = Instant::now() + limit;
    let read = read_within(&mut child, deadline);
    // Its outputs closed, it may still be on its way out: waited for until the deadline too.
    let status = read.as_ref().ok().and_then(|_| {
        loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                _ => break None,
            }
        }
    });
    let (Ok((out, err)), Some(status)) = (read, status) else {
        // SAFETY: killpg on the process group this child leads (it is not reaped yet).
        unsafe { libc::killpg(child.id() as i32, libc::SIGKILL) };
        let _ = child.wait();
        return Err(format!("{what} gave no answer within {}s", limit.as_secs()));
    };
    if status.success() {
        return Ok(String::from_utf8_lossy(&out).into_owned());
    }
    let err = String::from_utf8_lossy(&err);
    let last = err.lines().rev().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    Err(format!("{what} {status}{}{last}", if last.is_empty() { "" } else { ": " }))
}

/// Both of `child`'s outputs to their ends, or `Err` at `deadline`.
fn read_within(child: &mut Child, deadline: Instant) -> Result<(Vec<u8>, Vec<u8>), ()> {
    let (mut out, mut err) = (child.stdout.take().ok_or(())?, child.stderr.take().ok_or(())?);
    let (mut out_buf, mut err_buf) = (Vec::new(), Vec::new());
    let (mut out_open, mut err_open) = (true, true);
    let mut chunk = [0u8; 8192];
    while out_open || err_open {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(());
        }
        let ms = u16::try_from(left.as_millis().max(1)).unwrap_or(u16::MAX);
        let mut fds = Vec::new();
        if out_open {
            fds.push(PollFd::new(out.as_fd(), PollFlags::POLLIN));
        }
        if err_open {
            fds.push(PollFd::new(err.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return Err(()),
        }
        let ready: Vec<bool> = fds.iter().map(|f| f.revents().is_some_and(|r| !r.is_empty())).collect();
        drop(fds);
        let mut i = 0;
        if out_open {
            if ready[i] {
                match out.read(&mut chunk) {
                    Ok(0) | Err(_) => out_open = false,
                    Ok(n) => out_buf.extend_from_slice(&chunk[..n]),
                }
            }
            i += 1;
        }
        if err_open && ready[i] {
            match err.read(&mut chunk) {
                Ok(0) | Err(_) => err_open = false,
                Ok(n) => err_buf.extend_from_slice(&chunk[..n]),
            }
        }
    }
    Ok((out_buf, err_buf))
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
        let job = parse("13|RUNNING|None|vm|1795409561|agentctl-abc123-0a|b").unwrap();
        assert_eq!((job.node.as_str(), job.started_s), ("vm", Some(1_795_409_561)));
        assert_eq!(job.name, "agentctl-abc123-0a|b");
        assert_eq!(parse("14|RUNNING|None|vm|N/A").unwrap().started_s, None);
        assert_eq!(parse("garbage"), None);
        assert_eq!(parse(""), None);
    }

    #[test]
    fn a_command_that_hangs_is_ended_at_its_limit_and_failures_say_why() {
        let t0 = Instant::now();
        let hung = output_within(Command::new("sleep").arg("30"), Duration::from_millis(200));
        assert!(hung.unwrap_err().contains("no answer"));
        // A hang guard, far under the command's 30 s.
        assert!(t0.elapsed() < Duration::from_secs(20));
        let failed = output_within(
            Command::new("sh").args(["-c", "echo out; echo 'scancel: error: no job' >&2; exit 1"]),
            ANSWER_IN,
        );
        assert!(failed.unwrap_err().ends_with("scancel: error: no job"));
        assert_eq!(output_within(Command::new("echo").arg("hi"), ANSWER_IN).unwrap(), "hi\n");
        assert!(
            output_within(&mut Command::new("/nonexistent/squeue"), ANSWER_IN).unwrap_err().starts_with("cannot run")
        );
        // Done, but something it started holds its outputs open: ended with it at the limit.
        let t0 = Instant::now();
        let held =
            output_within(Command::new("sh").args(["-c", "sleep 30 & echo started"]), Duration::from_millis(300));
        assert!(held.unwrap_err().contains("no answer"));
        assert!(t0.elapsed() < Duration::from_secs(20));
    }
}
