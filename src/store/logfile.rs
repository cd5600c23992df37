//! Reading a task's log: its line count and its summary.

use std::fs::File;
use std::io::{self, ErrorKind, Read, Seek, SeekFrom};
use std::path::Path;

use crate::summary::{DEFAULT_CAP, summarize};

/// Counts the lines of a log as it grows, reading each byte once (a last line without `\n`
/// counts).
pub struct LineCounter<R> {
    src: R,
    lines: u64,
    last: Option<u8>,
    buf: Vec<u8>,
}

impl<R: Read> LineCounter<R> {
    /// Count from `src`'s current position.
    pub fn new(src: R) -> LineCounter<R> {
        LineCounter { src, lines: 0, last: None, buf: Vec::new() }
    }

    /// Count up to `budget` more bytes; true when it caught up with what has been written.
    pub fn advance(&mut self, budget: u64) -> io::Result<bool> {
        if self.buf.is_empty() {
            // Small at first: most logs counted while a task starts are empty or short, and
            // every fresh page costs a fault.
            self.buf = vec![0u8; 4 * 1024];
        }
        let mut read = 0u64;
        while read < budget {
            let n = match self.src.read(&mut self.buf) {
                Ok(0) => return Ok(true),
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if n == self.buf.len() && n < 64 * 1024 {
                self.buf.resize(64 * 1024, 0);
            }
            self.lines += memchr::memchr_iter(b'\n', &self.buf[..n]).count() as u64;
            self.last = Some(self.buf[n - 1]);
            read += n as u64;
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
    let mut counter = LineCounter::new(src);
    counter.advance(u64::MAX)?;
    Ok(counter.total())
}

/// The line count of the log at `path` (0 if it does not exist).
pub fn line_count(path: &Path) -> io::Result<u64> {
    match File::open(path) {
        Ok(mut f) => count_lines(&mut f),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}

/// The summary of the log at `path`, and its line count unless `known` (empty if it does not
/// exist).
pub fn summary_and_lines(path: &Path, known: Option<u64>) -> io::Result<(String, u64)> {
    match File::open(path) {
        Ok(mut f) => {
            let summary = summarize(&mut f, DEFAULT_CAP)?;
            let lines = match known {
                Some(n) => n,
                None => count_lines(&mut f)?,
            };
            Ok((summary, lines))
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok((String::new(), 0)),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    #[test]
    fn counts_a_growing_log_incrementally() {
        let mut c = LineCounter::new(Cursor::new(b"a\nb\nc".to_vec()));
        assert!(!c.advance(0).unwrap());
        assert!(c.advance(u64::MAX).unwrap());
        assert_eq!(c.total(), 3);
    }

    #[test]
    fn counts_lines() {
        for (text, n) in [("", 0), ("a", 1), ("a\n", 1), ("a\nb", 2), ("\n\n", 2)] {
            assert_eq!(count_lines(&mut Cursor::new(text.as_bytes())).unwrap(), n, "{text:?}");
        }
    }
}
