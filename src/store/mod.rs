//! The home on disk: where each file lives, the database of records and events, locks, logs.

mod atomic;
mod db;
mod events;
pub mod files;
mod finish;
mod home;
mod legacy;
mod lock;
pub mod logfile;
mod mcp_tasks;
mod pages;
mod pools;
mod questions;
mod schema;
mod tasks;

pub use atomic::{Durability, write_atomic};
pub use events::{EventLog, Logged};
pub use files::Refused;
pub use home::resolve_home;
pub use lock::FileLock;
pub use mcp_tasks::McpTask;
pub use pages::Page;
pub use pools::{Claim, WATCHERS};
pub use tasks::Store;
