//! Codex CLI (`codex exec --output-last-message {result_file}`), and any agent that writes its
//! answer to the file agentctl names (`result = "file"`, implied by `{result_file}` in the
//! command): that file is its answer; its whole output if it wrote none.

use super::{Agent, AgentKind};
use crate::summary::{Found, Tail};

/// An agent that writes its answer to `{result_file}`.
pub struct Codex;

impl Agent for Codex {
    fn kind(&self) -> AgentKind {
        AgentKind::Codex
    }

    fn answer_in_file(&self) -> bool {
        true
    }

    /// Only when it wrote no file: its output stands in, whole.
    fn answer(&self, tail: &Tail<'_>) -> Found {
        tail.output()
    }
}
