//! What agentctl knows of each agent CLI, one module per kind behind one interface (`Agent`):
//! today, where its final answer is. A template's `result` setting chooses the kind
//! (`registry`); the store and the supervisor ask the kind and never name one.
//!
//! Adding a kind: a module here with a type that implements `Agent`, and its arm in
//! `registry::of` (see docs/agents.md).

mod claude;
mod codex;
mod gemini;
mod generic;
mod json;
mod kiro;
mod registry;

use crate::summary::{Found, Tail};

pub use registry::{of, summarize};

/// One agent CLI, as agentctl reads what it did.
pub trait Agent {
    /// The kind's name, as `docs/agents.md` lists it: `kiro`, `claude`, `gemini`, `codex`,
    /// `json`, `generic`.
    fn name(&self) -> &'static str;

    /// Whether the agent writes its answer to the file agentctl names (`{result_file}`,
    /// emptied before each run): that file is its answer, its output only when it wrote none.
    fn answer_in_file(&self) -> bool {
        false
    }

    /// Its answer in `tail`, a window of its log's end; `NeedMore` when a wider window may
    /// hold it (never asked again once `tail` cannot grow: then the output stands in).
    fn answer(&self, tail: &Tail<'_>) -> Found;
}
