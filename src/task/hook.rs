//! `on_end`: a command run once for every end of a task (completed, failed, cancelled, expired,
//! over budget, lost), after its record is final, and where that stands.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How long a hook may run before it is killed, unless `[hooks] timeout` says.
pub const HOOK_LIMIT: Duration = Duration::from_secs(30);

/// The hook a task runs at its end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hook {
    pub argv: Vec<String>,
    pub limit_ms: u64,
}

/// Where a task's hook stands: it runs once its record is final (`due`), taken by the one
/// process that runs it (`running`), then `done`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookState {
    Due,
    Running,
    Done,
}
