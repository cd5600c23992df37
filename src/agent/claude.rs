//! Claude Code (`claude -p --output-format stream-json --verbose`, or `--output-format json`):
//! its answer is the `result` field of its last JSON object (`result = "json:result"`); its
//! stream says its session, each model call's usage and content (tool calls, thinking, text)
//! and, at the end, the run's totals, `num_turns` and `total_cost_usd`.
//!
//! One trap: the stream has one `assistant` event per content block, each repeating its
//! message's usage as it was when the message began (output tokens: 1), so a message counts
//! once, by its id, with the highest figures seen; the final `result` event's totals replace
//! the sum. With `--include-partial-messages` the `stream_event` lines carry the API's own
//! events: `message_start` and `message_delta` give a message's true output tokens while it
//! runs (the text deltas, most of such a stream, are skipped unparsed). A run killed before its
//! `result` has the calls' sum and no cost: the supervisor estimates it.

use std::collections::HashMap;
use std::hash::BuildHasher;

use serde_json::Value;

use super::stream::{self, Reader, Seen};
mod ends;
mod sessions;
use ends::Pending;

use super::{Agent, AgentKind, Usage, json, scan};
use crate::summary::{Found, Tail};
use ends::{EDITS, MAIN_ARGS};

/// How many of the latest model calls are remembered by id.
const CALLS: usize = 32;

/// The field of Claude Code's JSON output that holds its answer.
pub const FIELD: &str = "result";

/// Claude Code.
pub struct Claude;

impl Agent for Claude {
    fn kind(&self) -> AgentKind {
        AgentKind::Claude
    }

    /// A run stopped before its `result` (over budget, halted) has the last text its main agent
    /// wrote as its partial answer, not its stream's JSON.
    fn answer(&self, tail: &Tail<'_>) -> Found {
        match tail.json_field(FIELD) {
            Some(answer) => json::cleaned(tail, &answer),
            None if tail.can_grow() => Found::NeedMore,
            None => match json::last_event(tail, &["assistant"], last_text) {
                Some(text) => json::cleaned(tail, &text),
                None => tail.output(),
            },
        }
    }

    fn reader(&self) -> Option<Box<dyn Reader>> {
        Some(Box::<ClaudeStream>::default())
    }

    /// `--resume SESSION` (and `--fork-session`) after the program: Claude Code finds the
    /// session among those of the directory it runs in.
    fn resume(&self, argv: Vec<String>, session: &str, fork: bool) -> Result<Vec<String>, String> {
        Ok(super::after_program(argv, ["--resume", session].into_iter().chain(fork.then_some("--fork-session"))))
    }

    fn carry_session(
        &self,
        session: &str,
        from: &std::path::Path,
        to: &std::path::Path,
        env: &super::Env,
    ) -> Result<(), String> {
        sessions::carry(session, from, to, env)
    }

    /// Its config directory (its conversations), and `~/.claude.json` beside the default one.
    fn state(&self, env: &super::Env) -> Vec<std::path::PathBuf> {
        let mut state: Vec<_> = sessions::config_dir(env).into_iter().collect();
        if super::var(env, "CLAUDE_CONFIG_DIR").is_none() {
            state.extend(super::at_home(env, ".claude.json"));
        }
        state
    }

    /// With `--input-format stream-json` it reads its prompt, and any later message, from
    /// stdin (a prompt argument is ignored). `--replay-user-messages` has it write each message
    /// back as it takes it into the conversation: a message sent during a tool call joins that
    /// turn, one sent after an answer starts a new one, and only the replays tell which.
    fn reads_messages(&self, argv: &mut Vec<String>) -> bool {
        let stdin_json = argv.windows(2).any(|w| w[0] == "--input-format" && w[1] == "stream-json")
            || argv.iter().any(|a| a == "--input-format=stream-json");
        if stdin_json && !argv.iter().any(|a| a == REPLAY) {
            let at = argv.len().min(1);
            argv.insert(at, REPLAY.to_owned());
        }
        stdin_json
    }

    fn message_line(&self, text: &str) -> String {
        // In the order Claude Code writes it.
        let text = serde_json::Value::from(text);
        format!("{{\"type\":\"user\",\"message\":{{\"role\":\"user\",\"content\":{text}}}}}\n")
    }
}

