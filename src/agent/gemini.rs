//! Gemini CLI (`gemini -p … --output-format stream-json`, or `--output-format json`): its
//! answer is the assistant's message after its last tool result (the stream's deltas, joined),
//! or the `response` field of the one JSON object `json` prints (`result = "json:response"`).
//!
//! Its stream: `init` (session, model: `auto` when a router picks it), `message` deltas,
//! `tool_use` / `tool_result`, and a final `result` whose `stats` hold the run's tokens: input
//! (uncached), cached and output, no cost. Those totals include the router's own model call: it
//! is spend, so it counts. Turns are the conversation's model calls, counted from the stream (a
//! call begins with the first message or tool call after the prompt or a tool result); the
//! router's call is not one. With model `auto`, the model is the one that used the most tokens.
//! `write_todos` (when enabled) gives its todo list.

use serde_json::Value;

use super::stream::{self, Reader, Seen};
use super::{Agent, AgentKind, json, scan};
use crate::summary::{Found, Tail};

/// A message of the model's, and a tool call that sets the todo list.
static ASSISTANT: scan::Key = scan::Key::new(r#""role":"assistant""#);
static TODO: scan::Key = scan::Key::new(r#""tool_name":"write_todos""#);

/// The field of Gemini CLI's JSON output that holds its answer.
pub const FIELD: &str = "response";

/// Gemini CLI.
pub struct Gemini;

impl Agent for Gemini {
    fn kind(&self) -> AgentKind {
        AgentKind::Gemini
    }

    fn answer(&self, tail: &Tail<'_>) -> Found {
        streamed_answer(tail).unwrap_or_else(|| json::answer_at(tail, FIELD))
    }

    fn reader(&self) -> Option<Box<dyn Reader>> {
        Some(Box::<GeminiStream>::default())
    }

    /// `~/.gemini`: its settings, credentials and saved chats.
    fn state(&self, env: &super::Env) -> Vec<std::path::PathBuf> {
        super::at_home(env, ".gemini").into_iter().collect()
    }

    /// `--resume S` after the program (it must run in the session's directory). No fork.
    fn resume(&self, argv: Vec<String>, session: &str, fork: bool) -> Result<Vec<String>, String> {
        if fork {
            return Err("Gemini CLI cannot fork a session".into());
        }
        Ok(super::after_program(argv, ["--resume", session]))
    }
}

/// The assistant's deltas after the last tool result in `tail`, joined; none if there are none.
fn streamed_answer(tail: &Tail<'_>) -> Option<Found> {
    let lines = tail.lines();
    let (mut parts, mut bounded) = (Vec::new(), false);
    for line in lines.iter().rev().map(|l| l.text.as_bytes()) {
        if json::starts_with_type(line, "message") {
            let Ok(event) = serde_json::from_slice::<Value>(line) else { continue };
            if event.get("role").and_then(Value::as_str) != Some("assistant") {
                bounded = true;
                break;
            }
            if let Some(text) = event.get("content").and_then(Value::as_str) {
                parts.push(text.to_owned());
            }
        } else if ["tool_result", "tool_use", "init"].iter().any(|k| json::starts_with_type(line, k)) {
            bounded = true;
            break;
        }
    }
    if parts.is_empty() {
        return None;
    }
    // The message may begin before the window.
    if !bounded && tail.can_grow() {
        return Some(Found::NeedMore);
    }
    parts.reverse();
    Some(json::cleaned(tail, &parts.concat()))
}

/// Gemini CLI's stream as read so far.
#[derive(Default)]
struct GeminiStream {
    /// A model call is under way: a message or tool call came since the last tool result.
    in_call: bool,
}

impl Reader for GeminiStream {
    fn line(&mut self, line: &[u8], seen: &mut Seen) {
        if !line.starts_with(b"{") {
            return;
        }
        // Tool results (their output) and the answer's deltas (the bulk of the stream) are read
        // from their first bytes only.
        if json::starts_with_type(line, "tool_result") {
            self.in_call = false;
            return;
        }
        if json::starts_with_type(line, "message") {
            if scan::early(line, &ASSISTANT, 192) {
                self.call(seen);
                if seen.step.as_ref().is_none_or(|s| s.what != "answering") {
                    seen.step = stream::step("answering");
                }
            }
            return;
        }
        // A tool call's input can be big (a file written whole): what is needed is near its ends.
        if line.len() > stream::EDGE && json::starts_with_type(line, "tool_use") && !scan::early(line, &TODO, 256) {
            let (head, tail) = (&line[..stream::EDGE], &line[line.len() - stream::EDGE..]);
            return self.long_line(head, tail, seen);
        }
        let Ok(event) = serde_json::from_slice::<Value>(line) else { return };
        match event.get("type").and_then(Value::as_str) {
            Some("init") => {
                if let Some(id) = event.get("session_id").and_then(Value::as_str) {
                    seen.usage.session_id = Some(id.to_owned());
                }
                if let Some(m) = event.get("model").and_then(Value::as_str).filter(|m| *m != "auto") {
                    seen.usage.model = Some(m.to_owned());
                }
            }
            Some("tool_use") => {
                self.call(seen);
                tool(&event, seen);
            }
            Some("result") => result(&event, seen),
            _ => {}
        }
    }

    /// A line made long by a tool's output or input (a file written whole) or a long delta.
    fn long_line(&mut self, head: &[u8], tail: &[u8], seen: &mut Seen) {
        if json::starts_with_type(head, "tool_use") {
            let mut event = serde_json::Map::new();
            let mut params = serde_json::Map::new();
            if let Some(name) = scan::value_after(head, "tool_name") {
                event.insert("tool_name".into(), name);
            }
            for key in ["file_path", "command"] {
                if let Some(v) = scan::value_after(head, key).or_else(|| scan::value_after(tail, key)) {
                    params.insert(key.into(), v);
                }
            }
            event.insert("parameters".into(), Value::Object(params));
            self.call(seen);
            tool(&Value::Object(event), seen);
        } else {
            self.line(head, seen);
        }
    }
}

impl GeminiStream {
    /// A message or tool call: the first since the last tool result begins a model call.
    fn call(&mut self, seen: &mut Seen) {
        if !self.in_call {
            self.in_call = true;
            seen.usage.turns = Some(seen.usage.turns.unwrap_or(0) + 1);
        }
    }
}

/// A tool call: its name and the argument that says most of what it does.
fn tool(event: &Value, seen: &mut Seen) {
    let name = event.get("tool_name").and_then(Value::as_str).unwrap_or("tool");
    let params = &event["parameters"];
    if name == "write_todos"
        && let Some(items) = params.get("todos").and_then(Value::as_array)
    {
        seen.todo = stream::todo_list(items, &["description"]);
    }
    let keys = ["command", "file_path", "dir_path", "path", "pattern", "query", "url", "prompt"];
    seen.step = stream::tool_step(name, stream::main_arg(params, &keys), &["write_file", "replace"]);
}

/// The run's end: its tokens, all model calls' (the router's too).
fn result(event: &Value, seen: &mut Seen) {
    seen.step = None;
    let Some(stats) = event.get("stats").filter(|s| s.is_object()) else { return };
    let n = |k: &str| stats.get(k).and_then(Value::as_u64);
    let u = &mut seen.usage;
    u.cache_read_tokens = n("cached");
    u.input_tokens = n("input").or_else(|| Some(n("input_tokens")?.saturating_sub(n("cached")?)));
    u.output_tokens = n("output_tokens");
    if u.model.is_none() {
        let models = stats.get("models").and_then(Value::as_object).into_iter().flatten();
        let tokens = |m: &Value| m.get("total_tokens").and_then(Value::as_u64);
        u.model = models.filter_map(|(name, m)| Some((tokens(m)?, name))).max().map(|(_, name)| name.clone());
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;
    use crate::summary::{DEFAULT_CAP, read_answer};

    const STREAM: &str = include_str!("../../fixtures/transcripts/gemini-stream.jsonl");
    const ANSWER: &str = include_str!("../../fixtures/transcripts/answer.md");

    fn answer(log: &str) -> String {
        read_answer(&mut Cursor::new(log), DEFAULT_CAP, |tail| Gemini.answer(tail)).unwrap()
    }

    fn read(stream: &str) -> Seen {
        crate::agent::stream::read_all(Gemini.reader(), stream)
    }

    #[test]
    fn a_recorded_run_gives_exactly_its_answer() {
        assert_eq!(answer(include_str!("../../fixtures/transcripts/gemini.log")), ANSWER.trim_end());
        assert_eq!(answer(STREAM), ANSWER.trim_end());
    }

    #[test]
    fn a_recorded_stream_gives_all_calls_tokens_and_the_conversations_turns() {
        let seen = read(STREAM);
        let u = &seen.usage;
        // The router's 10 in / 20 out are in the totals: 530 + 10 uncached, 60 + 20 out.
        assert_eq!(u.figures(), [Some(540), Some(80), Some(800), None, Some(3)]);
        assert_eq!((u.model.as_deref(), u.cost_usd), (Some("gemini-3.8-flash"), None));
        assert_eq!(u.session_id.as_deref(), Some("63fd87e4-dbbc-4804-a476-424c8044a6cc"));
        let upto = |n: usize| read(&STREAM.lines().take(n).collect::<Vec<_>>().join("\n"));
        assert_eq!(upto(4).step.unwrap().what, "run_shell_command: echo step one");
        let seen = upto(6);
        assert_eq!((seen.step.unwrap().what.as_str(), seen.usage.turns), ("editing notes.txt", Some(2)));
        assert_eq!(upto(9).step.unwrap().what, "answering");
    }

    #[test]
    fn a_named_model_stands_and_an_answer_before_the_window_is_looked_for() {
        let seen = read(&STREAM.replace("\"model\":\"auto\"", "\"model\":\"gemini-x\""));
        assert_eq!(seen.usage.model.as_deref(), Some("gemini-x"));
        // Deltas filling more than the first window: the answer is found whole.
        let delta = r#"{"type":"message","role":"assistant","content":"0123456789","delta":true}"#;
        let log = format!("{{\"type\":\"tool_result\",\"output\":\"x\"}}\n{}\n", [delta; 40_000].join("\n"));
        assert_eq!(answer(&log).len(), 400_000);
    }

    #[test]
    fn lines_longer_than_kept_still_count_their_call_and_say_their_step() {
        let big = "x".repeat(stream::LONG * 2);
        let write = format!(
            r#"{{"type":"tool_use","tool_name":"write_file","tool_id":"w1","parameters":{{"file_path":"big.txt","content":"{big}"}}}}"#
        );
        let result = format!(r#"{{"type":"tool_result","tool_id":"w1","status":"success","output":"{big}"}}"#);
        let delta = format!(r#"{{"type":"message","role":"assistant","content":"{big}","delta":true}}"#);
        let seen = read(&format!("{write}\n{result}\n"));
        assert_eq!((seen.step.unwrap().what.as_str(), seen.usage.turns), ("editing big.txt", Some(1)));
        let seen = read(&write.replace(&big, &big[..stream::EDGE]));
        assert_eq!((seen.step.unwrap().what.as_str(), seen.usage.turns), ("editing big.txt", Some(1)));
        let seen = read(&format!("{write}\n{result}\n{delta}\n"));
        assert_eq!((seen.step.unwrap().what.as_str(), seen.usage.turns), ("answering", Some(2)));
    }

    #[test]
    fn its_todo_list_is_read() {
        let todo = r#"{"type":"tool_use","tool_name":"write_todos","tool_id":"t1","parameters":{"todos":[{"description":"Read it","status":"completed"},{"description":"Fix it","status":"in_progress"},{"status":"pending"}]}}"#;
        let seen = read(todo);
        let got: Vec<_> = seen.todo.iter().map(|t| (t.text.as_str(), t.status.as_str())).collect();
        assert_eq!(got, [("Read it", "completed"), ("Fix it", "in_progress")]);
        assert_eq!(seen.step.unwrap().what, "write_todos");
    }

    #[test]
    fn broken_lines_and_wrong_types_leave_what_is_unknown_unknown() {
        let seen = read(concat!(
            "Warning: 256-color support not detected.\n{\"type\":\"init\",\"session_id\":5,\"model\":[]}\n",
            "{\"type\":\"result\",\"stats\":{\"input\":\"9\",\"cached\":-1,\"models\":{\"m\":{\"total_tokens\":\"x\"}}}}\n",
            "{\"type\":\"tool_use\",\"parameters\":\"x\"}\n{\"type\":\"result\",\"stats\":[]}\n{\"type\":\"resu",
        ));
        assert_eq!(seen.usage.figures(), [None, None, None, None, Some(1)]);
        assert_eq!((seen.usage.session_id, seen.usage.model, seen.step), (None, None, None));
        assert_eq!(answer("no json\n"), "no json");
    }
}
