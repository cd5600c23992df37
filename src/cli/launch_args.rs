//! What `ask` and `run` take: how long to wait, where and how the task runs, and (for `ask`) a
//! role's question or a follow-up of an ended task. Clap definitions only.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub struct WaitArgs {
    /// Return the token at once
    #[arg(long = "async", conflicts_with_all = ["sync", "wait"])]
    pub r#async: bool,
    /// Wait until the task ends
    #[arg(long, conflicts_with = "wait")]
    pub sync: bool,
    /// Wait up to D for the result before handing back a token [default: 10s]
    #[arg(long, value_name = "D")]
    pub wait: Option<String>,
    /// Print only the task's token on stdout, for scripts: tok=$(agentctl run -q --async -- …)
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct LaunchArgs {
    /// Directory to run the agent in [default: the current directory, or the template's cwd]
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Session the task reports to [default: $AGENTCTL_SESSION, else the enclosing task, else `default`]
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    /// Halt the task as `expired` once it has run this long
    #[arg(long, value_name = "D")]
    pub timeout: Option<String>,
    /// Run it in a git worktree of its own (branch agentctl/TOKEN), from HEAD or --base
    #[arg(long)]
    pub worktree: bool,
    /// The commit or branch the worktree starts from [default: HEAD]; implies --worktree
    #[arg(long, value_name = "REF")]
    pub base: Option<String>,
    /// The pool it waits in for a place ([pools.NAME] in agents.toml) [default: the role's, else `default`]
    #[arg(long, value_name = "NAME")]
    pub pool: Option<String>,
    /// Halt it as `over_budget` once its agent's cost passes this many US dollars
    #[arg(long, value_name = "USD")]
    pub budget_usd: Option<f64>,
    /// … once its tokens (input, output, cache) pass this many
    #[arg(long, value_name = "N")]
    pub budget_tokens: Option<u64>,
    /// … once its model calls (turns) pass this many
    #[arg(long, value_name = "N")]
    pub budget_turns: Option<u64>,
    /// Start it once these tasks have ended, if each completed (else it ends cancelled, never run)
    #[arg(long, value_name = "TOKEN,…", value_delimiter = ',')]
    pub after: Vec<String>,
    /// With --after: start it whatever they ended as
    #[arg(long, requires = "after")]
    pub after_any_end: bool,
    /// Run it in this sandbox ([sandboxes.NAME] in agents.toml; `none`: none) [default: the role's, else its pool's, else the file's]
    #[arg(long, value_name = "NAME")]
    pub sandbox: Option<String>,
}

#[derive(Debug, Args)]
#[command(
    override_usage = "agentctl ask [OPTIONS] <ROLE> <QUESTION>\n       agentctl ask [OPTIONS] --to|--fork <TOKEN> <QUESTION>"
)]
pub struct AskArgs {
    /// The role to ask (its template comes from agents.toml, or the built-in kiro-cli default);
    /// with --to, the question
    #[arg(value_name = "ROLE")]
    pub role: String,
    /// The question; `-` reads it from stdin
    #[arg(required_unless_present_any = ["to", "fork"])]
    pub question: Option<String>,
    /// Go on with ended task TOKEN's conversation: its agent's session resumed, as its next turn
    #[arg(long, value_name = "TOKEN", conflicts_with_all = ["cwd", "worktree", "base", "pool", "session", "timeout", "after"])]
    pub to: Option<String>,
    /// Start a new task from a copy of ended task TOKEN's conversation (the original goes on unchanged)
    #[arg(long, value_name = "TOKEN", conflicts_with_all = ["to", "cwd", "worktree", "base", "session", "after"])]
    pub fork: Option<String>,
    #[command(flatten)]
    pub wait: WaitArgs,
    #[command(flatten)]
    pub launch: LaunchArgs,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Role name to file the task under
    #[arg(long, default_value = "run")]
    pub role: String,
    #[command(flatten)]
    pub wait: WaitArgs,
    #[command(flatten)]
    pub launch: LaunchArgs,
    /// The command and its arguments, after `--`
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}
