//! Events: sessions, waiting for the next event of a session, posting messages and questions,
//! and reading the log without consuming it.

use std::time::Duration;

use serde::Serialize;
use tokio::time::{Instant, timeout_at};

use super::blocking::blocking;
use super::lost::refresh;
use super::watch::Changes;
use crate::error::{Error, Result};
use crate::store::Store;
use crate::supervisor::reach;
use crate::task::{Event, EventKind, Role, TaskRecord, Token};

/// The session a launch or a wait belongs to: `--session`, else (inside a task) that task's
/// token, so a task that starts tasks hears of them itself, else `AGENTCTL_SESSION`, else
/// `default`.
pub fn session_of(flag: Option<&str>) -> Result<String> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let s = flag
        .map(str::to_owned)
        .or_else(|| env("AGENTCTL_TOKEN"))
        .or_else(|| env("AGENTCTL_SESSION"))
        .unwrap_or_else(|| "default".into());
    check_session(&s)?;
    Ok(s)
}

/// The default session of an MCP client connection: the CLI's rule where the environment names
/// one (a server run inside a task reports to that task); else one of its own (`mcp-` and 12
/// hex digits), so that two orchestrators sharing a home never take each other's events.
pub fn connection_session() -> Result<String> {
    let named =
        ["AGENTCTL_SESSION", "AGENTCTL_TOKEN"].iter().any(|k| std::env::var_os(k).is_some_and(|v| !v.is_empty()));
    if named { session_of(None) } else { Ok(format!("mcp-{:012x}", crate::task::random_u64() >> 16)) }
}

fn check_session(s: &str) -> Result<()> {
    Role::parse(s).map(drop).map_err(|_| {
        Error::Usage(format!(
            "invalid session `{}`: use 1 to 64 characters from A-Z, a-z, 0-9, `_` and `-`",
            crate::task::input_preview(s)
        ))
    })
}

/// Who takes events: this process and one of its connections (an MCP client, or the CLI's one
/// wait). An event taken is held until the holder confirms that its answer arrived
/// (`delivered`) or lets go of it (`undelivered`); a holder whose process died holds nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder(String);

impl Holder {
    /// Connection `connection` of this process.
    pub fn new(connection: u64) -> Holder {
        Holder(match reach::own_id() {
            Some(id) => format!("{} {} {:032x} {connection}", id.pid, id.start, id.boot),
            None => format!("{} 0 0 {connection}", std::process::id()),
        })
    }

    /// Process `pid` (not this one), which holds what it holds until it ends.
    pub fn of_process(pid: i32) -> Holder {
        let (start, boot) = reach::started(pid).unwrap_or((0, 0));
        Holder(format!("{pid} {start} {boot:032x} 0"))
    }

    pub(super) fn as_str(&self) -> &str {
        &self.0
    }
}

/// Whether the process a holder names still runs.
pub(super) fn holder_alive(holder: &str) -> bool {
    let mut f = holder.split(' ');
    let (Some(pid), Some(start), Some(boot)) = (f.next(), f.next(), f.next()) else { return false };
    match (pid.parse(), start.parse(), u128::from_str_radix(boot, 16)) {
        (Ok(pid), Ok(start), Ok(boot)) => reach::lives(pid, start, boot),
        _ => false,
    }
}

/// Wait up to `limit` for the oldest event of the session (`session`, else the `session_of`
/// default) of one of `kinds` (empty: any) not yet taken, and hand it to `holder`; a `timeout`
/// event if none came. Wakes on new events (`Changes`), never by polling the store. Safe to
/// cancel: an event is taken only in a step that cannot be interrupted, and then returned.
pub async fn wait_event(
    store: &Store,
    session: Option<&str>,
    kinds: &[EventKind],
    limit: Duration,
    holder: &Holder,
) -> Result<Event> {
    let session = session_of(session)?;
    let session = session.as_str();
    let deadline = Instant::now() + limit;
    let log = store.events();
    // Watch first, then look: an event appended in between still wakes us. The session's
    // bell, and the directory an earlier release appends to.
    let mut rung = Changes::watch(&log.bell(session)?)?;
    let mut legacy = Changes::watch(&log.dir())?;
    loop {
        if let Some(e) = blocking(|| log.take(session, kinds, holder.as_str(), holder_alive))? {
            return Ok(e);
        }
        let changed = async {
            tokio::select! {
                () = rung.next() => {}
                () = legacy.next() => {}
            }
        };
        if timeout_at(deadline, changed).await.is_err() {
            return Ok(Event::new(EventKind::Timeout, session));
        }
    }
}

/// The events `holder` was handed reached their caller: they are delivered, never handed out
/// again. `seq`: only that one.
pub fn delivered(store: &Store, holder: &Holder, seq: Option<u64>) -> Result<usize> {
    store.events().confirm(holder.as_str(), seq)
}

/// The events `holder` was handed (or only event `seq` of them) never reached their caller:
/// the next waiter gets them.
pub fn undelivered(store: &Store, holder: &Holder, seq: Option<u64>) -> Result<usize> {
    store.events().release(holder.as_str(), seq)
}