/// The flag by which Claude Code says when it took each message on its stdin.
const REPLAY: &str = "--replay-user-messages";

/// A model call's figures as `ends::FIGURES` lists them.
type Figures = [Option<u64>; 4];

/// Claude Code's stream as read so far.
#[derive(Default)]
struct ClaudeStream {
    /// The latest model calls' highest usage, by a hash of their message id: the last `CALLS`
    /// only (a call's events come together, or interleaved with a few sub-agents' at most), so
    /// that a long run's memory stays bounded.
    ids: [u64; CALLS],
    calls: [Figures; CALLS],
    /// The last `assistant` event read from its ends: its head up to its block's type, its
    /// message id (`id_hash`), its usage (`"usage":{…}`) and how far from its end that began.
    last_head: Vec<u8>,
    last_id: u64,
    last_usage: Vec<u8>,
    usage_from_end: usize,
    /// The step read last and not yet told, and the tool call it names.
    pending: Pending,
    block: Vec<u8>,
    /// How many calls there were in all.
    turns: u64,
    /// The sum of `calls`.
    total: Usage,
    /// The message each agent streams now (`message_start`), by its parent tool call (the main
    /// agent's: none), for the `message_delta` events that do not name it.
    current: HashMap<Option<String>, String>,
    /// The run's totals, once its `result` event said them.
    done: bool,
    /// What the conversation's earlier answers in this process said it spent (tokens and
    /// turns), when messages on its stdin made it answer more than once.
    before: Usage,
    /// How many calls there were when the current answer began.
    calls_before: u64,
}

impl Reader for ClaudeStream {
    fn line(&mut self, line: &[u8], seen: &mut Seen) {
        // Tool results (the bulk of a long stream) say nothing of usage or steps, nor do the
        // partial messages' deltas (the bulk of one with `--include-partial-messages`).
        let kind = if line.starts_with(b"{") { json::type_of(line) } else { return };
        match kind {
            Some(b"user") => return taken(line, seen),
            Some(b"stream_event") if is_delta(line) => return,
            // What a model writes (most of a stream) is read from its two ends.
            Some(b"assistant") if !self.done && self.assistant(line, seen) => return,
            _ => {}
        }
        // Any other event is read in its turn, after the step read before it.
        self.settle(seen);
        let Ok(event) = serde_json::from_slice::<Value>(line) else { return };
        if let Some(id) = event.get("session_id").and_then(Value::as_str) {
            seen.usage.session_id = Some(id.to_owned());
        }
        match event.get("type").and_then(Value::as_str) {
            Some("system") => {
                if let Some(m) = event.get("model").and_then(Value::as_str) {
                    seen.usage.model = Some(m.to_owned());
                }
                if self.done && event.get("subtype").and_then(Value::as_str) == Some("init") {
                    self.next_answer(seen);
                }
            }
            Some("assistant") if !self.done => self.message(&event["message"], seen),
            Some("stream_event") if !self.done => self.partial(&event, seen),
            Some("result") => self.result(&event, seen),
            _ => {}
        }
    }

    /// A `result` event made long by its answer: its turns are before the answer, its session,
    /// totals and cost after it. An `assistant` event made long by a text block: its id before,
    /// its usage after.
    fn long_line(&mut self, head: &[u8], tail: &[u8], seen: &mut Seen) {
        self.settle(seen);
        if let Some(id) = scan::value_after(tail, "session_id").and_then(|v| v.as_str().map(str::to_owned)) {
            seen.usage.session_id = Some(id);
        }
        if json::starts_with_type(head, "user") {
            taken(tail, seen);
        } else if json::starts_with_type(head, "result") {
            let mut event = serde_json::Map::new();
            for (key, part) in [("num_turns", head), ("total_cost_usd", tail), ("usage", tail)] {
                if let Some(v) = scan::value_after(part, key) {
                    event.insert(key.to_owned(), v);
                }
            }
            self.result(&Value::Object(event), seen);
        } else if json::starts_with_type(head, "assistant") && !self.done {
            let id = scan::value_after(head, "id").and_then(|v| v.as_str().map(str::to_owned));
            if let (Some(id), Some(u)) = (id, scan::value_after(tail, "usage")) {
                self.call(id_hash(id.as_bytes()), figures_of(&u), seen);
            }
            seen.step = stream::step("answering");
        }
    }

