//! The supervisor's hold on the task's log: one descriptor on the very file the agent writes
//! (so a log renamed, deleted or replaced by something else under the same name changes
//! nothing), counted as it grows and published for readers, and summarized from at the end.

use std::fs::File;
use std::io::{self, Seek, SeekFrom};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};

use crate::store::files::{self, Access};
use crate::store::logfile::{Checkpoint, LineCounter};
use crate::store::{Durability, write_atomic};

/// How often, at most, the count is published while the log grows. Readers count what came after
/// the checkpoint themselves, so a stale one costs them little and is never wrong.
const PUBLISH_EVERY: Duration = Duration::from_secs(1);

/// The most counted in one pass, so that halts and waiters are served between passes.
const PASS: u64 = 16 << 20;

/// A growing log and what has been counted of it.
pub(super) struct LogWatch {
    file: File,
    /// Wakes on each write; `None` where inotify is out of instances (counted at the end only).
    changes: Option<Inotify>,
    counter: LineCounter,
    /// More was written than the last pass counted.
    pub behind: bool,
    /// Where the count is published for `status`, `list` and `await`, and when it last was.
    checkpoint: PathBuf,
    published: Option<(Instant, Checkpoint)>,
    /// When a count held back by `PUBLISH_EVERY` is to be published.
    pub due: Option<Instant>,
    /// False once the record is final.
    publishing: bool,
}

impl LogWatch {
    /// Open the log the launcher created (refusing a symlink or anything but a regular file).
    pub fn open(path: &Path, checkpoint: PathBuf) -> io::Result<LogWatch> {
        let file = files::open(path, Access::Read)?;
        let changes = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok().filter(|i| {
            // The descriptor's own file, whatever its name becomes.
            let me = Path::new("/proc/self/fd").join(file.as_raw_fd().to_string());
            i.add_watch(&me, AddWatchFlags::IN_MODIFY).is_ok()
        });
        Ok(LogWatch {
            file,
            changes,
            counter: LineCounter::new(),
            behind: true,
            checkpoint,
            published: None,
            due: None,
            publishing: true,
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

    /// What to poll for growth, if anything.
    pub fn changes(&self) -> Option<BorrowedFd<'_>> {
        self.changes.as_ref().map(|c| c.as_fd())
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

    /// Count what was written since the last pass, a bounded slice at a time.
    pub fn count_some(&mut self) {
        if let Some(changes) = &self.changes {
            while let Ok(events) = changes.read_events() {
                if events.is_empty() {
                    break;
                }
            }
        }
        self.behind = !self.catch_up(PASS);
        self.publish();
    }

    /// Count up to `budget` more bytes; true when caught up. A log cut short in place
    /// (logrotate's copytruncate) is counted again from its start, and published at once.
    fn catch_up(&mut self, budget: u64) -> bool {
        let len = self.file.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
        if len < self.counter.counted() && self.file.seek(SeekFrom::Start(0)).is_ok() {
            self.counter = LineCounter::new();
            self.published = None;
        }
        matches!(self.counter.advance(&mut self.file, budget), Ok(true))
    }

    /// The final count, after which nothing more is published, and the file to summarize.
    pub fn finish(&mut self) -> (u64, &File) {
        self.catch_up(u64::MAX);
        // The final count goes into the record. (The watch stays open: closing an inotify
        // instance waits for an RCU grace period, many milliseconds that waiters would wait too.)
        self.publishing = false;
        (self.counter.total(), &self.file)
    }
}
