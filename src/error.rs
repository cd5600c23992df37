//! The one error type of agentctl, and the exit code each failure maps to.

use std::fmt;
use std::path::PathBuf;

use crate::task::{Status, Token};

/// Everything that can go wrong, split into what the user can fix (exit 2) and internal faults (70).
///
/// A message says what went wrong the same way for every front-end; what to do next is
/// added by `message` in the reader's terms: a command line for the CLI (`Display`), a tool
/// to call for the MCP server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Not `^[0-9a-f]{6}$` (what was given, shortened for display).
    InvalidToken(String),
    /// Not `[A-Za-z0-9_-]{1,64}`.
    InvalidRole(String),
    /// A well-formed token with no task in this home.
    UnknownToken { token: Token, home: PathBuf },
    /// A role with no template of its own whose name is close to one that has (a typo).
    UnknownRole { role: String, near: String, roles: Vec<String>, file: PathBuf },
    /// A halt of a task that has already ended.
    AlreadyFinished { token: Token, status: Status },
    /// A halt that took over from an unresponsive supervisor could not see it end.
    HaltTimedOut { token: Token },
    /// Bad input, with what to do instead.
    Usage(String),
    /// The agent's command cannot be started.
    LaunchFailed(String),
    /// A file in the home that agentctl will not use (a planted symlink, a FIFO…).
    Refused(String),
    /// A command that only reads found no home at the path it was given.
    NoHome(PathBuf),
    /// An I/O failure, with what was being done.
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// A fault of agentctl itself.
    Internal(String),
}

/// Who reads an error message, and so how its advice is put.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frontend {
    /// A person or a script at the command line: name the command to run.
    Cli,
    /// A model calling tools over MCP: name the tool to call, never a command line or a flag.
    Mcp,
}

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The process exit code for this error (DESIGN.md §4).
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::InvalidToken(_)
            | Error::InvalidRole(_)
            | Error::UnknownToken { .. }
            | Error::UnknownRole { .. }
            | Error::AlreadyFinished { .. }
            | Error::Usage(_)
            | Error::LaunchFailed(_)
            | Error::Refused(_)
            | Error::NoHome(_) => 2,
            // A home that cannot be written (a read-only mount, a store not ours to write) is the
            // user's situation, not a fault.
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::ReadOnlyFilesystem => 2,
            Error::Io { .. } | Error::HaltTimedOut { .. } | Error::Internal(_) => 70,
        }
    }

    /// A short machine-readable kind for `--json` output.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::InvalidToken(_) => "invalid_token",
            Error::InvalidRole(_) => "invalid_role",
            Error::UnknownToken { .. } => "unknown_token",
            Error::UnknownRole { .. } => "unknown_role",
            Error::AlreadyFinished { .. } => "already_finished",
            Error::Usage(_) => "usage",
            Error::LaunchFailed(_) => "launch_failed",
            Error::Refused(_) => "refused",
            Error::NoHome(_) => "no_home",
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::ReadOnlyFilesystem => "read_only",
            Error::Io { .. } => "io",
            Error::HaltTimedOut { .. } | Error::Internal(_) => "internal",
        }
    }

    /// The whole message for `reader`: what went wrong, then what to do next.
    pub fn message(&self, reader: Frontend) -> String {
        let core = match reader {
            Frontend::Cli => self.core(),
            Frontend::Mcp => self.core_without_paths(),
        };
        match self.advice(reader) {
            Some(advice) => format!("{core}; {advice}"),
            None => core,
        }
    }

    /// What went wrong, as the MCP server says it: without the paths of the machine it runs
    /// on (its results promise none; a model could not use them).
    fn core_without_paths(&self) -> String {
        match self {
            Error::UnknownToken { token, .. } => format!("no task {token} in this server's home"),
            e => without_paths(&e.core()),
        }
    }

    /// What went wrong, the same for every front-end.
    fn core(&self) -> String {
        match self {
            Error::InvalidToken(t) => {
                format!("invalid token `{t}`: a token is 6 lowercase hex characters, like a3f2c1")
            }
            Error::InvalidRole(r) => {
                format!("invalid role `{r}`: use 1 to 64 characters from A-Z, a-z, 0-9, `_` and `-`")
            }
            Error::UnknownToken { token, home } => format!("no task {token} in {}", home.display()),
            Error::UnknownRole { role, near, .. } => format!("role `{role}` is not defined (did you mean `{near}`?)"),
            Error::AlreadyFinished { token, status } => {
                format!("task {token} already finished ({status}); there is nothing to halt")
            }
            Error::HaltTimedOut { token } => {
                format!("the supervisor of task {token} did not finish halting it in time")
            }
            Error::Usage(m) | Error::LaunchFailed(m) | Error::Refused(m) | Error::Internal(m) => m.clone(),
            Error::NoHome(home) => {
                format!("no home at {}: nothing has run with this home yet", home.display())
            }
            Error::Io { context, source } => format!("{context}: {source}"),
        }
    }

    /// What to do next, in `reader`'s terms, where the message alone does not say.
    fn advice(&self, reader: Frontend) -> Option<String> {
        use Frontend::{Cli, Mcp};
        Some(match (self, reader) {
            (Error::InvalidToken(_), Cli) => "`agentctl list` shows them".into(),
            (Error::InvalidToken(_), Mcp) => "the `list` tool shows them".into(),
            (Error::UnknownToken { .. }, Cli) => "`agentctl list` shows the tasks of this home (or pass --home)".into(),
            (Error::UnknownToken { .. }, Mcp) => "call `list` to see the tasks this server knows".into(),
            (Error::NoHome(_), Cli) => "check --home and AGENTCTL_HOME".into(),
            (Error::Io { source, .. }, _) if source.kind() == std::io::ErrorKind::ReadOnlyFilesystem => match reader {
                Cli => "the home cannot be written (a read-only file system, or its store not yours to write): \
                        `list`, `status`, `logs` and `await` read it, but starting or taking anything writes; pick a \
                        writable home with --home or AGENTCTL_HOME, or check the owner and mode of its files"
                    .into(),
                Mcp => "the server's home cannot be written: `list`, `logs` and `await` work, nothing can be \
                        started or taken"
                    .into(),
            },
            (Error::UnknownRole { role, roles, file, .. }, Cli) => format!(
                "the roles of {} are {} (`agentctl roles` shows them); for a new role of that name, give it an entry \
                 [agents.{role}] there",
                file.display(),
                crate::agents::name_list(roles)
            ),
            (Error::UnknownRole { roles, .. }, Mcp) => {
                format!("the roles are {}; call `ask` again with one of them", crate::agents::name_list(roles))
            }
            (Error::HaltTimedOut { token }, Cli) => format!("check `agentctl status {token}`"),
            (Error::HaltTimedOut { token }, Mcp) => format!("call `await` with token {token} to see how it ends"),
            (Error::InvalidRole(_), Mcp) => "call `ask` again with such a role".into(),
            // Bad arguments: the same call, corrected, unless the message names another.
            (Error::Usage(m), Mcp) if !TOOLS.iter().any(|t| m.contains(&format!("`{t}`"))) => {
                "correct that and make the same tool call again".into()
            }
            (Error::LaunchFailed(_), Mcp) => "then call `ask` (or `run`) again; nothing was started".into(),
            (Error::AlreadyFinished { token, .. }, Mcp) => format!("call `await` with token {token} for its result"),
            (Error::Io { .. } | Error::Internal(_) | Error::Refused(_), Mcp) => {
                "call `list` to see where the tasks stand, then try again".into()
            }
            _ => return None,
        })
    }
}

