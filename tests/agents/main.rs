//! The real agent CLIs (Claude Code, Codex, Gemini CLI, OpenCode, Copilot CLI) run as agentctl
//! tasks against the scripted fake model API of `fixtures/transcripts`. They come from npm:
//! `scripts/agent-clis PREFIX`, then `AGENTCTL_TEST_CLIS=PREFIX cargo test --test agents`
//! (scripts/test does both, into `target/agent-clis`).

#[allow(dead_code)]
#[path = "../cli/common.rs"]
mod common;

#[allow(dead_code)]
#[path = "../faults/raw_mcp.rs"]
mod raw_mcp;

mod budgets;
mod builtin;
mod clis;
mod fake_api;
mod followups;
mod sandbox;
mod smoke;
mod steering;
mod steps;
mod task;
mod totals;
mod usage;
