//! An `assistant` event of Claude Code's stream read from its two ends, without parsing what
//! the model wrote (most of a stream): its message id, model and block type from its head,
//! its usage and session from its tail; only a tool call's block is parsed, into a type of
//! its own rather than a map of every field.

use std::borrow::Cow;

use serde_json::Value;

use super::ClaudeStream;
use crate::agent::Usage;
use crate::agent::scan::{self, Key};
use crate::agent::stream::{self, Seen};

/// How far into an `assistant` event its message id, model and first block's type are looked
/// for, and how far from its end its usage.
const HEAD: usize = 512;
const TAIL: usize = 1024;
/// The keys of an `assistant` event read from its ends.
static ID: Key = Key::new(r#""id":"#);
static MODEL: Key = Key::new(r#""model":"#);
static SESSION: Key = Key::new(r#""session_id":"#);
static USAGE_KEY: Key = Key::new(r#""usage":"#);

impl ClaudeStream {
    /// An `assistant` event read from its ends, without parsing what the model wrote: its
    /// message id, model and block type from its head, its usage and session from its tail,
    /// and only a tool call's block parsed. False for a shape this does not know.
    pub(super) fn assistant(&mut self, line: &[u8], seen: &mut Seen) -> bool {
        const BLOCK: &[u8] = br#""content":[{"type":""#;
        static BLOCK_AT: Key = Key::new(r#""content":[{"type":""#);
        static USAGE: std::sync::LazyLock<memchr::memmem::FinderRev<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::FinderRev::new(br#""usage":{"#));
        let head = &line[..line.len().min(HEAD)];
        let Some(block_at) = BLOCK_AT.find(head) else { return false };
        let kind = &head[block_at + BLOCK.len()..];
        let step = match () {
            _ if kind.starts_with(b"text\"") => Some("answering"),
            _ if kind.starts_with(b"thinking\"") => Some("thinking"),
            _ if kind.starts_with(b"tool_use\"") => None,
            _ => return false,
        };
        let tail = &line[line.len().saturating_sub(TAIL)..];
        let Some(usage_at) = USAGE.rfind(tail) else { return false };
        let tail = &tail[usage_at..];
        let (Some(id), Some(usage)) =
            (scan::plain_str_after(head, &ID), scan::parse_after::<RawUsage>(tail, &USAGE_KEY))
        else {
            return false;
        };
        set(&mut seen.usage.model, scan::plain_str_after(head, &MODEL));
        set(&mut seen.usage.session_id, scan::plain_str_after(tail, &SESSION));
        self.call(id, usage.into(), seen);
        match step {
            Some(step) if seen.step.as_ref().is_some_and(|s| s.what == step) => {}
            Some(step) => seen.step = stream::step(step),
            None => {
                // The block itself, from its `{` on: a tool call's name and input.
                let from = &line[block_at + BLOCK.len() - 9..];
                let block = serde_json::Deserializer::from_slice(from).into_iter::<ToolBlock>().next();
                match block {
                    Some(Ok(b)) if b.name != "TodoWrite" => {
                        seen.step = stream::tool_step(&b.name, b.input.main(), &EDITS)
                    }
                    // A todo list (or an input of another shape) is read whole.
                    _ => match serde_json::Deserializer::from_slice(from).into_iter::<Value>().next() {
                        Some(Ok(block)) => self.tool(&block, seen),
                        _ => return false,
                    },
                }
            }
        }
        true
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

/// An Anthropic `usage` object, read without building a map of its fields.
#[derive(serde::Deserialize)]
struct RawUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

impl From<RawUsage> for Usage {
    fn from(u: RawUsage) -> Usage {
        Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_tokens: u.cache_read_input_tokens,
            cache_write_tokens: u.cache_creation_input_tokens,
            ..Usage::default()
        }
    }
}