/// `text` with each absolute path shortened to `…/` and its last part (`cannot read
/// /home/me/.agentctl/tasks/a3f2c1/summary.md` → `cannot read …/summary.md`), for the MCP
/// server. A path starts at a `/` that begins a word or follows a quote, a bracket or `=`;
/// a URL's slashes do not.
pub fn without_paths(text: &str) -> String {
    const OPENS: &str = "`'\"([{<=";
    const ENDS: &str = "`'\")]}>,;";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('/') {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let starts = out.chars().next_back().is_none_or(|c| c.is_whitespace() || OPENS.contains(c));
        let len = from.find(|c: char| c.is_whitespace() || ENDS.contains(c)).unwrap_or(from.len());
        // A sentence's `.` or `:` after a path is not part of it.
        let path = from[..len].trim_end_matches(['.', ':']);
        let last = path.trim_end_matches('/').rsplit('/').next().unwrap_or_default();
        if starts && !last.is_empty() {
            out.push_str("…/");
            out.push_str(last);
            rest = &from[path.len()..];
        } else {
            out.push('/');
            rest = &from[1..];
        }
    }
    out.push_str(rest);
    out
}

/// The MCP tools, as messages name them.
const TOOLS: [&str; 10] = ["ask", "run", "await", "halt", "list", "logs", "wait_for_event", "notify", "reply", "send"];

/// The command line's message (`Frontend::Cli`).
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message(Frontend::Cli))
    }
}

/// Attach a description of what was being done to an I/O error.
pub trait IoContext<T> {
    /// Wrap the error with `what` (evaluated only on failure).
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| Error::from_io(source, what))
    }
}

impl Error {
    /// An I/O error with what was being done; a file the home refused stays a refusal.
    pub fn from_io(source: std::io::Error, what: impl FnOnce() -> String) -> Error {
        match source.get_ref().and_then(|e| e.downcast_ref::<crate::store::Refused>()) {
            Some(r) => Error::Refused(r.0.clone()),
            None => Error::Io { context: what(), source },
        }
    }

