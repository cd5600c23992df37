//! The per-task supervisor: `launch` starts it detached, `run` is its life, `control` is how
//! others talk to it, `spawn` starts the agent, `unix` holds the process-group and signal details.

pub mod cgroup;
mod clients;
pub mod control;
mod launch;
mod logwatch;
mod pool_limit;
mod queue;
pub mod reach;
mod run;
pub mod slurm;
mod spawn;
mod strays;
mod unix;

pub use launch::launch;
pub use run::supervise;
