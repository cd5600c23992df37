//! The command line: clap arguments, dispatch to `ops`, rendering as text or `--json`.

mod args;
mod dispatch;
mod render;

pub use dispatch::main;
