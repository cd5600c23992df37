//! Reading tasks: status, list, and the log (whole, tail, or followed to the end).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::time::Duration;

use super::lost::refresh;
use super::view::TaskView;
use super::wait::await_end;
use super::watch::Changes;
use crate::error::{Error, IoContext, Result};
use crate::store::files::{self, Access};
use crate::store::{Page, Store};
use crate::summary::{LineCleaner, clean_line};
use crate::supervisor::reach;
use crate::task::{Role, Status, TaskRecord, Token};

/// The current state of one task, with what its processes use while it runs.
pub fn status(store: &Store, token: Token) -> Result<TaskView> {
    let mut rec = refresh(store, token)?;
    // Read once, for its sandbox and its Slurm job.
    let spec = store.read_spec(token).ok();
    let of_task = || spec.as_ref().and_then(crate::supervisor::backend::slurm::of_spec);
    let slurm = match rec.slurm_job {
        Some(id) => {
            let known = of_task().and_then(|(slurm, _)| slurm.describe(id));
            Some(known.unwrap_or(crate::task::SlurmJob { job_id: id, ..Default::default() }))
        }
        // Its supervisor has not found its job yet (it looks once the agent writes output, and
        // less often as a wait grows): looked for by its name, the newest of it, if Slurm may
        // still run it (not a rate-limited run's earlier job).
        None if rec.ended.is_none() && rec.slurm_pending.is_some() => of_task()
            .and_then(|(slurm, name)| slurm.find(&name, Duration::ZERO, || false, &[]).ok().flatten())
            .filter(|job| job.is_active()),
        None => None,
    };
    // Slurm's word now over its supervisor's last look at a pending job (made less often as
    // the wait grows).
    if let Some(job) = slurm.as_ref().filter(|j| rec.ended.is_none() && !j.state.is_empty()) {
        rec.slurm_pending = job.pending_reason();
        // A job found by its name is named in the summary too ("Slurm holds job 6 pending").
        rec.slurm_job = Some(job.job_id);
    }
    let mut v = TaskView::of(store, &rec, true)?;
    v.containment = rec.containment.clone();
    v.sandbox = spec.and_then(|s| s.sandbox);
    v.slurm = slurm;
    if rec.status() == Status::Running
        && let Some(u) = reach::usage(rec.containment.as_ref(), store.supervisor_id(token))
    {
        (v.processes, v.memory_bytes) = (Some(u.processes), Some(u.memory_bytes));
    }
    Ok(v)
}

/// Which tasks `list` shows, and which page of them.
#[derive(Clone, Debug, Default)]
pub struct ListFilter {
    pub status: Option<Status>,
    pub role: Option<Role>,
    /// Skip this many of the newest.
    pub offset: usize,
    /// At most this many (`None`: all).
    pub limit: Option<usize>,
    /// Only tasks older than this cursor (`Listing::cursor` of the previous page's last task).
    pub before: Option<String>,
}

/// Record `lost` for every task whose supervisor died unnoticed, so that the stored statuses
/// are true, once the tasks just handed back are in the database. Costs one lock probe per task
/// not yet final (running ones), whatever the history.
pub(super) fn refresh_open(store: &Store) -> Result<()> {
    store.settle_all_starting()?;
    for token in store.open_tokens()? {
        match refresh(store, token) {
            Ok(_) | Err(Error::UnknownToken { .. }) => {}
            Err(e) => eprintln!("agentctl: warning: skipping task {token}: {e}"),
        }
    }
    Ok(())
}

/// One page of `list`: newest first.
#[derive(Clone, Debug)]
pub struct Listing {
    pub tasks: Vec<TaskView>,
    /// Whether older tasks match beyond this page.
    pub more: bool,
    /// Where each task stands in the order (creation time, token), for cursors.
    keys: Vec<(u64, Token)>,
}

impl Listing {
    /// The cursor that continues after the `i`th task: it stays valid when that task is
    /// pruned meanwhile.
    pub fn cursor(&self, i: usize) -> Option<String> {
        self.keys.get(i).map(|(at, t)| format!("{at}-{t}"))
    }
}

/// The position a cursor names; a clear error for anything `Listing::cursor` did not make.
fn parse_cursor(cursor: &str) -> Result<(u64, Token)> {
    let bad = || {
        Error::Usage(format!(
            "cursor `{}` is not one `list` gave; leave it out for the first page",
            crate::task::input_preview(cursor)
        ))
    };
    let (at, t) = cursor.split_once('-').ok_or_else(bad)?;
    Ok((at.parse().map_err(|_| bad())?, Token::parse(t).map_err(|_| bad())?))
}

