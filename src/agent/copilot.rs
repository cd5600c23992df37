//! GitHub Copilot CLI (`copilot`): its answer is its output, until its stream is read.

use super::{Agent, AgentKind};
use crate::summary::{Found, Tail};

/// Copilot.
pub struct Copilot;

impl Agent for Copilot {
    fn kind(&self) -> AgentKind {
        AgentKind::Copilot
    }

    fn answer(&self, tail: &Tail<'_>) -> Found {
        tail.output()
    }
}
