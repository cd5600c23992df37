//! `TaskSpec`: exactly what the supervisor is to run, fixed when the task is created.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The command, directory, extra environment and limits of one task.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TaskSpec {
    /// The agent's argv; `argv[0]` is looked up on `PATH` when it has no `/`.
    pub argv: Vec<String>,
    /// The absolute directory the agent runs in.
    pub cwd: PathBuf,
    /// Variables set on top of the launcher's environment.
    pub env: BTreeMap<String, String>,
    /// Run time after which the supervisor halts the task as `expired`.
    pub deadline_ms: Option<u64>,
    /// How long a halted agent gets between SIGTERM and SIGKILL.
    pub grace_ms: u64,
}
