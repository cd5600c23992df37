//! Reading a task's log: its line count and its summary.

use std::fs::File;
use std::io::{self, ErrorKind, Read, Seek, SeekFrom};
use std::path::Path;

use super::files::{self, Access};
use crate::summary::{DEFAULT_CAP, Tail, read_answer};
use crate::task::ResultFrom;

/// Counts the lines of a log as it grows, reading each byte once (a last line without `\n`
/// counts).
pub struct LineCounter {
    lines: u64,
    last: Option<u8>,
    buf: Vec<u8>,
    /// Bytes counted, including those of a resumed checkpoint.
    counted: u64,
}

/// A count of the first `bytes` of a log, published by the supervisor as the log grows so that
/// a reader counts only what came after. One line of text: `BYTES NEWLINES ENDS_WITH_NEWLINE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pub bytes: u64,
    pub newlines: u64,
    pub ends_with_newline: bool,
}

impl Checkpoint {
    pub fn to_line(self) -> String {
        format!("{} {} {}\n", self.bytes, self.newlines, u8::from(self.ends_with_newline))
    }

    pub fn parse(text: &str) -> Option<Checkpoint> {
        let mut f = text.split_whitespace().map(|w| w.parse::<u64>().ok());
        let (Some(Some(bytes)), Some(Some(newlines)), Some(Some(nl @ (0 | 1))), None) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            return None;
        };
        (newlines <= bytes).then_some(Checkpoint { bytes, newlines, ends_with_newline: nl == 1 })
    }
}

impl Default for LineCounter {
    fn default() -> LineCounter {
        LineCounter::new()
    }
}

impl LineCounter {
    /// A count of nothing yet.
    pub fn new() -> LineCounter {
        LineCounter { lines: 0, last: None, buf: Vec::new(), counted: 0 }
    }

    /// Go on from `at` (what follows is read from wherever the source stands).
    pub fn resume(at: Checkpoint) -> LineCounter {
        let last = at.bytes.checked_sub(1).map(|_| if at.ends_with_newline { b'\n' } else { b' ' });
        LineCounter { lines: at.newlines, last, buf: Vec::new(), counted: at.bytes }
    }

    /// How many bytes have been counted.
    pub fn counted(&self) -> u64 {
        self.counted
    }

    /// Where the count stands, to be resumed later by another process.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint { bytes: self.counted, newlines: self.lines, ends_with_newline: self.last == Some(b'\n') }
    }

    /// Count up to `budget` more bytes read from `src`; true when it caught up with what has
    /// been written.
    pub fn advance(&mut self, src: &mut impl Read, budget: u64) -> io::Result<bool> {
        self.advance_with(src, budget, |_| None)
    }

    /// As `advance`, handing each piece read to `also` as well, which may count its newlines
    /// itself (it walks through them anyway): its count then stands for a second walk.
    pub fn advance_with(
        &mut self,
        src: &mut impl Read,
        budget: u64,
        mut also: impl FnMut(&[u8]) -> Option<u64>,
    ) -> io::Result<bool> {
        if self.buf.is_empty() {
            // Small at first: most logs counted while a task starts are empty or short, and
            // every fresh page costs a fault.
            self.buf = vec![0u8; 4 * 1024];
        }
        let mut read = 0u64;
        while read < budget {
            let n = match src.read(&mut self.buf) {
                Ok(0) => return Ok(true),
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if n == self.buf.len() && n < 64 * 1024 {
                self.buf.resize(64 * 1024, 0);
            }
            let piece = &self.buf[..n];
            self.lines += also(piece).unwrap_or_else(|| memchr::memchr_iter(b'\n', piece).count() as u64);
            self.last = Some(self.buf[n - 1]);
            read += n as u64;
            self.counted += n as u64;
        }
        Ok(false)
    }

    /// The lines counted so far.
    pub fn total(&self) -> u64 {
        self.lines + u64::from(self.last.is_some_and(|b| b != b'\n'))
    }
}

