//! What the user typed: clap definitions only, parsed into validated types by `dispatch`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use clap_complete::engine::ArgValueCompleter;

pub use super::access::AccessArgs;
pub use super::launch_args::{AskArgs, LaunchArgs, RunArgs, WaitArgs};

/// Supervise sub-agent processes: start agent CLIs detached, get quick answers at once, await
/// slow ones by token, halt them, list them and read their logs.
#[derive(Debug, Parser)]
#[command(name = "agentctl", version, propagate_version = true, after_help = EXAMPLES)]
pub struct Cli {
    #[command(flatten)]
    pub globals: Globals,
    #[command(subcommand)]
    pub command: Command,
}

/// The options every command takes.
#[derive(Debug, Args)]
pub struct Globals {
    /// State directory [default: $AGENTCTL_HOME, else $XDG_STATE_HOME/agentctl, else ~/.local/state/agentctl]
    #[arg(long, global = true, value_name = "DIR", help_heading = GLOBAL)]
    pub home: Option<PathBuf>,
    /// Print exactly one JSON object (one per line for streams) on stdout
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub json: bool,
    /// Agent templates file [default: <home>/agents.toml, else $XDG_CONFIG_HOME/agentctl/agents.toml]
    #[arg(long, global = true, value_name = "FILE", help_heading = GLOBAL)]
    pub agents: Option<PathBuf>,
    /// Colour on a terminal (auto), always or never; NO_COLOR set means never unless `always`
    #[arg(long, global = true, value_name = "WHEN", default_value = "auto", help_heading = GLOBAL)]
    pub color: clap::ColorChoice,
}

/// The heading global options are shown under, apart from each command's own.
const GLOBAL: &str = "Global options";

