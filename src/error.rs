//! The one error type of agentctl, and the exit code each failure maps to.

use std::path::PathBuf;

use crate::task::{Status, Token};

/// Everything that can go wrong, split into what the user can fix (exit 2) and internal faults (70).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid token `{0}`: a token is 6 lowercase hex characters, like a3f2c1 (`agentctl list` shows them)")]
    InvalidToken(String),
    #[error("invalid role `{0}`: use 1 to 64 characters from A-Z, a-z, 0-9, `_` and `-`")]
    InvalidRole(String),
    #[error("no task {token} in {home}; `agentctl list` shows the tasks of this home (or pass --home)")]
    UnknownToken { token: Token, home: PathBuf },
    #[error("task {token} already finished ({status}); there is nothing to halt")]
    AlreadyFinished { token: Token, status: Status },
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    LaunchFailed(String),
    /// A file in the home that agentctl will not use (a planted symlink, a FIFO…).
    #[error("{0}")]
    Refused(String),
    /// A command that only reads found no home at the path it was given.
    #[error("no agentctl home at {0}: nothing has run with this home yet; check --home and AGENTCTL_HOME")]
    NoHome(PathBuf),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Internal(String),
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
            | Error::AlreadyFinished { .. }
            | Error::Usage(_)
            | Error::LaunchFailed(_)
            | Error::Refused(_)
            | Error::NoHome(_) => 2,
            Error::Io { .. } | Error::Internal(_) => 70,
        }
    }

    /// A short machine-readable kind for `--json` output.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::InvalidToken(_) => "invalid_token",
            Error::InvalidRole(_) => "invalid_role",
            Error::UnknownToken { .. } => "unknown_token",
            Error::AlreadyFinished { .. } => "already_finished",
            Error::Usage(_) => "usage",
            Error::LaunchFailed(_) => "launch_failed",
            Error::Refused(_) => "refused",
            Error::NoHome(_) => "no_home",
            Error::Io { .. } => "io",
            Error::Internal(_) => "internal",
        }
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
}

impl<T> IoContext<T> for nix::Result<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|errno| Error::Io { context: what(), source: errno.into() })
    }
}
