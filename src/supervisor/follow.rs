//! The supervisor's reading of its agent's structured stream, as the log is counted: what it
//! says so far (usage, current step, todo list), published for `status`, `list`, `top` and
//! `await` whenever it changes, and kept over the runs of a rate-limited task.

use std::path::PathBuf;
use std::time::Instant;

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
    prices: Prices,
    /// Where what it said is published, and when it last changed.
    path: PathBuf,
    pub changed_at: Option<Instant>,
}

impl Follow {
    /// A follower for `spec`'s agent, if its kind writes a stream agentctl reads.
    pub fn of(spec: &TaskSpec, path: PathBuf) -> Option<Follow> {
        let kind = spec.agent_kind();
        let lines = Lines::new(crate::agent::kind(kind).reader()?);
        Some(Follow { kind, lines, before: None, prices: spec.prices.clone(), path, changed_at: None })
    }

    /// What the agent wrote next.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.lines.feed(bytes);
    }

    /// Publish what the stream said, if it changed since last time; true then.
    pub fn publish(&mut self) -> bool {
        if !self.lines.take_changed() {
            return false;
        }
        if let Ok(json) = serde_json::to_vec(&self.seen()) {
            // Not synced: a crash loses at most the latest figures, which the log still holds.
            let _ = write_atomic(&self.path, &json, Durability::Atomic);
        }
        self.changed_at = Some(Instant::now());
        true
    }

    /// What the stream said so far, over all runs, its cost estimated where the agent gives none.
    pub fn seen(&self) -> Seen {
        let mut seen = self.lines.seen.clone();
        seen.usage.estimate(&self.prices);
        if let Some(before) = &self.before {
            let mut total = before.clone();
            total.add(&seen.usage);
            total.model = seen.usage.model.take().or(total.model);
            total.session_id = seen.usage.session_id.take().or(total.session_id);
            seen.usage = total;
        }
        seen
    }

    /// The run ended: a last line without a newline is read too.
    pub fn finish(&mut self) {
        self.lines.finish();
    }

    /// A new run of the task begins (the last was rate-limited): its stream is read afresh,
    /// and what the earlier ones spent is kept.
    pub fn next_run(&mut self) {
        self.lines.finish();
        self.before = Some(self.seen().usage);
        if let Some(reader) = crate::agent::kind(self.kind).reader() {
            self.lines = Lines::new(reader);
        }
    }
}
