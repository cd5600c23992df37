//! Codex CLI (`codex exec --output-last-message {result_file}`), and any agent that writes its
//! answer to the file agentctl names (`result = "file"`, implied by `{result_file}` in the
//! command): that file is its answer; its whole output if it wrote none.

use super::Agent;
use crate::summary::{Found, Tail};
use crate::task::ResultFrom;

/// An agent that writes its answer to `{result_file}`.
pub struct Codex;

/// Codex for `result = "file"`.
pub fn select(result: &ResultFrom) -> Option<Box<dyn Agent>> {
    (*result == ResultFrom::File).then(|| Box::new(Codex) as Box<dyn Agent>)
}

impl Agent for Codex {
    fn name(&self) -> &'static str {
        "codex"
    }

    fn answer_in_file(&self) -> bool {
        true
    }

    /// Only when it wrote no file: its output stands in, whole.
    fn answer(&self, tail: &Tail<'_>) -> Found {
        tail.output()
    }
}