/// The longest message or question an event carries.
pub const MAX_MESSAGE: usize = 256 * 1024;

/// Post a `message` (or `question`) from the task this runs in (`AGENTCTL_TOKEN`) to its
/// session, or to `session` when given. Outside a task, `session` is required.
pub fn notify(store: &Store, session: Option<&str>, question: bool, text: &str) -> Result<Event> {
    store.events().append(worded(notice(store, session, question)?, text)?)
}

/// What `notify` posts, without its text yet: a message (or question) to `session`, else to the
/// session of the task this runs in, from that task.
pub fn notice(store: &Store, session: Option<&str>, question: bool) -> Result<Event> {
    notice_from(enclosing_task(store)?, session, question)
}

/// `notice`, from task `task` (none: from outside any).
pub fn notice_from(task: Option<TaskRecord>, session: Option<&str>, question: bool) -> Result<Event> {
    let session = match (session, &task) {
        (Some(s), _) => s.to_owned(),
        (None, Some(rec)) => rec.session.clone(),
        (None, None) => {
            return Err(Error::Usage(
                "notify posts from inside a task (AGENTCTL_TOKEN is not set here); pass --session NAME to post to a session from outside".into(),
            ));
        }
    };
    check_session(&session)?;
    let mut event = Event::new(if question { EventKind::Question } else { EventKind::Message }, &session);
    event.token = task.as_ref().map(|r| r.token);
    event.role = task.map(|r| r.role);
    Ok(event)
}

/// A `notice` carrying `text`, once the text is found fit to post.
pub fn worded(mut notice: Event, text: &str) -> Result<Event> {
    check_text(text, "message", MAX_MESSAGE)?;
    notice.text = Some(text.to_owned());
    Ok(notice)
}

/// The task this process runs in (`AGENTCTL_TOKEN`), if any.
pub(super) fn enclosing_task(store: &Store) -> Result<Option<TaskRecord>> {
    match enclosing_token() {
        Some(t) => refresh(store, Token::parse(&t)?).map(Some),
        None => Ok(None),
    }
}

/// The token of the task this process runs in (`AGENTCTL_TOKEN`, which agentctl sets for its
/// agents), if any.
pub(super) fn enclosing_token() -> Option<String> {
    std::env::var("AGENTCTL_TOKEN").ok().filter(|t| !t.is_empty())
}

/// Refuse an empty text (a `what`: message, question, answer), or one over `max` bytes.
pub(super) fn check_text(text: &str, what: &str, max: usize) -> Result<()> {
    if text.trim().is_empty() {
        return Err(Error::Usage(format!("the {what} is empty; say what the other side should know")));
    }
    if text.len() > max {
        return Err(Error::Usage(format!(
            "the {what} is longer than the {max} bytes an event carries; write it to a file and name the file in it"
        )));
    }
    Ok(())
}

/// An event as `events` shows it: with whether a waiter has received it.
#[derive(Clone, Debug, Serialize)]
pub struct LoggedEvent {
    #[serde(flatten)]
    pub event: Event,
    pub consumed: bool,
}

/// How many events are read at a time.
const EVENT_PAGE: usize = 1000;

/// The events of `session` (or of every session) after seq `after`, oldest first, at most
/// `limit` (`None`: all), consuming nothing.
pub fn read_events(store: &Store, session: Option<&str>, after: u64, limit: Option<usize>) -> Result<Vec<LoggedEvent>> {
    session.map(check_session).transpose()?;
    let mut out = Vec::new();
    let mut after = after;
    loop {
        let want = limit.map_or(EVENT_PAGE, |l| (l - out.len()).min(EVENT_PAGE));
        let page = store.events().read(session, after, want)?;
        let full = page.len() == want;
        for l in page {
            after = l.event.seq.unwrap_or(after);
            out.push(LoggedEvent { event: l.event, consumed: l.delivered });
        }
        if !full || limit.is_some_and(|l| out.len() >= l) {
            return Ok(out);
        }
    }
}

/// Show every event of `session` (or all) as it is appended, after those already there, until
/// `show` fails (the reader went away) or the caller stops awaiting.
pub async fn follow_events(
    store: &Store,
    session: Option<&str>,
    mut show: impl FnMut(&LoggedEvent) -> std::io::Result<()>,
) -> Result<()> {
    session.map(check_session).transpose()?;
    // Every bell (made if missing, so that it can be watched), and where an earlier release
    // appends.
    store.events().bell(session.unwrap_or("default"))?;
    let mut rung = Changes::watch(&store.events().bells())?;
    let mut legacy = Changes::watch(&store.events().dir())?;
    let mut seen = 0;
    loop {
        let page = read_events(store, session, seen, Some(EVENT_PAGE))?;
        for e in &page {
            seen = e.event.seq.unwrap_or(seen);
            if show(e).is_err() {
                return Ok(());
            }
        }
        if page.len() < EVENT_PAGE {
            tokio::select! {
                () = rung.next() => {}
                () = legacy.next() => {}
            }
        }
    }
}