/// The number of lines in a log (a last line without `\n` counts).
pub fn count_lines<R: Read + Seek>(src: &mut R) -> io::Result<u64> {
    src.seek(SeekFrom::Start(0))?;
    let mut counter = LineCounter::new();
    counter.advance(src, u64::MAX)?;
    Ok(counter.total())
}

/// The line count of the log at `path` (0 if it does not exist), counting on from the
/// checkpoint saved at `checkpoint` when there is a usable one.
pub fn line_count(path: &Path, checkpoint: &Path) -> io::Result<u64> {
    let mut f = match files::open(path, Access::Read) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let saved = files::read(checkpoint, 64).ok().and_then(|t| Checkpoint::parse(&String::from_utf8_lossy(&t)));
    match saved {
        // A log cut short (copytruncate) is counted afresh.
        Some(at) if at.bytes <= f.metadata()?.len() => {
            f.seek(SeekFrom::Start(at.bytes))?;
            let mut counter = LineCounter::resume(at);
            counter.advance(&mut f, u64::MAX)?;
            Ok(counter.total())
        }
        _ => count_lines(&mut f),
    }
}

/// The summary of the log at `path`, and its line count unless `known` (empty if it does not
/// exist).
pub fn summary_and_lines(path: &Path, from: &ResultFrom, start: u64) -> io::Result<(String, u64)> {
    match files::open(path, Access::Read) {
        Ok(f) => summary_of(&f, None, from, start, None),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok((String::new(), 0)),
        Err(e) => Err(e),
    }
}

