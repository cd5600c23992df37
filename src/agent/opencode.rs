//! OpenCode (`opencode run --format json`): its answer is the last `text` part of its stream,
//! else its output.
//!
//! Its stream: every event names the session (`sessionID`); each model call is a step, from
//! `step_start` to `step_finish`, whose `tokens` (input uncached, output, reasoning,
//! `cache.read`, `cache.write`) and `cost` (OpenCode's own, from its model's price) are the
//! call's: the run's are their sums (there is no total event). Turns are steps; reasoning
//! tokens count as output (they are billed so). Tool calls come as `tool_use` parts once run,
//! `todowrite`'s input is its todo list. The stream does not name the model.

use serde_json::Value;

use super::stream::{self, Reader, Seen};
use super::{Agent, AgentKind, json, scan};
use crate::summary::{Found, Tail};

/// A tool call that sets the todo list.
static TODO: scan::Key = scan::Key::new(r#""tool":"todowrite""#);

/// OpenCode.
pub struct Opencode;

impl Agent for Opencode {
    fn kind(&self) -> AgentKind {
        AgentKind::Opencode
    }

    fn answer(&self, tail: &Tail<'_>) -> Found {
        let last = json::last_event(tail, &["text"], |e| e.get("part")?.get("text")?.as_str().map(str::to_owned));
        match last {
            Some(text) => json::cleaned(tail, &text),
            None => tail.output(),
        }
    }

    fn reader(&self) -> Option<Box<dyn Reader>> {
        Some(Box::new(OpencodeStream))
    }

    /// `--session S` (and `--fork`) after `run` (it must run in the session's directory).
    fn resume(&self, mut argv: Vec<String>, session: &str, fork: bool) -> Result<Vec<String>, String> {
        let at = argv.iter().position(|a| a == "run").map_or(argv.len().min(1), |run| run + 1);
        let flags = ["--session", session].into_iter().chain(fork.then_some("--fork"));
        argv.splice(at..at, flags.map(str::to_owned));
        Ok(argv)
    }
}

/// OpenCode's stream: everything it says is in the event at hand.
struct OpencodeStream;

impl Reader for OpencodeStream {
    fn line(&mut self, line: &[u8], seen: &mut Seen) {
        if !line.starts_with(b"{") {
            return;
        }
        // A tool call's output can be big: what is needed of it is near its start (but for a
        // todo list, which is small and read whole).
        if line.len() > stream::EDGE && json::starts_with_type(line, "tool_use") && !scan::early(line, &TODO, 512) {
            let (head, tail) = (&line[..stream::EDGE], &line[line.len() - stream::EDGE..]);
            return self.long_line(head, tail, seen);
        }
        let Ok(event) = serde_json::from_slice::<Value>(line) else { return };
        if let Some(id) = event.get("sessionID").and_then(Value::as_str) {
            seen.usage.session_id = Some(id.to_owned());
        }
        let part = &event["part"];
        match event.get("type").and_then(Value::as_str) {
            Some("step_start") => seen.usage.turns = Some(seen.usage.turns.unwrap_or(0) + 1),
            Some("step_finish") => step_finish(part, seen),
            Some("tool_use") => tool(part.get("tool").and_then(Value::as_str), &part["state"]["input"], seen),
            Some("text") => seen.step = stream::step("answering"),
            Some("reasoning") => seen.step = stream::step("thinking"),
            _ => {}
        }
    }

    /// A tool call made long by its output or its input (a file written whole): its name and
    /// main argument are near its start.
    fn long_line(&mut self, head: &[u8], tail: &[u8], seen: &mut Seen) {
        if let Some(id) = scan::value_after(head, "sessionID").and_then(|v| v.as_str().map(str::to_owned)) {
            seen.usage.session_id = Some(id);
        }
        if json::starts_with_type(head, "tool_use") {
            let name = scan::value_after(head, "tool");
            let mut input = serde_json::Map::new();
            for key in ["command", "filePath"] {
                if let Some(v) = scan::value_after(head, key).or_else(|| scan::value_after(tail, key)) {
                    input.insert(key.into(), v);
                }
            }
            tool(name.as_ref().and_then(Value::as_str), &Value::Object(input), seen);
        }
    }
}

/// The end of a model call: its tokens and cost, added to the run's.
fn step_finish(part: &Value, seen: &mut Seen) {
    let tokens = &part["tokens"];
    let n = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64);
    let add = |total: &mut Option<u64>, n: Option<u64>| {
        if let Some(n) = n {
            *total = Some(total.unwrap_or(0).saturating_add(n));
        }
    };
    let u = &mut seen.usage;
    let output = match (n(tokens, "output"), n(tokens, "reasoning")) {
        (Some(o), r) => Some(o.saturating_add(r.unwrap_or(0))),
        (None, r) => r,
    };
    add(&mut u.input_tokens, n(tokens, "input"));
    add(&mut u.output_tokens, output);
    add(&mut u.cache_read_tokens, n(&tokens["cache"], "read"));
    add(&mut u.cache_write_tokens, n(&tokens["cache"], "write"));
    if let Some(c) = part.get("cost").and_then(Value::as_f64).filter(|c| c.is_finite() && *c >= 0.0) {
        u.cost_usd = Some(u.cost_usd.unwrap_or(0.0) + c);
        u.cost_estimated = false;
    }
}

