//! The per-task supervisor: `launch` starts it detached, `run` is its life, `control` is how
//! others talk to it, `spawn` starts the agent, `backend` is where the agent runs (one module
//! each), `unix` holds the process-group and signal details.

mod after;
pub mod backend;
pub mod cgroup;
mod clients;
pub mod control;
mod follow;
mod gateway;
mod input;
mod launch;
mod lock;
mod logwatch;
mod memory;
pub mod network;
mod pool_limit;
mod queue;
pub mod reach;
pub(crate) mod road;
mod run;
pub mod sandbox;
mod seccomp;
mod slots;
mod spawn;
mod spend_hold;
mod strays;
mod unix;

pub use launch::{Announced, launch};
pub use run::supervise;
