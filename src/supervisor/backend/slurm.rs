//! The agent runs on a Slurm cluster, as the step of a job of its own that `srun` (the run's
//! process here) submits: srun's command line, with the job's unique name; the job's id (found
//! by that name, kept in the record and the lock file), whether Slurm holds it pending and why,
//! a halt passed on to the job's processes with a grace, Slurm's own ends. And for a task whose
//! supervisor is gone: its job's state (`status`) and cancellation (the lost path).

mod commands;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};

pub use self::commands::Commands;
use super::{Backend, Look, Prepare, Run};
use crate::store::Store;
use crate::task::{
    Backend as Place, NOT_SCHEDULED, Outcome, SlurmJob, SlurmSettings, TaskRecord, TaskSpec, Token,
    is_allocation_variable,
};

/// How long Slurm may take to list a job srun submitted.
const LISTS_IN: Duration = Duration::from_secs(10);

/// A new task's runs go to Slurm, with these options (its template's over its pool's), as its
/// template chose (`""`) or its pool (` in [pools.NAME]`).
pub(super) struct Submit(pub(super) SlurmSettings, pub(super) String);

impl Prepare for Submit {
    /// The agent's command is looked for on the node, not here: srun must be found here.
    fn program<'a>(&'a self, _agent: &'a str) -> &'a str {
        "srun"
    }

    fn missing(&self, place: &str) -> Option<String> {
        let chosen_by = &self.1;
        Some(format!(
            "{place} runs its agent on Slurm (backend = \"slurm\"{chosen_by}), and `srun` was not found on PATH; \
             install Slurm's client commands (slurm-client), or set backend = \"local\""
        ))
    }

    /// The cluster the launcher's srun would reach: the task's job is reached there later too,
    /// from whatever shell asks (`status`, a halt, the lost path).
    fn environment(&self, env: &mut BTreeMap<String, String>) {
        if let Ok(conf) = std::env::var("SLURM_CONF") {
            env.entry("SLURM_CONF".into()).or_insert(conf);
        }
    }

    /// srun's command line for a job of a name unique beyond this home (tokens are six hex
    /// digits; squeue and scancel go by name among all of the user's jobs).
    fn command(
        &self,
        argv: Vec<String>,
        program: &Path,
        token: Token,
        cwd: &Path,
        deadline_ms: Option<u64>,
    ) -> (Vec<String>, Place) {
        let job_name = crate::task::slurm_job_name(token);
        let srun = program.to_string_lossy();
        let argv = self.0.srun_argv(&srun, &job_name, &cwd.to_string_lossy(), deadline_ms, &argv);
        (argv, Place::Slurm { job_name })
    }
}

/// A task's runs on Slurm, each a job named `job_name`.
pub(super) struct Slurm {
    commands: Commands,
    job_name: String,
    /// The jobs of its earlier runs.
    seen: Vec<u64>,
    /// The current run's job was cancelled (once is enough).
    cancelled: bool,
}

impl Slurm {
    /// The runs of the task whose spec is `spec`.
    pub(super) fn new(spec: &TaskSpec, job_name: &str) -> Slurm {
        Slurm { commands: Commands::of(spec), job_name: job_name.to_owned(), seen: Vec::new(), cancelled: false }
    }

    /// Look (for up to `limit`) for the job srun submitted, and once found keep its id in the
    /// record and the lock file.
    fn find(&mut self, run: &mut Run<'_>, limit: Duration) -> Result<Option<SlurmJob>, String> {
        let srun = run.process;
        let srun_runs = || {
            let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
            matches!(waitid(Id::Pid(srun), flags), Ok(WaitStatus::StillAlive))
        };
        let job = self.commands.find(&self.job_name, limit, srun_runs, &self.seen)?;
        if let Some(job) = &job {
            run.rec.slurm_job = Some(job.job_id);
            run.lock.mark(|note| note.slurm_job = Some(job.job_id));
        }
        Ok(job)
    }

    /// What a look at the job found (`None`: no answer): pending, or running from then on.
    fn saw(&self, run: &mut Run<'_>, job: Option<SlurmJob>, output: bool) -> Look {
        let pending = match &job {
            _ if output => None,
            Some(job) => job.pending_reason(),
            None => run.rec.slurm_pending.clone(),
        };
        let look = match pending {
            // Once it runs, nothing more to look at but a job not found yet.
            None => Look::Running { since_s: job.and_then(|j| j.started_s), settled: run.rec.slurm_job.is_some() },
            Some(_) => Look::Pending,
        };
        if pending != run.rec.slurm_pending {
            run.rec.slurm_pending = pending;
            let _ = run.store.write_record(run.rec);
        }
        look
    }
}

impl Backend for Slurm {
    /// A launcher inside a Slurm job (an agent on a node, a batch script): the task's job is its
    /// own, not a step of that one.
    fn environment(&self, inherited: &mut BTreeMap<OsString, OsString>) {
        inherited.retain(|k, _| !k.to_str().is_some_and(is_allocation_variable));
    }

    /// Until Slurm says the job runs (or the agent writes output), the task is `queued`, with
    /// Slurm's reason.
    fn at_start(&self, rec: &mut TaskRecord) {
        rec.slurm_pending = Some(NOT_SCHEDULED.to_owned());
    }

