//! Pure: the end of a log -> the task's summary (escapes stripped, CR progress collapsed).
//! Where the answer is depends on the template's `result` setting: after the last response
//! marker (kiro-cli's coloured `> `), the whole output, or a field of the JSON the agent printed
//! last (see `json`). Only the end of the log is read: a window that grows from 256 KiB until
//! it holds what is sought or more text than the cap, up to 16 MiB.

mod clean;
mod json;

use std::io::{self, Read, Seek, SeekFrom};

use crate::task::ResultFrom;

pub use clean::{LineCleaner, clean_line};

/// The default cap on a summary's size: more than any answer a model should read whole.
pub const DEFAULT_CAP: usize = 1024 * 1024;
const FIRST_WINDOW: u64 = 256 * 1024;
const MAX_WINDOW: u64 = 16 * 1024 * 1024;

/// A cleaned line, and whether it opens with a coloured response marker.
struct Line {
    text: String,
    marked: bool,
}

/// The result of looking at one window of the log's end.
#[derive(Debug, PartialEq)]
enum Attempt {
    Done(String),
    NeedMore,
}

/// Summarize `window`, the last bytes of a log, as `from` says. `whole` says the window starts
/// at the log's first byte; otherwise its first line is whole only if `line_start` says so.
fn attempt(window: &[u8], whole: bool, line_start: bool, cap: usize, last_try: bool, from: &ResultFrom) -> Attempt {
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
    let more = !whole && !last_try;
    if let ResultFrom::Json(field) = from {
        match json::last_field(body, field) {
            Some(answer) => {
                // What the agent put in its JSON may hold escapes and progress too.
                let lines: Vec<String> = answer.split('\n').map(|l| clean_line(l.as_bytes())).collect();
                return Attempt::Done(cap_keeping_end(lines.join("\n").trim(), cap, false));
            }
            // The object may begin before the window; without one, the output is the answer.
            None if more => return Attempt::NeedMore,
            None => {}
        }
    }
    let lines: Vec<Line> = body
        .split(|&b| b == b'\n')
        .map(|raw| {
            let (text, marked) = LineCleaner::default().marked_piece(raw);
            Line { text, marked }
        })
        .collect();
    let len: usize = lines.iter().map(|l| l.text.len() + 1).sum();
    // Short of the cap, a marker (or the log's start) may still lie before the window.
    let short = more && len <= cap;
    let start = match from {
        ResultFrom::LastResponse => match lines.iter().rposition(|l| l.marked) {
            Some(i) => Some(i),
            None if short => return Attempt::NeedMore,
            None => plain_marker(&lines),
        },
        _ if short => return Attempt::NeedMore,
        _ => None,
    };
    let mut texts: Vec<&str> = match start {
        Some(i) => std::iter::once(&lines[i].text[2..]).chain(lines[i + 1..].iter().map(|l| l.text.as_str())).collect(),
        None => lines.iter().map(|l| l.text.as_str()).collect(),
    };
    if *from == ResultFrom::LastResponse {
        while texts.last().is_some_and(|t| t.trim().is_empty() || is_kiro_status(t)) {
            texts.pop();
        }
    }
    // Without a marker and without the log's start, the text is known to exceed the cap.
    let cut_short = start.is_none() && !whole;
    Attempt::Done(cap_keeping_end(texts.join("\n").trim(), cap, cut_short))
}

/// Without a coloured marker (NO_COLOR, or an agent that prints a plain prompt): the last line
/// that starts with `> ` outside a fenced code block. An answer ends with its fences closed,
/// so a line with an odd number of fence lines after it is inside one.
fn plain_marker(lines: &[Line]) -> Option<usize> {
    let mut fences = 0;
    for (i, l) in lines.iter().enumerate().rev() {
        let t = l.text.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fences += 1;
        } else if fences % 2 == 0 && l.text.starts_with("> ") {
            return Some(i);
        }
    }
    None
}

