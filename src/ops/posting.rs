//! Events posted in bulk: what arrives while one group is being written goes into the store
//! with the next, in one durable transaction (a group commit). Pipelined `notify` calls over
//! one MCP connection share a `Poster`; `notify --lines` posts the lines of stdin that have
//! come in by the time the last group is written. Each event is numbered, on the disk and its
//! session's bell rung before its caller hears it was posted; a waiter takes it once, as any
//! other event.

use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc;

use tokio::sync::oneshot;

use super::events::{MAX_MESSAGE, worded};
use crate::error::{Error, IoContext, Result};
use crate::store::Store;
use crate::task::Event;

/// The most events written in one transaction.
const GROUP: usize = 1024;

/// Posts the events handed to it from any number of callers, in groups, from a thread of its
/// own. The thread ends when the poster is dropped.
pub struct Poster {
    queue: mpsc::Sender<Posting>,
}

/// An event waiting to be written, and where its caller waits for the outcome.
struct Posting {
    event: Event,
    done: oneshot::Sender<Result<Event>>,
}

impl Poster {
    /// A poster writing to `store`.
    pub fn new(store: Store) -> Result<Poster> {
        let (queue, waiting) = mpsc::channel();
        std::thread::Builder::new()
            .name("poster".into())
            .spawn(move || write_groups(&store, &waiting))
            .ctx(|| "cannot start the thread that posts events".into())?;
        Ok(Poster { queue })
    }

    /// Post `event` (a `notice`, `worded`): numbered, durable and announced when this returns.
    pub async fn post(&self, event: Event) -> Result<Event> {
        let (done, outcome) = oneshot::channel();
        let stopped = || Error::Internal("the thread that posts events has stopped; restart the server".into());
        self.queue.send(Posting { event, done }).map_err(|_| stopped())?;
        outcome.await.map_err(|_| stopped())?
    }
}

/// Write what is waiting, a group at a time, until every poster is gone.
fn write_groups(store: &Store, waiting: &mpsc::Receiver<Posting>) {
    while let Ok(first) = waiting.recv() {
        let group: Vec<Posting> =
            std::iter::once(first).chain(std::iter::from_fn(|| waiting.try_recv().ok()).take(GROUP - 1)).collect();
        let (events, mut answers): (Vec<Event>, Vec<_>) = group.into_iter().map(|p| (p.event, p.done)).unzip();
        match store.events().append_all(events) {
            Ok(posted) => {
                for (answer, event) in answers.into_iter().zip(posted) {
                    let _ = answer.send(Ok(event));
                }
            }
            // Nothing fails one event alone (each was checked before it came): what failed the
            // group (a full disk, a store locked for a minute) is every caller's answer, at once.
            Err(e) => {
                for answer in answers.drain(1..) {
                    let _ = answer.send(Err(e.again()));
                }
                let _ = answers.remove(0).send(Err(e));
            }
        }
    }
}

