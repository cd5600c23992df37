//! Which directory is the home: `--home` > `AGENTCTL_HOME` > `$XDG_STATE_HOME/agentctl` >
//! `~/.local/state/agentctl`.

use std::path::PathBuf;

use crate::error::{Error, Result};

/// Pick the home from the flag and the environment (not yet created).
pub fn resolve_home(flag: Option<PathBuf>) -> Result<PathBuf> {
    let nonempty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(h) = flag.or_else(|| nonempty("AGENTCTL_HOME")) {
        return Ok(h);
    }
    if let Some(x) = nonempty("XDG_STATE_HOME") {
        return Ok(x.join("agentctl"));
    }
    match nonempty("HOME") {
        Some(h) => Ok(h.join(".local/state/agentctl")),
        None => Err(Error::Usage("cannot find a home for agentctl: set --home, AGENTCTL_HOME or HOME".into())),
    }
}
