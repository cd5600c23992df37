//! Task statuses and the final outcome of a run, with the rule that maps an exit to an outcome.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a task is in its life (DESIGN.md §2). The last six are final.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Waiting for a free place in its pool (`[pools.NAME] parallel = N`).
    Queued,
    Starting,
    Running,
    Completed,
    Failed,
    Cancelled,
    Expired,
    /// Halted for spending more than its budget.
    OverBudget,
    Lost,
}

impl Status {
    /// All statuses, in lifecycle order.
    pub const ALL: [Status; 9] = [
        Status::Queued,
        Status::Starting,
        Status::Running,
        Status::Completed,
        Status::Failed,
        Status::Cancelled,
        Status::Expired,
        Status::OverBudget,
        Status::Lost,
    ];

    /// Whether the task can no longer change.
    pub fn is_final(self) -> bool {
        !matches!(self, Status::Queued | Status::Starting | Status::Running)
    }

    /// The status as the lowercase word used in output and records.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Queued => "queued",
            Status::Starting => "starting",
            Status::Running => "running",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
            Status::Expired => "expired",
            Status::OverBudget => "over_budget",
            Status::Lost => "lost",
        }
    }

    /// Parse a status word (for filters).
    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Parse a status filter a user gave, with an error that lists the statuses.
    pub fn parse_filter(s: &str) -> Result<Status, crate::error::Error> {
        Status::parse(s).ok_or_else(|| {
            let all: Vec<_> = Status::ALL.iter().map(|s| s.as_str()).collect();
            crate::error::Error::Usage(format!(
                "unknown status `{}`; use one of: {}",
                super::input_preview(s),
                all.join(", ")
            ))
        })
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the supervisor stopped a task before it exited on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// `halt` was asked for (or the supervisor itself was told to stop).
    Halted,
    /// The task's deadline passed.
    DeadlinePassed,
    /// The task spent more than its budget.
    OverBudget,
}

/// How a task ended. Written once, in the final record, and never changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    Completed,
    Failed { exit_code: Option<i32>, signal: Option<i32>, error: Option<String> },
    Cancelled { exit_code: Option<i32>, signal: Option<i32> },
    Expired { exit_code: Option<i32>, signal: Option<i32> },
    OverBudget { exit_code: Option<i32>, signal: Option<i32> },
    Lost,
}

impl Outcome {
    /// The outcome of a child that exited with `exit_code` or was killed by `signal`.
    pub fn from_exit(exit_code: Option<i32>, signal: Option<i32>, stopped: Option<StopReason>) -> Outcome {
        match stopped {
            Some(StopReason::Halted) => Outcome::Cancelled { exit_code, signal },
            Some(StopReason::DeadlinePassed) => Outcome::Expired { exit_code, signal },
            Some(StopReason::OverBudget) => Outcome::OverBudget { exit_code, signal },
            None if exit_code == Some(0) => Outcome::Completed,
            None => Outcome::Failed { exit_code, signal, error: None },
        }
    }

    /// The final status this outcome stands for.
    pub fn status(&self) -> Status {
        match self {
            Outcome::Completed => Status::Completed,
            Outcome::Failed { .. } => Status::Failed,
            Outcome::Cancelled { .. } => Status::Cancelled,
            Outcome::Expired { .. } => Status::Expired,
            Outcome::OverBudget { .. } => Status::OverBudget,
            Outcome::Lost => Status::Lost,
        }
    }

    /// The child's exit code, when it exited normally.
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            Outcome::Completed => Some(0),
            Outcome::Failed { exit_code, .. }
            | Outcome::Cancelled { exit_code, .. }
            | Outcome::Expired { exit_code, .. }
            | Outcome::OverBudget { exit_code, .. } => *exit_code,
            Outcome::Lost => None,
        }
    }

    /// The signal that killed the child, if one did.
    pub fn signal(&self) -> Option<i32> {
        match self {
            Outcome::Failed { signal, .. }
            | Outcome::Cancelled { signal, .. }
            | Outcome::Expired { signal, .. }
            | Outcome::OverBudget { signal, .. } => *signal,
            Outcome::Completed | Outcome::Lost => None,
        }
    }

    /// A description of what went wrong, when there is more to say than the status.
    pub fn error(&self) -> Option<String> {
        match self {
            Outcome::Failed { error: Some(e), .. } => Some(e.clone()),
            Outcome::Lost => Some("the task's supervisor died before recording how the task ended".into()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_maps_to_outcome() {
        let cases = [
            (Some(0), None, None, Status::Completed),
            (Some(3), None, None, Status::Failed),
            (None, Some(9), None, Status::Failed),
            (Some(0), None, Some(StopReason::Halted), Status::Cancelled),
            (None, Some(15), Some(StopReason::Halted), Status::Cancelled),
            (None, Some(15), Some(StopReason::DeadlinePassed), Status::Expired),
            (None, Some(15), Some(StopReason::OverBudget), Status::OverBudget),
        ];
        for (code, sig, why, want) in cases {
            let o = Outcome::from_exit(code, sig, why);
            assert_eq!(o.status(), want, "{code:?} {sig:?} {why:?}");
            assert_eq!(o.signal(), sig);
            assert_eq!(o.exit_code(), code);
        }
    }

    #[test]
    fn outcome_round_trips_as_tagged_json() {
        let o = Outcome::Failed { exit_code: Some(2), signal: None, error: None };
        let j = serde_json::to_string(&o).unwrap();
        assert!(j.contains(r#""status":"failed""#), "{j}");
        assert_eq!(serde_json::from_str::<Outcome>(&j).unwrap(), o);
    }

    #[test]
    fn final_statuses() {
        let finals: Vec<_> = Status::ALL.into_iter().filter(|s| s.is_final()).collect();
        assert_eq!(finals.len(), 6);
        assert_eq!(Status::parse("over_budget"), Some(Status::OverBudget));
        assert_eq!(Status::parse("lost"), Some(Status::Lost));
        assert_eq!(Status::parse("nope"), None);
    }
}
