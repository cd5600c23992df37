//! Integration tests: the built `agentctl` binary against real processes and a temp home.

mod after;
mod common;
mod conventions;
mod conversation;
mod durations;
mod events;
mod followups;
mod halting;
mod home;
mod hooks;
mod launching;
mod listing;
mod load;
mod pools;
mod retries;
mod sandbox;
mod steering;
mod survival;
mod templates;
mod top;
mod totals;
mod usage;
mod waiting;
mod worktrees;
