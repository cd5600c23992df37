//! Following an agent's structured stream while it runs: its log cut into lines, each handed
//! to its kind's `Reader`, which keeps what the stream has said so far (`Seen`): usage and the
//! current step. Memory stays bounded: a line longer than `LONG` is kept as its first and last
//! `EDGE` bytes.

use serde::{Deserialize, Serialize};

use super::Usage;

/// The longest line kept whole.
pub const LONG: usize = 64 * 1024;
/// What is kept of each end of a longer line.
pub const EDGE: usize = 4 * 1024;

/// What an agent's stream has said so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Seen {
    #[serde(default)]
    pub usage: Usage,
    /// What it is doing now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<Step>,
    /// Its todo list, if it keeps one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub todo: Vec<Todo>,
    /// How far it has read the messages written to its stdin, for an agent that reads them
    /// as it runs: the supervisor's own concern, never published.
    #[serde(skip)]
    #[schemars(skip)]
    pub input: Input,
}

/// An agent that reads user messages on its stdin, as its stream tells it took them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Input {
    /// How many messages it has taken into its conversation.
    pub taken: u64,
    /// It has answered since it took the last: nothing it was given is left unanswered.
    pub answered: bool,
}

/// The agent's current step: `Bash: sleep 5`, `editing src/main.rs`, `thinking`, `answering`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Step {
    pub what: String,
    /// When agentctl read it (ms since the epoch).
    pub at_ms: u64,
}

/// One item of an agent's todo list.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Todo {
    pub text: String,
    /// `pending`, `in_progress` or `completed`, as the agent says.
    pub status: String,
}

/// One kind's reading of its stream.
pub trait Reader: Send {
    /// One whole line of the agent's output (without its newline): an event of its stream, or
    /// anything else it printed (ignored). Must not panic on any input.
    fn line(&mut self, line: &[u8], seen: &mut Seen);

    /// A line longer than `LONG`: its first and last `EDGE` bytes. Ignored unless the kind
    /// can read something from them.
    fn long_line(&mut self, _head: &[u8], _tail: &[u8], _seen: &mut Seen) {}

    /// Tell in `seen` what was read but kept back (a kind may keep only its latest step, to
    /// read it once, not on every line). Called before `seen` is looked at.
    fn settle(&mut self, _seen: &mut Seen) {}
}

/// A step seen now.
pub fn step(what: impl Into<String>) -> Option<Step> {
    let now = crate::task::unix_ms(std::time::SystemTime::now());
    Some(Step { what: shorten(&what.into(), 200), at_ms: now })
}

/// A tool call as the agent's step: `editing PATH` for one of its kind's `edits` tools with an
/// argument, else `NAME: ARG`, else `NAME`.
pub fn tool_step(name: &str, arg: Option<&str>, edits: &[&str]) -> Option<Step> {
    match arg {
        Some(path) if edits.contains(&name) => step(format!("editing {path}")),
        Some(arg) => step(format!("{name}: {arg}")),
        None => step(name),
    }
}

/// The first of `keys` that `args` (a tool call's JSON arguments) holds as a string: the one that
/// says most of what the call does.
pub fn main_arg<'a>(args: &'a serde_json::Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| args.get(*k).and_then(serde_json::Value::as_str))
}

/// A todo list as a tool call's JSON gives it: each item's text at the first of `text_keys` it
/// has, its status at `status` (`pending` if none).
pub fn todo_list(items: &[serde_json::Value], text_keys: &[&str]) -> Vec<Todo> {
    let item = |t: &serde_json::Value| {
        let text = text_keys.iter().find_map(|k| t.get(*k))?.as_str()?;
        let status = t.get("status").and_then(serde_json::Value::as_str).unwrap_or("pending");
        Some(Todo::new(text, status))
    };
    items.iter().filter_map(item).collect()
}

impl Todo {
    /// An item, its text cut to one short line.
    pub fn new(text: &str, status: &str) -> Todo {
        Todo { text: shorten(text, 120), status: status.to_owned() }
    }
}

/// `s` on one line, at most `max` characters.
pub fn shorten(s: &str, max: usize) -> String {
    // Most are one short line already.
    if s.len() <= max && !s.contains(|c: char| c.is_whitespace() && c != ' ') && !s.contains("  ") && s.trim() == s {
        return s.to_owned();
    }
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match one.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &one[..i]),
        None => one,
    }
}

/// What `reader` makes of the whole of `stream` (for tests of each kind).
#[cfg(test)]
pub fn read_all(reader: Option<Box<dyn Reader>>, stream: &str) -> Seen {
    let mut lines = Lines::new(reader.expect("the kind reads its stream"));
    lines.feed(stream.as_bytes());
    lines.finish();
    lines.seen
}

/// A stream cut into lines as it arrives, each handed to a reader. A line that arrives whole
/// is read where it lies; only one cut by the end of a piece is copied.
pub struct Lines {
    reader: Box<dyn Reader>,
    /// What the stream said, as of the last `changed`, `take_changed` or `finish`.
    pub seen: Seen,
    /// What `seen` was when `take_changed` last looked.
    told: Seen,
    /// The line being read: whole up to `LONG` bytes, then its head only.
    buf: Vec<u8>,
    /// The last `EDGE` bytes of a long line, as a ring.
    tail: Vec<u8>,
    /// How much of the current line there was in all.
    len: usize,
}

impl Lines {
    pub fn new(reader: Box<dyn Reader>) -> Lines {
        Lines { reader, seen: Seen::default(), told: Seen::default(), buf: Vec::new(), tail: Vec::new(), len: 0 }
    }

