//! Where a task's agent runs: here (`local`), or on a Slurm cluster as a job step that `srun`
//! starts from the supervisor, so that its output, exit and halt pass through the supervisor
//! as a local agent's do.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{Bytes, Outcome};

/// A template's (or pool's) `backend`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendKind {
    #[default]
    Local,
    Slurm,
}

/// `[agents.ROLE.slurm]`: the options of the job the agent runs in.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmSettings {
    pub partition: Option<String>,
    pub account: Option<String>,
    /// CPUs for the agent (`--cpus-per-task`).
    pub cpus: Option<u32>,
    /// Memory for the agent (`--mem`), like `"4G"`.
    pub memory: Option<Bytes>,
    /// GPUs (`--gpus`), like `"1"` or `"a100:2"`.
    pub gpus: Option<String>,
    /// More `srun` arguments, as they are (`["--qos=low", "--constraint=ssd"]`).
    #[serde(default)]
    pub args: Vec<String>,
}

/// Where a task's agent runs, as its spec keeps it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Backend {
    #[default]
    Local,
    /// A Slurm job named `job_name`, started by `srun`.
    Slurm { job_name: String },
}

impl Backend {
    /// The command of a new run of the task whose command was `argv` (as this backend made it)
    /// that runs `agent` instead, and the backend of that run: a Slurm job of a name of its own,
    /// with the same options. None when `argv` is not one this backend made.
    pub fn again(&self, argv: &[String], agent: Vec<String>, token: super::Token) -> Option<(Vec<String>, Backend)> {
        let argv = self.instead(argv, agent)?;
        match self {
            Backend::Local => Some((argv, Backend::Local)),
            Backend::Slurm { job_name } => {
                let (old, name) = (format!("--job-name={job_name}"), slurm_job_name(token));
                let argv = argv.into_iter().map(|a| if a == old { format!("--job-name={name}") } else { a }).collect();
                Some((argv, Backend::Slurm { job_name: name }))
            }
        }
    }

    /// `argv` (as this backend made it) running `agent` instead of the command it was made for.
    pub fn instead(&self, argv: &[String], agent: Vec<String>) -> Option<Vec<String>> {
        match self {
            Backend::Local => Some(agent),
            Backend::Slurm { .. } => {
                let joined = argv.windows(JOIN_STDERR.len()).position(|w| w == JOIN_STDERR)? + JOIN_STDERR.len();
                Some(argv[..joined].iter().cloned().chain(agent).collect())
            }
        }
    }

    /// Why a task whose agent was just started waits, if it does: a Slurm job is pending until
    /// Slurm says it runs (the task is `queued` meanwhile, not `running`).
    pub fn pending_at_start(&self) -> Option<String> {
        matches!(self, Backend::Slurm { .. }).then(|| NOT_SCHEDULED.to_owned())
    }
}

/// Whether environment variable `name` describes the Slurm job (or step) the launcher runs in,
/// which srun would otherwise run the agent in as a step of its own, with that job's resources
/// and time: a task's job is its own. (A user's defaults, like `SLURM_ACCOUNT`, stay.)
pub fn is_allocation_variable(name: &str) -> bool {
    const NAMES: &[&str] = &[
        "SLURM_JOBID",
        "SLURM_STEPID",
        "SLURM_NODELIST",
        "SLURM_NNODES",
        "SLURM_NTASKS",
        "SLURM_NPROCS",
        "SLURM_NTASKS_PER_NODE",
        "SLURM_TASKS_PER_NODE",
        "SLURM_CPUS_ON_NODE",
        "SLURM_CPUS_PER_TASK",
        "SLURM_MEM_PER_NODE",
        "SLURM_MEM_PER_CPU",
        "SLURM_GPUS_ON_NODE",
        "SLURM_NODEID",
        "SLURM_PROCID",
        "SLURM_LOCALID",
        "SLURM_TASK_PID",
        "SLURM_GTIDS",
        "SLURM_DISTRIBUTION",
        "SLURM_SRUN_COMM_HOST",
        "SLURM_SRUN_COMM_PORT",
        "SLURM_LAUNCH_NODE_IPADDR",
        "SLURM_OVERLAP",
    ];
    name.starts_with("SLURM_JOB_") || name.starts_with("SLURM_STEP_") || NAMES.contains(&name)
}

/// A new name for a job of task `token`: each run of it on Slurm is found by its own.
pub fn slurm_job_name(token: super::Token) -> String {
    format!("agentctl-{token}-{:08x}", super::random_u64() as u32)
}

