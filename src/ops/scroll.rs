//! The live view's window on a task's log: a screenful of rows anchored by byte offset, so
//! that a view scrolled back stays on the rows it shows while output comes, reaches the first
//! line of any log, and costs work in proportion to what it shows or what is new, never to the
//! size of the log or the length of a line.
//!
//! A row is a line, or a piece of a line longer than `BLOCK`: a line is cut at each multiple
//! of `BLOCK` that lies at least `BLOCK` after its row's start (unless a newline is there).
//! That makes the rows the same whether they are found reading forwards or backwards, and
//! finding one reads at most two blocks.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result};
use crate::store::files::{self, Access};
use crate::summary::clean_line;

/// The longest a row runs before it is cut (twice this at most), and the size of a read.
pub const BLOCK: u64 = 64 * 1024;
/// The bytes of a row read for its text, and the characters of it kept: more than a terminal
/// is wide.
const TEXT_BYTES: u64 = 4096;
const TEXT_CHARS: usize = 512;
/// The blocks kept in memory: scanning back and forth reads each once.
const KEPT: usize = 4;
/// Shown where a row goes on a line cut before it.
const GOES_ON: char = '…';

/// How to move the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Move {
    Up,
    Down,
    PageUp,
    PageDown,
    /// To the log's first row.
    First,
    /// To the end, and follow it as it grows.
    Follow,
}

/// One row shown: where it begins and ends, and its text.
struct Row {
    start: u64,
    /// Where the next row begins; `None` while the row runs to the end of the log.
    end: Option<u64>,
    /// Up to where the row is known to hold no end (it is scanned on from there).
    scanned: u64,
    text: String,
    /// Up to where the text was read.
    read_to: u64,
}

impl Row {
    fn new(start: u64, end: Option<u64>) -> Row {
        Row { start, end, scanned: start, text: String::new(), read_to: start }
    }
}

/// A window of rows on the log at a path (which may not exist yet).
pub struct LogScroll {
    path: PathBuf,
    blocks: Option<Blocks>,
    /// The log's length when last looked at.
    len: u64,
    /// The rows shown, the first at the top.
    rows: VecDeque<Row>,
    /// Shows the end, as the log grows; otherwise stays on the rows shown.
    following: bool,
    height: usize,
}

impl LogScroll {
    /// A window that follows the end of the log at `path`; nothing is read yet.
    pub fn new(path: &Path) -> LogScroll {
        LogScroll { path: path.to_owned(), blocks: None, len: 0, rows: VecDeque::new(), following: true, height: 0 }
    }

    /// Look at the log again, for a window of `height` rows: following, the rows that came
    /// are read (only what is new); scrolled back, nothing shown changes.
    pub fn refresh(&mut self, height: usize) -> Result<()> {
        self.look(height.max(1)).ctx(|| format!("cannot read {}", self.path.display()))
    }

    /// Move the window (after a `refresh`).
    pub fn go(&mut self, how: Move) -> Result<()> {
        let page = self.height.saturating_sub(1).max(1);
        let moved = match how {
            Move::Up => self.up(1),
            Move::PageUp => self.up(page),
            Move::Down => self.down(1),
            Move::PageDown => self.down(page),
            Move::First => self.window_from(0),
            Move::Follow => {
                self.following = true;
                self.last_rows()
            }
        };
        moved.and_then(|()| self.texts()).ctx(|| format!("cannot read {}", self.path.display()))
    }

    /// The rows' text, the first at the top.
    pub fn lines(&self) -> Vec<String> {
        self.rows.iter().map(|r| r.text.clone()).collect()
    }

    /// Whether the window follows the end.
    pub fn following(&self) -> bool {
        self.following
    }

    /// How far into the log the first row shown begins, in percent.
    pub fn percent(&self) -> u64 {
        self.rows.front().map_or(0, |r| (r.start * 100).checked_div(self.len).unwrap_or(0))
    }

    /// The bytes read from the log so far.
    pub fn bytes_read(&self) -> u64 {
        self.blocks.as_ref().map_or(0, |b| b.read)
    }

    fn look(&mut self, height: usize) -> io::Result<()> {
        let Some(len) = self.length()? else {
            (self.len, self.rows) = (0, VecDeque::new());
            return Ok(());
        };
        let before = self.len;
        if len < before {
            // Cut short (copytruncate): what was shown is gone.
            (self.rows, self.following) = (VecDeque::new(), true);
            self.blocks().kept.clear();
        }
        self.len = len;
        let resized = std::mem::replace(&mut self.height, height) != height;
        if !self.following {
            match self.rows.front() {
                Some(first) if resized => self.window_from(first.start)?,
                _ => {}
            }
        } else if self.rows.is_empty() || resized || len - before > 2 * BLOCK * height as u64 {
            // Reading all that came would cost more than finding the last rows anew.
            self.last_rows()?;
        } else {
            self.extend()?;
        }
        self.texts()
    }

