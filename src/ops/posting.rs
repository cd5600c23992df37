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
        let (events, answers): (Vec<Event>, Vec<_>) = group.into_iter().map(|p| (p.event, p.done)).unzip();
        match store.events().append_all(events.clone()) {
            Ok(posted) => {
                for (answer, event) in answers.into_iter().zip(posted) {
                    let _ = answer.send(Ok(event));
                }
            }
            // Whatever failed the group, each caller hears of its own event: written alone.
            Err(_) => {
                for (answer, event) in answers.into_iter().zip(events) {
                    let _ = answer.send(store.events().append(event));
                }
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
            for event in store.events().append_all(group)? {
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