/// A pending job's reason before Slurm has given one.
pub const NOT_SCHEDULED: &str = "not scheduled yet";

impl SlurmSettings {
    /// These settings over `under`'s (a pool's): each one set here wins; the arguments of both
    /// are given, `under`'s first (so that srun takes these where both set one option).
    pub fn over(&self, under: &SlurmSettings) -> SlurmSettings {
        SlurmSettings {
            partition: self.partition.clone().or_else(|| under.partition.clone()),
            account: self.account.clone().or_else(|| under.account.clone()),
            cpus: self.cpus.or(under.cpus),
            memory: self.memory.or(under.memory),
            gpus: self.gpus.clone().or_else(|| under.gpus.clone()),
            args: under.args.iter().chain(&self.args).cloned().collect(),
        }
    }

    /// The `srun` command line that runs `argv` as a job named `job_name` in `cwd`, with a
    /// time limit of `deadline_ms` (Slurm counts minutes: rounded up) when given.
    pub fn srun_argv(
        &self,
        srun: &str,
        job_name: &str,
        cwd: &str,
        deadline_ms: Option<u64>,
        argv: &[String],
    ) -> Vec<String> {
        let mut a = vec![
            srun.to_owned(),
            format!("--job-name={job_name}"),
            format!("--chdir={cwd}"),
            "--ntasks=1".into(),
            // Output as it is written, and nothing of srun's own but errors.
            "--unbuffered".into(),
            "--quiet".into(),
        ];
        let mut opt = |flag: &str, v: Option<String>| a.extend(v.map(|v| format!("--{flag}={v}")));
        opt("partition", self.partition.clone());
        opt("account", self.account.clone());
        opt("cpus-per-task", self.cpus.map(|c| c.to_string()));
        opt("mem", self.memory.map(|m| format!("{}K", m.0.div_ceil(1024))));
        opt("gpus", self.gpus.clone());
        opt("time", deadline_ms.map(|ms| ms.div_ceil(60_000).max(1).to_string()));
        a.extend(self.args.iter().cloned());
        a.push("--".into());
        // srun forwards a step's stdout and stderr apart, so what the agent wrote to one could
        // land after what it wrote later to the other (its stderr after its answer, in the
        // summary). Joined on the node, as they are in a local task's log, they keep their order.
        a.extend(JOIN_STDERR.iter().map(|s| s.to_string()));
        a.extend(argv.iter().cloned());
        a
    }
}

/// The agent's argv is run on the node through this, its stderr joined to its stdout.
const JOIN_STDERR: [&str; 4] = ["/bin/sh", "-c", "exec \"$@\" 2>&1", "sh"];

/// What Slurm says of a job now.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SlurmJob {
    pub job_id: u64,
    /// `PENDING`, `RUNNING`, `COMPLETING`… (empty once Slurm has forgotten the job).
    pub state: String,
    /// Why it waits, while it does (`Resources`, `Priority`…).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The node it runs on.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub node: String,
    /// When it started running (seconds since the epoch).
    #[serde(skip)]
    pub started_s: Option<u64>,
    /// Its name.
    #[serde(skip)]
    pub name: String,
}

/// How Slurm ended a job agentctl did not stop, where that is more than how its agent exited.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlurmEnd {
    /// Its time limit (or `--deadline`) passed: the task is `expired`.
    Expired(String),
    /// Someone cancelled it outside agentctl (`scancel`): `cancelled`.
    Cancelled(String),
    /// Slurm took it away (its node failed, a job of higher priority preempted it, it ran out
    /// of the memory it asked for): `failed`.
    Failed(String),
}

impl SlurmEnd {
    /// How Slurm ended job `id`, as srun passed Slurm's word on into the agent's `output`
    /// (`slurmstepd: error: *** STEP 7.0 ON n1 CANCELLED AT 2026-… DUE TO TIME LIMIT ***`):
    /// for a job whose final state Slurm does not show yet (`COMPLETING`).
    pub fn said_in(id: u64, output: &[u8]) -> Option<SlurmEnd> {
        let text = String::from_utf8_lossy(output);
        let (step, job) = (format!("*** STEP {id}."), format!("*** JOB {id} "));
        let line =
            text.lines().rev().find(|l| (l.contains(&step) || l.contains(&job)) && l.contains(" CANCELLED AT "))?;
        // The final state the line stands for, worded as Slurm's state would be.
        let causes = [
            ("DUE TO TIME LIMIT", "TIMEOUT"),
            ("DUE TO PREEMPTION", "PREEMPTED"),
            ("DUE TO NODE FAILURE", "NODE_FAIL"),
        ];
        let state = match causes.iter().find(|(cause, _)| line.contains(cause)) {
            Some((_, state)) => state,
            None if line.contains("DUE TO") => {
                return Some(SlurmEnd::Failed(format!("Slurm ended job {id}: {}", line.trim())));
            }
            None => "CANCELLED",
        };
        SlurmJob { job_id: id, state: state.to_owned(), ..SlurmJob::default() }.end()
    }

