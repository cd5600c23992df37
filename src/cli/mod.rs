//! The command line: clap arguments, dispatch to `ops`, rendering as text or `--json`.

mod access;
mod args;
mod complete;
mod dispatch;
mod launch_args;
mod log_json;
mod narrow;
mod progress;
mod reference;
mod render;
mod roles;
mod spend;
mod start;
mod table;
mod term;
mod top;
mod totals;
mod usage;

pub use dispatch::main;
pub use reference::commands_markdown;