const EXAMPLES: &str = "Examples:
  agentctl ask reviewer 'Is src/main.rs safe?'   the answer, or a token after 10 s
  agentctl run --async -- make test              a token at once
  agentctl await a3f2c1                          the result once it ends
  agentctl list                                  what runs, and what ran
  source <(agentctl completions bash)            completions, tokens too";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Ask a role's agent a question (QUESTION `-` reads it from stdin)
    #[command(after_help = "Examples:
  agentctl ask reviewer 'Review the last commit'          the answer within 10 s, else a token
  agentctl ask planner - --async < question.md            a long question from stdin, a token at once
  agentctl ask coder 'Fix the flaky test' --worktree      in a git worktree of its own")]
    Ask(AskArgs),
    /// Run any command as a supervised task
    #[command(after_help = "Examples:
  agentctl run -- make test                      the command after `--`
  agentctl run --async --timeout 30m -- ./long-job.sh
  tok=$(agentctl run -q --async -- make test)   the token alone, for a script
  agentctl run --role build --sync -- cargo build --release")]
    Run(RunArgs),
    /// Wait for a task to end, or the first of several (up to --timeout; call again to keep waiting)
    #[command(after_help = "Examples:
  agentctl await a3f2c1                 up to 55 s; exit 124 if it still runs
  agentctl await a3f2c1 b7e9d0 --timeout 5m   the first of them to end")]
    Await(AwaitArgs),
    /// Stop a task: SIGTERM to all its processes, SIGKILL after the grace period
    #[command(after_help = "Examples:
  agentctl halt a3f2c1
  agentctl halt a3f2c1 --grace 1s --purge")]
    Halt(HaltArgs),
    /// List the tasks of this home
    #[command(after_help = "Examples:
  agentctl list
  agentctl list --status running
  agentctl list --role reviewer --limit 20")]
    List(ListArgs),
    /// List the roles `ask` knows (agents.toml), and what runs any other role
    #[command(after_help = "Examples:
  agentctl roles
  agentctl --agents team.toml --json roles")]
    Roles,
    /// What agents spent: tokens, turns and cost of the tasks that ended in a window (and those running)
    #[command(after_help = "Examples:
  agentctl usage --since 1d --by role
  agentctl --json usage --by agent")]
    Usage(UsageArgs),
    /// Show one task
    #[command(after_help = "Examples:
  agentctl status a3f2c1
  agentctl --json status a3f2c1")]
    Status(TokenArgs),
    /// Print a task's output (escapes stripped unless --raw)
    #[command(after_help = "Examples:
  agentctl logs a3f2c1 --follow
  agentctl logs a3f2c1 -n 20")]
    Logs(LogsArgs),
    /// Wait for the next event of a session: a task finishing, or a message or question from one
    #[command(after_help = "Examples:
  agentctl wait                               the next event of session `default`
  agentctl wait --types question --timeout 5m")]
    Wait(WaitEventArgs),
    /// Post a message (or a question) from inside a task to the session it reports to
    #[command(after_help = "Examples:
  agentctl notify 'halfway: tests pass'
  agentctl notify --question 'Which branch?'
  cargo test 2>&1 | grep --line-buffered FAIL | agentctl notify --lines")]
    Notify(NotifyArgs),
    /// From inside a task: ask the lead a question and wait for the answer (printed on stdout)
    #[command(
        name = "ask-lead",
        after_help = "Examples:
  branch=$(agentctl ask-lead 'Which branch?' --choices main,dev --timeout 10m)"
    )]
    AskLead(AskLeadArgs),
    /// Answer a task's question (by the question's id, or the task's token)
    #[command(after_help = "Examples:
  agentctl reply a3f2c1 main
  agentctl reply q0123456789 'use dev'")]
    Reply(ReplyArgs),
    /// Send a running task a message: into its agent's conversation where the agent reads
    /// messages as it runs (the built-in claude template), else to its inbox (`agentctl inbox`)
    #[command(after_help = "Examples:
  agentctl send a3f2c1 'stop after this file'")]
    Send(SendArgs),
    /// From inside a task: print the next message sent to it (waiting up to --wait)
    #[command(after_help = "Examples:
  agentctl inbox --wait 30s")]
    Inbox(InboxArgs),
    /// Show the events of a session (or all) without consuming them
    #[command(after_help = "Examples:
  agentctl events --session lead --follow")]
    Events(EventsArgs),
    /// Remove finished tasks (record, log, summary); running tasks are never touched
    #[command(after_help = "Examples:
  agentctl prune --older-than 7d
  agentctl prune --keep 100 --dry-run")]
    Prune(PruneArgs),
    /// Serve MCP (Model Context Protocol) on stdin/stdout, or over HTTP with --http
    #[command(after_help = "Examples:
  claude mcp add agentctl -- agentctl mcp
  agentctl mcp --allow-run --max-wait 30s
  agentctl mcp --http 127.0.0.1:8750          then: agentctl token create laptop")]
    Mcp(McpArgs),
    /// Make, list and revoke the access tokens of the HTTP server (`mcp --http`)
    #[command(after_help = "Examples:
  agentctl token create laptop                 prints the token, once
  agentctl token create ci --read-only --expires 30d
  agentctl token list
  agentctl token revoke laptop")]
    Token(AccessArgs),
    /// A live full-screen view of the tasks: their output as it comes, halt, reply, filter
    #[command(after_help = "Keys:
  ↑↓ j k     select a task            Enter   its whole output (Esc: back)
  h          halt it (y to confirm)   r       answer its question
  /          filter by token, role, status, session or question
  q          quit (the terminal is given back as it was)")]
    Top,
    /// Print the script that gives a shell completions (commands, options, the home's tokens)
    #[command(after_help = "Examples:
  source <(agentctl completions bash)                    in ~/.bashrc
  source <(agentctl completions zsh)                     in ~/.zshrc
  agentctl completions fish | source                     in ~/.config/fish/config.fish")]
    Completions(CompletionsArgs),
    /// Print the man page (roff), or write one page per command into a directory
    #[command(after_help = "Examples:
  agentctl man --dir ~/.cargo/share/man/man1     then: man agentctl, man agentctl-ask, …
  agentctl man | man -l -")]
    Man(ManArgs),
    /// Internal: the per-task supervisor (started by ask/run)
    #[command(name = "__supervise", hide = true)]
    Supervise(TokenArgs),
    /// Internal: run an ended task's on_end hook
    #[command(name = "__hook", hide = true)]
    Hook(TokenArgs),
}

