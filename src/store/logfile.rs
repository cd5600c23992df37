//! Reading a task's log: its line count and its summary.

use std::fs::File;
use std::io::{self, ErrorKind, Read, Seek, SeekFrom};
use std::path::Path;

use crate::summary::{DEFAULT_CAP, summarize};

/// The number of lines in a log (a last line without `\n` counts).
pub fn count_lines<R: Read + Seek>(src: &mut R) -> io::Result<u64> {
    src.seek(SeekFrom::Start(0))?;
    let mut buf = vec![0u8; 1 << 20];
    let (mut lines, mut last) = (0u64, b'\n');
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        lines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
        last = buf[n - 1];
    }
    Ok(lines + u64::from(last != b'\n'))
}

/// The line count of the log at `path` (0 if it does not exist).
pub fn line_count(path: &Path) -> io::Result<u64> {
    match File::open(path) {
        Ok(mut f) => count_lines(&mut f),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}

/// The summary and line count of the log at `path` (empty if it does not exist).
pub fn summary_and_lines(path: &Path) -> io::Result<(String, u64)> {
    match File::open(path) {
        Ok(mut f) => Ok((summarize(&mut f, DEFAULT_CAP)?, count_lines(&mut f)?)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok((String::new(), 0)),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    #[test]
    fn counts_lines() {
        for (text, n) in [("", 0), ("a", 1), ("a\n", 1), ("a\nb", 2), ("\n\n", 2)] {
            assert_eq!(count_lines(&mut Cursor::new(text.as_bytes())).unwrap(), n, "{text:?}");
        }
    }
}
