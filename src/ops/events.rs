//! Events: sessions, waiting for the next event of a session, posting messages and questions,
//! and reading the log without consuming it.

use std::time::Duration;

use serde::Serialize;
use tokio::time::{Instant, timeout_at};

use super::wait::refresh;
use super::watch::Changes;
use crate::error::{Error, Result};
use crate::store::Store;
use crate::task::{Event, EventKind, Role, Token};

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

fn check_session(s: &str) -> Result<()> {
    Role::parse(s).map(drop).map_err(|_| {
        Error::Usage(format!(
            "invalid session `{}`: use 1 to 64 characters from A-Z, a-z, 0-9, `_` and `-`",
            crate::task::input_preview(s)
        ))
    })
}

/// Wait up to `limit` for the oldest unconsumed event of the session (`session`, else the
/// `session_of` default) of one of `kinds` (empty: any) and consume it; a `timeout` event if
/// none came. Wakes on changes to the event log (inotify), never by polling. Safe to cancel: an
/// event is consumed only in a step that cannot be interrupted, and then returned.
pub async fn wait_event(store: &Store, session: Option<&str>, kinds: &[EventKind], limit: Duration) -> Result<Event> {
    let session = session_of(session)?;
    let session = session.as_str();
    let deadline = Instant::now() + limit;
    let log = store.events();
    // Watch first, then look: an event appended in between still wakes us.
    let mut changes = Changes::watch(log.dir())?;
    loop {
        if let Some(e) = log.take_next(session, kinds)? {
            return Ok(e);
        }
        if timeout_at(deadline, changes.next()).await.is_err() {
            return Ok(Event::new(EventKind::Timeout, session));
        }
    }
}

/// The longest message or question an event carries.
pub const MAX_MESSAGE: usize = 64 * 1024;

/// Post a `message` (or `question`) from the task this runs in (`AGENTCTL_TOKEN`) to its
/// session, or to `session` when given. Outside a task, `session` is required.
pub fn notify(store: &Store, session: Option<&str>, question: bool, text: &str) -> Result<Event> {
    let inside = std::env::var("AGENTCTL_TOKEN").ok().filter(|t| !t.is_empty());
    let task = match inside.as_deref().map(Token::parse).transpose()? {
        Some(t) => Some(refresh(store, t)?),
        None => None,
    };
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
    if text.trim().is_empty() {
        return Err(Error::Usage("the message is empty; say what the lead should know".into()));
    }
    if text.len() > MAX_MESSAGE {
        return Err(Error::Usage(format!(
            "the message is {} bytes, more than the {MAX_MESSAGE} an event carries; write the rest to a file and \
             name the file in the message",
            text.len()
        )));
    }
    let mut event = Event::new(if question { EventKind::Question } else { EventKind::Message }, &session);
    event.token = task.as_ref().map(|r| r.token);
    event.role = task.map(|r| r.role);
    event.text = Some(text.to_owned());
    store.events().append(event)
}

/// An event as `events` shows it: with whether a waiter has taken it.
#[derive(Clone, Debug, Serialize)]
pub struct LoggedEvent {
    #[serde(flatten)]
    pub event: Event,
    pub consumed: bool,
}

/// The events of `session` (or of every session), oldest first, consuming nothing.
pub fn read_events(store: &Store, session: Option<&str>) -> Result<Vec<LoggedEvent>> {
    session.map(check_session).transpose()?;
    let (events, consumed) = store.events().read_all()?;
    Ok(events
        .into_iter()
        .filter(|e| session.is_none_or(|s| e.session == s))
        .map(|e| LoggedEvent { consumed: e.seq.is_some_and(|s| consumed.contains(&s)), event: e })
        .collect())
}

/// Show every event of `session` (or all) as it is appended, after those already there, until
/// `show` fails (the reader went away) or the caller stops awaiting.
pub async fn follow_events(
    store: &Store,
    session: Option<&str>,
    mut show: impl FnMut(&LoggedEvent) -> std::io::Result<()>,
) -> Result<()> {
    session.map(check_session).transpose()?;
    let mut changes = Changes::watch(store.events().dir())?;
    let mut seen = 0;
    loop {
        let after = seen;
        for e in read_events(store, session)?.into_iter().filter(|e| e.event.seq.unwrap_or(0) > after) {
            seen = e.event.seq.unwrap_or(seen);
            if show(&e).is_err() {
                return Ok(());
            }
        }
        changes.next().await?;
    }
}
