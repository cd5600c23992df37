//! Agents that print their result as a JSON object (`result = "json:FIELD"`): the answer is a
//! string field of the last JSON object they printed; their whole output if there is none.
//! Claude Code and Gemini CLI are such agents, each with a module of its own.

use super::Agent;
use crate::summary::{Found, Tail, clean_line};

/// An agent whose answer is the string at `field` (a dotted path) of its last JSON object.
pub struct Json {
    pub field: String,
}

impl Agent for Json {
    fn name(&self) -> &'static str {
        "json"
    }

    fn answer(&self, tail: &Tail<'_>) -> Found {
        answer_at(tail, &self.field)
    }
}

/// The string at `field` of the last JSON object in `tail`, cleaned; the output without one.
pub(super) fn answer_at(tail: &Tail<'_>, field: &str) -> Found {
    match tail.json_field(field) {
        Some(answer) => {
            // What the agent put in its JSON may hold escapes and progress too.
            let lines: Vec<String> = answer.split('\n').map(|l| clean_line(l.as_bytes())).collect();
            tail.answer(&lines.join("\n"), false)
        }
        // The object may begin before the window.
        None if tail.can_grow() => Found::NeedMore,
        None => tail.output(),
    }
}