    /// The log's length; `None` while it does not exist.
    fn length(&mut self) -> io::Result<Option<u64>> {
        if self.blocks.is_none() {
            match files::open(&self.path, Access::Read) {
                Ok(file) => self.blocks = Some(Blocks { file, kept: VecDeque::new(), read: 0 }),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        Ok(Some(self.blocks.as_ref().expect("open").file.metadata()?.len()))
    }

    fn blocks(&mut self) -> &mut Blocks {
        self.blocks.as_mut().expect("the log is open once its length is known")
    }

    /// The last `height` rows.
    fn last_rows(&mut self) -> io::Result<()> {
        self.rows.clear();
        let mut end = self.len;
        while self.rows.len() < self.height && end > 0 {
            let start = self.row_before(end)?;
            // The last row is done once a newline ends it; its cut may be still to come.
            let done = end < self.len || self.blocks().bytes(end - 1, end)? == b"\n";
            let mut row = Row::new(start, done.then_some(end));
            row.scanned = end;
            self.rows.push_front(row);
            end = start;
        }
        Ok(())
    }

    /// The rows from `start` on, as many as fit; at the end of the log, the window follows.
    fn window_from(&mut self, start: u64) -> io::Result<()> {
        if start >= self.len {
            self.following = true;
            return self.last_rows();
        }
        self.rows = VecDeque::from([Row::new(start, None)]);
        self.following = false;
        self.extend()?;
        if self.rows.back().is_some_and(|r| r.end.is_none_or(|e| e >= self.len)) {
            self.following = true;
            self.last_rows()?;
        }
        Ok(())
    }

    /// Add the rows after the last one shown, reading only what was not read yet: following,
    /// the first rows go as new ones come; scrolled back, rows are added until the window is
    /// full.
    fn extend(&mut self) -> io::Result<()> {
        loop {
            let len = self.len;
            let Some(last) = self.rows.back() else { return Ok(()) };
            let end = match last.end {
                Some(end) => end,
                None => {
                    let (start, scanned) = (last.start, last.scanned);
                    let end = self.row_end(start, scanned)?;
                    let last = self.rows.back_mut().expect("a last row");
                    (last.end, last.scanned) = (end, len);
                    match end {
                        Some(end) => end,
                        None => return Ok(()),
                    }
                }
            };
            if end >= len || (!self.following && self.rows.len() >= self.height) {
                return Ok(());
            }
            self.rows.push_back(Row::new(end, None));
            if self.rows.len() > self.height {
                self.rows.pop_front();
            }
        }
    }

    fn up(&mut self, rows: usize) -> io::Result<()> {
        let Some(first) = self.rows.front().map(|r| r.start) else { return Ok(()) };
        let mut start = first;
        for _ in 0..rows {
            if start == 0 {
                break;
            }
            start = self.row_before(start)?;
        }
        if start != first { self.window_from(start) } else { Ok(()) }
    }

    fn down(&mut self, rows: usize) -> io::Result<()> {
        if self.following || self.rows.is_empty() {
            return Ok(());
        }
        let start = self.rows[rows.min(self.rows.len() - 1)].start;
        self.window_from(start)
    }

    /// Read the text of the rows that have none yet, or that grew while it was short.
    fn texts(&mut self) -> io::Result<()> {
        for i in 0..self.rows.len() {
            let (start, end) = (self.rows[i].start, self.rows[i].end.unwrap_or(self.len));
            let to = end.min(start + TEXT_BYTES);
            if self.rows[i].read_to == to {
                continue;
            }
            let goes_on = start > 0 && start % BLOCK == 0 && self.blocks().bytes(start - 1, start)? != b"\n";
            let raw = self.blocks().bytes(start, to)?;
            let raw = if to == end { raw.strip_suffix(b"\n").unwrap_or(&raw) } else { &raw };
            let mut text: String = clean_line(raw).chars().take(TEXT_CHARS).collect();
            if goes_on {
                text.insert(0, GOES_ON);
            }
            (self.rows[i].text, self.rows[i].read_to) = (text, to);
        }
        Ok(())
    }

    /// Where the row that begins at `start` ends (the next one begins), looking no further than
    /// the log's length, and from `scanned` on (no end lies before it); `None` if the row runs
    /// to the end of the log, which may end it yet.
    fn row_end(&mut self, start: u64, scanned: u64) -> io::Result<Option<u64>> {
        let len = self.len;
        let cut = (start + 2 * BLOCK - 1) / BLOCK * BLOCK;
        if let Some(newline) = self.blocks().find(scanned.max(start), (cut + 1).min(len), len)? {
            return Ok(Some(newline + 1));
        }
        Ok((cut < len).then_some(cut))
    }

    /// Where the row that ends at `end` (> 0) begins: after the last newline before its own
    /// last byte, or at the cut before that byte if the block before the cut holds no newline.
    fn row_before(&mut self, end: u64) -> io::Result<u64> {
        if end <= 1 {
            return Ok(0);
        }
        let cut = (end - 2) / BLOCK * BLOCK;
        let len = self.len;
        Ok(match self.blocks().find_back(cut.saturating_sub(BLOCK), end - 1, len)? {
            Some(newline) => newline + 1,
            None => cut,
        })
    }
}

/// The log read a block at a time, the last few blocks kept, and a count of what was read.
struct Blocks {
    file: File,
    /// Block number and bytes, the last used first. A block at the end of the log may be
    /// shorter: only what was added to it since is read.
    kept: VecDeque<(u64, Vec<u8>)>,
    read: u64,
}

impl Blocks {
    /// Block `n`, as far as `len` reaches into it.
    fn block(&mut self, n: u64, len: u64) -> io::Result<&[u8]> {
        let want = (len.saturating_sub(n * BLOCK)).min(BLOCK) as usize;
        let mut data = match self.kept.iter().position(|(m, _)| *m == n) {
            Some(i) => self.kept.remove(i).expect("found").1,
            None => Vec::with_capacity(BLOCK as usize),
        };
        while data.len() < want {
            let have = data.len();
            data.resize(want, 0);
            let got = self.file.read_at(&mut data[have..], n * BLOCK + have as u64)?;
            data.truncate(have + got);
            self.read += got as u64;
            if got == 0 {
                break;
            }
        }
        self.kept.push_front((n, data));
        self.kept.truncate(KEPT);
        Ok(&self.kept[0].1[..want.min(self.kept[0].1.len())])
    }

    /// The first newline in `from..to`.
    fn find(&mut self, mut from: u64, to: u64, len: u64) -> io::Result<Option<u64>> {
        while from < to {
            let n = from / BLOCK;
            let data = self.block(n, len)?;
            let (lo, hi) = ((from - n * BLOCK) as usize, ((to - n * BLOCK).min(BLOCK) as usize).min(data.len()));
            if lo >= hi {
                break;
            }
            if let Some(i) = memchr::memchr(b'\n', &data[lo..hi]) {
                return Ok(Some(n * BLOCK + (lo + i) as u64));
            }
            from = n * BLOCK + hi as u64;
        }
        Ok(None)
    }

    /// The last newline in `from..to`.
    fn find_back(&mut self, from: u64, mut to: u64, len: u64) -> io::Result<Option<u64>> {
        while to > from {
            let n = (to - 1) / BLOCK;
            let data = self.block(n, len)?;
            let (lo, hi) = ((from.max(n * BLOCK) - n * BLOCK) as usize, ((to - n * BLOCK) as usize).min(data.len()));
            let lo = lo.min(hi);
            if let Some(i) = memchr::memrchr(b'\n', &data[lo..hi]) {
                return Ok(Some(n * BLOCK + (lo + i) as u64));
            }
            to = n * BLOCK;
        }
        Ok(None)
    }

    /// The bytes `from..to` (a few kilobytes at most): from a kept block if they lie in one,
    /// else read as they are (not their whole block).
    fn bytes(&mut self, from: u64, to: u64) -> io::Result<Vec<u8>> {
        let n = from / BLOCK;
        let (lo, hi) = ((from - n * BLOCK) as usize, (to - n * BLOCK) as usize);
        if let Some((_, data)) = self.kept.iter().find(|(m, data)| *m == n && data.len() >= hi) {
            return Ok(data[lo..hi].to_vec());
        }
        let mut out = vec![0; (to - from) as usize];
        let mut have = 0;
        while have < out.len() {
            let got = self.file.read_at(&mut out[have..], from + have as u64)?;
            if got == 0 {
                break;
            }
            (have, self.read) = (have + got, self.read + got as u64);
        }
        out.truncate(have);
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
