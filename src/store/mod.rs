//! The home on disk: where each file lives, atomic records, per-task locks, log reading.

mod atomic;
mod home;
mod lock;
pub mod logfile;
mod tasks;

pub use atomic::write_atomic;
pub use home::resolve_home;
pub use lock::TaskLock;
pub use tasks::Store;
