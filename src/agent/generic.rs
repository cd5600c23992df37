//! Any other command (`result = "output"`): its answer is its whole output.

use super::{Agent, AgentKind};
use crate::summary::{Found, Tail};

/// A command agentctl knows nothing more of.
pub struct Generic;

impl Agent for Generic {
    fn kind(&self) -> AgentKind {
        AgentKind::Generic
    }

    fn answer(&self, tail: &Tail<'_>) -> Found {
        tail.output()
    }
}
