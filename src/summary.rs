//! Pure: the tail of a log -> the task's summary (escapes stripped, CR progress collapsed,
//! the text after the last `> ` marker line, capped keeping the end).
//!
//! Only the end of the log is read: a window that grows from 256 KiB until it holds the last
//! marker or more text than the cap (beyond which the result cannot change), up to 16 MiB.

use std::io::{self, Read, Seek, SeekFrom};

/// The default cap on a summary's size.
pub const DEFAULT_CAP: usize = 64 * 1024;
const FIRST_WINDOW: u64 = 256 * 1024;
const MAX_WINDOW: u64 = 16 * 1024 * 1024;

/// Turn one raw log line (no `\n`) into what a terminal would show: the text after the last
/// `\r`, escape sequences removed, tabs kept, invalid UTF-8 replaced.
pub fn clean_line(raw: &[u8]) -> String {
    LineCleaner::default().piece(raw)
}

/// `clean_line` for a line too long to hold at once, fed in pieces: each piece is cleaned as
/// a line would be (the text after its last `\r`), and an escape sequence cut between two
/// pieces is still recognized. What a `\r` in a later piece would erase of an earlier one
/// stays: the price of bounded memory on lines of megabytes.
#[derive(Default)]
pub struct LineCleaner {
    parser: vte::Parser,
}

impl LineCleaner {
    /// The visible text of the next piece of the line.
    pub fn piece(&mut self, raw: &[u8]) -> String {
        let mut end = raw.len();
        while end > 0 && raw[end - 1] == b'\r' {
            end -= 1;
        }
        let line = &raw[..end];
        // Not `memchr`: its first call in a process asks the CPU for its features, which costs
        // a virtual machine ~0.1 ms (12 µs an instruction), and lines are short.
        let visible = match line.iter().rposition(|&b| b == b'\r') {
            Some(i) => &line[i + 1..],
            None => line,
        };
        let mut out = Printable(String::with_capacity(visible.len()));
        self.parser.advance(&mut out, visible);
        out.0
    }
}

struct Printable(String);

impl vte::Perform for Printable {
    fn print(&mut self, c: char) {
        self.0.push(c);
    }
    fn execute(&mut self, byte: u8) {
        if byte == b'\t' {
            self.0.push('\t');
        }
    }
}

/// The result of looking at one window of the log's end.
#[derive(Debug, PartialEq)]
enum Attempt {
    Done(String),
    NeedMore,
}

/// Summarize `window`, the last bytes of a log. `whole` says the window starts at the log's
/// first byte; otherwise its first line is whole only if `line_start` says so.
fn attempt(window: &[u8], whole: bool, line_start: bool, cap: usize, last_try: bool) -> Attempt {
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
    let lines: Vec<String> = body.split(|&b| b == b'\n').map(clean_line).collect();
    let marker = lines.iter().rposition(|l| l.starts_with("> "));
    let text = match marker {
        Some(i) => {
            let mut t = lines[i][2..].to_owned();
            for l in &lines[i + 1..] {
                t.push('\n');
                t.push_str(l);
            }
            t
        }
        None => {
            let len: usize = lines.iter().map(|l| l.len() + 1).sum();
            if !whole && len <= cap && !last_try {
                return Attempt::NeedMore;
            }
            lines.join("\n")
        }
    };
    // Without a marker and without the log's start, the text is known to exceed the cap.
    let cut_short = marker.is_none() && !whole;
    Attempt::Done(cap_keeping_end(text.trim(), cap, cut_short))
}

/// Keep at most `cap` bytes of `text`, from its end, with a note when anything was dropped.
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