    /// The same failure once more, for another caller of one shared attempt (an error is not
    /// `Clone`): an I/O failure keeps its kind, and so its advice (a full disk).
    pub fn again(&self) -> Error {
        match self {
            Error::Io { context, source } => {
                Error::Io { context: context.clone(), source: std::io::Error::new(source.kind(), source.to_string()) }
            }
            Error::Refused(m) => Error::Refused(m.clone()),
            other => Error::Internal(other.to_string()),
        }
    }

    /// This failure with `note` (what was done before it) added to what it says.
    pub fn noted(self, note: &str) -> Error {
        match self {
            Error::Io { context, source } => Error::Io { context: format!("{context} ({note})"), source },
            Error::Usage(m) => Error::Usage(format!("{m}; {note}")),
            Error::Refused(m) => Error::Refused(format!("{m}; {note}")),
            Error::Internal(m) => Error::Internal(format!("{m}; {note}")),
            other => other,
        }
    }
}

impl<T> IoContext<T> for nix::Result<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|errno| Error::Io { context: what(), source: errno.into() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn every_kind() -> Vec<Error> {
        let token = crate::task::Token::parse("a3f2c1").unwrap();
        vec![
            Error::InvalidToken("../x".into()),
            Error::InvalidRole("a/b".into()),
            Error::UnknownToken { token, home: "/h".into() },
            Error::UnknownRole {
                role: "reviwer".into(),
                near: "reviewer".into(),
                roles: vec!["planner".into(), "reviewer".into()],
                file: "/h/agents.toml".into(),
            },
            Error::AlreadyFinished { token, status: Status::Completed },
            Error::HaltTimedOut { token },
            Error::Usage("bad".into()),
            Error::LaunchFailed("no such command".into()),
            Error::Io { context: "cannot read x".into(), source: std::io::ErrorKind::NotFound.into() },
            Error::Refused("/h/x.log is a symlink, where the home keeps a regular file of its own; remove it".into()),
            Error::NoHome("/nowhere".into()),
            Error::Internal("oops".into()),
        ]
    }

    #[test]
    fn mcp_messages_name_tools_never_command_lines() {
        for e in every_kind() {
            let m = e.message(Frontend::Mcp);
            assert!(!m.contains("agentctl ") && !m.contains("--"), "{m}");
            assert!(m.starts_with(&e.core_without_paths()), "{m}");
        }
    }

    #[test]
    fn mcp_messages_name_no_absolute_path_and_the_cli_keeps_them() {
        for e in every_kind() {
            let m = e.message(Frontend::Mcp);
            assert!(!m.contains(" /") && !m.contains("`/"), "{m}");
        }
        let token = crate::task::Token::parse("a3f2c1").unwrap();
        let unknown = Error::UnknownToken { token, home: "/root/.agentctl".into() };
        assert!(unknown.message(Frontend::Mcp).starts_with("no task a3f2c1 in this server's home; call `list`"));
        assert!(unknown.to_string().starts_with("no task a3f2c1 in /root/.agentctl;"));
        let io = Error::Io {
            context: "cannot read /root/.agentctl/tasks/a3f2c1/summary.md".into(),
            source: std::io::ErrorKind::PermissionDenied.into(),
        };
        assert!(io.message(Frontend::Mcp).starts_with("cannot read …/summary.md: permission denied;"), "{io}");
        assert!(io.to_string().starts_with("cannot read /root/.agentctl/tasks/a3f2c1/summary.md: "));
    }

    #[test]
    fn paths_are_cut_to_their_last_part_and_nothing_else_is() {
        for (text, says) in [
            ("cannot open log /h/tasks/a3f2c1/output.log: denied", "cannot open log …/output.log: denied"),
            ("working directory /srv/app/ does not exist.", "working directory …/app does not exist."),
            ("cannot run `/usr/bin/kiro-cli` (`PATH=/nonexistent:/bin`)", "cannot run `…/kiro-cli` (`PATH=…/bin`)"),
            ("/h/x.log is a symlink", "…/x.log is a symlink"),
            (
                "see https://example.com/a/b and a/b, 3/4, and / alone",
                "see https://example.com/a/b and a/b, 3/4, and / alone",
            ),
            ("no paths here", "no paths here"),
        ] {
            assert_eq!(without_paths(text), says, "{text}");
        }
    }

    #[test]
    fn cli_messages_keep_their_advice() {
        let [invalid, _, unknown, _, finished, halt, ..] = &every_kind()[..] else { unreachable!() };
        for (e, says) in [
            (
                invalid,
                "invalid token `../x`: a token is 6 lowercase hex characters, like a3f2c1; `agentctl list` shows them",
            ),
            (unknown, "no task a3f2c1 in /h; `agentctl list` shows the tasks of this home (or pass --home)"),
            (finished, "task a3f2c1 already finished (completed); there is nothing to halt"),
            (halt, "the supervisor of task a3f2c1 did not finish halting it in time; check `agentctl status a3f2c1`"),
        ] {
            assert_eq!(e.to_string(), says);
        }
        assert!(unknown.message(Frontend::Mcp).contains("call `list`"));
    }
}