/// A tool call: `bash: CMD`, `editing PATH`, its todo list, or its name and main argument.
fn tool(name: Option<&str>, input: &Value, seen: &mut Seen) {
    let name = name.unwrap_or("tool");
    if name == "todowrite"
        && let Some(items) = input.get("todos").and_then(Value::as_array)
    {
        seen.todo = stream::todo_list(items, &["content"]);
    }
    let arg = stream::main_arg(input, &["command", "filePath", "path", "pattern", "url", "description"]);
    seen.step = stream::tool_step(name, arg, &["write", "edit", "patch"]);
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;
    use crate::summary::{DEFAULT_CAP, read_answer};

    const STREAM: &str = include_str!("../../fixtures/transcripts/opencode-stream.jsonl");

    fn read(stream: &str) -> Seen {
        crate::agent::stream::read_all(Opencode.reader(), stream)
    }

    #[test]
    fn a_recorded_stream_gives_its_steps_sums_its_own_cost_and_its_last_text() {
        let seen = read(STREAM);
        let u = &seen.usage;
        assert_eq!(u.figures(), [Some(530), Some(60), Some(800), Some(0), Some(3)]);
        assert!((u.cost_usd.unwrap() - 0.00273).abs() < 1e-12 && !u.cost_estimated, "{u:?}");
        assert_eq!((u.session_id.as_deref(), u.model.as_deref()), (Some("ses_de75a7a5cffe92DWizQA1STLDs"), None));
        let log = STREAM.as_bytes();
        let answer = read_answer(&mut Cursor::new(log), DEFAULT_CAP, |tail| Opencode.answer(tail)).unwrap();
        assert_eq!(answer, include_str!("../../fixtures/transcripts/answer.md").trim_end());
        let upto = |n: usize| read(&STREAM.lines().take(n).collect::<Vec<_>>().join("\n"));
        assert_eq!(upto(3).step.unwrap().what, "bash: echo step one");
        assert_eq!(upto(6).step.unwrap().what, "editing /work/scratch/rec/work-opencode/notes.txt");
        // While the second call runs: the first's figures, two calls.
        assert_eq!(upto(5).usage.figures(), [Some(300), Some(10), Some(0), Some(0), Some(2)]);
    }

    #[test]
    fn its_todo_list_and_long_tool_calls_are_read() {
        let todo = r#"{"type":"tool_use","sessionID":"s","part":{"type":"tool","tool":"todowrite","state":{"status":"completed","input":{"todos":[{"content":"Read it","status":"completed","priority":"high","id":"1"},{"content":"Fix it","status":"in_progress"}]}}}}"#;
        let seen = read(todo);
        let got: Vec<_> = seen.todo.iter().map(|t| (t.text.as_str(), t.status.as_str())).collect();
        assert_eq!(got, [("Read it", "completed"), ("Fix it", "in_progress")]);
        let big = "x".repeat(stream::LONG * 2);
        let write = format!(
            r#"{{"type":"tool_use","sessionID":"s2","part":{{"type":"tool","tool":"write","state":{{"status":"completed","input":{{"filePath":"/w/big.txt","content":"{big}"}},"output":"ok"}}}}}}"#
        );
        let seen = read(&write);
        assert_eq!(
            (seen.step.unwrap().what.as_str(), seen.usage.session_id.as_deref()),
            ("editing /w/big.txt", Some("s2"))
        );
    }

    #[test]
    fn broken_lines_and_wrong_types_leave_what_is_unknown_unknown() {
        let seen = read(concat!(
            "INFO starting\n{\"type\":\"step_finish\",\"sessionID\":3,\"part\":{\"tokens\":{\"input\":\"1\",\"cache\":7},\"cost\":\"0.1\"}}\n",
            "{\"type\":\"step_finish\",\"part\":[]}\n{\"type\":\"tool_use\",\"part\":{\"tool\":5,\"state\":null}}\n{\"type\":\"step_fin",
        ));
        assert!(!seen.usage.is_known(), "{seen:?}");
        assert_eq!(seen.step.unwrap().what, "tool");
    }
}
