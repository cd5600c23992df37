//! The home's event log: `events/log.jsonl` (append-only, one event per line) and
//! `events/consumed` (the seq of each event a waiter took). Both change only under
//! `events/lock`, which makes every event go to exactly one waiter.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::FileLock;
use crate::error::{IoContext, Result};
use crate::task::{Event, EventKind};

/// The event log of one home.
#[derive(Clone, Debug)]
pub struct EventLog {
    dir: PathBuf,
}

impl EventLog {
    pub(super) fn new(dir: PathBuf) -> EventLog {
        EventLog { dir }
    }

    /// The directory to watch for new events.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("log.jsonl")
    }

    fn consumed_path(&self) -> PathBuf {
        self.dir.join("consumed")
    }

    fn lock(&self) -> Result<FileLock> {
        FileLock::take(&self.dir.join("lock"))
    }

    /// Append `event`, giving it the next seq and the current time. Durable when this returns.
    pub fn append(&self, mut event: Event) -> Result<Event> {
        let _lock = self.lock()?;
        let path = self.log_path();
        let what = || format!("cannot append to {}", path.display());
        let mut file = open_append(&path).ctx(what)?;
        let (last_seq, ends_cleanly) = last_seq(&mut file).ctx(what)?;
        event.seq = Some(last_seq + 1);
        event.time = Some(humantime::format_rfc3339_millis(SystemTime::now()).to_string());
        let mut line = if ends_cleanly { Vec::new() } else { b"\n".to_vec() };
        serde_json::to_writer(&mut line, &event).map_err(|e| crate::error::Error::Internal(e.to_string()))?;
        line.push(b'\n');
        file.write_all(&line).ctx(what)?;
        file.sync_data().ctx(what)?;
        Ok(event)
    }

    /// Every event in the log (unreadable lines skipped), and the seqs already consumed.
    pub fn read_all(&self) -> Result<(Vec<Event>, HashSet<u64>)> {
        let events = match fs::read(self.log_path()) {
            Ok(bytes) => bytes.split(|&b| b == b'\n').filter_map(|l| serde_json::from_slice(l).ok()).collect(),
            Err(e) if e.kind() == ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e).ctx(|| format!("cannot read {}", self.log_path().display())),
        };
        let consumed = match fs::read_to_string(self.consumed_path()) {
            Ok(text) => text.lines().filter_map(|l| l.trim().parse().ok()).collect(),
            Err(e) if e.kind() == ErrorKind::NotFound => HashSet::new(),
            Err(e) => return Err(e).ctx(|| format!("cannot read {}", self.consumed_path().display())),
        };
        Ok((events, consumed))
    }

    /// Take the oldest unconsumed event of `session` whose kind is in `kinds` (empty: any).
    pub fn take_next(&self, session: &str, kinds: &[EventKind]) -> Result<Option<Event>> {
        let _lock = self.lock()?;
        let (events, consumed) = self.read_all()?;
        let Some(event) =
            events.into_iter().find(|e| e.matches(session, kinds) && e.seq.is_some_and(|s| !consumed.contains(&s)))
        else {
            return Ok(None);
        };
        let path = self.consumed_path();
        let what = || format!("cannot record a consumed event in {}", path.display());
        let mut file = open_append(&path).ctx(what)?;
        writeln!(file, "{}", event.seq.unwrap_or_default()).ctx(what)?;
        file.sync_data().ctx(what)?;
        Ok(Some(event))
    }
}

fn open_append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().read(true).append(true).create(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(path)
}

/// The seq of the last whole event in the log, and whether the log ends with a newline (a
/// crash may have left half a line, which the next append must not extend).
fn last_seq(file: &mut File) -> std::io::Result<(u64, bool)> {
    let len = file.seek(SeekFrom::End(0))?;
    let from = len.saturating_sub(64 * 1024);
    file.seek(SeekFrom::Start(from))?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail)?;
    let seq = tail
        .split(|&b| b == b'\n')
        .rev()
        .filter_map(|l| serde_json::from_slice::<Event>(l).ok())
        .find_map(|e| e.seq)
        .unwrap_or(0);
    Ok((seq, tail.last().is_none_or(|&b| b == b'\n')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_numbered_and_taken_once_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::new(dir.path().to_owned());
        for (kind, session) in
            [(EventKind::TaskFinished, "a"), (EventKind::Question, "a"), (EventKind::TaskFinished, "b")]
        {
            log.append(Event::new(kind, session)).unwrap();
        }
        let q = log.take_next("a", &[EventKind::Question]).unwrap().unwrap();
        assert_eq!((q.seq, q.kind), (Some(2), EventKind::Question));
        assert_eq!(log.take_next("a", &[EventKind::Question]).unwrap(), None);
        assert_eq!(log.take_next("a", &[]).unwrap().unwrap().seq, Some(1));
        assert_eq!(log.take_next("a", &[]).unwrap(), None);
        assert_eq!(log.take_next("b", &[]).unwrap().unwrap().seq, Some(3));
    }

    #[test]
    fn concurrent_appenders_and_takers_deliver_every_event_exactly_once() {
        for _ in 0..5 {
            let dir = tempfile::tempdir().unwrap();
            let log = EventLog::new(dir.path().to_owned());
            let taken: Vec<u64> = std::thread::scope(|s| {
                for _ in 0..4 {
                    s.spawn(|| {
                        for _ in 0..10 {
                            log.append(Event::new(EventKind::TaskFinished, "s")).unwrap();
                        }
                    });
                }
                let takers: Vec<_> = (0..4)
                    .map(|_| {
                        s.spawn(|| {
                            let mut got = Vec::new();
                            let mut idle = 0;
                            while idle < 200 {
                                match log.take_next("s", &[]).unwrap() {
                                    Some(e) => got.push(e.seq.unwrap()),
                                    None => idle += 1,
                                }
                            }
                            got
                        })
                    })
                    .collect();
                takers.into_iter().flat_map(|t| t.join().unwrap()).collect()
            });
            let mut all = taken.clone();
            all.sort();
            all.dedup();
            assert_eq!(all.len(), taken.len(), "an event was taken twice");
            let (events, consumed) = log.read_all().unwrap();
            assert_eq!(events.len(), 40);
            // Whatever the takers missed at the end is still queued, never lost.
            while let Some(e) = log.take_next("s", &[]).unwrap() {
                all.push(e.seq.unwrap());
            }
            all.sort();
            assert_eq!(all, (1..=40).collect::<Vec<_>>());
            assert!(consumed.len() <= 40);
        }
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_not_extended() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::new(dir.path().to_owned());
        log.append(Event::new(EventKind::Message, "s")).unwrap();
        fs::OpenOptions::new().append(true).open(log.log_path()).unwrap().write_all(b"{\"type\":\"mess").unwrap();
        let e = log.append(Event::new(EventKind::Message, "s")).unwrap();
        assert_eq!(e.seq, Some(2));
        let (events, _) = log.read_all().unwrap();
        assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [Some(1), Some(2)]);
    }
}
