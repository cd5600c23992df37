//! Paging through a task's log: a window of lines, so a huge log never floods a reader (an
//! LLM's context above all).

use super::view::TaskView;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::PathBuf;

use serde::Serialize;

use super::query::{status, tail_offset};
use crate::error::{Error, IoContext, Result};
use crate::store::Store;
use crate::store::files::{self, Access};
use crate::summary::LineCleaner;
use crate::task::{Status, Token};

/// The most lines one page holds.
pub const MAX_PAGE_LINES: u64 = 1000;
/// The most bytes of text one page holds unless told otherwise (it ends early, inside a line
/// if need be).
pub const MAX_PAGE_BYTES: usize = 64 * 1024;
/// How much of a line is cleaned at a time: a line of gigabytes is read in bounded memory.
const PIECE: usize = 64 * 1024;

/// Which lines to read.
#[derive(Clone, Copy, Debug)]
pub enum Window {
    /// The last N lines.
    Tail(u64),
    /// Up to `limit` lines from line `offset` (0-based), its first line from character
    /// `column` on.
    Range { offset: u64, limit: u64, column: u64 },
}

/// What to read, and how much of it.
#[derive(Clone, Copy, Debug)]
pub struct PageRequest {
    /// Which lines.
    pub window: Window,
    /// Keep escape sequences as the agent wrote them.
    pub raw: bool,
    /// Read the task's summary (its final answer, whole on disk) instead of its log.
    pub summary: bool,
    /// The most bytes of text in the page.
    pub max_bytes: usize,
}

/// One window of a task's log (or summary).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct LogPage {
    #[schemars(with = "String")]
    pub token: Token,
    pub status: Status,
    /// Lines in the whole log (or summary).
    pub line_count: u64,
    /// The 0-based number of the first line returned.
    pub offset: u64,
    /// The character of the first line the page begins at (0 but where a long line goes on).
    pub column: u64,
    pub lines: Vec<String>,
    /// Where the next page starts; absent at the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
    /// The character of line `next_offset` the next page starts at: the page ended inside it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_column: Option<u64>,
    /// The file read.
    #[serde(skip)]
    pub path: PathBuf,
}

/// Where a page begins.
#[derive(Clone, Copy)]
enum Start {
    /// At this line number.
    Line(u64),
    /// This many lines before the end.
    FromEnd(u64),
}

/// Read one window of the log or summary (escapes stripped unless `raw`). A page always moves
/// on: its `next_offset` (and `next_column`) is past everything it returned, or absent once
/// the end was reached.
pub fn log_page(store: &Store, token: Token, req: PageRequest) -> Result<LogPage> {
    page_of(&status(store, token)?, req)
}

/// `log_page` of a task already looked at.
fn page_of(view: &TaskView, req: PageRequest) -> Result<LogPage> {
    let token = view.token;
    let path = if req.summary { view.summary_path.clone() } else { view.log_path.clone() };
    let what = || format!("cannot read {}", path.display());
    let mut page = LogPage {
        token,
        status: view.status,
        line_count: if req.summary { 0 } else { view.line_count },
        offset: 0,
        column: 0,
        lines: Vec::new(),
        next_offset: None,
        next_column: None,
        path: path.clone(),
    };
    if req.summary && !view.status.is_final() {
        return Err(Error::Usage(format!(
            "task {token} is still {}: it has no summary yet; call `logs` without summary for its output, or `await` it",
            view.status
        )));
    }
    let mut file = match files::open(&path, Access::Read) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(page),
        Err(e) => return Err(e).ctx(what),
    };
    if req.summary {
        page.line_count = crate::store::logfile::count_lines(&mut file).ctx(what)?;
    }
    // Where the page begins: a line number from the start (a range), or a count of lines
    // before the end (a tail).
    let (first, limit, mut skip) = match req.window {
        Window::Tail(n) => {
            let n = n.min(MAX_PAGE_LINES);
            let (at, found) = tail_offset(&mut file, n as usize).ctx(what)?;
            file.seek(SeekFrom::Start(at)).ctx(what)?;
            (Start::FromEnd(found as u64), n, 0)
        }
        Window::Range { offset, limit, column } => {
            let skipped = skip_lines(&mut file, offset).ctx(what)?;
            let column = if skipped == offset { column } else { 0 };
            (Start::Line(skipped), limit.clamp(1, MAX_PAGE_LINES), column)
        }
    };
    page.column = skip;
    let mut reader = BufReader::with_capacity(PIECE, file);
    let mut bytes = 0;
    let mut at_end = false;
    let mut cut = false;
    while (page.lines.len() as u64) < limit {
        if !page.lines.is_empty() && bytes >= req.max_bytes {
            break;
        }
        let room = req.max_bytes.saturating_sub(bytes).max(if page.lines.is_empty() { 4 } else { 0 });
        let Some(line) = read_line_window(&mut reader, skip, room, req.raw).ctx(what)? else {
            at_end = true;
            break;
        };
        skip = 0;
        if line.cut && line.text.is_empty() && !page.lines.is_empty() {
            // No room left for any of it: the next page begins with it.
            break;
        }
        bytes += line.text.len() + 1;
        cut = line.cut;
        page.lines.push(line.text);
        if cut {
            break;
        }
    }
    if !at_end && !cut {
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
    if cut {
        // The page ended inside its last line: the next one goes on from there.
        let last = page.lines.last().map_or(0, |l| l.chars().count() as u64);
        let begun = if returned == 1 { page.column } else { 0 };
        page.next_offset = Some(page.offset + returned - 1);
        page.next_column = Some(begun + last);
    } else {
        page.next_offset = (!at_end).then_some(page.offset + returned);
    }
    Ok(page)
}

/// Part of one line: its visible text, and whether the line goes on past it.
struct LineWindow {
    text: String,
    cut: bool,
}

/// The next line of `reader` (without its `\n`), from visible character `skip` on, at most
/// `room` bytes of it; `None` at the end. The line is cleaned a piece at a time, so a line of
/// any length costs bounded memory.
fn read_line_window(reader: &mut impl BufRead, skip: u64, room: usize, raw: bool) -> io::Result<Option<LineWindow>> {
    let mut cleaner = if raw { LineCleaner::raw() } else { LineCleaner::default() };
    let mut text = String::new();
    let mut seen = 0u64;
    let mut any = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() && !any {
            return Ok(None);
        }
        any = true;
        let newline = memchr::memchr(b'\n', buf);
        let take = newline.unwrap_or(buf.len()).min(PIECE);
        // The line's last piece: before a newline, or at the end of the file.
        let ends = newline == Some(take) || buf.is_empty();
        let visible = if ends { cleaner.last(&buf[..take]) } else { cleaner.piece(&buf[..take]) };
        reader.consume(take + usize::from(newline == Some(take)));
        for c in visible.chars() {
            if seen >= skip {
                if text.len() + c.len_utf8() > room {
                    return Ok(Some(LineWindow { text, cut: true }));
                }
                text.push(c);
            }
            seen += 1;
        }
        if ends {
            return Ok(Some(LineWindow { text, cut: false }));
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
