//! Any other command (`result = "output"`): its answer is its whole output.

use super::Agent;
use crate::summary::{Found, Tail};

/// A command agentctl knows nothing more of.
pub struct Generic;

impl Agent for Generic {
    fn name(&self) -> &'static str {
        "generic"
    }

    fn answer(&self, tail: &Tail<'_>) -> Found {
        tail.output()
    }
}