/// The tasks of the home matching `filter`, newest first, one page.
pub fn list(store: &Store, filter: &ListFilter) -> Result<Listing> {
    refresh_open(store)?;
    let before = filter.before.as_deref().map(parse_cursor).transpose()?;
    let page = Page {
        status: filter.status,
        role: filter.role.clone(),
        before,
        offset: filter.offset,
        // One more than asked tells whether there are more.
        limit: filter.limit.map(|l| l + 1),
    };
    let mut recs = store.page(&page)?;
    let more = filter.limit.is_some_and(|l| recs.len() > l);
    recs.truncate(filter.limit.unwrap_or(usize::MAX));
    let tasks = recs.iter().map(|r| TaskView::of(store, r, false)).collect::<Result<_>>()?;
    let keys = recs.iter().map(|r| (r.created_at_ms, r.token)).collect();
    Ok(Listing { tasks, more, keys })
}

/// The newest `limit` tasks' records, without looking whether their supervisors still live
/// (which may record one `lost`), nor at their logs: for a shell completing a token, which must
/// change nothing and answer at once.
pub fn peek(store: &Store, limit: usize) -> Result<Vec<TaskRecord>> {
    store.page(&Page { status: None, role: None, before: None, offset: 0, limit: Some(limit) })
}

/// What a live view shows: every open task and the newest `most` tasks, each view built once,
/// with its pool and place in line (`placed`), after one look at whose supervisor died.
pub fn live(store: &Store, most: usize) -> Result<Vec<TaskView>> {
    refresh_open(store)?;
    let mut recs = store.page(&Page { status: None, role: None, before: None, offset: 0, limit: Some(most) })?;
    let shown: std::collections::HashSet<Token> = recs.iter().map(|r| r.token).collect();
    for token in store.open_tokens()?.into_iter().filter(|t| !shown.contains(t)) {
        match store.read_record(token) {
            Ok(rec) => recs.push(rec),
            Err(Error::UnknownToken { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let mut views = recs.iter().map(|r| TaskView::of(store, r, false)).collect::<Result<Vec<_>>>()?;
    placed(store, &mut views)?;
    Ok(views)
}

/// Fill in the pool and queue place of each open task of `views`, in one look at the store.
fn placed(store: &Store, views: &mut [TaskView]) -> Result<()> {
    let places = store.open_places()?;
    for v in views.iter_mut().filter(|v| !v.status.is_final()) {
        if let Some((_, pool, place)) = places.iter().find(|(t, _, _)| *t == v.token) {
            (v.pool, v.queue_place) = (Some(pool.clone()), *place);
        }
    }
    Ok(())
}

/// Write the task's log to `out`: the last `tail` lines or all, escapes stripped unless `raw`.
pub fn read_log(store: &Store, token: Token, tail: Option<usize>, raw: bool, out: &mut dyn Write) -> Result<TaskView> {
    let view = status(store, token)?;
    if let Some(mut log) = LogReader::open(&view, tail, raw)? {
        log.copy_new(out)?;
        log.finish(out)?;
    }
    Ok(view)
}

/// Stream the log to `out` from the last `tail` lines (or the start) until the task ends.
pub async fn follow(
    store: &Store,
    token: Token,
    tail: Option<usize>,
    raw: bool,
    out: &mut dyn Write,
) -> Result<TaskView> {
    let view = status(store, token)?;
    let Some(mut log) = LogReader::open(&view, tail, raw)? else { return Ok(view) };
    let end = await_end(store, token, None);
    tokio::pin!(end);
    // Woken by each write to the log (see `Changes`), or every 100 ms where it cannot be
    // watched (it was renamed or removed: the file read goes on).
    let mut changes = Changes::watch(&view.log_path).ok();
    loop {
        log.copy_new(out)?;
        let grew = async {
            match changes.as_mut() {
                Some(c) => c.next().await,
                None => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        tokio::select! {
            v = &mut end => {
                log.copy_new(out)?;
                log.finish(out)?;
                return v;
            }
            () = grew => {}
        }
    }
}

/// A task's log, read from a starting point onwards and printed as it grows.
struct LogReader {
    file: File,
    path: std::path::PathBuf,
    printer: Printer,
    buf: Vec<u8>,
}

impl LogReader {
    /// Open the log at its last `tail` lines (or its start); `None` if it has been purged.
    fn open(view: &TaskView, tail: Option<usize>, raw: bool) -> Result<Option<LogReader>> {
        let path = view.log_path.clone();
        let mut file = match files::open(&path, Access::Read) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).ctx(|| format!("cannot read {}", path.display())),
        };
        let start = match tail {
            Some(n) => tail_offset(&mut file, n).map(|(at, _)| at),
            None => Ok(0),
        };
        start.and_then(|at| file.seek(SeekFrom::Start(at))).ctx(|| format!("cannot read {}", path.display()))?;
        let printer = Printer { raw, pending: Vec::new(), long: None };
        Ok(Some(LogReader { file, path, printer, buf: vec![0u8; 256 * 1024] }))
    }

    /// Print whatever was written since the last call.
    fn copy_new(&mut self, out: &mut dyn Write) -> Result<()> {
        loop {
            let n = self.file.read(&mut self.buf).ctx(|| format!("cannot read {}", self.path.display()))?;
            if n == 0 {
                return out.flush().ctx(|| "cannot write the log out".into());
            }
            self.printer.feed(&self.buf[..n], out).ctx(|| "cannot write the log out".into())?;
        }
    }

    /// Print a last line that has no newline.
    fn finish(&mut self, out: &mut dyn Write) -> Result<()> {
        self.printer.flush(out).ctx(|| "cannot write the log out".into())
    }
}

/// The offset where the last `n` lines of `file` begin (reading backwards from the end), and
/// how many lines there are from there (fewer than `n` in a shorter file).
pub(super) fn tail_offset(file: &mut File, n: usize) -> io::Result<(u64, usize)> {
    let len = file.seek(SeekFrom::End(0))?;
    if n == 0 {
        return Ok((len, 0));
    }
    let mut pos = len;
    let mut seen = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    // A final newline ends the last line; it does not start a new one.
    let mut skip_last = true;
    while pos > 0 {
        let step = (pos as usize).min(buf.len());
        pos -= step as u64;
        file.seek(SeekFrom::Start(pos))?;
        file.read_exact(&mut buf[..step])?;
        for i in (0..step).rev() {
            if buf[i] == b'\n' {
                if skip_last && pos + i as u64 == len - 1 {
                    skip_last = false;
                    continue;
                }
                seen += 1;
                if seen == n {
                    return Ok((pos + i as u64 + 1, n));
                }
            }
        }
        skip_last = false;
    }
    // The whole file: the newlines seen end lines, and one more line runs to the end.
    Ok((0, if len == 0 { 0 } else { seen + 1 }))
}

/// How much of one line is held before it is printed in pieces.
pub const LINE_PIECE: usize = 1 << 20;

/// Writes log bytes out, raw, or as cleaned whole lines; a line longer than `LINE_PIECE` is
/// printed a piece at a time, so memory stays bounded whatever the line length.
struct Printer {
    raw: bool,
    pending: Vec<u8>,
    /// Cleans the line being printed in pieces, if one is.
    long: Option<LineCleaner>,
}

impl Printer {
    fn feed(&mut self, bytes: &[u8], out: &mut dyn Write) -> io::Result<()> {
        if self.raw {
            return out.write_all(bytes);
        }
        self.pending.extend_from_slice(bytes);
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', &self.pending) {
            let line = &self.pending[start..end];
            let text = match self.long.take() {
                Some(mut piece) => piece.last(line),
                None => clean_line(line),
            };
            writeln!(out, "{text}")?;
            start = end + 1;
        }
        self.pending.drain(..start);
        if self.pending.len() > LINE_PIECE {
            let text = self.long.get_or_insert_with(LineCleaner::default).piece(&self.pending);
            out.write_all(text.as_bytes())?;
            self.pending.clear();
        }
        Ok(())
    }

    fn flush(&mut self, out: &mut dyn Write) -> io::Result<()> {
        if !self.pending.is_empty() || self.long.is_some() {
            let text = match self.long.take() {
                Some(mut piece) => piece.last(&self.pending),
                None => clean_line(&self.pending),
            };
            writeln!(out, "{text}")?;
            self.pending.clear();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        for (text, n, want) in [
            ("a\nb\nc\n", 1, "c\n"),
            ("a\nb\nc\n", 2, "b\nc\n"),
            ("a\nb\nc", 1, "c"),
            ("a\nb\nc", 5, "a\nb\nc"),
            ("", 3, ""),
            ("a\nb\nc\n", 0, ""),
        ] {
            std::fs::write(&p, text).unwrap();
            let mut f = File::open(&p).unwrap();
            let (off, found) = tail_offset(&mut f, n).unwrap();
            assert_eq!(&text[off as usize..], want, "{text:?} {n}");
            assert_eq!(found, want.lines().count(), "{text:?} {n}");
        }
    }

    #[test]
    fn printer_cleans_whole_lines() {
        let mut out = Vec::new();
        let mut p = Printer { raw: false, pending: Vec::new(), long: None };
        p.feed(b"\x1b[1mone\x1b[0m\ntw", &mut out).unwrap();
        p.feed(b"o\r\nthr", &mut out).unwrap();
        p.flush(&mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "one\ntwo\nthr\n");
    }

    #[test]
    fn printer_holds_at_most_a_piece_of_an_endless_line() {
        let mut out = Vec::new();
        let mut p = Printer { raw: false, pending: Vec::new(), long: None };
        let chunk = b"\x1b[1mab\x1b[0m".repeat(16 * 1024);
        for _ in 0..100 {
            p.feed(&chunk, &mut out).unwrap();
            assert!(p.pending.len() <= LINE_PIECE + chunk.len());
        }
        p.feed(b"end\nnext\n", &mut out).unwrap();
        p.flush(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.len(), 100 * 16 * 1024 * 2 + "end\nnext\n".len());
        assert!(text.ends_with("ababend\nnext\n") && !text.contains('\x1b'));
    }
}
