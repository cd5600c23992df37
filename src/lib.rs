//! agentctl supervises sub-agent processes: agent CLIs (`kiro-cli chat`, `claude -p`,
//! `codex exec`, any command) started by an orchestrating agent or a person.
//!
//! # Theory of operation
//! A launcher (a CLI call, later the MCP server) validates a request, creates the task
//! exclusively under the home (`tasks/<token>/`), takes the task's lock and starts a detached
//! supervisor (`agentctl __supervise`, double-forked into its own session) that inherits the
//! lock. The supervisor holds the lock for its whole life, spawns the agent in its own process
//! group with output appended to `subagents/<role>/data/history/<token>.log`, reports "started"
//! or the exec error back through a pipe, then waits on the agent's pid and serves `wait` and
//! `halt` requests on a Unix socket. When the agent exits it ends leftover descendants (it is a
//! child subreaper), writes the summary and the final record once, answers its waiters and exits.
//! Anyone who finds the lock free while the record is not final records the task as `lost`.
//!
//! # Modules
//! - [`task`] holds the pure domain (tokens, roles, specs, statuses, outcomes, templates)
//! - [`store`] holds the home on disk (layout, atomic records, locks, logs)
//! - [`summary`] turns a log tail into a summary
//! - [`agent`] knows each agent CLI (kiro-cli, Claude Code, Gemini CLI, Codex…): where its answer is
//! - [`supervisor`] launches the per-task supervisor and is its life
//! - [`agents`] reads `agents.toml`
//! - [`ops`] holds the operations, shared by every front-end
//! - [`cli`] is the command line
//! - [`mcp`] is the MCP server, over the same `ops`
//! - [`worktree`] gives tasks git worktrees of their own and counts what they changed

pub mod agent;
pub mod agents;
pub mod cli;
pub mod error;
pub mod mcp;
pub mod ops;
pub mod store;
pub mod summary;
pub mod supervisor;
pub mod task;
pub mod worktree;
