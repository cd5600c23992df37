//! The fault-injection suite: each failure mode of issue 5 injected into real processes,
//! with the behaviour agentctl must show. Its own test binary, so everyday `cargo test --test
//! cli` stays quick; `scripts/test` runs it.

// Shared with the CLI tests, which use parts this suite does not.
#[allow(dead_code)]
#[path = "../cli/common.rs"]
mod common;

mod root;
pub use root::needs_root;

mod cgroups;
mod clock;
mod concurrency;
mod containment;
mod containment_strays;
mod crash_points;
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
mod stranger;
mod summary_props;
mod supervisor_death;
mod unhaltable;