#[derive(Debug, Args)]
pub struct AwaitArgs {
    /// One task's token, or several: then it returns as soon as any of them ends, with every
    /// one that has ended by then and the ones still running
    #[arg(required = true, value_name = "TOKEN", add = ArgValueCompleter::new(super::complete::tokens))]
    pub tokens: Vec<String>,
    /// Give up waiting after D (the task keeps running) [default: 55s]
    #[arg(long, value_name = "D")]
    pub timeout: Option<String>,
}

#[derive(Debug, Args)]
pub struct HaltArgs {
    /// The task's token (6 hex characters, as `ask`, `run` and `list` show it)
    #[arg(add = ArgValueCompleter::new(super::complete::tokens))]
    pub token: String,
    /// Time between SIGTERM and SIGKILL [default: 5s]
    #[arg(long, value_name = "D")]
    pub grace: Option<String>,
    /// Also remove the task's log and summary
    #[arg(long)]
    pub purge: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only tasks with this status (starting, running, completed, failed, cancelled, expired, lost)
    #[arg(long)]
    pub status: Option<String>,
    /// Only tasks of this role
    #[arg(long)]
    pub role: Option<String>,
    /// Only the N newest matching tasks
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Skip the N newest matching tasks (with --limit: the next page)
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub offset: usize,
}

#[derive(Debug, Args)]
pub struct UsageArgs {
    /// Only tasks that ended in the last D (e.g. 1d, 12h), and those still running [default: all]
    #[arg(long, value_name = "D")]
    pub since: Option<String>,
    /// A line per role, pool, session (the one a task reports to) or agent (its kind)
    #[arg(long, value_name = "GROUP", value_parser = ["role", "pool", "session", "agent"])]
    pub by: Option<String>,
}

#[derive(Debug, Args)]
pub struct TokenArgs {
    /// The task's token (6 hex characters, as `ask`, `run` and `list` show it)
    #[arg(add = ArgValueCompleter::new(super::complete::tokens))]
    pub token: String,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete in
    pub shell: Shell,
}

/// The shells completions are made for.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
    Elvish,
    Powershell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write agentctl.1 and a page per command (agentctl-ask.1, …) into DIR, made if missing
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The task's token (6 hex characters, as `ask`, `run` and `list` show it)
    #[arg(add = ArgValueCompleter::new(super::complete::tokens))]
    pub token: String,
    /// Keep printing new output until the task ends
    #[arg(long, short)]
    pub follow: bool,
    /// Only the last N lines
    #[arg(long, short = 'n', value_name = "N")]
    pub tail: Option<usize>,
    /// Keep escape sequences and carriage returns as the agent wrote them
    #[arg(long)]
    pub raw: bool,
}