    fn settle(&mut self, seen: &mut Seen) {
        ClaudeStream::settle(self, seen);
    }
}

impl ClaudeStream {
    /// One content block of a model call, with the call's usage so far.
    fn message(&mut self, msg: &Value, seen: &mut Seen) {
        if let Some(m) = msg.get("model").and_then(Value::as_str) {
            seen.usage.model = Some(m.to_owned());
        }
        if let (Some(id), Some(u)) = (msg.get("id").and_then(Value::as_str), msg.get("usage")) {
            self.call(id_hash(id.as_bytes()), figures_of(u), seen);
        }
        for block in msg.get("content").and_then(Value::as_array).into_iter().flatten() {
            self.block(block, seen);
        }
    }

    /// An event of the API's own stream (`--include-partial-messages`).
    fn partial(&mut self, event: &Value, seen: &mut Seen) {
        let agent = event.get("parent_tool_use_id").and_then(Value::as_str).map(str::to_owned);
        let api = &event["event"];
        match api.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                let msg = &api["message"];
                if let Some(m) = msg.get("model").and_then(Value::as_str) {
                    seen.usage.model = Some(m.to_owned());
                }
                let Some(id) = msg.get("id").and_then(Value::as_str) else { return };
                self.current.insert(agent, id.to_owned());
                if let Some(u) = msg.get("usage") {
                    self.call(id_hash(id.as_bytes()), figures_of(u), seen);
                }
            }
            // Its usage is the message's so far (cumulative), output tokens included.
            Some("message_delta") => {
                if let (Some(id), Some(u)) = (self.current.get(&agent).cloned(), api.get("usage")) {
                    self.call(id_hash(id.as_bytes()), figures_of(u), seen);
                }
            }
            // A tool call's name, before its input streams in.
            Some("content_block_start") => self.block(&api["content_block"], seen),
            _ => {}
        }
    }

    /// One model call's usage as it stands now: each figure the highest seen for it.
    fn call(&mut self, id: u64, figures: Figures, seen: &mut Seen) {
        // A ring: call n is at n % CALLS.
        let known = (self.turns as usize).min(CALLS);
        let old = match self.ids[..known].iter().position(|k| *k == id) {
            Some(at) => &mut self.calls[at],
            None => {
                let at = self.turns as usize % CALLS;
                self.turns += 1;
                (self.ids[at], self.calls[at]) = (id, [None; 4]);
                &mut self.calls[at]
            }
        };
        let t = &mut self.total;
        let totals = [&mut t.input_tokens, &mut t.output_tokens, &mut t.cache_read_tokens, &mut t.cache_write_tokens];
        for ((total, old), new) in totals.into_iter().zip(old).zip(figures) {
            if new > *old {
                let (n, o) = (new.unwrap_or(0), old.unwrap_or(0));
                *total = Some(total.unwrap_or(0).saturating_sub(o).saturating_add(n));
                *old = new;
            }
        }
        let u = &mut seen.usage;
        (u.input_tokens, u.output_tokens) = (t.input_tokens, t.output_tokens);
        (u.cache_read_tokens, u.cache_write_tokens) = (t.cache_read_tokens, t.cache_write_tokens);
        u.turns = Some(self.before.turns.unwrap_or(0) + self.turns - self.calls_before);
    }

    /// A message on its stdin made it answer again, in the same process: this answer's calls,
    /// then its `result`'s own figures, add to what the earlier answers spent.
    fn next_answer(&mut self, seen: &Seen) {
        self.done = false;
        let u = &seen.usage;
        self.before = Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_tokens: u.cache_read_tokens,
            cache_write_tokens: u.cache_write_tokens,
            turns: u.turns,
            ..Usage::default()
        };
        self.total = self.before.clone();
        self.calls_before = self.turns;
    }

    /// A content block: what the agent does now.
    fn block(&self, block: &Value, seen: &mut Seen) {
        match block.get("type").and_then(Value::as_str) {
            Some("tool_use") => self.tool(block, seen),
            Some("thinking" | "redacted_thinking") => seen.step = stream::step("thinking"),
            Some("text") => seen.step = stream::step("answering"),
            _ => {}
        }
    }

    /// A tool call: its name and the argument that says most of what it does.
    fn tool(&self, block: &Value, seen: &mut Seen) {
        let name = block.get("name").and_then(Value::as_str).unwrap_or("tool");
        let input = &block["input"];
        if name == "TodoWrite"
            && let Some(items) = input.get("todos").and_then(Value::as_array)
        {
            seen.todo = stream::todo_list(items, &["content", "activeForm"]);
        }
        seen.step = stream::tool_step(name, stream::main_arg(input, &MAIN_ARGS), &EDITS);
    }

    /// The run's end: its totals, turns and cost replace what the calls added up to.
    /// Its `usage` and `num_turns` are the answer's own; `total_cost_usd`, the process's so far.
    fn result(&mut self, event: &Value, seen: &mut Seen) {
        self.done = true;
        seen.input.answered = true;
        let (u, b) = (&mut seen.usage, &self.before);
        let plus = |before: Option<u64>, own: Option<u64>, sum: Option<u64>| match own {
            Some(n) => Some(before.unwrap_or(0) + n),
            None => sum,
        };
        if let Some(totals) = event.get("usage").filter(|v| v.is_object()) {
            let [input, output, read, write] = figures_of(totals);
            u.input_tokens = plus(b.input_tokens, input, u.input_tokens);
            u.output_tokens = plus(b.output_tokens, output, u.output_tokens);
            u.cache_read_tokens = plus(b.cache_read_tokens, read, u.cache_read_tokens);
            u.cache_write_tokens = plus(b.cache_write_tokens, write, u.cache_write_tokens);
        }
        if let Some(n) = event.get("num_turns").and_then(Value::as_u64) {
            u.turns = Some(b.turns.unwrap_or(0) + n);
        }
        if let Some(c) = event.get("total_cost_usd").and_then(Value::as_f64).filter(|c| c.is_finite() && *c >= 0.0) {
            (u.cost_usd, u.cost_estimated) = (Some(c), false);
        }
        seen.step = None;
    }
}

