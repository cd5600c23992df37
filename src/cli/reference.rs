//! The command reference in Markdown (docs/reference/commands.md), rendered from the same clap
//! definitions as `--help` and the man pages, so it cannot drift from them.

use std::fmt::Write as _;

use clap::CommandFactory;

use super::args::Cli;

/// How the page says it was made; the doc tests regenerate it.
const HEAD: &str = "# Command reference

Generated from agentctl's command-line definitions (`src/cli/args.rs`): do not edit it by hand,
run `UPDATE_DOCS=1 cargo test --test docs` to write it anew. `agentctl COMMAND --help` prints
the same text, and `man agentctl-COMMAND` the same as a man page.
";

/// The reference page: the top-level help, then each command's, with a list of contents.
pub fn commands_markdown() -> String {
    let mut cli = Cli::command().color(clap::ColorChoice::Never).disable_help_subcommand(true);
    cli.build();
    let commands: Vec<&clap::Command> = cli.get_subcommands().filter(|c| !c.is_hide_set()).collect();
    let mut page = format!("{HEAD}\n");
    for c in &commands {
        let about = c.get_about().map(|a| a.to_string()).unwrap_or_default();
        let _ = writeln!(page, "- [`{0}`](#agentctl-{0}): {about}", c.get_name());
    }
    let _ = write!(page, "\n## agentctl\n\n```text\n{}```\n", cli.clone().render_long_help());
    for c in commands {
        let help = c.clone().render_long_help().to_string();
        let _ = write!(page, "\n## agentctl {}\n\n```text\n{}```\n", c.get_name(), help);
    }
    page
}