#[derive(Debug, Args)]
pub struct McpArgs {
    /// Offer the `run` tool, which runs any command (off unless given)
    #[arg(long)]
    pub allow_run: bool,
    /// The longest one tool call blocks (await, wait_for_event, and ask/run's wait for a quick
    /// result); keep it below the client's tool-call timeout (60 s in the TypeScript SDK)
    #[arg(long, value_name = "D", default_value = "55s")]
    pub max_wait: String,
    /// The most bytes one tool result holds, both its copies together (at least 2048): a
    /// longer answer keeps its head and tail, and says which `logs` call reads the rest
    #[arg(long, value_name = "BYTES", default_value_t = crate::mcp::DEFAULT_BUDGET)]
    pub result_budget: usize,
    /// Serve over Streamable HTTP at ADDR:PORT (path /mcp) instead of stdio; every request needs
    /// a token from `agentctl token create`
    #[arg(long, value_name = "ADDR:PORT")]
    pub http: Option<std::net::SocketAddr>,
    /// A host name (or host:port) clients may reach the HTTP server by, beside loopback's
    #[arg(long = "allowed-host", value_name = "HOST", requires = "http")]
    pub allowed_hosts: Vec<String>,
    /// Serve over TLS with this certificate chain (PEM); needs --tls-key
    #[arg(long, value_name = "FILE", requires_all = ["http", "tls_key"])]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Listen on an address other than loopback without TLS
    #[arg(long, requires = "http")]
    pub insecure_http: bool,
    /// The most calls one token may have under way at once over HTTP (more get 429)
    #[arg(long, value_name = "N", default_value_t = 256, requires = "http")]
    pub max_calls: usize,
}

#[derive(Debug, Args)]
pub struct WaitEventArgs {
    /// Session to wait on [default: the enclosing task's token inside a task, else $AGENTCTL_SESSION, else `default`]
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    /// Only these event types, comma-separated: task_finished, message, question
    #[arg(long, value_name = "TYPES")]
    pub types: Option<String>,
    /// Give up after D and print a `timeout` event [default: 55s]
    #[arg(long, value_name = "D")]
    pub timeout: Option<String>,
}

#[derive(Debug, Args)]
pub struct NotifyArgs {
    /// What to tell the session's lead (`-`: read it from stdin)
    #[arg(required_unless_present = "lines", conflicts_with = "lines")]
    pub message: Option<String>,
    /// Post each line of stdin as a message of its own, as the lines come (blank lines are
    /// skipped); lines that come together are written together
    #[arg(long)]
    pub lines: bool,
    /// Post it as a question (waiters can filter on `question`)
    #[arg(long)]
    pub question: bool,
    /// Post to this session [default: the session of the task this runs in]
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
}

#[derive(Debug, Args)]
pub struct AskLeadArgs {
    /// The question (`-`: read it from stdin)
    pub question: String,
    /// Give up after D: the question is withdrawn and the exit code is 124 [default: wait for ever]
    #[arg(long, value_name = "D")]
    pub timeout: Option<String>,
    /// The answers to offer, comma-separated, like `main,dev`
    #[arg(long, value_name = "A,B,…")]
    pub choices: Option<String>,
}

#[derive(Debug, Args)]
pub struct ReplyArgs {
    /// The question's id (like q0123456789) or the token of the task that asks
    #[arg(add = ArgValueCompleter::new(super::complete::tokens))]
    pub target: String,
    /// The answer (`-`: read it from stdin)
    pub answer: String,
}

#[derive(Debug, Args)]
pub struct SendArgs {
    /// The running task's token
    #[arg(add = ArgValueCompleter::new(super::complete::tokens))]
    pub token: String,
    /// The message (`-`: read it from stdin)
    pub message: String,
}

#[derive(Debug, Args)]
pub struct InboxArgs {
    /// Wait up to D for a message; print a `timeout` event and exit 124 if none came [default: 0s]
    #[arg(long, value_name = "D")]
    pub wait: Option<String>,
}

#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Only this session's events
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    /// Keep printing new events as they come
    #[arg(long, short)]
    pub follow: bool,
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Only tasks that ended longer ago than D (e.g. 7d, 12h)
    #[arg(long, value_name = "D")]
    pub older_than: Option<String>,
    /// Keep the N most recently ended tasks
    #[arg(long, value_name = "N")]
    pub keep: Option<usize>,
    /// Only list what would be removed
    #[arg(long)]
    pub dry_run: bool,
    /// Also delete the branches (agentctl/TOKEN) of their worktrees, which are kept otherwise
    #[arg(long)]
    pub purge: bool,
}
