//! Paging through a task's log: a window of lines, so a huge log never floods a reader (an
//! LLM's context above all).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::PathBuf;

use serde::Serialize;

use super::query::{status, tail_offset};
use crate::error::{IoContext, Result};
use crate::store::Store;
use crate::summary::clean_line;
use crate::task::{Status, Token};

/// The most lines one page holds.
pub const MAX_PAGE_LINES: u64 = 1000;
/// The most bytes one page holds (the page ends early, at a line boundary).
const MAX_PAGE_BYTES: usize = 64 * 1024;
/// Lines longer than this are cut, with a note.
const MAX_LINE_CHARS: usize = 4000;

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

/// Read one window of the log (escapes stripped unless `raw`).
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
    let mut file = match File::open(&view.log_path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(page),
        Err(e) => return Err(e).ctx(what),
    };
    let (start_line, limit) = match window {
        Window::Tail(n) => {
            let n = n.min(MAX_PAGE_LINES);
            let at = tail_offset(&mut file, n as usize).ctx(what)?;
            file.seek(SeekFrom::Start(at)).ctx(what)?;
            (None, n)
        }
        Window::Range { offset, limit } => {
            skip_lines(&mut file, offset).ctx(what)?;
            (Some(offset), limit.min(MAX_PAGE_LINES))
        }
    };
    let mut reader = BufReader::new(file);
    let mut raw_line = Vec::new();
    let mut bytes = 0;
    while (page.lines.len() as u64) < limit {
        raw_line.clear();
        if reader.read_until(b'\n', &mut raw_line).ctx(what)? == 0 {
            break;
        }
        if raw_line.last() == Some(&b'\n') {
            raw_line.pop();
        }
        let mut line = if raw { String::from_utf8_lossy(&raw_line).into_owned() } else { clean_line(&raw_line) };
        if line.chars().count() > MAX_LINE_CHARS {
            let cut: String = line.chars().take(MAX_LINE_CHARS).collect();
            line = format!("{cut} [agentctl: line cut at {MAX_LINE_CHARS} characters]");
        }
        bytes += line.len() + 1;
        if bytes > MAX_PAGE_BYTES && !page.lines.is_empty() {
            page.truncated = true;
            break;
        }
        page.lines.push(line);
    }
    let returned = page.lines.len() as u64;
    // A tail's first line number follows from the total; a range's is the one asked for.
    page.offset = start_line.unwrap_or_else(|| page.line_count.saturating_sub(returned));
    let next = page.offset + returned;
    page.next_offset = (next < page.line_count).then_some(next);
    Ok(page)
}

/// Move `file` past its first `n` lines.
fn skip_lines(file: &mut File, n: u64) -> io::Result<()> {
    file.seek(SeekFrom::Start(0))?;
    if n == 0 {
        return Ok(());
    }
    let mut buf = vec![0u8; 256 * 1024];
    let (mut seen, mut pos) = (0u64, 0u64);
    loop {
        let got = file.read(&mut buf)?;
        if got == 0 {
            return Ok(());
        }
        for i in memchr::memchr_iter(b'\n', &buf[..got]) {
            seen += 1;
            if seen == n {
                file.seek(SeekFrom::Start(pos + i as u64 + 1))?;
                return Ok(());
            }
        }
        pos += got as u64;
    }
}
