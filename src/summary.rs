//! Pure: the end of a log -> an agent's answer, escapes stripped, CR progress collapsed, capped.
//! Only the end of the log is read: a window that grows from 256 KiB until the agent's kind
//! (`crate::agent`) finds its answer in it, or the window holds more text than the cap, up to
//! 16 MiB. What a kind looks with: a window's cleaned lines, each marked when it opens with a
//! response marker (kiro-cli's coloured `> `), the last JSON object's field (see `json`), and
//! the whole output.

mod clean;
mod json;

use std::io::{self, Read, Seek, SeekFrom};

pub use clean::{LineCleaner, clean_line};

/// The default cap on a summary's size: more than any answer a model should read whole.
pub const DEFAULT_CAP: usize = 1024 * 1024;
/// The first window read from a log's end.
pub const FIRST_WINDOW: u64 = 256 * 1024;
/// The widest window read from a log's end.
pub const MAX_WINDOW: u64 = 16 * 1024 * 1024;

/// A cleaned line, and whether it opens with a response marker: `> ` in colour, the colour
/// reset right after it (as kiro-cli prints one).
pub struct Line {
    pub text: String,
    pub marked: bool,
}

/// What a look at one window of a log's end found.
#[derive(Debug, PartialEq)]
pub enum Found {
    Answer(String),
    /// The answer may begin before the window: a wider one is read, if there is one.
    NeedMore,
}

/// One window of a log's end, for an agent kind to find its answer in.
pub struct Tail<'a> {
    /// The window from its first whole line on (a line cut short only at the widest window).
    body: &'a [u8],
    /// The window starts at the log's first byte.
    whole: bool,
    /// A wider window could be read.
    more: bool,
    cap: usize,
}

