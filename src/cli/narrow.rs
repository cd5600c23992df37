//! The commands an orchestrator runs most (`run`, `ask`, `await`, `status`, `notify`, `wait`,
//! `halt`, and the supervisor's own), parsed with their own arguments and the global ones
//! only: clap builds every command's arguments before it parses any, and for three dozen
//! commands that is most of what a start costs agentctl's own process. Whatever this parse
//! does not take (help, a usage error, any other command) goes to the whole parser, which says
//! it as it always has.

use std::ffi::OsString;

use clap::{ArgMatches, Args, FromArgMatches};

use super::args::{AskArgs, AwaitArgs, Cli, Command, Globals, HaltArgs, NotifyArgs, RunArgs, TokenArgs, WaitEventArgs};

/// How a command's matches become the command.
type Make = fn(&ArgMatches) -> Result<Command, clap::Error>;

/// `args` (the program's name first) parsed as `Cli` would, if it names one of the commands
/// above and parses without a word to say.
pub fn parse(args: &[OsString]) -> Option<Cli> {
    let name = command_name(args.get(1..)?)?;
    let (sub, make): (clap::Command, Make) = match name {
        "run" => (RunArgs::augment_args(clap::Command::new("run")), |m| RunArgs::from_arg_matches(m).map(Command::Run)),
        "ask" => (AskArgs::augment_args(clap::Command::new("ask")), |m| AskArgs::from_arg_matches(m).map(Command::Ask)),
        "await" => (AwaitArgs::augment_args(clap::Command::new("await")), |m| {
            AwaitArgs::from_arg_matches(m).map(Command::Await)
        }),
        "status" => (TokenArgs::augment_args(clap::Command::new("status")), |m| {
            TokenArgs::from_arg_matches(m).map(Command::Status)
        }),
        "halt" => {
            (HaltArgs::augment_args(clap::Command::new("halt")), |m| HaltArgs::from_arg_matches(m).map(Command::Halt))
        }
        "notify" => (NotifyArgs::augment_args(clap::Command::new("notify")), |m| {
            NotifyArgs::from_arg_matches(m).map(Command::Notify)
        }),
        "wait" => (WaitEventArgs::augment_args(clap::Command::new("wait")), |m| {
            WaitEventArgs::from_arg_matches(m).map(Command::Wait)
        }),
        "__supervise" => (TokenArgs::augment_args(clap::Command::new("__supervise")), |m| {
            TokenArgs::from_arg_matches(m).map(Command::Supervise)
        }),
        _ => return None,
    };
    let cmd = Globals::augment_args(clap::Command::new("agentctl")).subcommand(sub);
    let matches = cmd.try_get_matches_from(args).ok()?;
    let globals = Globals::from_arg_matches(&matches).ok()?;
    let command = make(matches.subcommand()?.1).ok()?;
    Some(Cli { globals, command })
}

/// The command's name: the first word that is neither a global option nor its value.
fn command_name(args: &[OsString]) -> Option<&str> {
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let word = word.to_str()?;
        match word {
            "--home" | "--agents" | "--color" => {
                words.next()?;
            }
            "--json" => {}
            w if ["--home=", "--agents=", "--color="].iter().any(|p| w.starts_with(p)) => {}
            w if w.starts_with('-') => return None,
            w => return Some(w),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    fn the_commands_it_takes_parse_as_the_whole_parser_parses_them() {
        let lines = [
            "agentctl run --async -- true",
            "agentctl --json run -q --async --role build --timeout 30m -- make -j4 test",
            "agentctl --home /tmp/h run --wait 2s --cwd /tmp --pool p --after a3f2c1 -- sh -c 'x'",
            "agentctl ask reviewer 'Is it fine?' --async --budget-usd 2",
            "agentctl ask --to a3f2c1 'go on'",
            "agentctl --json await a3f2c1 b7e9d0 --timeout 5m",
            "agentctl status a3f2c1 --json",
            "agentctl --agents team.toml --color never halt a3f2c1 --grace 1s --purge",
            "agentctl notify --session ops hello",
            "agentctl --json wait --session ops --timeout 20s",
            "agentctl --home=/tmp/h __supervise a3f2c1",
        ];
        for line in lines {
            let args: Vec<OsString> = shell_words(line).into_iter().map(OsString::from).collect();
            let narrow = parse(&args).unwrap_or_else(|| panic!("not taken: {line}"));
            let whole = Cli::try_parse_from(&args).unwrap();
            assert_eq!(format!("{narrow:?}"), format!("{whole:?}"), "{line}");
        }
    }

    #[test]
    fn what_it_does_not_take_goes_to_the_whole_parser() {
        for line in [
            "agentctl list",
            "agentctl run --help",
            "agentctl --version",
            "agentctl run --async sleep 5",
            "agentctl await",
            "agentctl -h run",
            "agentctl",
        ] {
            let args: Vec<OsString> = line.split(' ').map(OsString::from).collect();
            assert!(parse(&args).is_none(), "{line}");
        }
    }

    fn shell_words(line: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut word = String::new();
        let mut quoted = false;
        for c in line.chars() {
            match c {
                '\'' => quoted = !quoted,
                ' ' if !quoted => out.push(std::mem::take(&mut word)),
                c => word.push(c),
            }
        }
        out.push(word);
        out
    }
}