    /// The task's outcome for an agent that exited with `exit_code` or by `signal`, and what
    /// the end notes of it (a failure's words are its error instead).
    pub fn outcome(self, exit_code: Option<i32>, signal: Option<i32>) -> (Outcome, Option<String>) {
        match self {
            SlurmEnd::Expired(why) => (Outcome::Expired { exit_code, signal }, Some(why)),
            SlurmEnd::Cancelled(why) => (Outcome::Cancelled { exit_code, signal }, Some(why)),
            SlurmEnd::Failed(why) => (Outcome::Failed { exit_code, signal, error: Some(why) }, None),
        }
    }
}

impl SlurmJob {
    /// Whether Slurm may still run it (or does).
    pub fn is_active(&self) -> bool {
        matches!(self.state.as_str(), "PENDING" | "RUNNING" | "SUSPENDED" | "CONFIGURING" | "REQUEUED" | "RESIZING")
    }

    /// Why Slurm holds the job pending (`Resources`, `Priority`…), while it does.
    pub fn pending_reason(&self) -> Option<String> {
        (self.state == "PENDING").then(|| match self.reason.as_str() {
            "" | "None" => NOT_SCHEDULED.to_owned(),
            r => r.to_owned(),
        })
    }

    /// What this final state of the job means for its task, beyond its agent's exit; `None`
    /// for a job that ended as its agent did (`COMPLETED`, `FAILED`: the exit code tells), or
    /// one Slurm no longer knows.
    pub fn end(&self) -> Option<SlurmEnd> {
        let id = self.job_id;
        let why = match self.reason.as_str() {
            "" | "None" => String::new(),
            r => format!(" ({r})"),
        };
        let node = if self.node.is_empty() { String::new() } else { format!(" {}", self.node) };
        Some(match self.state.as_str() {
            // Still completing (its processes being ended) after its time ran out.
            "TIMEOUT" | "COMPLETING" if self.state == "TIMEOUT" || self.reason == "TimeLimit" => {
                SlurmEnd::Expired(format!("Slurm ended job {id} at its time limit{why}"))
            }
            "DEADLINE" => SlurmEnd::Expired(format!("Slurm ended job {id} at its deadline{why}")),
            "CANCELLED" => SlurmEnd::Cancelled(format!(
                "its Slurm job {id} was cancelled outside agentctl (scancel, by a user or an administrator){why}"
            )),
            "NODE_FAIL" => SlurmEnd::Failed(format!("Slurm job {id} ended because its node{node} failed{why}")),
            "BOOT_FAIL" => SlurmEnd::Failed(format!("Slurm job {id} ended because its node{node} failed to boot{why}")),
            "PREEMPTED" => {
                SlurmEnd::Failed(format!("Slurm preempted job {id}: a job of higher priority took its resources{why}"))
            }
            "OUT_OF_MEMORY" => {
                SlurmEnd::Failed(format!("Slurm job {id} ran out of the memory it was given (`memory`, --mem){why}"))
            }
            _ => return None,
        })
    }
}