/// Post each line of `input` as its own event, a copy of `notice` carrying it, as the lines
/// come: a group of those already read with the first, then the next. Blank lines are skipped.
/// `posted` is told of each event once it is on the disk. How many were posted.
pub fn post_lines<R: Read>(store: &Store, notice: &Event, input: R, mut posted: impl FnMut(&Event)) -> Result<usize> {
    let mut input = BufReader::with_capacity(64 * 1024, input);
    let (mut count, mut line_no) = (0, 0);
    loop {
        let first = line_no + 1;
        let mut group = Vec::new();
        let mut refused = None;
        let mut ended = false;
        // Wait for one line; take with it only those already in (a line split across reads
        // waits for the next group).
        while group.len() < GROUP && (group.is_empty() || input.buffer().contains(&b'\n')) {
            let mut line = Vec::new();
            let read = (&mut input).take(MAX_MESSAGE as u64 + 2).read_until(b'\n', &mut line);
            if read.ctx(|| "cannot read stdin".into())? == 0 {
                ended = true;
                break;
            }
            line_no += 1;
            match line_event(notice, line, line_no) {
                Ok(Some(event)) => group.push(event),
                Ok(None) => {}
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        if !group.is_empty() {
            let written = store.events().append_all(group).map_err(|e| {
                e.noted(&format!("the {count} messages before line {first} of stdin were posted, none from it on"))
            })?;
            for event in written {
                count += 1;
                posted(&event);
            }
        }
        if let Some(e) = refused {
            return Err(Error::Usage(format!("{e}; the {count} messages before it were posted, none after it")));
        }
        if ended {
            return Ok(count);
        }
    }
}

/// The event carrying line `line_no` (with its end of line), or none for a blank line.
fn line_event(notice: &Event, mut line: Vec<u8>, line_no: usize) -> Result<Option<Event>> {
    if line.last() == Some(&b'\n') {
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
    }
    if line.len() > MAX_MESSAGE {
        return Err(Error::Usage(format!(
            "line {line_no} of stdin is longer than the {MAX_MESSAGE} bytes an event carries (write it to a file and post the file's name)"
        )));
    }
    let text = String::from_utf8(line).map_err(|_| Error::Usage(format!("line {line_no} of stdin is not UTF-8")))?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    worded(notice.clone(), &text).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::EventKind;

    /// Hands out `chunk` bytes at a time, as a pipe written in pieces would.
    struct Chunks<'a> {
        data: &'a [u8],
        chunk: usize,
    }

    impl Read for Chunks<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.chunk.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    /// `post_lines` of `input` read in pieces of `chunk`: its outcome, and what the store holds.
    fn posted(input: &[u8], chunk: usize) -> (Result<usize>, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("home")).unwrap();
        let notice = Event::new(EventKind::Message, "s");
        let mut said = Vec::new();
        let outcome =
            post_lines(&store, &notice, Chunks { data: input, chunk }, |e| said.push(e.text.clone().unwrap()));
        let stored: Vec<String> =
            store.events().read(Some("s"), 0, 100).unwrap().into_iter().map(|l| l.event.text.unwrap()).collect();
        assert_eq!(said, stored, "it said what it stored");
        (outcome, stored)
    }

    #[test]
    fn lines_are_posted_whatever_pieces_they_come_in() {
        for chunk in [1, 3, 7, 64 * 1024] {
            let (outcome, stored) = posted(b"first\r\n\n  \nsecond\rline\nlast without an end", chunk);
            assert_eq!(outcome.unwrap(), 3);
            assert_eq!(stored, ["first", "second\rline", "last without an end"], "in pieces of {chunk}");
        }
    }

    #[test]
    fn a_line_at_the_limit_is_posted_and_one_past_it_stops_the_rest() {
        let at = "x".repeat(MAX_MESSAGE);
        let (outcome, stored) = posted(format!("{at}\r\n{at}y\nafter\n").as_bytes(), 4096);
        let e = outcome.unwrap_err().to_string();
        assert!(e.contains("line 2 of stdin is longer than the 262144 bytes"), "{e}");
        assert!(e.contains("the 1 messages before it were posted, none after it"), "{e}");
        assert_eq!(stored, [at]);
    }

    #[test]
    fn a_line_that_is_not_utf8_stops_the_rest() {
        let (outcome, stored) = posted(b"ok\n\xff\nnot this\n", 2);
        let e = outcome.unwrap_err().to_string();
        assert!(e.contains("line 2 of stdin is not UTF-8; the 1 messages before it were posted"), "{e}");
        assert_eq!(stored, ["ok"]);
    }

    #[test]
    fn every_caller_of_a_group_that_fails_hears_why() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("home")).unwrap();
        store.events().read(None, 0, 1).unwrap();
        // No write to the events can go through now.
        let conn = rusqlite::Connection::open(dir.path().join("home/agentctl.db")).unwrap();
        conn.execute_batch("ALTER TABLE events RENAME TO gone").unwrap();
        let poster = Poster::new(store).unwrap();
        let post = |text: &str| poster.post(worded(Event::new(EventKind::Message, "s"), text).unwrap());
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let (a, b, c) = rt.block_on(async { tokio::join!(post("a"), post("b"), post("c")) });
        for outcome in [a, b, c] {
            let e = outcome.unwrap_err().to_string();
            assert!(e.contains("cannot record an event") && e.contains("no such table"), "{e}");
        }
    }
}
