//! An `assistant` event of Claude Code's stream read from its two ends, without parsing what
//! the model wrote (most of a stream): its message id, model and block type from its head, its
//! usage from its tail. A call's first event is read in full; the events of its other blocks
//! repeat its usage, which is compared as bytes, not read again. A tool call's block is only
//! copied: it is read when the step is next looked at (`settle`), as only the latest counts.

use std::borrow::Cow;

use serde_json::Value;

use super::ClaudeStream;
use crate::agent::scan::{self, Key};
use crate::agent::stream::{self, Seen};

/// How far into an `assistant` event its message id, model and first block's type are looked
/// for, and how far from its end its usage: in the nearest `NEAR` bytes first.
const HEAD: usize = 512;
const NEAR: usize = 512;
const TAIL: usize = 1024;
/// The keys of an `assistant` event read from its ends.
static ID_KEY: Key = Key::new(r#""id":"#);
static MODEL_KEY: Key = Key::new(r#""model":"#);
static SESSION: Key = Key::new(r#""session_id":"#);
static USAGE: Key = Key::new(r#""usage":{"#);
static BLOCK: Key = Key::new(r#""content":[{"type":""#);
static TODO: Key = Key::new(r#""name":"TodoWrite""#);
/// The fields of an Anthropic `usage` object, in `Usage`'s order: input, output, cache read,
/// cache write.
pub(super) const FIGURES: [&[u8]; 4] =
    [b"input_tokens", b"output_tokens", b"cache_read_input_tokens", b"cache_creation_input_tokens"];

/// What the agent does now, as read from its latest block but not yet told.
#[derive(Default)]
pub(super) enum Pending {
    #[default]
    None,
    /// Thinking or answering.
    Word(&'static str),
    /// A tool call: its block, from its `{`, in `ClaudeStream::block`.
    Tool,
}

impl ClaudeStream {
    /// An `assistant` event read from its ends, without parsing what the model wrote. False for
    /// a shape this does not know (the caller parses it whole).
    pub(super) fn assistant(&mut self, line: &[u8], seen: &mut Seen) -> bool {
        // Another block of the call read last opens as its event did, up to its block's type,
        // and repeats its usage where that event had it.
        let same = line.starts_with(&self.last_head) && !self.last_head.is_empty();
        let head = match same {
            true => Head { id: &[], model: None, block_at: self.last_head.len() - BLOCK.quoted().len() },
            false => match Head::of(line) {
                Some(head) => head,
                None => return false,
            },
        };
        let kind = &line[head.block_at + BLOCK.quoted().len()..];
        let word = match () {
            _ if kind.starts_with(b"text\"") => Some("answering"),
            _ if kind.starts_with(b"thinking\"") => Some("thinking"),
            _ if kind.starts_with(b"tool_use\"") => None,
            _ => return false,
        };
        let again = line.len().checked_sub(self.usage_from_end).map(|at| &line[at..]);
        if !same || !again.is_some_and(|u| u.starts_with(&self.last_usage)) {
            let Some(at) = usage_at(line, head.block_at) else { return false };
            let Some((figures, len)) = scan::numbers(&line[at + USAGE.quoted().len() - 1..], FIGURES) else {
                return false;
            };
            if !same {
                set(&mut seen.usage.model, head.model);
                if seen.usage.session_id.is_none() {
                    set(&mut seen.usage.session_id, scan::plain_str_after(&line[at..], &SESSION));
                }
                self.last_head.clear();
                self.last_head.extend_from_slice(&line[..head.block_at + BLOCK.quoted().len()]);
                self.last_id = super::id_hash(head.id);
            }
            self.last_usage.clear();
            self.last_usage.extend_from_slice(&line[at..at + USAGE.quoted().len() - 1 + len]);
            self.usage_from_end = line.len() - at;
            self.call(self.last_id, figures, seen);
        }
        match word {
            Some(word) => self.pending = Pending::Word(word),
            None => {
                // The block from its `{`: a todo list is read at once (a later call must not
                // hide it), any other call when the step is next looked at.
                let block = &line[head.block_at + BLOCK.quoted().len() - 9..];
                if may_be_todo(block) {
                    match serde_json::Deserializer::from_slice(block).into_iter::<Value>().next() {
                        Some(Ok(block)) => self.tool(&block, seen),
                        _ => return false,
                    }
                }
                self.block.clear();
                self.block.extend_from_slice(block);
                self.pending = Pending::Tool;
            }
        }
        true
    }

    /// Tell the step read last, if it is not told yet.
    pub(super) fn settle(&mut self, seen: &mut Seen) {
        match std::mem::take(&mut self.pending) {
            Pending::None => {}
            Pending::Word(word) if seen.step.as_ref().is_some_and(|s| s.what == word) => {}
            Pending::Word(word) => seen.step = stream::step(word),
            Pending::Tool => {
                let block = serde_json::Deserializer::from_slice(&self.block).into_iter::<ToolBlock>().next();
                match block {
                    Some(Ok(b)) => seen.step = stream::tool_step(&b.name, b.input.main(), &EDITS),
                    // An input of another shape is read whole.
                    _ => {
                        if let Some(Ok(block)) =
                            serde_json::Deserializer::from_slice(&self.block).into_iter::<Value>().next()
                        {
                            self.tool(&block, seen);
                        }
                    }
                }
            }
        }
    }
}

/// What the head of an `assistant` event says: its message id, model and where its first
/// block's type is (at `BLOCK`).
struct Head<'a> {
    id: &'a [u8],
    model: Option<&'a [u8]>,
    block_at: usize,
}

impl<'a> Head<'a> {
    /// The head of `line`, read in order where Claude Code writes it as it does, else searched
    /// for in its first `HEAD` bytes.
    fn of(line: &'a [u8]) -> Option<Head<'a>> {
        const ID: &[u8] = br#"{"type":"assistant","message":{"id":""#;
        const MODEL: &[u8] = br#"","type":"message","role":"assistant","model":""#;
        const CONTENT: &[u8] = br#"","stop_reason":null,"stop_sequence":null,"content":[{"type":""#;
        let in_order = || {
            let rest = line.strip_prefix(ID)?;
            let id = scan::plain_str(rest)?;
            let rest = rest[id.len()..].strip_prefix(MODEL)?;
            let model = scan::plain_str(rest)?;
            let rest = &rest[model.len()..];
            let block_at = line.len() - rest.len() + CONTENT.len() - BLOCK.quoted().len();
            rest.starts_with(CONTENT).then_some(Head { id, model: Some(model), block_at })
        };
        in_order().or_else(|| {
            let head = &line[..line.len().min(HEAD)];
            let (id, block_at) = (scan::plain_str_after(head, &ID_KEY)?, BLOCK.find(head)?);
            Some(Head { id, model: scan::plain_str_after(head, &MODEL_KEY), block_at })
        })
    }
}

/// Where the message's own `"usage":{` is: the last in the event (after its content), looked
/// for in its last `NEAR` bytes, then in its last `TAIL`.
fn usage_at(line: &[u8], block_at: usize) -> Option<usize> {
    let from = |n: usize| line.len().saturating_sub(n).max(block_at);
    USAGE.last(&line[from(NEAR)..]).map(|at| at + from(NEAR)).or_else(|| {
        let wider = &line[from(TAIL)..(from(NEAR) + USAGE.quoted().len()).min(line.len())];
        USAGE.last(wider).map(|at| at + from(TAIL))
    })
}

/// Whether a `tool_use` block (from its `{`) may be a `TodoWrite` call: its name read where
/// Claude Code writes it, else looked for.
fn may_be_todo(block: &[u8]) -> bool {
    let named = || {
        let rest = block.strip_prefix(br#"{"type":"tool_use","id":""#)?;
        let rest = rest[scan::plain_str(rest)?.len()..].strip_prefix(br#"","name":""#)?;
        scan::plain_str(rest)
    };
    match named() {
        Some(name) => name == b"TodoWrite",
        None => TODO.find(&block[..block.len().min(256)]).is_some(),
    }
}

/// The arguments of a tool call that say most of what it does, the first one it has.
pub(super) const MAIN_ARGS: [&str; 7] = ["command", "file_path", "path", "pattern", "url", "description", "prompt"];

/// Claude Code's tools that edit the file their argument names.
pub(super) const EDITS: [&str; 4] = ["Write", "Edit", "MultiEdit", "NotebookEdit"];

/// A `tool_use` block, read without building a map of its input.
#[derive(serde::Deserialize)]
struct ToolBlock<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(default, borrow)]
    input: ToolInput<'a>,
}

/// The arguments of `MAIN_ARGS` a tool call's input has (strings, or the block is read whole).
#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct ToolInput<'a> {
    #[serde(borrow)]
    command: Option<Cow<'a, str>>,
    #[serde(borrow)]
    file_path: Option<Cow<'a, str>>,
    #[serde(borrow)]
    path: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pattern: Option<Cow<'a, str>>,
    #[serde(borrow)]
    url: Option<Cow<'a, str>>,
    #[serde(borrow)]
    description: Option<Cow<'a, str>>,
    #[serde(borrow)]
    prompt: Option<Cow<'a, str>>,
}

impl ToolInput<'_> {
    /// The first of `MAIN_ARGS` it has.
    fn main(&self) -> Option<&str> {
        [&self.command, &self.file_path, &self.path, &self.pattern, &self.url, &self.description, &self.prompt]
            .into_iter()
            .find_map(|a| a.as_deref())
    }
}

/// `*field = Some(value)` for a value read as bytes, allocating only when it changes.
fn set(field: &mut Option<String>, value: Option<&[u8]>) {
    if let Some(v) = value.filter(|v| field.as_deref().map(str::as_bytes) != Some(*v))
        && let Ok(v) = std::str::from_utf8(v)
    {
        *field = Some(v.to_owned());
    }
}
