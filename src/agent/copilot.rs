//! GitHub Copilot CLI (`copilot -p … --output-format json`): its answer is the content of its
//! last `assistant.message` that has one, else its output.
//!
//! Its stream (`{"type", "data", …}` lines) says the model (`model.call_start`), each turn
//! (`assistant.turn_start`), each tool run (`tool.execution_start`) and, at the end, the
//! session (`result.sessionId`), but no token counts and no cost: its usage is turns and model
//! only, the tokens unknown. Copilot writes its counts only to the file
//! `--usage-output-file FILE` names, when it ends (`modelMetrics.*.usage`, input with the cached
//! tokens included); reading that file at the end is left to a later change.

use serde_json::Value;

use super::stream::{self, Reader, Seen};
use super::{Agent, AgentKind, json};
use crate::summary::{Found, Tail};

/// Copilot.
pub struct Copilot;

impl Agent for Copilot {
    fn kind(&self) -> AgentKind {
        AgentKind::Copilot
    }

    fn answer(&self, tail: &Tail<'_>) -> Found {
        let last = json::last_event(tail, &["assistant.message"], |e| {
            let content = e.get("data")?.get("content")?.as_str()?;
            (!content.is_empty()).then(|| content.to_owned())
        });
        match last {
            Some(text) => json::cleaned(tail, &text),
            None => tail.output(),
        }
    }

    fn reader(&self) -> Option<Box<dyn Reader>> {
        Some(Box::new(CopilotStream))
    }

    /// `--resume=S` after the program. No fork.
    fn resume(&self, argv: Vec<String>, session: &str, fork: bool) -> Result<Vec<String>, String> {
        if fork {
            return Err("Copilot CLI cannot fork a session".into());
        }
        Ok(super::after_program(argv, [format!("--resume={session}").as_str()]))
    }
}

/// The events read whole; the others (tool output, deltas, background tasks: most of the
/// stream) are looked at by their type only.
const READ: [&str; 4] = ["assistant.turn_start", "model.call_start", "tool.execution_start", "result"];

/// Copilot's stream: everything it says is in the event at hand.
struct CopilotStream;

impl Reader for CopilotStream {
    fn line(&mut self, line: &[u8], seen: &mut Seen) {
        if !line.starts_with(b"{") {
            return;
        }
        if json::starts_with_type(line, "assistant.message_delta") {
            if seen.step.as_ref().is_none_or(|s| s.what != "answering") {
                seen.step = stream::step("answering");
            }
            return;
        }
        if json::starts_with_type(line, "assistant.reasoning_delta")
            || json::starts_with_type(line, "assistant.reasoning")
        {
            if seen.step.as_ref().is_none_or(|s| s.what != "thinking") {
                seen.step = stream::step("thinking");
            }
            return;
        }
        if !READ.iter().any(|t| json::starts_with_type(line, t)) {
            return;
        }
        let Ok(event) = serde_json::from_slice::<Value>(line) else { return };
        let data = &event["data"];
        match event.get("type").and_then(Value::as_str) {
            Some("assistant.turn_start") => seen.usage.turns = Some(seen.usage.turns.unwrap_or(0) + 1),
            Some("model.call_start") => {
                if let Some(m) = data.get("model").and_then(Value::as_str) {
                    seen.usage.model = Some(m.to_owned());
                }
            }
            Some("tool.execution_start") => tool(data, seen),
            Some("result") => {
                if let Some(id) = event.get("sessionId").and_then(Value::as_str) {
                    seen.usage.session_id = Some(id.to_owned());
                }
                seen.step = None;
            }
            _ => {}
        }
    }
}

/// A tool run: `bash: CMD`, `editing PATH` (a patch: the first file it adds, updates or
/// deletes), or its name and main argument.
fn tool(data: &Value, seen: &mut Seen) {
    let name = data.get("toolName").and_then(Value::as_str).unwrap_or("tool");
    let args = &data["arguments"];
    if let Some(patch) = args.as_str() {
        let file = patch.lines().find_map(|l| {
            ["*** Add File: ", "*** Update File: ", "*** Delete File: "].iter().find_map(|p| l.strip_prefix(p))
        });
        seen.step = match file {
            Some(path) => stream::step(format!("editing {}", path.trim())),
            None => stream::step(name),
        };
        return;
    }
    let arg = stream::main_arg(args, &["command", "path", "pattern", "url", "description"]);
    seen.step = stream::tool_step(name, arg, &["edit", "create", "write"]);
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;
    use crate::summary::{DEFAULT_CAP, read_answer};

    const STREAM: &str = include_str!("../../fixtures/transcripts/copilot-stream.jsonl");

    fn read(stream: &str) -> Seen {
        crate::agent::stream::read_all(Copilot.reader(), stream)
    }

    #[test]
    fn a_recorded_stream_gives_its_session_model_turns_steps_and_answer_but_no_tokens() {
        let seen = read(STREAM);
        let u = &seen.usage;
        assert_eq!((u.turns, u.model.as_deref()), (Some(3), Some("gpt-5.5")));
        assert_eq!(u.session_id.as_deref(), Some("a0dde9eb-677f-4bac-b04d-76eaa5be3a55"));
        assert_eq!((u.tokens(), u.cost_usd), (None, None));
        let answer = read_answer(&mut Cursor::new(STREAM), DEFAULT_CAP, |tail| Copilot.answer(tail)).unwrap();
        assert_eq!(answer, include_str!("../../fixtures/transcripts/answer.md").trim_end());
        let upto = |needle: &str| {
            let n = STREAM.lines().position(|l| l.contains(needle)).unwrap() + 1;
            read(&STREAM.lines().take(n).collect::<Vec<_>>().join("\n"))
        };
        assert_eq!(upto("\"toolName\":\"bash\",\"arguments\"").step.unwrap().what, "bash: echo step one");
        let seen = upto("\"toolName\":\"apply_patch\",\"arguments\"");
        assert_eq!((seen.step.unwrap().what.as_str(), seen.usage.turns), ("editing notes.txt", Some(2)));
        assert_eq!(upto("Verdict: approve.\\n\"}").step.unwrap().what, "answering");
    }

    #[test]
    fn broken_lines_and_wrong_types_leave_what_is_unknown_unknown() {
        let seen = read(concat!(
            "Error: no network\n{\"type\":\"model.call_start\",\"data\":{\"model\":5}}\n",
            "{\"type\":\"result\",\"sessionId\":[]}\n{\"type\":\"tool.execution_start\",\"data\":[]}\n{\"type\":\"assistant.turn_st",
        ));
        assert!(!seen.usage.is_known(), "{seen:?}");
        assert_eq!((seen.usage.model, seen.usage.session_id, seen.step.unwrap().what), (None, None, "tool".to_owned()));
        let empty = r#"{"type":"assistant.message","data":{"content":""}}"#;
        let answer = read_answer(&mut Cursor::new(empty), DEFAULT_CAP, |tail| Copilot.answer(tail)).unwrap();
        assert_eq!(answer, empty);
    }
}
