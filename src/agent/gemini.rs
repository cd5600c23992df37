//! Gemini CLI (`gemini -p … --output-format json`, `result = "json:response"`): its answer is
//! the `response` field of the JSON object it prints last.

use super::{Agent, AgentKind, json};
use crate::summary::{Found, Tail};

/// The field of Gemini CLI's JSON output that holds its answer.
pub const FIELD: &str = "response";

/// Gemini CLI.
pub struct Gemini;

impl Agent for Gemini {
    fn kind(&self) -> AgentKind {
        AgentKind::Gemini
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
        let log = include_bytes!("../../fixtures/transcripts/gemini.log");
        let answer = read_answer(&mut Cursor::new(log), DEFAULT_CAP, |tail| Gemini.answer(tail)).unwrap();
        assert_eq!(answer, include_str!("../../fixtures/transcripts/answer.md").trim_end());
    }
}
