//! Paging through a task's log: a window of lines, so a huge log never floods a reader (an
//! LLM's context above all).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::PathBuf;

use serde::Serialize;

use super::query::{status, tail_offset};
use crate::error::{IoContext, Result};
use crate::store::Store;
use crate::store::files::{self, Access};
use crate::summary::clean_line;
use crate::task::{Status, Token};

/// The most lines one page holds.
pub const MAX_PAGE_LINES: u64 = 1000;
/// The most bytes one page holds (the page ends early, at a line boundary).
const MAX_PAGE_BYTES: usize = 64 * 1024;
/// Lines longer than this are cut, with a note.
const MAX_LINE_CHARS: usize = 4000;
/// The most bytes of one line read (4000 characters of UTF-8 and escape sequences fit).
const MAX_LINE_BYTES: usize = 64 * 1024;

/// Which lines to read.
#[derive(Clone, Copy, Debug)]
pub enum Window {
    /// The last N lines.
    Tail(u64),
    /// Up to `limit` lines from line `offset` (0-based).
    Range { offset: u64, limit: u64 },
}

/// One window of a task's log.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct LogPage {
    #[schemars(with = "String")]
    pub token: Token,
    pub status: Status,
    /// Lines in the whole log.
    pub line_count: u64,
    /// The 0-based number of the first line returned.
    pub offset: u64,
    pub lines: Vec<String>,
    /// Where the next page starts; absent at the end of the log.
    pub next_offset: Option<u64>,
    /// True when the page stopped early to stay under its size limit.
    pub truncated: bool,
    pub log_path: PathBuf,
}

/// Where a page begins.
#[derive(Clone, Copy)]
enum Start {
    /// At this line number.
    Line(u64),
    /// This many lines before the end.
    FromEnd(u64),
}

/// Read one window of the log (escapes stripped unless `raw`). A page always moves on: its
/// `next_offset` is past every line it returned, or absent once the log's end was reached.
pub fn log_page(store: &Store, token: Token, window: Window, raw: bool) -> Result<LogPage> {
    let view = status(store, token)?;
    let what = || format!("cannot read {}", view.log_path.display());
    let mut page = LogPage {
        token,
        status: view.status,
        line_count: view.line_count,
        offset: 0,
        lines: Vec::new(),
        next_offset: None,
        truncated: false,
        log_path: view.log_path.clone(),
    };
    let mut file = match files::open(&view.log_path, Access::Read) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(page),
        Err(e) => return Err(e).ctx(what),
    };
    // Where the page begins: a line number from the start (a range), or a count of lines
    // before the end (a tail).
    let (first, limit) = match window {
        Window::Tail(n) => {
            let n = n.min(MAX_PAGE_LINES);
            let (at, found) = tail_offset(&mut file, n as usize).ctx(what)?;
            file.seek(SeekFrom::Start(at)).ctx(what)?;
            (Start::FromEnd(found as u64), n)
        }
        Window::Range { offset, limit } => {
            let skipped = skip_lines(&mut file, offset).ctx(what)?;
            (Start::Line(skipped), limit.clamp(1, MAX_PAGE_LINES))
        }
    };
    let mut reader = BufReader::new(file);
    let mut raw_line = Vec::new();
    let mut bytes = 0;
    let mut at_end = false;
    while (page.lines.len() as u64) < limit {
        let Some(cut) = read_line_bounded(&mut reader, &mut raw_line, MAX_LINE_BYTES).ctx(what)? else {
            at_end = true;
            break;
        };
        let mut line = if raw { String::from_utf8_lossy(&raw_line).into_owned() } else { clean_line(&raw_line) };
        if cut || line.chars().count() > MAX_LINE_CHARS {
            let kept: String = line.chars().take(MAX_LINE_CHARS).collect();
            line = format!("{kept} [agentctl: line cut at {MAX_LINE_CHARS} characters]");
        }
        bytes += line.len() + 1;
        if bytes > MAX_PAGE_BYTES && !page.lines.is_empty() {
            page.truncated = true;
            break;
        }
        page.lines.push(line);
    }
    if !at_end && !page.truncated {
        // The page is full: is there more?
        at_end = reader.fill_buf().ctx(what)?.is_empty();
    }
    let returned = page.lines.len() as u64;
    page.offset = match first {
        Start::Line(skipped) => skipped,
        // A tail's first line number follows from the total.
        Start::FromEnd(found) => page.line_count.saturating_sub(found),
    };
    if at_end && matches!(first, Start::Line(_)) {
        // Read to the end: the count is exact, whatever the published one said.
        page.line_count = page.offset + returned;
    }
    page.next_offset = (!at_end).then_some(page.offset + returned);
    Ok(page)
}

/// Read the next line of `reader` into `line` (without its `\n`), holding at most `max` bytes
/// of it; the rest of a longer line is skipped. `None` at the end; else whether it was cut.
fn read_line_bounded(reader: &mut impl BufRead, line: &mut Vec<u8>, max: usize) -> io::Result<Option<bool>> {
    line.clear();
    let mut cut = false;
    let mut any = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(any.then_some(cut));
        }
        any = true;
        let (take, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (i, true),
            None => (buf.len(), false),
        };
        let room = max.saturating_sub(line.len());
        line.extend_from_slice(&buf[..take.min(room)]);
        cut |= take > room;
        reader.consume(if done { take + 1 } else { take });
        if done {
            return Ok(Some(cut));
        }
    }
}

/// Move `file` past its first `n` lines (or to its end); returns how many it passed. A last
/// line without `\n` counts as one.
fn skip_lines(file: &mut File, n: u64) -> io::Result<u64> {
    file.seek(SeekFrom::Start(0))?;
    if n == 0 {
        return Ok(0);
    }
    let mut buf = vec![0u8; 256 * 1024];
    let (mut seen, mut pos, mut open_line) = (0u64, 0u64, false);
    loop {
        let got = file.read(&mut buf)?;
        if got == 0 {
            return Ok(seen + u64::from(open_line));
        }
        for i in memchr::memchr_iter(b'\n', &buf[..got]) {
            seen += 1;
            if seen == n {
                file.seek(SeekFrom::Start(pos + i as u64 + 1))?;
                return Ok(n);
            }
        }
        open_line = buf[got - 1] != b'\n';
        pos += got as u64;
    }
}
