//! The home on disk: where each file lives, the database of records and events, locks, logs.
//!
//! Each file imports only files of the layers below its own (`tests/imports.rs` checks it):
//! 1. `files`, `home` (the home directory), `schema`, `db` (SQL errors, write transactions)
//! 2. `lock`, `atomic`, `logfile`, `rows` (records, specs and events as rows)
//! 3. `legacy` (what earlier releases kept in files), then `connect` (opening the database)
//! 4. `layout` (`Store`: where each file lives)
//! 5. `events`, `pools`, `spend`, `totals`, `questions`, `pages`, `mcp_tasks`, `access`, `finish`,
//!    then `tasks`

mod access;
mod atomic;
mod connect;
mod db;
mod events;
pub mod files;
mod finish;
mod home;
mod hooks;
mod layout;
mod legacy;
mod lock;
pub mod logfile;
mod mcp_tasks;
mod pages;
mod pools;
mod questions;
mod rows;
mod schema;
mod spend;
mod starting;
mod tasks;
mod totals;

pub use access::{AccessToken, digest};
pub use atomic::{Durability, write_atomic};
pub use events::{EventLog, Logged};
pub use files::Refused;
pub use home::resolve_home;
pub use layout::Store;
pub use lock::FileLock;
pub use mcp_tasks::McpTask;
pub use pages::Page;
pub use pools::{Claim, WATCHERS};
pub use spend::Spent;
pub use tasks::waits_first;
pub use totals::{SpendBy, SpendRow};
