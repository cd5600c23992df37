//! The fault-injection suite: each failure mode of issue 5 injected into real processes,
//! with the behaviour agentctl must show. Its own test binary, so everyday `cargo test --test
//! cli` stays quick; `scripts/test` runs it.

// Shared with the CLI tests, which use parts this suite does not.
#[allow(dead_code)]
#[path = "../cli/common.rs"]
mod common;

/// Fail (never skip) a test that cannot run without root, saying so.
pub fn needs_root(what: &str) {
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "this test needs root ({what}); scripts/test runs as root on CI");
}

mod cgroups;
mod clock;
mod concurrency;
mod containment;
mod containment_strays;
mod delivery;
mod disk;
mod home_files;
mod inputs;
mod launchers;
mod long_lines;
mod mcp_malformed;
mod mcp_protocol;
mod mcp_transcript;
mod mounts;
mod pools;
mod processes;
mod raw_mcp;
mod scale;
mod stranger;
mod summary_props;
mod supervisor_death;
mod unhaltable;
mod waiters;
