//! What agentctl knows of each agent CLI, one module per kind behind one interface (`Agent`):
//! where its final answer is, and how to follow its structured stream while it runs (usage,
//! session, current step). A template's `agent` (else its program's name) chooses the kind, its
//! `result` setting where the answer is (`registry`); the store and the supervisor ask the kind
//! and never name one.
//!
//! Adding a kind: a module here with a type that implements `Agent`, and its arm in
//! `registry::of` (see docs/agents.md).

mod claude;
mod codex;
mod copilot;
mod gemini;
mod generic;
mod json;
mod kind;
mod kiro;
mod opencode;
mod registry;
mod scan;
pub mod stream;
pub mod usage;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::summary::{Found, Tail};

/// The variables a task sets over the launcher's environment.
pub type Env = BTreeMap<String, String>;

pub use codex::resumed_run_usage;
pub use kind::AgentKind;
pub use registry::{kind, of, summarize};
pub use stream::{Reader, Seen};
pub use usage::{Price, Prices, Usage};

/// One agent CLI, as agentctl reads what it did.
pub trait Agent {
    /// The agent CLI it is.
    fn kind(&self) -> AgentKind;

    /// Its name, as `docs/agents.md` lists it: the kind's, or `json` for any JSON answer.
    fn name(&self) -> &'static str {
        self.kind().as_str()
    }

    /// Whether the agent writes its answer to the file agentctl names (`{result_file}`,
    /// emptied before each run): that file is its answer, its output only when it wrote none.
    fn answer_in_file(&self) -> bool {
        false
    }

    /// Its answer in `tail`, a window of its log's end; `NeedMore` when a wider window may
    /// hold it (never asked again once `tail` cannot grow: then the output stands in).
    fn answer(&self, tail: &Tail<'_>) -> Found;

    /// A reader of the structured stream it writes, to follow it while it runs; none for an
    /// agent whose output says nothing of its usage or steps.
    fn reader(&self) -> Option<Box<dyn Reader>> {
        None
    }

    /// The command that goes on with the conversation `session` (its agent's own id): `argv` is
    /// its template rendered with the follow-up question, to which the kind adds its own flags;
    /// with `fork`, a new conversation that starts as a copy of it. Err: why the kind cannot.
    fn resume(&self, _argv: Vec<String>, _session: &str, _fork: bool) -> Result<Vec<String>, String> {
        Err(format!("agentctl does not know how {} goes on with a conversation", self.name()))
    }

    /// Whether a resumed run's stream reports its conversation's total so far (Codex's thread
    /// totals) rather than the run's own.
    fn resumed_usage_is_total(&self) -> bool {
        false
    }

    /// Make conversation `session`, held for directory `from`, one the agent finds from
    /// directory `to` too (a fork that runs in a worktree of its own), with `env` over the
    /// launcher's environment. Err: why it cannot.
    fn carry_session(&self, _session: &str, _from: &Path, _to: &Path, _env: &Env) -> Result<(), String> {
        Err(format!("agentctl does not know how {} finds a conversation from another directory", self.name()))
    }

    /// Whether the command `argv` reads user messages on its stdin while it runs (Claude's
    /// `--input-format stream-json`): then its question is its first message, and `send` writes
    /// more into its conversation. The kind adds to `argv` what it needs for that (Claude:
    /// `--replay-user-messages`, by which its stream says each message was taken).
    fn reads_messages(&self, _argv: &mut Vec<String>) -> bool {
        false
    }

    /// Where the CLI keeps its conversations and state, for a task with `env` (over the
    /// launcher's environment): writable in agentctl's sandbox, so that its conversation can go
    /// on later (`ask --to`). None for a CLI agentctl does not know that of.
    fn state(&self, _env: &Env) -> Vec<PathBuf> {
        Vec::new()
    }

    /// The command `argv` as it runs in agentctl's sandbox: an agent whose own sandbox for its
    /// tools cannot start inside another (Codex's bubblewrap) is told to run them unfenced
    /// by itself, agentctl's sandbox fencing them instead.
    fn in_sandbox(&self, argv: Vec<String>) -> Vec<String> {
        argv
    }

    /// A user message as the line the agent reads on its stdin.
    fn message_line(&self, text: &str) -> String {
        format!("{text}\n")
    }
}

/// Variable `name` of a task with `env`, else of the launcher's environment, as a path.
fn var(env: &Env, name: &str) -> Option<PathBuf> {
    env.get(name).map(PathBuf::from).or_else(|| std::env::var_os(name).map(PathBuf::from))
}

/// `$HOME/rel`, for a task with `env`.
fn at_home(env: &Env, rel: &str) -> Option<PathBuf> {
    var(env, "HOME").map(|h| h.join(rel))
}

/// For a command of `kind` that reads user messages on its stdin (`Agent::reads_messages`, which
/// may add to `argv`): `question` as the first line it reads.
pub fn first_message(kind: AgentKind, argv: &mut Vec<String>, question: &str) -> Option<String> {
    let agent = registry::kind(kind);
    agent.reads_messages(argv).then(|| agent.message_line(question))
}

/// `argv` with `flags` put right after its program.
fn after_program<'a>(mut argv: Vec<String>, flags: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let at = argv.len().min(1);
    argv.splice(at..at, flags.into_iter().map(str::to_owned));
    argv
}
