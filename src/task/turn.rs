//! A task's turns: each follow-up (`ask --to TOKEN`) continues its agent's conversation as the
//! task's next turn. The record keeps what each earlier turn asked, how it ended and what it
//! spent; its own fields are the current turn's, its usage the whole conversation's.

use serde::{Deserialize, Serialize};

use super::{Status, TaskRecord};
use crate::agent::Usage;

/// One turn that ended, as the task's record keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Turn {
    /// 1 for the task's first run.
    pub turn: u32,
    /// What it was asked, on one line.
    pub question: String,
    pub status: Status,
    pub ended_at_ms: u64,
    /// The first line of its answer.
    pub answer: String,
    /// What this turn alone spent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

impl TaskRecord {
    /// Which turn the task is in (or ended in): 1 until it is followed up.
    pub fn turn(&self) -> u32 {
        self.turns.last().map_or(1, |t| t.turn + 1)
    }

    /// What the earlier turns spent together (none: nothing known).
    pub fn earlier_usage(&self) -> Option<Usage> {
        spent(self.turns.iter())
    }

    /// Begin the next turn of a task that ended: its end is kept among its turns (with `answer`,
    /// its first line), and it is a task about to start again, asked `question`, its output
    /// from `run_start` in its log on. Its usage stays the conversation's so far.
    pub fn begin_turn(&mut self, question: String, answer: &str, run_start: u64) {
        let Some(ended) = self.ended.take() else { return };
        let own = match (&self.usage, self.earlier_usage()) {
            (Some(all), Some(before)) => Some(all.minus(&before)),
            (all, _) => all.clone(),
        };
        let answer = super::one_line_preview(answer, 160);
        let asked = std::mem::replace(&mut self.preview, question);
        let status = ended.outcome.status();
        self.turns.push(Turn {
            turn: self.turn(),
            question: asked,
            status,
            ended_at_ms: ended.at_ms,
            answer,
            usage: own,
        });
        self.started = None;
        self.queued = false;
        self.retries = 0;
        self.retry_at_ms = None;
        self.rate_limited.clear();
        self.run_start = run_start;
        self.changes = None;
        self.containment = None;
        self.slurm_job = None;
        self.slurm_pending = None;
        self.limit_kept = None;
        self.spend_held = None;
        self.frees_at_ms = None;
    }
}

/// What a task spent since `since_ms`, `usage` being its conversation's and `turns` its earlier
/// turns (the JSON of its record's `turns`, if any): the turns that ended before then are left
/// out, as they were counted in a window of their own.
pub fn usage_since(usage: Usage, turns: Option<&str>, since_ms: u64) -> Usage {
    let Some(turns) = turns.and_then(|t| serde_json::from_str::<Vec<Turn>>(t).ok()) else { return usage };
    match spent(turns.iter().filter(|t| t.ended_at_ms < since_ms)) {
        Some(before) => usage.minus(&before),
        None => usage,
    }
}

/// What `turns` spent together (none: nothing known).
fn spent<'a>(turns: impl Iterator<Item = &'a Turn>) -> Option<Usage> {
    turns.filter_map(|t| t.usage.as_ref()).fold(None, |total, u| {
        let mut total: Usage = total.unwrap_or_default();
        total.add(u);
        Some(total)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{Ended, Outcome};

    #[test]
    fn a_turn_keeps_its_end_and_what_it_alone_spent() {
        let mut rec: TaskRecord = serde_json::from_value(serde_json::json!({
            "token": "abc123", "role": "r", "session": "s", "preview": "read the repo", "created_at_ms": 1,
            "started": {"pid": 5, "supervisor_pid": 4, "sid": 4, "at_ms": 2}, "ended": null,
            "usage": {"input_tokens": 10, "cost_usd": 0.5, "session_id": "c1"}
        }))
        .unwrap();
        assert_eq!((rec.turn(), rec.earlier_usage()), (1, None));
        rec.begin_turn("more".into(), "not ended", 9);
        assert!(rec.turns.is_empty(), "a task that has not ended has no next turn");
        let end = |at_ms| Some(Ended { outcome: Outcome::Completed, at_ms, line_count: 3, note: None });
        rec.ended = end(7);
        rec.begin_turn("now summarise it".into(), "It is a CLI.\nMore.", 120);
        assert_eq!((rec.turn(), rec.preview.as_str(), rec.run_start), (2, "now summarise it", 120));
        assert!(rec.ended.is_none() && rec.started.is_none());
        let first = &rec.turns[0];
        assert_eq!((first.turn, first.question.as_str(), first.answer.as_str()), (1, "read the repo", "It is a CLI.…"));
        assert_eq!(first.usage.as_ref().unwrap().cost_usd, Some(0.5));
        // The second turn's end: the record's usage is the conversation's, the turn's its own.
        rec.usage = Some(Usage { input_tokens: Some(25), cost_usd: Some(0.75), ..Usage::default() });
        rec.ended = end(8);
        rec.begin_turn("and then?".into(), "Done.", 200);
        let second = rec.turns[1].usage.clone().unwrap();
        assert_eq!((second.input_tokens, second.cost_usd), (Some(15), Some(0.25)));
        assert_eq!(rec.earlier_usage().unwrap().input_tokens, Some(25));
        assert_eq!(rec.turn(), 3);
        // A window from 8 on counts the second turn, not the first (ended at 7).
        let turns = serde_json::to_string(&rec.turns).unwrap();
        let since = |ms| usage_since(rec.usage.clone().unwrap(), Some(&turns), ms).cost_usd;
        assert_eq!((since(0), since(8), since(9)), (Some(0.75), Some(0.25), Some(0.0)));
        assert_eq!(usage_since(Usage::default(), None, 9), Usage::default());
    }
}