/// kiro-cli's closing status line, like `▸ Credits: 0.12 • Time: 8s`.
fn is_kiro_status(line: &str) -> bool {
    let t = line.trim();
    t.starts_with('▸') && (t.contains("Credits:") || t.contains("Time:"))
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

/// Summarize a log read from `src` as `from` says, reading only its end, and each byte of it
/// once.
pub fn summarize<R: Read + Seek>(src: &mut R, cap: usize, from: &ResultFrom) -> io::Result<String> {
    let len = src.seek(SeekFrom::End(0))?;
    let mut window = FIRST_WINDOW;
    // `buf` holds the log from `from` to its end; a wider window reads only what it adds.
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
        if let Attempt::Done(s) = attempt(bytes, start == 0, line_start, cap, last_try, from) {
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

    const KIRO: ResultFrom = ResultFrom::LastResponse;
    /// kiro-cli's response marker, as its terminal library writes it.
    const MARK: &str = "\x1b[38;5;10m> \x1b[0m";

    fn sum(log: &[u8]) -> String {
        summarize(&mut Cursor::new(log.to_vec()), DEFAULT_CAP, &KIRO).unwrap()
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
    fn a_kiro_answer_with_quotes_and_code_is_kept_whole_without_its_status_line() {
        let kiro = |answer: &str| {
            format!(
                "{MARK}Let me look.\n\x1b[38;5;244mRunning tool fs_read\x1b[0m\n> tool output\n\n{MARK}{answer}\n\n \x1b[38;5;8m▸ Credits: 0.31 • Time: 9s\x1b[0m\n\n"
            )
        };
        // Markdown rendering off: the answer as the model wrote it.
        let source = "Review: approve.\n\n> a quoted line\n> another\n\n```sh\ncat <<EOF |\n> line one\nEOF\n```\n\nVerdict: approve.";
        assert_eq!(sum(kiro(source).as_bytes()), source);
        // Rendered as kiro-cli does: quotes drawn with a bar, code in colour without fences.
        let rendered = "Review: approve.\n\n\x1b[38;5;8m│ a quoted line\n\x1b[38;5;8m│ another\x1b[0m\n\n\x1b[1msh\x1b[0m\n\x1b[38;5;10mcat <<EOF |\n> line one\nEOF\n\x1b[0m\n\nVerdict: approve.";
        let shown =
            "Review: approve.\n\n│ a quoted line\n│ another\n\nsh\ncat <<EOF |\n> line one\nEOF\n\n\nVerdict: approve.";
        assert_eq!(sum(kiro(rendered).as_bytes()), shown);
        // Without colour (NO_COLOR): the last `> ` outside a fenced block.
        let plain = "> Let me look.\n> Verdict first.\n```\n> inside\n```\nend\n";
        assert_eq!(sum(plain.as_bytes()), "Verdict first.\n```\n> inside\n```\nend");
    }

    #[test]
    fn each_result_setting_finds_its_answer() {
        let log =
            b"progress 1\n\x1b[31mwarning\x1b[0m on stderr\n{\"type\":\"result\",\"result\":\"the answer\\n> kept\\r\\n\\u001b[1mclean\\u001b[0m\"}\n";
        let of = |from: ResultFrom| summarize(&mut Cursor::new(log.to_vec()), DEFAULT_CAP, &from).unwrap();
        assert_eq!(of(ResultFrom::Json("result".into())), "the answer\n> kept\nclean");
        assert!(of(ResultFrom::Output).starts_with("progress 1\nwarning on stderr\n{"));
        // No such field: the output stands in.
        assert_eq!(of(ResultFrom::Json("response".into())), of(ResultFrom::Output));
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
        let s = summarize(&mut Cursor::new(log), 1000, &KIRO).unwrap();
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
        let s = summarize(&mut Cursor::new(log), usize::MAX / 2, &KIRO).unwrap();
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
        f.write_all(format!("\n{MARK}the last response\n").as_bytes()).unwrap();
        for i in 0..20_000 {
            writeln!(f, "\x1b[32mline {i}\x1b[0m of a long answer").unwrap();
        }
        let mut src = Counting { inner: f, read: 0 };
        let cap = 64 * 1024;
        let s = summarize(&mut src, cap, &KIRO).unwrap();
        assert!(s.starts_with("[agentctl: summary truncated"), "{}", &s[..60]);
        assert!(s.ends_with("line 19999 of a long answer"));
        assert!(s.len() <= cap + 100 && !s.contains('\x1b'));
        assert!(src.read <= MAX_WINDOW + 1, "read {} bytes of a 1 GiB log", src.read);

        // A short last response is found in the first window.
        let short = |marker: &str| {
            let mut f = tempfile::tempfile().unwrap();
            f.set_len(1 << 30).unwrap();
            f.seek(SeekFrom::End(0)).unwrap();
            f.write_all(format!("\n{marker}short answer\n").as_bytes()).unwrap();
            let mut src = Counting { inner: f, read: 0 };
            let s = summarize(&mut src, DEFAULT_CAP, &KIRO).unwrap();
            (s, src.read)
        };
        let (s, read) = short(MARK);
        assert_eq!(s, "short answer");
        assert!(read <= FIRST_WINDOW + 1, "read {read} bytes");
        // A plain marker might be a quote inside a longer answer: the search goes on, bounded.
        let (s, read) = short("> ");
        assert_eq!(s, "short answer");
        assert!(read <= MAX_WINDOW + 1, "read {read} bytes");
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
