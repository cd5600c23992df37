//! Shell completions (clap_complete's engine: the shell asks the binary itself, so a task's
//! token completes from the home) and the man page.

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;

use clap::CommandFactory;
use clap_complete::engine::CompletionCandidate;
use clap_complete::env::{Bash, Elvish, EnvCompleter, Fish, Powershell, Zsh};

use super::args::{Cli, Shell};
use crate::error::{Error, IoContext, Result};
use crate::ops;
use crate::store::{Store, resolve_home};

/// The variable that makes the binary answer the shell's completion request.
const VARIABLE: &str = "COMPLETE";

/// Answer the shell's completion request and exit, if this run is one.
pub fn answer_shell() {
    clap_complete::CompleteEnv::with_factory(Cli::command).var(VARIABLE).complete();
}

/// The script that registers completions in `shell`, calling this binary by its path.
pub fn script(shell: Shell, out: &mut dyn Write) -> Result<()> {
    let exe = std::env::current_exe().ctx(|| "cannot find this binary's path".into())?;
    let exe = exe.to_str().ok_or_else(|| Error::Usage(format!("{} is not UTF-8", exe.display())))?;
    let shell: &dyn EnvCompleter = match shell {
        Shell::Bash => &Bash,
        Shell::Zsh => &Zsh,
        Shell::Fish => &Fish,
        Shell::Elvish => &Elvish,
        Shell::Powershell => &Powershell,
    };
    shell.write_registration(VARIABLE, "agentctl", "agentctl", exe, out).ctx(|| "cannot write the script".into())
}

/// The commands the man pages describe: clap's own `help` command has no page of its own.
fn manual() -> clap::Command {
    Cli::command().disable_help_subcommand(true)
}

/// The man page (roff).
pub fn man(out: &mut dyn Write) -> Result<()> {
    clap_mangen::Man::new(manual()).render(out).ctx(|| "cannot write the man page".into())
}

/// Write `agentctl.1` and a page per command (`agentctl-ask.1`, …: the names `agentctl.1`
/// lists) into `dir`, made if missing; what was written, in a line.
pub fn man_pages(dir: &Path) -> Result<String> {
    std::fs::create_dir_all(dir).ctx(|| format!("cannot create {}", dir.display()))?;
    clap_mangen::generate_to(manual(), dir).ctx(|| format!("cannot write the man pages into {}", dir.display()))?;
    let commands = manual().get_subcommands().filter(|c| !c.is_hide_set()).count();
    Ok(format!("wrote agentctl.1 and {commands} pages agentctl-COMMAND.1 to {}", dir.display()))
}

/// The tokens of the home (`$AGENTCTL_HOME` or the default: the shell's line is not parsed)
/// that start with what was typed, newest first, each with its role, status and question.
pub fn tokens(current: &OsStr) -> Vec<CompletionCandidate> {
    let typed = current.to_string_lossy();
    let Ok(store) = resolve_home(None).and_then(|h| Store::existing(&h)) else { return Vec::new() };
    let Ok(tasks) = ops::peek(&store, 500) else { return Vec::new() };
    tasks
        .iter()
        .filter(|t| t.token.as_str().starts_with(typed.as_ref()))
        .map(|t| {
            let help = format!("{} {}: {}", t.role, t.status(), t.preview);
            CompletionCandidate::new(t.token.as_str()).help(Some(help.into()))
        })
        .collect()
}