impl fmt::Display for SlurmJob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job {}", self.job_id)?;
        if !self.state.is_empty() {
            write!(f, " {}", self.state.to_lowercase())?;
        }
        if !self.node.is_empty() {
            write!(f, " on {}", self.node)?;
        }
        if !self.reason.is_empty() && self.reason != "None" {
            write!(f, " ({})", self.reason)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn srun_gets_the_options_a_template_sets() {
        let s = SlurmSettings {
            partition: Some("gpu".into()),
            cpus: Some(4),
            memory: Some(Bytes(4 << 30)),
            gpus: Some("1".into()),
            args: vec!["--qos=low".into()],
            ..SlurmSettings::default()
        };
        let argv = s.srun_argv("/usr/bin/srun", "agentctl-abc123", "/w", Some(90_001), &["claude".into(), "-p".into()]);
        assert_eq!(
            argv,
            [
                "/usr/bin/srun",
                "--job-name=agentctl-abc123",
                "--chdir=/w",
                "--ntasks=1",
                "--unbuffered",
                "--quiet",
                "--partition=gpu",
                "--cpus-per-task=4",
                "--mem=4194304K",
                "--gpus=1",
                "--time=2",
                "--qos=low",
                "--",
                "/bin/sh",
                "-c",
                "exec \"$@\" 2>&1",
                "sh",
                "claude",
                "-p"
            ]
        );
        let job = SlurmJob { job_id: 7, state: "PENDING".into(), reason: "Resources".into(), ..SlurmJob::default() };
        assert_eq!(job.to_string(), "job 7 pending (Resources)");
        assert_eq!(job.pending_reason().as_deref(), Some("Resources"));
    }

    #[test]
    fn the_launchers_own_job_is_not_passed_on() {
        for v in ["SLURM_JOB_ID", "SLURM_JOBID", "SLURM_STEP_ID", "SLURM_NODELIST", "SLURM_CPUS_PER_TASK"] {
            assert!(is_allocation_variable(v), "{v}");
        }
        for v in ["SLURM_CONF", "SLURM_ACCOUNT", "SLURM_PARTITION", "PATH"] {
            assert!(!is_allocation_variable(v), "{v}");
        }
    }

    #[test]
    fn a_pool_gives_what_a_template_leaves_unset() {
        let pool = SlurmSettings {
            partition: Some("batch".into()),
            cpus: Some(2),
            args: vec!["--qos=low".into()],
            ..SlurmSettings::default()
        };
        let template = SlurmSettings { cpus: Some(8), args: vec!["--qos=high".into()], ..SlurmSettings::default() };
        let both = template.over(&pool);
        assert_eq!(both.partition.as_deref(), Some("batch"));
        assert_eq!(both.cpus, Some(8));
        assert_eq!(both.args, ["--qos=low", "--qos=high"]);
    }

    #[test]
    fn slurm_side_ends_map_to_statuses() {
        let job = |state: &str, reason: &str| SlurmJob {
            job_id: 9,
            state: state.into(),
            reason: reason.into(),
            node: "n1".into(),
            ..SlurmJob::default()
        };
        assert_eq!(
            job("TIMEOUT", "TimeLimit").end(),
            Some(SlurmEnd::Expired("Slurm ended job 9 at its time limit (TimeLimit)".into()))
        );
        assert!(
            matches!(job("CANCELLED", "None").end(), Some(SlurmEnd::Cancelled(n)) if n.contains("outside agentctl") && !n.contains("None"))
        );
        assert!(
            matches!(job("NODE_FAIL", "NodeDown").end(), Some(SlurmEnd::Failed(n)) if n.contains("node n1 failed (NodeDown)"))
        );
        assert!(matches!(job("PREEMPTED", "").end(), Some(SlurmEnd::Failed(n)) if n.contains("preempted")));
        assert!(matches!(job("COMPLETING", "TimeLimit").end(), Some(SlurmEnd::Expired(_))));
        for ended_as_its_agent in ["COMPLETED", "FAILED", "COMPLETING", ""] {
            assert_eq!(job(ended_as_its_agent, "NonZeroExitCode").end(), None, "{ended_as_its_agent}");
        }
        assert_eq!(job("PENDING", "None").pending_reason().as_deref(), Some("not scheduled yet"));
        assert!(job("RUNNING", "None").is_active() && !job("COMPLETING", "None").is_active());
        assert_eq!(job("RUNNING", "None").pending_reason(), None);
    }

    #[test]
    fn slurms_word_in_the_output_tells_an_end_it_made() {
        let out = |line: &str| format!("working\nslurmstepd-n1: error: {line}\nsrun: error: n1: task 0: Terminated\n");
        let said = |line: &str| SlurmEnd::said_in(7, out(line).as_bytes());
        assert!(matches!(
            said("*** STEP 7.0 ON n1 CANCELLED AT 2026-11-23T04:59:40 DUE TO TIME LIMIT ***"),
            Some(SlurmEnd::Expired(_))
        ));
        assert!(matches!(
            said("*** JOB 7 ON n1 CANCELLED AT 2026-11-23T04:59:40 DUE TO PREEMPTION ***"),
            Some(SlurmEnd::Failed(_))
        ));
        assert!(matches!(
            said("*** STEP 7.0 ON n1 CANCELLED AT 2026-11-23T04:59:40 ***"),
            Some(SlurmEnd::Cancelled(_))
        ));
        // Another job's, or no such line.
        assert_eq!(said("*** STEP 70.0 ON n1 CANCELLED AT 2026-11-23T04:59:40 ***"), None);
        assert_eq!(SlurmEnd::said_in(7, b"all done\n"), None);
    }
}
