//! Claude Code (`claude -p --output-format stream-json --verbose`, or `--output-format json`):
//! its answer is the `result` field of its last JSON object (`result = "json:result"`); its
//! stream says its session, each model call's usage and content (tool calls, thinking, text)
//! and, at the end, the run's totals and `total_cost_usd`.
//!
//! One trap: the stream has one `assistant` event per content block, each repeating its
//! message's usage with the output tokens counted so far, so a message counts once, by its id,
//! with its latest figures; the final `result` event's totals replace the sum.

use std::collections::HashMap;

use serde_json::Value;

use super::stream::{self, Reader, Seen, Todo};
use super::{Agent, AgentKind, Usage, json};
use crate::summary::{Found, Tail};

/// The field of Claude Code's JSON output that holds its answer.
pub const FIELD: &str = "result";

/// Claude Code.
pub struct Claude;

impl Agent for Claude {
    fn kind(&self) -> AgentKind {
        AgentKind::Claude
    }

    fn answer(&self, tail: &Tail<'_>) -> Found {
        json::answer_at(tail, FIELD)
    }

    fn reader(&self) -> Option<Box<dyn Reader>> {
        Some(Box::<ClaudeStream>::default())
    }
}

/// Claude Code's stream as read so far.
#[derive(Default)]
struct ClaudeStream {
    /// Each model call's latest usage, by message id, and the order they came in.
    calls: HashMap<String, Usage>,
    /// The run's totals, once its `result` event said them.
    done: bool,
}

impl Reader for ClaudeStream {
    fn line(&mut self, line: &[u8], seen: &mut Seen) {
        // Tool results (the bulk of a long stream) say nothing of usage or steps.
        if !line.starts_with(b"{") || json::starts_with_type(line, "user") {
            return;
        }
        let Ok(event) = serde_json::from_slice::<Value>(line) else { return };
        if let Some(id) = event.get("session_id").and_then(Value::as_str) {
            seen.usage.session_id = Some(id.to_owned());
        }
        match event.get("type").and_then(Value::as_str) {
            Some("system") => {
                if let Some(m) = event.get("model").and_then(Value::as_str) {
                    seen.usage.model = Some(m.to_owned());
                }
            }
            Some("assistant") if !self.done => self.message(&event["message"], seen),
            Some("result") => self.result(&event, seen),
            _ => {}
        }
    }
}

impl ClaudeStream {
    /// One content block of a model call, with the call's usage so far.
    fn message(&mut self, msg: &Value, seen: &mut Seen) {
        if let Some(m) = msg.get("model").and_then(Value::as_str) {
            seen.usage.model = Some(m.to_owned());
        }
        if let (Some(id), Some(u)) = (msg.get("id").and_then(Value::as_str), msg.get("usage")) {
            self.calls.insert(id.to_owned(), usage_of(u));
            let mut total = Usage { turns: Some(self.calls.len() as u64), ..Usage::default() };
            for call in self.calls.values() {
                total.add(call);
            }
            let u = &mut seen.usage;
            (u.input_tokens, u.output_tokens) = (total.input_tokens, total.output_tokens);
            (u.cache_read_tokens, u.cache_write_tokens) = (total.cache_read_tokens, total.cache_write_tokens);
            u.turns = total.turns;
        }
        for block in msg.get("content").and_then(Value::as_array).into_iter().flatten() {
            match block.get("type").and_then(Value::as_str) {
                Some("tool_use") => self.tool(block, seen),
                Some("thinking" | "redacted_thinking") => seen.step = stream::step("thinking"),
                Some("text") => seen.step = stream::step("answering"),
                _ => {}
            }
        }
    }

    /// A tool call: its name and the argument that says most of what it does.
    fn tool(&self, block: &Value, seen: &mut Seen) {
        let name = block.get("name").and_then(Value::as_str).unwrap_or("tool");
        let input = &block["input"];
        if name == "TodoWrite"
            && let Some(items) = input.get("todos").and_then(Value::as_array)
        {
            seen.todo = items
                .iter()
                .filter_map(|t| {
                    let text = t.get("content").or_else(|| t.get("activeForm"))?.as_str()?;
                    let status = t.get("status").and_then(Value::as_str).unwrap_or("pending");
                    Some(Todo { text: stream::shorten(text, 120), status: status.to_owned() })
                })
                .collect();
        }
        let arg = ["command", "file_path", "path", "pattern", "url", "description", "prompt"]
            .into_iter()
            .find_map(|k| input.get(k).and_then(Value::as_str));
        seen.step = match (name, arg) {
            ("Write" | "Edit" | "MultiEdit" | "NotebookEdit", Some(path)) => stream::step(format!("editing {path}")),
            (_, Some(arg)) => stream::step(format!("{name}: {arg}")),
            (_, None) => stream::step(name),
        };
    }

