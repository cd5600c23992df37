//! The real agent CLIs (Claude Code, Codex, Gemini CLI, OpenCode, Copilot CLI) run as agentctl
//! tasks against the scripted fake model API of `fixtures/transcripts`. They come from npm:
//! `scripts/agent-clis PREFIX`, then `AGENTCTL_TEST_CLIS=PREFIX cargo test --test agents`
//! (scripts/test does both, into `target/agent-clis`).

#[allow(dead_code)]
#[path = "../cli/common.rs"]
mod common;

mod budgets;
mod builtin;
mod clis;
mod fake_api;
mod smoke;
mod task;
mod usage;