    /// What the agent wrote next; how many lines it ended.
    pub fn feed(&mut self, mut bytes: &[u8]) -> u64 {
        let mut ended = 0;
        while let Some(nl) = memchr::memchr(b'\n', bytes) {
            if self.len == 0 && nl <= LONG {
                let line = &bytes[..nl];
                self.reader.line(line.strip_suffix(b"\r").unwrap_or(line), &mut self.seen);
            } else {
                self.push(&bytes[..nl]);
                self.end_line();
            }
            ended += 1;
            bytes = &bytes[nl + 1..];
        }
        self.push(bytes);
        ended
    }

    /// The stream ended: a last line without a newline is read too.
    pub fn finish(&mut self) {
        if self.len > 0 {
            self.end_line();
        }
        self.reader.settle(&mut self.seen);
    }

    /// Whether `seen` changed since `take_changed` was last asked (which this does not count).
    pub fn changed(&mut self) -> bool {
        self.reader.settle(&mut self.seen);
        self.seen != self.told
    }

    /// Whether `seen` changed since the last call.
    pub fn take_changed(&mut self) -> bool {
        if !self.changed() {
            return false;
        }
        self.told = self.seen.clone();
        true
    }

    fn push(&mut self, part: &[u8]) {
        if part.is_empty() {
            return;
        }
        let room = LONG.saturating_sub(self.buf.len()).min(part.len());
        if self.len + part.len() <= LONG {
            self.buf.extend_from_slice(part);
        } else {
            // Beyond `LONG`: the head is what `buf` holds (cut to `EDGE` at the end), the tail a ring.
            self.buf.extend_from_slice(&part[..room.min(part.len())]);
            let keep = &part[part.len().saturating_sub(EDGE)..];
            self.tail.extend_from_slice(keep);
            if self.tail.len() > EDGE {
                self.tail.drain(..self.tail.len() - EDGE);
            }
        }
        self.len += part.len();
    }

    fn end_line(&mut self) {
        if self.len <= LONG {
            let line = self.buf.strip_suffix(b"\r").unwrap_or(&self.buf);
            self.reader.line(line, &mut self.seen);
        } else {
            // The tail ring may miss what lay between LONG and the last EDGE bytes: both ends are right.
            if self.tail.len() < EDGE {
                let from = self.buf.len().saturating_sub(EDGE - self.tail.len());
                let mut t = self.buf[from..].to_vec();
                t.extend_from_slice(&self.tail);
                self.tail = t;
            }
            let head = &self.buf[..EDGE.min(self.buf.len())];
            self.reader.long_line(head, &self.tail, &mut self.seen);
        }
        self.buf.clear();
        self.tail.clear();
        self.len = 0;
        if self.buf.capacity() > 2 * EDGE {
            // A long line's buffer is not kept between lines.
            self.buf.shrink_to(2 * EDGE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line as given: whole (head, no tail), or a long line's two ends.
    type Given = (Vec<u8>, Vec<u8>, bool);

    /// Records what it was given.
    struct Log(std::sync::Arc<std::sync::Mutex<Vec<Given>>>);

    impl Reader for Log {
        fn line(&mut self, line: &[u8], seen: &mut Seen) {
            self.0.lock().unwrap().push((line.to_vec(), Vec::new(), false));
            seen.usage.turns = Some(seen.usage.turns.unwrap_or(0) + 1);
        }
        fn long_line(&mut self, head: &[u8], tail: &[u8], _: &mut Seen) {
            self.0.lock().unwrap().push((head.to_vec(), tail.to_vec(), true));
        }
    }

    #[test]
    fn lines_are_read_whole_however_the_stream_is_cut() {
        let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut lines = Lines::new(Box::new(Log(got.clone())));
        for piece in [&b"{\"a\""[..], b":1}\r\n{\"b\":2}\n", b"", b"last"] {
            lines.feed(piece);
        }
        assert!(lines.take_changed() && !lines.take_changed());
        lines.finish();
        let got: Vec<_> = got.lock().unwrap().iter().map(|(l, _, _)| String::from_utf8(l.clone()).unwrap()).collect();
        assert_eq!(got, ["{\"a\":1}", "{\"b\":2}", "last"]);
        assert_eq!(lines.seen.usage.turns, Some(3));
    }

    #[test]
    fn a_long_line_keeps_its_two_ends_and_bounded_memory() {
        let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut lines = Lines::new(Box::new(Log(got.clone())));
        let mut line = b"HEAD".to_vec();
        line.extend(std::iter::repeat_n(b'x', 1 << 20));
        line.extend_from_slice(b"TAIL");
        for chunk in line.chunks(1000) {
            lines.feed(chunk);
            assert!(lines.buf.capacity() <= 2 * LONG && lines.tail.capacity() <= 4 * EDGE);
        }
        lines.feed(b"\nshort\n");
        let got = got.lock().unwrap();
        let (head, tail, long) = &got[0];
        assert!(*long && head.starts_with(b"HEAD") && tail.ends_with(b"TAIL"));
        assert_eq!((head.len(), tail.len()), (EDGE, EDGE));
        assert_eq!(got[1].0, b"short");
    }

    #[test]
    fn steps_are_one_short_line() {
        assert_eq!(shorten("Bash:  sleep\n 5", 50), "Bash: sleep 5");
        assert_eq!(shorten("abcdef", 3), "abc…");
    }
}
