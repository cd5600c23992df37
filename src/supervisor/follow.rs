//! The supervisor's reading of its agent's structured stream, as the log is counted: what it
//! says so far (usage, current step, todo list), published for `status`, `list`, `top` and
//! `await` whenever it changes, and kept over the runs of a rate-limited task.

use std::path::PathBuf;

use crate::agent::stream::Lines;
use crate::agent::{AgentKind, Prices, Seen, Usage};
use crate::store::{Durability, write_atomic};
use crate::task::TaskSpec;

/// An agent's stream, followed.
pub(super) struct Follow {
    kind: AgentKind,
    lines: Lines,
    /// What the earlier runs of the task spent (a rate-limited run's usage still counts).
    before: Option<Usage>,
    /// What its earlier turns spent (a follow-up's), counted in what is published but not
    /// against this turn's budget.
    earlier: Option<Usage>,
    /// How much of the log is earlier turns': counted, not read.
    skip: u64,
    /// Its kind reports a resumed run's usage as the conversation's total so far.
    cumulative: bool,
    prices: Prices,
    /// The model its command asks for (`-m`/`--model`), for a stream that does not say it.
    model: Option<String>,
    /// Where what it said is published.
    path: PathBuf,
}

impl Follow {
    /// A follower for `spec`'s agent, if its kind writes a stream agentctl reads.
    pub fn of(spec: &TaskSpec, path: PathBuf) -> Option<Follow> {
        let kind = spec.agent_kind();
        let lines = Lines::new(crate::agent::kind(kind).reader()?);
        let model = model_in(&spec.argv);
        let cumulative = crate::agent::kind(kind).resumed_usage_is_total();
        let prices = spec.prices.clone();
        Some(Follow { kind, lines, before: None, earlier: None, skip: 0, cumulative, prices, model, path })
    }

    /// For a task's next turn: its log's first `run_start` bytes are its earlier turns', which
    /// spent `earlier`.
    pub fn for_turn(mut self, run_start: u64, earlier: Option<Usage>) -> Follow {
        (self.skip, self.earlier) = (run_start, earlier);
        self
    }

    /// What the agent wrote next; how many lines it ended.
    pub fn feed(&mut self, bytes: &[u8]) -> u64 {
        let skipped = bytes.len().min(usize::try_from(self.skip).unwrap_or(usize::MAX));
        self.skip -= skipped as u64;
        let (earlier, now) = bytes.split_at(skipped);
        memchr::memchr_iter(b'\n', earlier).count() as u64 + self.lines.feed(now)
    }

    /// Whether the stream said anything new since it was last published.
    pub fn changed(&mut self) -> bool {
        self.lines.changed()
    }

    /// Publish what the stream said, if it changed since last time.
    pub fn publish(&mut self) {
        if !self.lines.take_changed() {
            return;
        }
        if let Ok(json) = serde_json::to_vec(&self.seen()) {
            // Not synced: a crash loses at most the latest figures, which the log still holds.
            let _ = write_atomic(&self.path, &json, Durability::Atomic);
        }
    }

    /// What the stream said so far, over all runs and turns, its cost estimated where the agent
    /// gives none.
    pub fn seen(&self) -> Seen {
        let mut seen = self.turn_seen();
        if let Some(earlier) = &self.earlier {
            seen.usage = after(earlier, std::mem::take(&mut seen.usage));
        }
        seen
    }

    /// What this turn's stream said, over its runs: what its budget limits.
    pub fn turn_seen(&self) -> Seen {
        let mut seen = self.lines.seen.clone();
        // A resumed Codex thread reports its running total: this turn's is what it adds.
        if let Some(earlier) = self.earlier.as_ref().filter(|_| self.cumulative) {
            seen.usage = crate::agent::resumed_run_usage(&seen.usage, earlier);
        }
        if seen.usage.model.is_none() && seen.usage.is_known() {
            seen.usage.model = self.model.clone();
        }
        seen.usage.estimate(&self.prices);
        if let Some(before) = &self.before {
            seen.usage = after(before, std::mem::take(&mut seen.usage));
        }
        seen
    }

    /// How far the agent has read the messages on its stdin, in this run.
    pub fn input(&self) -> crate::agent::stream::Input {
        self.lines.seen.input
    }

    /// The run ended: a last line without a newline is read too.
    pub fn finish(&mut self) {
        self.lines.finish();
    }

    /// A new run of the task begins (the last was rate-limited): its stream is read afresh,
    /// and what the earlier ones spent is kept.
    pub fn next_run(&mut self) {
        self.lines.finish();
        self.before = Some(self.turn_seen().usage);
        if let Some(reader) = crate::agent::kind(self.kind).reader() {
            self.lines = Lines::new(reader);
        }
    }
}

/// `earlier` and `later` spent together, named as `later` names its model and session.
fn after(earlier: &Usage, mut later: Usage) -> Usage {
    let mut total = earlier.clone();
    total.add(&later);
    total.model = later.model.take().or(total.model);
    total.session_id = later.session_id.take().or(total.session_id);
    total
}

/// The model a command asks for: the value of its `-m`/`--model` option.
fn model_in(argv: &[String]) -> Option<String> {
    let mut args = argv.iter().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "-m" | "--model" => return args.next().cloned(),
            _ => {
                if let Some(m) = a.strip_prefix("--model=") {
                    return Some(m.to_owned());
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_is_read_from_the_command_line() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(model_in(&argv(&["codex", "exec", "-m", "gpt-5.5", "q"])).as_deref(), Some("gpt-5.5"));
        assert_eq!(model_in(&argv(&["claude", "--model=opus", "-p"])).as_deref(), Some("opus"));
        assert_eq!(model_in(&argv(&["gemini", "-p", "--model"])), None);
        assert_eq!(model_in(&argv(&["-m"])), None);
    }
}
