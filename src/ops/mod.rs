//! The operations both front-ends offer (ask, run, await, halt, status, list, logs): the only
//! place where the rules live. The CLI and the MCP server convert types and render.

mod launch;
mod query;
mod view;
mod wait;

pub use launch::{Launch, Wait, What, start};
pub use query::{ListFilter, follow, list, read_log, status};
pub use view::TaskView;
pub use wait::{DEFAULT_GRACE, STILL_RUNNING, await_task, halt, refresh};
