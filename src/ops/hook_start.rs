//! Starting a task's `on_end` hook once its end is recorded: `agentctl __hook TOKEN`, detached,
//! which runs it (see `hook`). Below everything that records an end, so each can start it.

use std::process::{Command, Stdio};

use crate::store::{FileLock, Store};
use crate::task::{HookState, TaskRecord};

/// Start the hook of `rec` if it is due (its end is recorded), detached.
pub fn start_hook(store: &Store, rec: &TaskRecord) {
    if rec.hook != Some(HookState::Due) || !rec.status().is_final() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else { return };
    let mut cmd = Command::new(exe);
    cmd.arg("--home").arg(store.home()).args(["__hook", rec.token.as_str()]);
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    // It forks at once and its first process exits: waited for here, it leaves no zombie. A
    // supervisor (a child subreaper) is one no more meanwhile, so that the hook's process is not
    // handed to it, to be ended with its task's leftovers.
    let subreaper = nix::sys::prctl::get_child_subreaper().unwrap_or(false);
    if subreaper {
        let _ = nix::sys::prctl::set_child_subreaper(false);
    }
    if let Ok(mut child) = cmd.spawn() {
        let _ = child.wait();
    }
    if subreaper {
        let _ = nix::sys::prctl::set_child_subreaper(true);
    }
}

/// A task whose end is recorded, its hook still due, and its supervisor gone (it died after
/// recording the end): start the hook its supervisor did not.
pub fn start_orphaned_hook(store: &Store, rec: &TaskRecord) {
    if rec.hook == Some(HookState::Due)
        && rec.status().is_final()
        && matches!(FileLock::try_take(&store.lock_path(rec.token)), Ok(Some(_)))
    {
        start_hook(store, rec);
    }
}