/// The answer an agent wrote to `path` (escapes stripped, capped as a summary is), or `None`
/// when it wrote nothing there.
pub fn answer_file(path: &Path) -> io::Result<Option<String>> {
    match files::open(path, Access::Read) {
        Ok(mut f) => {
            read_answer(&mut f, DEFAULT_CAP, |tail: &Tail<'_>| tail.output()).map(|s| (!s.is_empty()).then_some(s))
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// A log its supervisor kept open and counted as it grew, handed over at the task's end.
pub struct Counted<'a> {
    pub file: &'a File,
    /// All its lines.
    pub lines: u64,
    /// Where the agent's output ends: the log's size when the agent exited.
    pub end: u64,
}

/// The summary of the open log `f` from offset `start` on (where the agent's last run began)
/// up to `end` (where its agent exited: what the processes it left wrote after that is no
/// part of its answer), and the whole log's line count unless `known`.
pub fn summary_of(
    mut f: &File,
    known: Option<u64>,
    from: &ResultFrom,
    start: u64,
    end: Option<u64>,
) -> io::Result<(String, u64)> {
    let part = &mut Part { file: f, start, end: end.unwrap_or(u64::MAX), at: 0 };
    let summary = crate::agent::summarize(part, DEFAULT_CAP, from)?;
    let lines = match known {
        Some(n) => n,
        None => count_lines(&mut f)?,
    };
    Ok((summary, lines))
}

/// The part of a file from `start` to `end`, as a file of its own (a log's last run).
struct Part<'a> {
    file: &'a File,
    start: u64,
    end: u64,
    /// The position, from `start`.
    at: u64,
}

impl Part<'_> {
    /// Where the part begins (`start`, or 0 if the file is shorter now: truncated in place), and
    /// its length.
    fn bounds(&self) -> io::Result<(u64, u64)> {
        let len = self.file.metadata()?.len();
        let base = if self.start > len { 0 } else { self.start };
        Ok((base, len.min(self.end).saturating_sub(base)))
    }
}

impl Read for Part<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let (base, len) = self.bounds()?;
        let want = buf.len().min(len.saturating_sub(self.at).try_into().unwrap_or(usize::MAX));
        let n = self.file.read_at(&mut buf[..want], base + self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

impl Seek for Part<'_> {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let (_, len) = self.bounds()?;
        let to = match pos {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(d) => len.checked_add_signed(d),
            SeekFrom::Current(d) => self.at.checked_add_signed(d),
        };
        self.at = to.ok_or_else(|| io::Error::new(ErrorKind::InvalidInput, "seek before the start"))?;
        Ok(self.at)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    #[test]
    fn counts_a_growing_log_incrementally() {
        let mut src = Cursor::new(b"a\nb\nc".to_vec());
        let mut c = LineCounter::new();
        assert!(!c.advance(&mut src, 0).unwrap());
        assert!(c.advance(&mut src, u64::MAX).unwrap());
        assert_eq!(c.total(), 3);
    }

    #[test]
    fn counts_lines() {
        for (text, n) in [("", 0), ("a", 1), ("a\n", 1), ("a\nb", 2), ("\n\n", 2)] {
            assert_eq!(count_lines(&mut Cursor::new(text.as_bytes())).unwrap(), n, "{text:?}");
        }
    }

    #[test]
    fn a_count_resumed_from_any_checkpoint_equals_a_full_count() {
        let texts = ["", "a", "a\n", "a\nb", "\n\n", "ab\ncd\n\nef", "x\ny\nz\n"];
        for text in texts {
            let bytes = text.as_bytes();
            for cut in 0..=bytes.len() {
                let mut first = LineCounter::new();
                first.advance(&mut Cursor::new(bytes[..cut].to_vec()), u64::MAX).unwrap();
                let at = Checkpoint::parse(&first.checkpoint().to_line()).unwrap();
                assert_eq!(at.bytes, cut as u64);
                let mut rest = LineCounter::resume(at);
                rest.advance(&mut Cursor::new(bytes[cut..].to_vec()), u64::MAX).unwrap();
                let full = count_lines(&mut Cursor::new(bytes)).unwrap();
                assert_eq!(rest.total(), full, "{text:?} cut at {cut}");
            }
        }
    }

    #[test]
    fn line_count_trusts_a_checkpoint_and_counts_only_what_follows() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().canonicalize().unwrap();
        let log = dir.join("t.log");
        let saved = dir.join("lines");
        std::fs::write(&log, "1\n2\n3\n4\n5\n").unwrap();
        assert_eq!(line_count(&log, &saved).unwrap(), 5, "no checkpoint: a full count");
        std::fs::write(&saved, Checkpoint { bytes: 6, newlines: 3, ends_with_newline: true }.to_line()).unwrap();
        assert_eq!(line_count(&log, &saved).unwrap(), 5);
        // What comes before the checkpoint is not read again: a planted count shows through.
        std::fs::write(&saved, Checkpoint { bytes: 6, newlines: 6, ends_with_newline: true }.to_line()).unwrap();
        assert_eq!(line_count(&log, &saved).unwrap(), 8);
        // A checkpoint past the end (the log was replaced) or unreadable: a full count.
        std::fs::write(&saved, Checkpoint { bytes: 99, newlines: 3, ends_with_newline: true }.to_line()).unwrap();
        assert_eq!(line_count(&log, &saved).unwrap(), 5);
        for junk in ["", "6 3", "6 3 2", "6 7 1", "a b c", "6 3 1 9"] {
            std::fs::write(&saved, junk).unwrap();
            assert_eq!(line_count(&log, &saved).unwrap(), 5, "{junk:?}");
        }
    }

    #[test]
    fn a_summary_ends_where_the_agent_exited_and_starts_with_its_run() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("t.log");
        let (before, answer, after) = ("run 1 said this\n", "the answer\n", "Terminated by a leftover\n");
        std::fs::write(&log, [before, answer, after].concat()).unwrap();
        let f = File::open(&log).unwrap();
        let (start, end) = (before.len() as u64, (before.len() + answer.len()) as u64);
        let of = |end| summary_of(&f, None, &ResultFrom::Output, start, end).unwrap();
        assert_eq!(of(Some(end)), ("the answer".to_owned(), 3));
        assert_eq!(of(None).0, "the answer\nTerminated by a leftover");
        // An end past the file's: up to its end.
        assert_eq!(of(Some(1 << 20)).0, "the answer\nTerminated by a leftover");
        assert_eq!(
            summary_of(&f, Some(7), &ResultFrom::Output, 0, Some(start)).unwrap(),
            ("run 1 said this".to_owned(), 7)
        );
    }
}