/// Whether a `stream_event` line is a content block's delta: at once in the form Claude Code
/// writes, else by a look at its first bytes.
fn is_delta(line: &[u8]) -> bool {
    const DELTA: &[u8] = br#"{"type":"stream_event","event":{"type":"content_block_delta""#;
    static KIND: scan::Key = scan::Key::new(r#""content_block_delta""#);
    line.starts_with(DELTA) || scan::early(line, &KIND, 256)
}

/// A `user` event (whose end is `end`) that is a message from stdin coming back as it was taken
/// (`"isReplay":true`, last in the form Claude Code writes), not a tool's result.
fn taken(end: &[u8], seen: &mut Seen) {
    const REPLAYED: &[u8] = br#""isReplay":true"#;
    if memchr::memmem::find(&end[end.len().saturating_sub(48)..], REPLAYED).is_some() {
        seen.input.taken += 1;
        seen.input.answered = false;
    }
}

/// The last text block of an `assistant` event of the main agent (not a subagent's).
fn last_text(event: &Value) -> Option<String> {
    if event.get("parent_tool_use_id").is_some_and(|p| !p.is_null()) {
        return None;
    }
    let blocks = event.get("message")?.get("content")?.as_array()?;
    blocks.iter().rev().find_map(|b| (b.get("type")? == "text").then(|| b.get("text")?.as_str().map(str::to_owned))?)
}

/// A model call's id as the calls are remembered by.
fn id_hash(id: &[u8]) -> u64 {
    foldhash::fast::FixedState::default().hash_one(id)
}

/// An Anthropic `usage` object's figures.
fn figures_of(u: &Value) -> Figures {
    ends::FIGURES.map(|k| std::str::from_utf8(k).ok().and_then(|k| u.get(k)).and_then(Value::as_u64))
}

#[cfg(test)]
mod tests;