/// Summarize a log read from `src`, reading only its end, and each byte of it once.
pub fn summarize<R: Read + Seek>(src: &mut R, cap: usize) -> io::Result<String> {
    let len = src.seek(SeekFrom::End(0))?;
    let mut window = FIRST_WINDOW;
    // `buf` holds the log from `from` to its end; a wider window reads only what it adds.
    let (mut buf, mut from) = (Vec::new(), len);
    loop {
        let start = len.saturating_sub(window);
        // One byte more, to learn whether the window begins at a line start.
        let wanted = start.saturating_sub(1);
        if wanted < from {
            src.seek(SeekFrom::Start(wanted))?;
            let mut front = Vec::with_capacity((from - wanted) as usize + buf.len());
            src.by_ref().take(from - wanted).read_to_end(&mut front)?;
            front.extend_from_slice(&buf);
            (buf, from) = (front, wanted);
        }
        let (line_start, bytes) = if start > 0 { (buf.first() == Some(&b'\n'), &buf[1..]) } else { (true, &buf[..]) };
        let last_try = window >= MAX_WINDOW;
        if let Attempt::Done(s) = attempt(bytes, start == 0, line_start, cap, last_try) {
            return Ok(s);
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

    fn sum(log: &[u8]) -> String {
        summarize(&mut Cursor::new(log.to_vec()), DEFAULT_CAP).unwrap()
    }

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
        ];
        for (raw, want) in cases {
            assert_eq!(clean_line(raw), *want, "{:?}", String::from_utf8_lossy(raw));
        }
    }

    #[test]
    fn summary_is_the_text_after_the_last_marker() {
        let cases: &[(&[u8], &str)] = &[
            (b"> first\nmore\n> second answer\nline two\n", "second answer\nline two"),
            (b"no marker\nat all\n", "no marker\nat all"),
            (b"", ""),
            (b"x\n\x1b[32m> \x1b[0mcoloured\n\n", "coloured"),
            (b"\xe2\xa0\x8b Thinking\r\xe2\xa0\x99 Thinking\r\x1b[K> spun\n", "spun"),
            (b">not a marker\n", ">not a marker"),
            (b"  > indented is not a marker\n", "> indented is not a marker"),
            (b"> last line only", "last line only"),
        ];
        for (log, want) in cases {
            assert_eq!(sum(log), *want, "{:?}", String::from_utf8_lossy(log));
        }
    }

    #[test]
    fn long_summaries_keep_the_end_with_a_note() {
        let mut log = b"> start\n".to_vec();
        for i in 0..20_000 {
            log.extend_from_slice(format!("line {i}\n").as_bytes());
        }
        let s = summarize(&mut Cursor::new(log), 1000).unwrap();
        assert!(s.starts_with("[agentctl: summary truncated"), "{}", &s[..80]);
        assert!(s.ends_with("line 19999"));
        assert!(s.len() < 1100);
    }

    #[test]
    fn marker_far_back_beyond_the_first_window_is_found() {
        let mut log = b"> old\n".to_vec();
        log.extend_from_slice(b"\x1b[0m".repeat(200_000).as_slice());
        log.extend_from_slice(b"\n> the answer\n");
        log.extend_from_slice(b"\x1b[0m".repeat(100_000).as_slice());
        log.push(b'\n');
        assert_eq!(sum(&log), "the answer");
    }

    #[test]
    fn a_window_that_begins_exactly_at_a_marker_line_keeps_it() {
        // Put the last marker line right at the start of the first window.
        let mut tail = format!("> answer\n{}", "y\n".repeat((FIRST_WINDOW as usize - 9) / 2));
        while tail.len() < FIRST_WINDOW as usize {
            tail.push('\n');
        }
        let mut log = format!("> earlier\n{}\n", "z".repeat(1000)).into_bytes();
        log.extend_from_slice(tail.as_bytes());
        let s = summarize(&mut Cursor::new(log), usize::MAX / 2).unwrap();
        assert!(s.starts_with("answer\ny"), "{}", &s[..20]);
    }

    /// Counts the bytes a summary reads.
    struct Counting<R> {
        inner: R,
        read: u64,
    }

    impl<R: Read> Read for Counting<R> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.read += n as u64;
            Ok(n)
        }
    }

    impl<R: Seek> Seek for Counting<R> {
        fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
            self.inner.seek(pos)
        }
    }

    #[test]
    fn a_one_gib_log_is_summarized_from_its_end_only() {
        use std::io::Write;
        let mut f = tempfile::tempfile().unwrap();
        f.set_len(1 << 30).unwrap(); // sparse: a GiB of NULs without using the disk
        f.seek(SeekFrom::End(0)).unwrap();
        f.write_all(b"\n> the last response\n").unwrap();
        for i in 0..20_000 {
            writeln!(f, "\x1b[32mline {i}\x1b[0m of a long answer").unwrap();
        }
        let mut src = Counting { inner: f, read: 0 };
        let s = summarize(&mut src, DEFAULT_CAP).unwrap();
        assert!(s.starts_with("[agentctl: summary truncated"), "{}", &s[..60]);
        assert!(s.ends_with("line 19999 of a long answer"));
        assert!(s.len() <= DEFAULT_CAP + 100 && !s.contains('\x1b'));
        assert!(src.read <= MAX_WINDOW + 1, "read {} bytes of a 1 GiB log", src.read);

        // A short last response is found in the first window.
        let mut f = tempfile::tempfile().unwrap();
        f.set_len(1 << 30).unwrap();
        f.seek(SeekFrom::End(0)).unwrap();
        f.write_all(b"\n> short answer\n").unwrap();
        let mut src = Counting { inner: f, read: 0 };
        assert_eq!(summarize(&mut src, DEFAULT_CAP).unwrap(), "short answer");
        assert!(src.read <= FIRST_WINDOW + 1, "read {} bytes", src.read);
    }

    #[test]
    fn a_line_longer_than_the_widest_window_keeps_its_end() {
        for ending in ["", "\n"] {
            let mut log = b"> earlier answer\n".to_vec();
            log.extend(std::iter::repeat_n(b'x', MAX_WINDOW as usize + 1000));
            log.extend_from_slice(b" the end of a very long line");
            log.extend_from_slice(ending.as_bytes());
            let s = sum(&log);
            assert!(s.starts_with("[agentctl: summary truncated"), "{ending:?}: {}", &s[..s.len().min(80)]);
            assert!(s.ends_with("the end of a very long line"), "{ending:?}");
            assert!(s.len() <= DEFAULT_CAP + 100);
        }
    }

    #[test]
    fn last_line_skips_blank_lines() {
        let mut c = Cursor::new(b"one\n\x1b[1mtwo\x1b[0m\n\n".to_vec());
        assert_eq!(last_line(&mut c).unwrap().as_deref(), Some("two"));
        assert_eq!(last_line(&mut Cursor::new(Vec::new())).unwrap(), None);
    }
}
