//! Agents that print their result as a JSON object (`result = "json:FIELD"`): the answer is a
//! string field of the last JSON object they printed; their whole output if there is none.
//! Claude Code and Gemini CLI are such agents, each with a module of its own.

use serde_json::Value;

use super::{Agent, AgentKind};
use crate::summary::{Found, Tail, clean_line};

/// An agent whose answer is the string at `field` (a dotted path) of its last JSON object.
pub struct Json {
    pub field: String,
}

impl Agent for Json {
    fn kind(&self) -> AgentKind {
        AgentKind::Generic
    }

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
        Some(answer) => cleaned(tail, &answer),
        // The object may begin before the window.
        None if tail.can_grow() => Found::NeedMore,
        None => tail.output(),
    }
}

/// `answer`, found in the agent's JSON, as its answer: cleaned, since what an agent puts in its
/// JSON may hold escapes and progress too.
pub(super) fn cleaned(tail: &Tail<'_>, answer: &str) -> Found {
    let lines: Vec<String> = answer.split('\n').map(|l| clean_line(l.as_bytes())).collect();
    tail.answer(&lines.join("\n"), false)
}

/// What `pick` finds in the last event of `tail` (a line that opens with `"type":"KIND"`, one of
/// `kinds`) in which it finds something; events of other types are not parsed.
pub(super) fn last_event<T>(tail: &Tail<'_>, kinds: &[&str], mut pick: impl FnMut(&Value) -> Option<T>) -> Option<T> {
    let lines = tail.lines();
    lines.iter().rev().map(|l| l.text.as_bytes()).filter(|l| kinds.iter().any(|k| starts_with_type(l, k))).find_map(
        |l| {
            let event = serde_json::from_slice::<Value>(l).ok()?;
            pick(&event)
        },
    )
}

/// Whether the JSON object `line` opens with `"type":"KIND"` (as stream events are written):
/// a look at its first bytes, so that events nobody reads are never parsed.
pub(super) fn starts_with_type(line: &[u8], kind: &str) -> bool {
    type_of(line) == Some(kind.as_bytes())
}

/// The type of the JSON event `line`, from its first bytes, unparsed: the string after
/// `"type":` (no escapes in it). Every line of a stream is looked at: the common form
/// (`{"type":"…`) is read without a search.
pub(super) fn type_of(line: &[u8]) -> Option<&[u8]> {
    let rest = match line.strip_prefix(b"{\"type\":\"") {
        Some(rest) => rest,
        None => {
            let head = &line[..line.len().min(64)];
            let at = memchr::memmem::find(head, b"\"type\"")?;
            let rest = line[at + 6..].trim_ascii_start().strip_prefix(b":")?;
            rest.trim_ascii_start().strip_prefix(b"\"")?
        }
    };
    let end = memchr::memchr2(b'"', b'\\', &rest[..rest.len().min(64)])?;
    (rest[end] == b'"').then(|| &rest[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_events_type_is_read_from_its_first_bytes() {
        assert!(starts_with_type(br#"{"type":"user","message":{}}"#, "user"));
        assert!(starts_with_type(br#"{ "type" : "user" }"#, "user"));
        assert!(!starts_with_type(br#"{"type":"users"}"#, "user"));
        assert!(!starts_with_type(br#"{"type":"assistant"}"#, "user"));
        assert!(!starts_with_type(b"", "user"));
        assert!(!starts_with_type(br#"{"type":"us\"er"}"#, "us"));
        assert_eq!(type_of(br#"{"type":"item.completed","item":{}}"#), Some(&b"item.completed"[..]));
        assert_eq!(type_of(br#"{"id":1,"type" :"x"}"#), Some(&b"x"[..]));
        assert_eq!((type_of(br#"{"type":"cut"#), type_of(br#"{"type":3}"#)), (None, None));
    }
}