    /// The run's end: its totals, turns and cost replace what the calls added up to.
    fn result(&mut self, event: &Value, seen: &mut Seen) {
        self.done = true;
        let u = &mut seen.usage;
        if let Some(totals) = event.get("usage").filter(|v| v.is_object()) {
            let t = usage_of(totals);
            (u.input_tokens, u.output_tokens) =
                (t.input_tokens.or(u.input_tokens), t.output_tokens.or(u.output_tokens));
            u.cache_read_tokens = t.cache_read_tokens.or(u.cache_read_tokens);
            u.cache_write_tokens = t.cache_write_tokens.or(u.cache_write_tokens);
        }
        if let Some(n) = event.get("num_turns").and_then(Value::as_u64) {
            u.turns = Some(n);
        }
        if let Some(c) = event.get("total_cost_usd").and_then(Value::as_f64).filter(|c| c.is_finite() && *c >= 0.0) {
            (u.cost_usd, u.cost_estimated) = (Some(c), false);
        }
        seen.step = None;
    }
}

/// An Anthropic `usage` object.
fn usage_of(u: &Value) -> Usage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64);
    Usage {
        input_tokens: n("input_tokens"),
        output_tokens: n("output_tokens"),
        cache_read_tokens: n("cache_read_input_tokens"),
        cache_write_tokens: n("cache_creation_input_tokens"),
        ..Usage::default()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;
    use crate::agent::stream::Lines;
    use crate::summary::{DEFAULT_CAP, read_answer};

    #[test]
    fn a_recorded_run_gives_exactly_its_answer() {
        let log = include_bytes!("../../fixtures/transcripts/claude.log");
        let answer = read_answer(&mut Cursor::new(log), DEFAULT_CAP, |tail| Claude.answer(tail)).unwrap();
        assert_eq!(answer, include_str!("../../fixtures/transcripts/answer.md").trim_end());
    }

    fn read(stream: &str) -> Seen {
        let mut lines = Lines::new(Claude.reader().unwrap());
        lines.feed(stream.as_bytes());
        lines.finish();
        lines.seen
    }

    #[test]
    fn the_one_object_of_json_output_gives_the_runs_usage() {
        let seen = read(include_str!("../../fixtures/transcripts/claude.stdout"));
        let u = &seen.usage;
        assert_eq!(
            (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens),
            (Some(10), Some(20), Some(0), Some(0))
        );
        assert_eq!((u.turns, u.cost_usd, u.cost_estimated), (Some(1), Some(0.00055), false));
        assert_eq!(u.session_id.as_deref(), Some("7d196e32-86d6-4137-b066-170ab5171cd2"));
    }

    #[test]
    fn a_message_split_into_blocks_counts_once_with_its_latest_figures() {
        let msg = |id: &str, out: u64, block: &str| {
            format!(
                r#"{{"type":"assistant","message":{{"id":"{id}","model":"claude-x","content":[{block}],"usage":{{"input_tokens":100,"cache_read_input_tokens":50,"cache_creation_input_tokens":7,"output_tokens":{out}}}}},"session_id":"s1"}}"#
            )
        };
        let stream = [
            msg("m1", 1, r#"{"type":"thinking","thinking":"hmm"}"#),
            msg("m1", 30, r#"{"type":"tool_use","name":"Bash","input":{"command":"sleep 5"}}"#),
            r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"x"}]}}"#.to_owned(),
            msg("m2", 5, r#"{"type":"tool_use","name":"Edit","input":{"file_path":"src/a.rs"}}"#),
        ]
        .join("\n");
        let seen = read(&stream);
        let u = &seen.usage;
        assert_eq!(
            (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens),
            (Some(200), Some(35), Some(100), Some(14))
        );
        assert_eq!((u.turns, u.cost_usd, u.model.as_deref()), (Some(2), None, Some("claude-x")));
        assert_eq!(seen.step.unwrap().what, "editing src/a.rs");
        let seen = read(&stream.lines().take(2).collect::<Vec<_>>().join("\n"));
        assert_eq!(seen.step.unwrap().what, "Bash: sleep 5");
    }

    #[test]
    fn broken_lines_and_wrong_types_leave_what_is_unknown_unknown() {
        let seen =
            read("not json\n{\"type\":\"result\",\"total_cost_usd\":\"0.5\",\"num_turns\":\"x\"}\n{\"type\":\"assist");
        assert!(!seen.usage.is_known(), "{seen:?}");
        assert_eq!(read("").usage, Usage::default());
    }
}
