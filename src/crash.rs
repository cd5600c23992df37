//! Named points of a task's start and end where the fault suite kills the process on purpose
//! (`AGENTCTL_CRASH_AT=NAME`: the process that reaches NAME sends itself SIGKILL), to show that
//! no task is lost without a note, nor left running for ever, whatever dies where. Unset, a
//! point costs a look at the environment.

/// The points, in the order a task's life passes them.
pub const POINTS: [&str; 9] = [
    "launch.created",
    "launch.saved",
    "launch.forked",
    "supervisor.begun",
    "supervisor.settled",
    "supervisor.spawned",
    "end.summary",
    "end.recorded",
    "end.cleaned",
];

/// Die here if asked to.
pub fn point(name: &str) {
    debug_assert!(POINTS.contains(&name), "unknown crash point {name}");
    if std::env::var_os("AGENTCTL_CRASH_AT").is_some_and(|at| at == name) {
        // SAFETY: kill(2) on this very process.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
}

/// The task whose supervisor this process is, once it says so (`supervising`).
static OWN: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// This process supervises task `token`: the end's points are its task's end, not another's
/// that it records (a dead holder of its pool's place, say).
pub fn supervising(token: &str) {
    let _ = OWN.set(token.to_owned());
}

/// `point`, in the end of task `token` only, recorded by its own supervisor.
pub fn point_of(name: &str, token: &str) {
    if OWN.get().is_some_and(|own| own == token) {
        point(name);
    }
}
