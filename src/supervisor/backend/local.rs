//! The agent runs here, as the run's process itself: everything the loop does to that process
//! (signals, the cgroup, its exit) is done to the agent, and nothing is left to add.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use super::{Backend, Look, Prepare, Run};
use crate::task::{self, Outcome, TaskRecord, Token};

/// The agent runs on this machine, started by the supervisor.
pub(super) struct Local;

impl Prepare for Local {
    /// The agent's own command must be found here.
    fn program<'a>(&'a self, agent: &'a str) -> &'a str {
        agent
    }

    fn missing(&self, _place: &str) -> Option<String> {
        None
    }

    fn environment(&self, _env: &mut BTreeMap<String, String>) {}

    /// The agent's argv as it is.
    fn command(
        &self,
        argv: Vec<String>,
        _program: &Path,
        _token: Token,
        _cwd: &Path,
        _deadline_ms: Option<u64>,
    ) -> (Vec<String>, task::Backend) {
        (argv, task::Backend::Local)
    }
}

impl Backend for Local {
    /// The agent gets the launcher's environment as it is.
    fn environment(&self, _inherited: &mut BTreeMap<OsString, OsString>) {}

    /// It runs as soon as it starts.
    fn at_start(&self, _rec: &mut TaskRecord) {}

    fn started(&mut self, _run: &mut Run<'_>) -> Option<Look> {
        None
    }

    /// Never asked: nothing waits.
    fn look(&mut self, _run: &mut Run<'_>, _output: bool) -> Look {
        Look::Running { since_s: None, settled: true }
    }

    fn rerun(&mut self, _run: &mut Run<'_>, _looked: bool) -> Option<u64> {
        None
    }

    /// The loop's signals reach the agent.
    fn stop(&mut self, _run: &mut Run<'_>) -> bool {
        false
    }

    fn kill(&mut self, _run: &mut Run<'_>) {}

    /// Its exit says it all.
    fn ended(
        &mut self,
        _run: &mut Run<'_>,
        _stopped: bool,
        _exit: (Option<i32>, Option<i32>),
        _output: &dyn Fn() -> Vec<u8>,
    ) -> Option<(Outcome, Option<String>)> {
        None
    }
}
