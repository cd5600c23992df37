//! Claude Code (`claude -p --output-format json`, `result = "json:result"`): its answer is the
//! `result` field of the JSON object it prints last.

use super::{Agent, json};
use crate::summary::{Found, Tail};

/// The field of Claude Code's JSON output that holds its answer.
pub const FIELD: &str = "result";

/// Claude Code.
pub struct Claude;

impl Agent for Claude {
    fn name(&self) -> &'static str {
        "claude"
    }

    fn answer(&self, tail: &Tail<'_>) -> Found {
        json::answer_at(tail, FIELD)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;
    use crate::summary::{DEFAULT_CAP, read_answer};

    #[test]
    fn a_recorded_run_gives_exactly_its_answer() {
        let log = include_bytes!("../../fixtures/transcripts/claude.log");
        let answer = read_answer(&mut Cursor::new(log), DEFAULT_CAP, |tail| Claude.answer(tail)).unwrap();
        assert_eq!(answer, include_str!("../../fixtures/transcripts/answer.md").trim_end());
    }
}
