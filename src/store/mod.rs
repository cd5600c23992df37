//! The home on disk: where each file lives, atomic records, locks, logs, the event log.

mod atomic;
mod events;
pub mod files;
mod finish;
mod home;
mod lock;
pub mod logfile;
mod tasks;

pub use atomic::{Durability, write_atomic};
pub use events::EventLog;
pub use files::Refused;
pub use home::resolve_home;
pub use lock::FileLock;
pub use tasks::Store;
