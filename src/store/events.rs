//! The home's event log: `events/log.jsonl` (append-only, one event per line) and
//! `events/consumed` (the seq of each event a waiter took). Both change only under
//! `events/lock`, which makes every event go to exactly one waiter.

use std::collections::HashSet;
use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::{Durability, FileLock, files, write_atomic};
use crate::error::{IoContext, Result};
use crate::task::{Event, EventKind, Token};

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
        let bytes = self.read_log()?;
        let events = bytes.split(|&b| b == b'\n').filter_map(|l| serde_json::from_slice(l).ok()).collect();
        Ok((events, self.read_consumed()?))
    }

    /// The log's bytes (none if it does not exist yet).
    fn read_log(&self) -> Result<Vec<u8>> {
        match files::read(&self.log_path(), u64::MAX / 2) {
            Ok(bytes) => Ok(bytes),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e).ctx(|| format!("cannot read {}", self.log_path().display())),
        }
    }

    /// The seqs already consumed.
    fn read_consumed(&self) -> Result<HashSet<u64>> {
        match files::read(&self.consumed_path(), u64::MAX / 2) {
            Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).lines().filter_map(|l| l.trim().parse().ok()).collect()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(HashSet::new()),
            Err(e) => Err(e).ctx(|| format!("cannot read {}", self.consumed_path().display())),
        }
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

impl EventLog {
    /// Drop the consumed events of `gone` tasks (removed by prune), rewriting the log and the
    /// consumed list atomically under the lock; returns how many were (or, with `dry_run`, would
    /// be) dropped. Events still waiting for a waiter stay, and so does the last event, which
    /// carries the seq the next append counts on from.
    pub fn compact(&self, gone: &HashSet<Token>, dry_run: bool) -> Result<usize> {
        let _lock = self.lock()?;
        let text = self.read_log()?;
        let consumed = self.read_consumed()?;
        let lines: Vec<&[u8]> = text.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
        let last = lines.len().saturating_sub(1);
        let mut kept = Vec::with_capacity(text.len());
        let mut kept_seqs = Vec::new();
        let mut dropped = 0;
        for (i, line) in lines.iter().enumerate() {
            let event = serde_json::from_slice::<Event>(line).ok();
            let seq = event.as_ref().and_then(|e| e.seq);
            let droppable = event.as_ref().and_then(|e| e.token).is_some_and(|t| gone.contains(&t))
                && seq.is_some_and(|s| consumed.contains(&s));
            if droppable && i != last {
                dropped += 1;
                continue;
            }
            kept.extend_from_slice(line);
            kept.push(b'\n');
            kept_seqs.extend(seq.filter(|s| consumed.contains(s)));
        }
        if dropped == 0 || dry_run {
            return Ok(dropped);
        }
        let consumed_text: String = kept_seqs.iter().map(|s| format!("{s}\n")).collect();
        // The log first: if we stop between the two, the old consumed list only names more
        // events than the log holds, and no dropped event can come back as one to take.
        write_atomic(&self.log_path(), &kept, Durability::Durable)?;
        write_atomic(&self.consumed_path(), consumed_text.as_bytes(), Durability::Durable)?;
        Ok(dropped)
    }
}

/// Open for appending; reading too (the last seq is read back), so not `Access::Append`.
fn open_append(path: &Path) -> std::io::Result<File> {
    let file = files::open(path, files::Access::ReadWriteCreate)?;
    // SAFETY: fcntl on a descriptor we own.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, libc::O_APPEND) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(file)
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
        std::fs::OpenOptions::new().append(true).open(log.log_path()).unwrap().write_all(b"{\"type\":\"mess").unwrap();
        let e = log.append(Event::new(EventKind::Message, "s")).unwrap();
        assert_eq!(e.seq, Some(2));
        let (events, _) = log.read_all().unwrap();
        assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [Some(1), Some(2)]);
    }

    #[test]
    fn compaction_drops_only_consumed_events_of_gone_tasks_and_keeps_the_seq_going() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::new(dir.path().to_owned());
        let [a, b, c] = ["aaaaaa", "bbbbbb", "cccccc"].map(|t| Token::parse(t).unwrap());
        for t in [a, b, a, c, b] {
            let mut e = Event::new(EventKind::TaskFinished, "s");
            e.token = Some(t);
            log.append(e).unwrap();
        }
        // Take seqs 1 (a), 2 (b) and 3 (a); 4 (c) and 5 (b) wait for a waiter.
        for want in [1, 2, 3] {
            assert_eq!(log.take_next("s", &[]).unwrap().unwrap().seq, Some(want));
        }
        let gone: HashSet<Token> = [a, b].into();
        assert_eq!(log.compact(&gone, true).unwrap(), 3, "a dry run counts");
        assert_eq!(log.read_all().unwrap().0.len(), 5, "a dry run drops nothing");
        assert_eq!(log.compact(&gone, false).unwrap(), 3);
        let (events, consumed) = log.read_all().unwrap();
        assert_eq!(events.iter().map(|e| e.seq.unwrap()).collect::<Vec<_>>(), [4, 5]);
        assert!(consumed.is_empty(), "{consumed:?}");
        assert_eq!(log.compact(&gone, false).unwrap(), 0, "nothing left to drop");
        // The waiting events are still delivered, and new ones go on from the last seq.
        assert_eq!(log.take_next("s", &[]).unwrap().unwrap().seq, Some(4));
        assert_eq!(log.take_next("s", &[]).unwrap().unwrap().seq, Some(5));
        // Every event consumed and gone: the last one stays, carrying the seq.
        let all: HashSet<Token> = [a, b, c].into();
        assert_eq!(log.compact(&all, false).unwrap(), 1);
        assert_eq!(log.read_all().unwrap().0.iter().map(|e| e.seq.unwrap()).collect::<Vec<_>>(), [5]);
        let next = log.append(Event::new(EventKind::Message, "s")).unwrap();
        assert_eq!(next.seq, Some(6));
        assert_eq!(log.take_next("s", &[]).unwrap().unwrap().seq, Some(6));
    }
}
