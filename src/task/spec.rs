//! `TaskSpec`: exactly what the supervisor is to run, fixed when the task is created.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{Backend, Budget, Limits, ResultFrom, RetryPolicy};
use crate::agent::{AgentKind, Prices};
use crate::worktree::Worktree;

/// The command, directory, extra environment and limits of one task.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TaskSpec {
    /// The agent's argv, as it will see it.
    pub argv: Vec<String>,
    /// The program `argv[0]` resolved to when the task was created (so the supervisor's exec
    /// does not walk `PATH` again); without it, `argv[0]` is looked up on `PATH`.
    #[serde(default)]
    pub program: Option<PathBuf>,
    /// The absolute directory the agent runs in.
    pub cwd: PathBuf,
    /// Variables set on top of the launcher's environment.
    pub env: BTreeMap<String, String>,
    /// Run time after which the supervisor halts the task as `expired`.
    pub deadline_ms: Option<u64>,
    /// How long a halted agent gets between SIGTERM and SIGKILL.
    pub grace_ms: u64,
    /// Where the summary comes from.
    #[serde(default)]
    pub result: ResultFrom,
    /// When a run that ended is run again (rate-limited).
    #[serde(default)]
    pub retry: Option<RetryPolicy>,
    /// The git worktree the task works in (`--worktree`), whose changes its end counts.
    #[serde(default)]
    pub worktree: Option<Worktree>,
    /// The pool it waits in for a place; none (tasks of earlier releases): it starts at once.
    #[serde(default)]
    pub pool: Option<PoolRef>,
    /// Its resource limits (its template's over its pool's), set on its cgroup.
    #[serde(default, skip_serializing_if = "Limits::is_empty")]
    pub limits: Limits,
    /// Where its agent runs (`argv` starts with `srun` for a Slurm job).
    #[serde(default)]
    pub backend: Backend,
    /// The agent CLI it runs (none in tasks of earlier releases: the kind its `result` chooses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentKind>,
    /// The most it may spend.
    #[serde(default, skip_serializing_if = "Budget::is_empty")]
    pub budget: Budget,
    /// The prices its cost is estimated from when its agent reports tokens only.
    #[serde(default, skip_serializing_if = "Prices::is_empty")]
    pub prices: Prices,
    /// The template's command it was rendered from (an `ask`; none for a `run`): a follow-up
    /// renders it again with its own question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<Vec<String>>,
    /// For an agent that reads user messages on its stdin as it runs: its first message (the
    /// question, as the line it reads). Its stdin stays open for the messages `send` writes
    /// until it has answered them all. None: its stdin is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// The tasks it waits for before it starts (`--after`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<super::After>,
    /// The command run once its end is recorded (`on_end`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_end: Option<super::Hook>,
    /// The sandbox its agent runs in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<super::Sandbox>,
}

impl TaskSpec {
    /// The kind of agent it runs, whose stream is read while it runs.
    pub fn agent_kind(&self) -> AgentKind {
        self.agent.unwrap_or_else(|| crate::agent::of(&self.result).kind())
    }
}

/// A task's pool, and the agents file whose `[pools]` says its limit (read again whenever the
/// task looks for a place, so that a changed `parallel` counts).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PoolRef {
    pub name: String,
    /// The agents file in force at launch (absolute), read again for the limit.
    pub agents_file: Option<PathBuf>,
    /// The limit at launch: kept while the file cannot be read (a half-saved edit, say).
    #[serde(default)]
    pub parallel: Option<u32>,
    /// What the pool's tasks may spend together, at launch: a task of such a pool always looks
    /// at what the pool spent before it takes a place (its supervisor reads the file again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spend: Option<super::Spend>,
    /// The memory (bytes) that must be available for it to start, at launch: a task of such a
    /// pool always looks before it takes a place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_memory: Option<u64>,
}
