//! agentctl supervises sub-agent processes: agent CLIs (`kiro-cli chat`, `claude -p`,
//! `codex exec`, any command) started by an orchestrating agent or a person.
//!
//! # Theory of operation
//! A launcher (a CLI call, or the MCP server) validates a request, creates the task exclusively
//! under the home (`tasks/<token>/`), takes the task's lock, binds its control socket, saves
//! the task (the CLI in `starting/<token>.json`, the server in the database) and starts a
//! detached supervisor in its own session that inherits the lock and the socket, then hands
//! the token back without waiting for it. The supervisor moves a starting task into the
//! database (whoever reads it first may have), holds the lock for its whole life, spawns the
//! agent in its own cgroup or process group with output appended to
//! `subagents/<role>/data/history/<token>.log`, then waits on the agent and serves `wait` and
//! `halt` requests on the socket. When the agent exits it ends leftover descendants (it is a
//! child subreaper), writes the final record once (the one synced write of the task's life,
//! with the answer), answers its waiters and exits. Anyone who finds the lock free while the
//! record is not final records the task as `lost`.
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
pub mod crash;
pub mod error;
pub mod mcp;
pub mod ops;
pub mod store;
pub mod summary;
pub mod supervisor;
pub mod task;
pub mod worktree;