impl<'a> Tail<'a> {
    /// `window`, the last bytes of a log. `whole` says the window starts at the log's first
    /// byte; otherwise its first line is whole only if `line_start` says so.
    fn of(window: &'a [u8], whole: bool, line_start: bool, cap: usize, last_try: bool) -> Tail<'a> {
        // At the widest window a first line cut short is kept: it is the end of a line too long
        // to read whole, and may be all there is.
        let body = if whole || line_start || last_try {
            window
        } else {
            match window.iter().position(|&b| b == b'\n') {
                Some(i) => &window[i + 1..],
                None => &[][..],
            }
        };
        Tail { body, whole, more: !whole && !last_try, cap }
    }

    /// Whether the window starts at the log's first byte.
    pub fn whole(&self) -> bool {
        self.whole
    }

    /// Whether a wider window could be read.
    pub fn can_grow(&self) -> bool {
        self.more
    }

    /// The window's lines, cleaned, each marked or not.
    pub fn lines(&self) -> Vec<Line> {
        self.body
            .split(|&b| b == b'\n')
            .map(|raw| {
                let (text, marked) = LineCleaner::default().marked_piece(raw);
                Line { text, marked }
            })
            .collect()
    }

    /// Whether `lines` (the window's) may be the end of an answer that begins before the
    /// window: short of the cap, its start (a marker, or the log's start) may lie further back.
    pub fn short(&self, lines: &[Line]) -> bool {
        let len: usize = lines.iter().map(|l| l.text.len() + 1).sum();
        self.more && len <= self.cap
    }

    /// `text`, trimmed, as the answer: at most the cap, from its end, with a note when anything
    /// was dropped (`cut_short`: the text is known to be the end of a longer one).
    pub fn answer(&self, text: &str, cut_short: bool) -> Found {
        Found::Answer(cap_keeping_end(text.trim(), self.cap, cut_short))
    }

    /// The whole output as the answer: the window's lines, once the window holds the log's
    /// start or more than the cap.
    pub fn output(&self) -> Found {
        let lines = self.lines();
        if self.short(&lines) {
            return Found::NeedMore;
        }
        Found::Answer(self.joined(&lines))
    }

    /// `lines` joined, capped: without the log's start, the text is known to exceed the cap.
    fn joined(&self, lines: &[Line]) -> String {
        let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
        cap_keeping_end(texts.join("\n").trim(), self.cap, !self.whole)
    }

    /// The string at `field` (a dotted path) of the last JSON object in the window that
    /// begins at a line's start and has it (see `json`).
    pub fn json_field(&self, field: &str) -> Option<String> {
        json::last_field(self.body, field)
    }
}

/// Keep at most `cap` bytes of `text`, from its end, with a note when anything was dropped.
pub fn keep_end(text: &str, cap: usize) -> String {
    cap_keeping_end(text, cap, false)
}

/// `keep_end`, noting a cut also when `cut_short` says the text was longer than it looks.
fn cap_keeping_end(text: &str, cap: usize, cut_short: bool) -> String {
    if text.len() <= cap && !cut_short {
        return text.to_owned();
    }
    let mut start = text.len().saturating_sub(cap);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let kept = &text[start..];
    format!("[agentctl: summary truncated, showing only its last {} bytes]\n{kept}", kept.len())
}

/// The answer `find` finds in the end of the log read from `src`, reading only its end, and
/// each byte of it once. At the widest window `find` must answer; if it does not, the output
/// is the answer.
pub fn read_answer<R: Read + Seek>(src: &mut R, cap: usize, find: impl Fn(&Tail<'_>) -> Found) -> io::Result<String> {
    let len = src.seek(SeekFrom::End(0))?;
    let mut window = FIRST_WINDOW;
    // `buf` holds the log from `at` to its end; a wider window reads only what it adds.
    let (mut buf, mut at) = (Vec::new(), len);
    loop {
        let start = len.saturating_sub(window);
        // One byte more, to learn whether the window begins at a line start.
        let wanted = start.saturating_sub(1);
        if wanted < at {
            src.seek(SeekFrom::Start(wanted))?;
            let mut front = Vec::with_capacity((at - wanted) as usize + buf.len());
            src.by_ref().take(at - wanted).read_to_end(&mut front)?;
            front.extend_from_slice(&buf);
            (buf, at) = (front, wanted);
        }
        let (line_start, bytes) = if start > 0 { (buf.first() == Some(&b'\n'), &buf[1..]) } else { (true, &buf[..]) };
        let last_try = window >= MAX_WINDOW;
        let tail = Tail::of(bytes, start == 0, line_start, cap, last_try);
        match find(&tail) {
            Found::Answer(s) => return Ok(s),
            // Nothing wider to read: the output stands in.
            Found::NeedMore if !tail.can_grow() => return Ok(tail.joined(&tail.lines())),
            Found::NeedMore => {}
        }
        window = (window * 4).min(MAX_WINDOW);
    }
}

/// The last non-empty line of a log, cleaned, for one-line progress reports.
pub fn last_line<R: Read + Seek>(src: &mut R) -> io::Result<Option<String>> {
    let len = src.seek(SeekFrom::End(0))?;
    let from = len.saturating_sub(16 * 1024);
    src.seek(SeekFrom::Start(from))?;
    let mut buf = Vec::new();
    src.take(len - from).read_to_end(&mut buf)?;
    Ok(buf.split(|&b| b == b'\n').rev().map(clean_line).map(|l| l.trim().to_owned()).find(|l| !l.is_empty()))
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    #[test]
    fn cleans_lines_like_a_terminal() {
        let cases: &[(&[u8], &str)] = &[
            (b"plain", "plain"),
            (b"\x1b[1;32mgreen\x1b[0m text", "green text"),
            (b"50%\r75%\r100% done", "100% done"),
            (b"line\r", "line"),
            (b"abc\r\r", "abc"),
            (b"\x1b]0;title\x07after", "after"),
            (b"a\tb", "a\tb"),
            (b"bad \xff\xfe utf8", "bad \u{fffd}\u{fffd} utf8"),
            (b"cut escape \x1b[3", "cut escape "),
            (b"nul\0byte", "nulbyte"),
            (b"\x1b[38;5;141m> \x1b[0manswer", "> answer"),
            (b"spinner\x1b[2K\x1b[1Gafter", "after"),
            (b"spinner\x1b[Gafter", "after"),
            (b"keep\x1b[Kthis", "keepthis"),
        ];
        for (raw, want) in cases {
            assert_eq!(clean_line(raw), *want, "{:?}", String::from_utf8_lossy(raw));
        }
    }

    #[test]
    fn only_a_coloured_prompt_reset_at_once_is_a_response_marker() {
        let cases: &[(&[u8], bool)] = &[
            (b"\x1b[38;5;10m> \x1b[0manswer", true),
            (b"\x1b[32m> \x1b[mrest", true),
            (b"\x1b[2K\x1b[1G\x1b[38;5;10m> \x1b[0m", true),
            ("⠸ Thinking...\x1b[2K\x1b[1G\x1b[38;5;10m> \x1b[0m".as_bytes(), true),
            (b"spinner\r\x1b[38;5;10m> \x1b[0mafter a spinner", true),
            (b"> plain", false),
            // Inside a fenced block kiro prints code in the same colour, without a reset.
            (b"\x1b[38;5;10m> line one", false),
            (b"\x1b[38;5;10m>  \x1b[0mtwo spaces", false),
            (b"\x1b[1m> \x1b[0mbold only", false),
            // Colours read in order, their own numbers skipped: none of these 0s is a reset.
            (b"\x1b[0;32m> \x1b[0mx", true),
            (b"\x1b[38;5;0m> \x1b[0mx", true),
            (b"\x1b[38;2;0;255;0m> \x1b[0mx", true),
            (b"\x1b[32;0m> \x1b[0mx", false),
            (b"\t\x1b[32m> \x1b[0mx", false),
            (b"x\x1b[38;5;10m> \x1b[0m", false),
        ];
        for (raw, want) in cases {
            assert_eq!(LineCleaner::default().marked_piece(raw).1, *want, "{:?}", String::from_utf8_lossy(raw));
        }
    }

    #[test]
    fn last_line_skips_blank_lines() {
        let mut c = Cursor::new(b"one\n\x1b[1mtwo\x1b[0m\n\n".to_vec());
        assert_eq!(last_line(&mut c).unwrap().as_deref(), Some("two"));
        assert_eq!(last_line(&mut Cursor::new(Vec::new())).unwrap(), None);
    }
}
