//! Where a task's agent runs: one module per place (`local`: here; `slurm`: a job step that
//! `srun` starts), each with two faces, chosen in this file only. [`Prepare`], from the
//! template's (or its pool's) `backend`, is what the launcher asks as it makes the task: the
//! command its runs' process runs, recorded in the task's spec. [`Backend`], from that spec
//! ([`of`]), is what the supervisor's loop asks as the task runs: the loop holds a
//! `Box<dyn Backend>` and never names one. `docs/backends.md` tells how to add one.
//!
//! Each run of the agent is one process here, which the loop supervises as it would the agent
//! itself (its output is the log, its exit the run's end, its process group and cgroup what a
//! halt ends): the agent, or what runs it elsewhere (srun). The backend adds what that process
//! cannot tell: whether the run still waits to be run there (and why), how a halt reaches the
//! agent there, what the place's own ends mean, and what whoever finds the supervisor dead needs
//! to end the run there (in the lock file).

mod local;
pub mod slurm;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use nix::unistd::Pid;

use super::lock::Lock;
use crate::store::Store;
use crate::task::{self, BackendKind, Outcome, SlurmSettings, TaskRecord, TaskSpec, Template, Token};

/// Where a new task's agent will run, as its launcher makes the task.
pub trait Prepare {
    /// The program the launcher must find here: the agent's own (`agent`), or what runs it
    /// elsewhere (`srun`).
    fn program<'a>(&'a self, agent: &'a str) -> &'a str;

    /// What to tell the user when that program is not found, for the task of `place`. `None`:
    /// it was the agent's own.
    fn missing(&self, place: &str) -> Option<String>;

    /// Add to the task's environment what it keeps of the launcher's, for its runs and for
    /// whoever asks of them later (Slurm: the cluster `SLURM_CONF` names).
    fn environment(&self, env: &mut BTreeMap<String, String>);

    /// The command the run's process runs for the agent's `argv` (with `program`, found here,
    /// first), in `cwd`, within `deadline_ms`; and the backend as the task's spec keeps it.
    fn command(
        &self,
        argv: Vec<String>,
        program: &Path,
        token: Token,
        cwd: &Path,
        deadline_ms: Option<u64>,
    ) -> (Vec<String>, task::Backend);
}

/// The backend a new task's `template` chose, else its pool's (`pool`: its name, `backend`
/// and Slurm options): the one place that knows them all, as the task is made.
pub fn prepare(template: &Template, pool: (&str, Option<BackendKind>, SlurmSettings)) -> Box<dyn Prepare> {
    let (pool_name, pool_kind, pool_slurm) = pool;
    // Where the choice was made, for what the user is told.
    let chosen_by = match template.backend {
        Some(_) => String::new(),
        None => format!(" in [pools.{pool_name}]"),
    };
    match template.backend.or(pool_kind).unwrap_or_default() {
        BackendKind::Local => Box::new(local::Local),
        BackendKind::Slurm => {
            Box::new(slurm::Submit(template.slurm.clone().unwrap_or_default().over(&pool_slurm), chosen_by))
        }
    }
}

/// Where a task's agent runs: what the supervisor's loop asks of it. The loop calls each method
/// at one point of a run's life, in this order.
pub(super) trait Backend {
    /// Change the environment the agent's process would inherit from the supervisor (the
    /// launcher's), before the task's own variables go on top.
    fn environment(&self, inherited: &mut BTreeMap<OsString, OsString>);

    /// A run starts: what the task's record says of it until a look says more (Slurm: its job
    /// is pending, not scheduled yet; the task is `queued` meanwhile).
    fn at_start(&self, rec: &mut TaskRecord);

    /// The run's process has just started. `None`: the run runs as its process does, with
    /// nothing to wait for. Else the run may wait to be run (the loop then looks at it with
    /// [`look`](Backend::look) until it runs, and a first run's deadline waits too): what a
    /// first look found. It may take a while (Slurm: up to 10 s for its job to be listed).
    fn started(&mut self, run: &mut Run<'_>) -> Option<Look>;

    /// Whether the run still waits, asked now and then (less often each time) and soon after
    /// the agent writes `output` (then it runs). A look that gets no answer says what the last
    /// one did.
    fn look(&mut self, run: &mut Run<'_>, output: bool) -> Look;

    /// The run ended, and the agent runs again (a rate-limited run). If the loop still
    /// `looked` at it: when it began to run, as the place says now (seconds since the epoch).
    fn rerun(&mut self, run: &mut Run<'_>, looked: bool) -> Option<u64>;

    /// A halt, the deadline or a signal stops the task: pass the stop (SIGTERM) on to where the
    /// agent runs. True when it did (or the run has ended there): the run's process here is
    /// left to end as the agent does. False: the loop signals it (and everything of the task
    /// here), as for a local agent.
    fn stop(&mut self, run: &mut Run<'_>) -> bool;

    /// The grace is over (or the task ends): end the run where it runs, at once. The loop then
    /// kills everything of the task here.
    fn kill(&mut self, run: &mut Run<'_>);

    /// The task ends with this run, whose process exited with `exit` (its code or signal),
    /// `stopped` by agentctl or not. When the place ended the run itself and that says more
    /// than the exit (Slurm's time limit, a failed node, someone's `scancel`): the outcome, and
    /// what the end notes. `output` reads the end of the run's output.
    fn ended(
        &mut self,
        run: &mut Run<'_>,
        stopped: bool,
        exit: (Option<i32>, Option<i32>),
        output: &dyn Fn() -> Vec<u8>,
    ) -> Option<(Outcome, Option<String>)>;
}

/// What a look at a run that may wait found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Look {
    /// It waits (the record says why).
    Pending,
    /// It runs: since `since_s` (seconds since the epoch) if the place says. `settled`: the
    /// place knows the run, and nothing more is looked for.
    Running { since_s: Option<u64>, settled: bool },
}

/// What a backend is handed of its task when the loop asks it something.
pub(super) struct Run<'a> {
    /// The task's record: whoever changes it writes it.
    pub rec: &'a mut TaskRecord,
    pub store: &'a Store,
    /// The run's process here (the agent, or what runs it elsewhere), not reaped yet.
    pub process: Pid,
    /// The task's lock file, for what whoever finds the supervisor dead needs.
    pub lock: &'a mut Lock,
    /// What the task's end will note.
    pub note: &'a mut Option<String>,
}

impl Run<'_> {
    /// Add `more` to what the task's end will note.
    pub fn add_note(&mut self, more: String) {
        add_note(self.note, more);
    }
}

/// Add `more` to `note`.
pub(super) fn add_note(note: &mut Option<String>, more: String) {
    *note = Some(match note.take() {
        Some(n) => format!("{n}; {more}"),
        None => more,
    });
}

/// The backend the task's spec names: the one place that knows them all, as the task runs.
pub(super) fn of(spec: &TaskSpec) -> Box<dyn Backend> {
    use crate::task::Backend as Place;
    match &spec.backend {
        Place::Local => Box::new(local::Local),
        Place::Slurm { job_name } => Box::new(slurm::Slurm::new(spec, job_name)),
    }
}
