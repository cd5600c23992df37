//! The supervisor's hold on the task's log: one descriptor on the very file the agent writes
//! (so a log renamed, deleted or replaced by something else under the same name changes
//! nothing), counted as it grows and published for readers, its agent's stream followed in
//! the same pass (`Follow`), and summarized from at the end.

use std::fs::File;
use std::io::{self, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::follow::Follow;
use crate::store::files::{self, Access};
use crate::store::logfile::{Checkpoint, Counted, LineCounter};
use crate::store::{Durability, write_atomic};

/// How often, at most, the count is published while the log grows. Readers count what came after
/// the checkpoint themselves, so a stale one costs them little and is never wrong.
const PUBLISH_EVERY: Duration = Duration::from_secs(1);

/// How long after a look at the log's size the next one is due: at first, and again after each
/// growth. A still log is looked at half as often each time, down to once every `LAST_LOOK`.
/// (No inotify: an instance per supervisor would run the user out of them at 128 tasks.)
const FIRST_LOOK: Duration = Duration::from_secs(1);
const LAST_LOOK: Duration = Duration::from_secs(30);
/// How often the log of an agent whose stream is followed is looked at: what it is doing and
/// spending is seen within half a second, and a budget is enforced as it is crossed.
const FOLLOW_LOOK: Duration = Duration::from_millis(250);

/// The most counted in one pass, so that halts and waiters are served between passes.
const PASS: u64 = 16 << 20;

/// A growing log and what has been counted of it.
pub(super) struct LogWatch {
    file: File,
    counter: LineCounter,
    /// More was written than the last pass counted.
    pub behind: bool,
    /// Where the count is published for `status`, `list` and `await`, and when it last was.
    checkpoint: PathBuf,
    published: Option<(Instant, Checkpoint)>,
    /// When a count held back by `PUBLISH_EVERY` is to be published.
    pub due: Option<Instant>,
    /// When the log's size is next looked at (`None` once the record is final), and how long
    /// after the last look that is.
    pub look_at: Option<Instant>,
    look_every: Duration,
    /// False once the record is final.
    publishing: bool,
    /// The agent's stream, read as it is counted, if its kind writes one agentctl reads.
    pub follow: Option<Follow>,
}

impl LogWatch {
    /// Open the log the launcher created (refusing a symlink or anything but a regular file).
    pub fn open(path: &Path, checkpoint: PathBuf, follow: Option<Follow>) -> io::Result<LogWatch> {
        let file = files::open(path, Access::Read)?;
        Ok(LogWatch {
            file,
            counter: LineCounter::new(),
            behind: true,
            checkpoint,
            published: None,
            due: None,
            look_at: Some(Instant::now() + if follow.is_some() { FOLLOW_LOOK } else { FIRST_LOOK }),
            look_every: FIRST_LOOK,
            publishing: true,
            follow,
        })
    }

    /// The agent's stdout and stderr: the same file, opened again for appending.
    pub fn open_for_agent(&self) -> io::Result<File> {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .append(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(Path::new("/proc/self/fd").join(self.file.as_raw_fd().to_string()))
    }

    /// The log's size now.
    pub fn size(&self) -> u64 {
        self.file.metadata().map_or(0, |m| m.len())
    }

    /// The last `window` bytes of the log written from offset `from` on.
    pub fn tail(&self, from: u64, window: u64) -> Vec<u8> {
        use std::os::unix::fs::FileExt;
        let end = self.size();
        // A log cut short in place (copytruncate) keeps what is left.
        let from = if from > end { 0 } else { from };
        let start = from.max(end.saturating_sub(window));
        let mut buf = vec![0; (end - start.min(end)) as usize];
        let n = self.file.read_at(&mut buf, start).unwrap_or(0);
        buf.truncate(n);
        buf
    }

    /// Save the count for other processes, at most every `PUBLISH_EVERY`; a count held back is
    /// published when its time comes (see `due`).
    pub fn publish(&mut self) {
        let now = Instant::now();
        let at = self.counter.checkpoint();
        self.due = None;
        if !self.publishing {
            return;
        }
        match self.published {
            Some((_, last)) if last == at => return,
            // Nothing counted yet: no file says it as well as an empty one.
            None if at == LineCounter::new().checkpoint() => return,
            Some((when, _)) if now < when + PUBLISH_EVERY => {
                self.due = Some(when + PUBLISH_EVERY);
                return;
            }
            _ => {}
        }
        if write_atomic(&self.checkpoint, at.to_line().as_bytes(), Durability::Atomic).is_ok() {
            self.published = Some((now, at));
        }
    }

    /// Look at the log's size (its time is `look_at`): count and publish if it changed, and
    /// look again sooner the busier the log is.
    pub fn look(&mut self) {
        let len = self.file.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
        self.look_every = if len != self.counter.counted() {
            self.count_some();
            FIRST_LOOK
        } else {
            (self.look_every * 2).min(LAST_LOOK)
        };
        if self.follow.is_some() {
            self.look_every = FOLLOW_LOOK;
        }
        self.look_at = Some(Instant::now() + self.look_every);
    }

    /// Count what was written since the last pass, a bounded slice at a time. What the stream
    /// said is published by `publish_seen`, once the supervisor has looked at it.
    pub fn count_some(&mut self) {
        self.behind = !self.catch_up(PASS);
        self.publish();
    }

    /// Publish what the agent's stream said, if it changed, while the record is not final.
    pub fn publish_seen(&mut self) {
        if let Some(f) = self.follow.as_mut().filter(|_| self.publishing) {
            f.publish();
        }
    }

    /// Count up to `budget` more bytes; true when caught up. A log cut short in place
    /// (logrotate's copytruncate) is counted again from its start, and published at once.
    fn catch_up(&mut self, budget: u64) -> bool {
        let len = self.file.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
        if len < self.counter.counted() && self.file.seek(SeekFrom::Start(0)).is_ok() {
            self.counter = LineCounter::new();
            self.published = None;
        }
        let follow = &mut self.follow;
        let done = self.counter.advance_with(&mut self.file, budget, |bytes| follow.as_mut().map(|f| f.feed(bytes)));
        matches!(done, Ok(true))
    }

    /// Count and follow all the agent wrote, its last line too.
    pub fn read_all(&mut self) {
        self.catch_up(u64::MAX);
        if let Some(f) = self.follow.as_mut() {
            f.finish();
        }
    }

    /// The final count, after which nothing more is published, and the file to summarize up to
    /// `end` (where the agent's output ends).
    pub fn finish(&mut self, end: u64) -> Counted<'_> {
        self.read_all();
        // The final count goes into the record.
        self.publishing = false;
        self.look_at = None;
        Counted { file: &self.file, lines: self.counter.total(), end }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn a_still_log_is_looked_at_less_often_and_a_growing_one_every_second() {
        let dir = tempfile::tempdir().unwrap();
        let (path, saved) = (dir.path().join("log"), dir.path().join("lines"));
        let mut log = File::options().create(true).append(true).open(&path).unwrap();
        let mut watch = LogWatch::open(&path, saved.clone(), None).unwrap();
        let mut every = Vec::new();
        for _ in 0..6 {
            watch.look();
            every.push(watch.look_every.as_secs());
        }
        assert_eq!(every, [2, 4, 8, 16, 30, 30]);
        log.write_all(b"one\ntwo\n").unwrap();
        watch.look();
        assert_eq!(watch.look_every, FIRST_LOOK);
        assert_eq!(std::fs::read_to_string(&saved).unwrap(), "8 2 1\n");
        // Cut short in place (copytruncate), then written again: counted from the start.
        log.set_len(0).unwrap();
        log.write_all(b"x").unwrap();
        watch.look();
        assert_eq!(watch.look_every, FIRST_LOOK);
        assert_eq!(std::fs::read_to_string(&saved).unwrap(), "1 0 0\n");
        assert_eq!(watch.finish(1).lines, 1);
        assert!(watch.look_at.is_none());
    }
}
