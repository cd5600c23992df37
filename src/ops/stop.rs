//! Halting as a request that can be repeated: a task that has already ended is reported as it
//! ended, with a note that nothing was stopped, by every front-end alike.

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
    /// stopped. Its final state, its note saying so.
    AlreadyEnded(TaskView),
}

impl Halted {
    /// The task as the halt left it.
    pub fn view(&self) -> &TaskView {
        match self {
            Halted::Stopped(v) | Halted::AlreadyEnded(v) => v,
        }
    }
}

/// Halt the task if it still runs (as `halt`); otherwise its final state, noting that nothing
/// was stopped. `purge` removes its log and summary either way. Unknown and invalid tokens are
/// still errors.
pub async fn halt_if_running(store: &Store, token: Token, grace: Duration, purge: bool) -> Result<Halted> {
    match halt(store, token, grace, purge).await {
        Ok(v) => Ok(Halted::Stopped(v)),
        Err(Error::AlreadyFinished { .. }) => {
            let mut v = status(store, token)?;
            let mut said = format!("task {token} had already ended ({}); nothing was stopped", v.status);
            if purge {
                let rec = store.read_record(token)?;
                let there = [store.log_path(&rec.role, token), store.summary_path(&rec.role, token)];
                let had = there.iter().any(|p| p.exists());
                store.remove_history(&rec.role, token)?;
                said.push_str(if had {
                    "; log and summary removed (--purge)"
                } else {
                    "; its log and summary were gone already"
                });
            }
            v.note = Some(match v.note.take() {
                Some(n) => format!("{n}; {said}"),
                None => said,
            });
            Ok(Halted::AlreadyEnded(v))
        }
        Err(e) => Err(e),
    }
}
