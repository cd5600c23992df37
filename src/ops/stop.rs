//! Halting as a request that can be repeated: a task that has already ended is reported as it
//! ended instead of refused (the MCP `halt` tool is idempotent; the CLI refuses, exit 2).

use std::time::Duration;

use super::query::status;
use super::view::TaskView;
use super::wait::halt;
use crate::error::{Error, Result};
use crate::store::Store;
use crate::task::Token;

/// What a halt found.
#[derive(Clone, Debug)]
pub enum Halted {
    /// The halt stopped the task: it is `cancelled`, with its partial summary.
    Stopped(TaskView),
    /// The task had already ended (before the halt, or on its own during it); nothing was
    /// stopped. Its final state.
    AlreadyEnded(TaskView),
}

/// Halt the task if it still runs (as `halt`); otherwise its final state. Unknown and invalid
/// tokens are still errors.
pub async fn halt_if_running(store: &Store, token: Token, grace: Duration) -> Result<Halted> {
    match halt(store, token, grace, false).await {
        Ok(v) => Ok(Halted::Stopped(v)),
        Err(Error::AlreadyFinished { .. }) => Ok(Halted::AlreadyEnded(status(store, token)?)),
        Err(e) => Err(e),
    }
}
