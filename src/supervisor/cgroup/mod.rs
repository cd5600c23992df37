//! A task's own cgroup. Its supervisor makes it before the agent starts; the agent joins it
//! before it executes, so every process it ever starts is in it, whatever it does (`setsid`,
//! double forks, setuid). A halt, a deadline or the lost path ends them all at once with
//! `cgroup.kill`, and the directories go when the task ends. Tracking needs the cgroup v2
//! hierarchy; limits go to v2 controllers where they can be enabled, else (a hybrid host, whose
//! memory, cpu and pids controllers are v1) to each controller's v1 hierarchy.

mod hierarchy;
mod make;
mod members;

pub use hierarchy::leave_task_cgroups;
pub use make::{MODE_VARIABLE, Made, NoCgroup, create, mode_refuses};
pub use members::{
    Counters, Events, Usage, contains, counters, is_tasks, join_files, kill, kill_and_wait, limits_reached, populated,
    procs, remove, resident, signal_all, usage,
};
