//! Where a task's agent runs: here (`local`), or on a Slurm cluster as a job step that `srun`
//! starts from the supervisor, so that its output, exit and halt pass through the supervisor
//! as a local agent's do.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Bytes;

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

impl SlurmSettings {
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
        a.extend(argv.iter().cloned());
        a
    }
}

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
                "claude",
                "-p"
            ]
        );
        let job = SlurmJob { job_id: 7, state: "PENDING".into(), reason: "Resources".into(), node: String::new() };
        assert_eq!(job.to_string(), "job 7 pending (Resources)");
    }
}
