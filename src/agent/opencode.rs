//! OpenCode (`opencode run`): its answer is its output, until its stream is read.

use super::{Agent, AgentKind};
use crate::summary::{Found, Tail};

/// Opencode.
pub struct Opencode;

impl Agent for Opencode {
    fn kind(&self) -> AgentKind {
        AgentKind::Opencode
    }

    fn answer(&self, tail: &Tail<'_>) -> Found {
        tail.output()
    }
}