    /// The job the agent's srun just submitted, for a halt, `status` and the lost path.
    fn started(&mut self, run: &mut Run<'_>) -> Option<Look> {
        // A run after a rate-limited one submits a job of the same name: the earlier ones, which
        // Slurm lists for a while after their end, are not it.
        self.seen.extend(run.rec.slurm_job.take());
        self.cancelled = false;
        let look = match self.find(run, LISTS_IN) {
            Ok(job) => self.saw(run, job, false),
            // The job runs or waits all the same; halts reach it through srun meanwhile (a
            // signalled srun cancels its step).
            Err(why) => {
                run.add_note(format!("cannot find the task's Slurm job yet: {why}"));
                self.saw(run, None, false)
            }
        };
        if let Err(e) = run.store.write_record(run.rec) {
            eprintln!("agentctl supervisor: cannot record the Slurm job: {e}");
        }
        Some(look)
    }

    /// Ask Slurm whether the job runs yet (looking for it first, if it was not found yet): its
    /// reason while it waits, the task `running` once it does.
    fn look(&mut self, run: &mut Run<'_>, output: bool) -> Look {
        let job = match run.rec.slurm_job {
            Some(id) => self.commands.describe(id),
            None => {
                let found = self.find(run, Duration::ZERO).ok().flatten();
                if found.is_some() {
                    let _ = run.store.write_record(run.rec);
                }
                found
            }
        };
        self.saw(run, job, output)
    }

    /// Its job ran (it ended): whatever the last look at it said.
    fn rerun(&mut self, run: &mut Run<'_>, looked: bool) -> Option<u64> {
        let since = match run.rec.slurm_job.filter(|_| looked) {
            Some(id) => self.commands.describe(id).and_then(|j| j.started_s),
            None => None,
        };
        run.rec.slurm_pending = None;
        since
    }

    /// Nothing of a pending job runs yet: it needs no grace. The agent's processes of a running
    /// one are the job's, on its node: Slurm signals them. (srun, signalled here, would cancel
    /// the step at once, without a grace.)
    fn stop(&mut self, run: &mut Run<'_>) -> bool {
        let Some(id) = run.rec.slurm_job else { return false };
        let (slurm, name) = (&self.commands, self.job_name.as_str());
        let sent = slurm
            .cancel(id, name, true)
            .and_then(|_| slurm.signal(id, name, "CONT"))
            .and_then(|_| slurm.signal(id, name, "TERM"));
        match sent {
            Ok(()) => true,
            // Cancelled while pending (or ended meanwhile): nothing left to signal.
            Err(_) if slurm.describe(id).is_some_and(|j| !j.is_active()) => {
                self.cancelled = true;
                true
            }
            // srun cancels the step itself then (at once).
            Err(why) => {
                eprintln!("agentctl supervisor: cannot signal Slurm job {id}: {why}");
                false
            }
        }
    }

    fn kill(&mut self, run: &mut Run<'_>) {
        if self.cancelled {
            return;
        }
        if let Some(id) = run.rec.slurm_job {
            if let Err(why) = self.commands.cancel(id, &self.job_name, false) {
                eprintln!("agentctl supervisor: cannot cancel Slurm job {id}: {why}");
            }
            self.cancelled = true;
        }
    }

    /// Slurm may have ended the job itself (its time limit, its node, someone's scancel).
    fn ended(
        &mut self,
        run: &mut Run<'_>,
        stopped: bool,
        (code, signal): (Option<i32>, Option<i32>),
        output: &dyn Fn() -> Vec<u8>,
    ) -> Option<(Outcome, Option<String>)> {
        run.rec.slurm_pending = None;
        let id = run.rec.slurm_job.filter(|_| !stopped)?;
        let end = self.commands.how_it_ended(id, &output())?;
        Some(end.outcome(code, signal))
    }
}

/// Task `token`'s Slurm commands and job name, as its spec says (`None`: not a Slurm task).
pub fn of_task(store: &Store, token: Token) -> Option<(Commands, String)> {
    of_spec(&store.read_spec(token).ok()?)
}

/// The Slurm commands and job name of a task whose spec is `spec` (`None`: not a Slurm task).
pub fn of_spec(spec: &TaskSpec) -> Option<(Commands, String)> {
    match &spec.backend {
        Place::Slurm { job_name } => Some((Commands::of(spec), job_name.clone())),
        Place::Local => None,
    }
}

/// Cancel Slurm job `id` of task `token`, whose supervisor is gone (the id its lock file
/// gives): what to note of it.
pub fn cancel_for_task(store: &Store, token: Token, id: u64) -> String {
    let Some((slurm, name)) = of_task(store, token) else {
        return format!("its Slurm job {id} was left: the task's spec cannot be read; run `scancel {id}`");
    };
    match slurm.cancel(id, &name, false) {
        // scancel says nothing of an id whose job has another name: it is spared.
        Ok(()) => match slurm.describe(id) {
            Some(job) if job.name != name => {
                format!("its Slurm job {id} was gone: Slurm has given the id to another job (left alone)")
            }
            _ => format!("its Slurm job {id} was cancelled"),
        },
        Err(why) => match slurm.describe(id) {
            Some(job) if !job.is_active() => format!("its Slurm job {id} had ended ({})", job.state.to_lowercase()),
            None if why.contains("Invalid job id") => format!("its Slurm job {id} had ended"),
            _ => format!("its Slurm job {id} could not be cancelled ({why}); run `scancel {id}`"),
        },
    }
}
