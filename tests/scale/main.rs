//! The scale suite: a thousand tasks, waits and waiting CLIs at once. Its own test binary, run
//! after the fault suite and one test at a time (`--test-threads=1`), so that its thousands of
//! processes starve no test that waits on a deadline.

#[allow(dead_code)]
#[path = "../cli/common.rs"]
mod common;
#[allow(dead_code)]
#[path = "../faults/raw_mcp.rs"]
mod raw_mcp;
#[allow(dead_code)]
#[path = "../faults/stranger.rs"]
mod stranger;

#[path = "../faults/root.rs"]
mod root;

use root::needs_root;

mod scale;
mod waiters;
