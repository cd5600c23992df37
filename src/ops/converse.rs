//! The conversation between a task and its lead: a worker asks (`ask-lead`) and waits for the
//! answer, the lead answers (`reply`); the lead sends a running worker a message (`send`), the
//! worker reads it (`inbox`). Waits are event-driven: on the task's own bell, which a reply, a
//! message and the task's end ring.

use std::time::Duration;

use tokio::time::{Instant, timeout_at};

use super::blocking::blocking;
use super::events::{Holder, MAX_MESSAGE, check_text, enclosing_task, holder_alive, wait_event};
use super::lost::refresh;
use super::watch::Changes;
use crate::error::{Error, Result};
use crate::store::Store;
use crate::task::{Event, EventKind, MAX_QUESTION, Question, QuestionState, TaskRecord, Token, is_question_id};

/// How an `ask-lead` ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Asked {
    Answered(String),
    /// Nobody answered in time: the question is withdrawn.
    TimedOut,
}

/// The task this process runs in (`AGENTCTL_TOKEN`), which must still run; `what` names the
/// command, for the error outside a task.
fn own_task(store: &Store, what: &str) -> Result<TaskRecord> {
    let rec = enclosing_task(store)?.ok_or_else(|| {
        Error::Usage(format!(
            "{what} runs inside a task (AGENTCTL_TOKEN is not set here): agentctl gives it to every agent it starts"
        ))
    })?;
    still_running(rec)
}

/// Task `token`, which must still run (for its sandbox's gateway, which asks on its behalf).
pub fn running_task(store: &Store, token: Token) -> Result<TaskRecord> {
    still_running(refresh(store, token)?)
}

fn still_running(rec: TaskRecord) -> Result<TaskRecord> {
    if rec.status().is_final() {
        return Err(Error::Usage(format!(
            "task {} has already ended ({}); nobody waits on it",
            rec.token,
            rec.status()
        )));
    }
    Ok(rec)
}

/// The session of a task's inbox: its own, apart from the session its children report to.
pub fn inbox_session(token: Token) -> String {
    format!("inbox-{token}")
}

/// The newest question task `token` waits on, if its asker still waits (see `all_pending`).
pub fn pending(store: &Store, token: Token) -> Result<Option<Question>> {
    Ok(all_pending(store, token)?.into_iter().next())
}

/// The questions task `token` waits on whose askers still wait, newest first: one whose
/// `ask-lead` was killed (an agent's tool timeout, say) is withdrawn here.
pub fn all_pending(store: &Store, token: Token) -> Result<Vec<Question>> {
    let mut waiting = store.pending_questions(token)?;
    waiting.retain(|q| {
        // Nobody waits for it, whether or not the withdrawal can be written (a read-only home).
        holder_alive(&q.asker) || {
            let _ = store.settle_question(&q.id, None);
            false
        }
    });
    Ok(waiting)
}

/// Ask the lead of the task this runs in, and wait up to `limit` (`None`: for ever) for the
/// answer. A question nobody answered in time is withdrawn; one the task's end withdrew is an
/// error, never a hang.
pub async fn ask_lead(store: &Store, text: &str, choices: &[String], limit: Option<Duration>) -> Result<Asked> {
    check_text(text, "question", MAX_QUESTION)?;
    ask_lead_as(store, own_task(store, "ask-lead")?, (text, choices), limit, Holder::new(0)).await
}

/// `ask_lead` for task `rec`, asked by `asker` (the question stands while it lives).
pub async fn ask_lead_as(
    store: &Store,
    rec: TaskRecord,
    (text, choices): (&str, &[String]),
    limit: Option<Duration>,
    asker: Holder,
) -> Result<Asked> {
    check_text(text, "question", MAX_QUESTION)?;
    let deadline = limit.map(|d| Instant::now() + d);
    // Watch first, then ask: an answer that comes at once still wakes us.
    let mut rung = Changes::watch(&store.events().bell(rec.token.as_str())?)?;
    let q = blocking(|| store.ask(rec.token, &rec.role, &rec.session, text, choices, asker.as_str()))?;
    loop {
        let now = blocking(|| store.question(&q.id))?.unwrap_or(q.clone());
        match now.state {
            QuestionState::Answered => return Ok(Asked::Answered(now.answer.unwrap_or_default())),
            QuestionState::Withdrawn => {
                return Err(Error::Usage(format!(
                    "question {} was withdrawn: task {} ended before anyone answered",
                    q.id, rec.token
                )));
            }
            QuestionState::Pending => {}
        }
        let timed_out = match deadline {
            Some(d) => timeout_at(d, rung.next()).await.is_err(),
            None => {
                rung.next().await;
                false
            }
        };
        if timed_out {
            // Withdrawn, unless an answer came first.
            return match blocking(|| store.settle_question(&q.id, None))? {
                Some(_) => Ok(Asked::TimedOut),
                None => match blocking(|| store.question(&q.id))?.and_then(|q| q.answer) {
                    Some(answer) => Ok(Asked::Answered(answer)),
                    None => Ok(Asked::TimedOut),
                },
            };
        }
    }
}

/// Answer a question: by its id, or by the token of the task that waits on it.
pub fn reply(store: &Store, target: &str, answer: &str) -> Result<Question> {
    check_text(answer, "answer", MAX_MESSAGE)?;
    let q = if is_question_id(target) {
        let q = store.question(target)?.ok_or_else(|| {
            Error::Usage(format!("there is no question {target} in this home; `list` shows the tasks that ask"))
        })?;
        // Its asker may be gone: then it is withdrawn now.
        pending(store, q.token)?;
        store.question(target)?.unwrap_or(q)
    } else {
        let token = Token::parse(target)?;
        let rec = refresh(store, token)?;
        pending(store, token)?.ok_or_else(|| {
            let instead = if rec.status().is_final() { "" } else { "; send it a message instead" };
            Error::Usage(format!("task {token} ({}) has no question waiting for an answer{instead}", rec.status()))
        })?
    };
    if let Some(done) = settled(&q) {
        return Err(done);
    }
    match store.settle_question(&q.id, Some(answer))? {
        Some(q) => Ok(q),
        // Someone settled it first.
        None => Err(store
            .question(&q.id)?
            .as_ref()
            .and_then(settled)
            .unwrap_or_else(|| Error::Internal(format!("question {} could not be answered", q.id)))),
    }
}

/// The error for answering `q` when it is settled already.
fn settled(q: &Question) -> Option<Error> {
    match q.state {
        QuestionState::Pending => None,
        QuestionState::Answered => Some(Error::Usage(format!(
            "question {} was answered already ({:?}); each question takes one answer",
            q.id,
            q.answer.as_deref().unwrap_or_default()
        ))),
        QuestionState::Withdrawn => Some(Error::Usage(format!(
            "question {} was withdrawn: task {} stopped waiting for it (it timed out or ended)",
            q.id, q.token
        ))),
    }
}

/// Where a message sent to a task went.
#[derive(Clone, Debug)]
pub enum Sent {
    /// Into its agent's conversation: the agent reads messages on its stdin as it runs.
    ToAgent,
    /// To its inbox, which its agent reads with `agentctl inbox` (it takes no other input).
    ToInbox(Box<Event>),
}

impl Sent {
    /// Where the message went, as each front-end says it after naming the task.
    pub fn meaning(&self) -> &'static str {
        match self {
            Sent::ToAgent => "it reads it in its conversation",
            Sent::ToInbox(_) => {
                "its agent takes no input while it runs, so it reads it only if it runs `agentctl inbox`"
            }
        }
    }
}

/// Send running task `token` a message: into its agent's conversation where the agent reads
/// messages as it runs, else to its inbox.
pub async fn send(store: &Store, token: Token, text: &str) -> Result<Sent> {
    check_text(text, "message", MAX_MESSAGE)?;
    let rec = refresh(store, token)?;
    if rec.status().is_final() {
        return Err(Error::Usage(format!(
            "task {token} has already ended ({}); nobody would read it; follow it up as its next turn (ask --to {token})",
            rec.status()
        )));
    }
    if store.read_spec(token)?.input.is_some() {
        let said = crate::supervisor::control::say(&store.socket_path(token), text).await;
        return match said {
            Ok(Some(true)) => Ok(Sent::ToAgent),
            // It answered all it was given (its input is closed), or its supervisor is gone.
            _ => Err(Error::Usage(format!(
                "task {token}'s agent has answered its messages and is ending; once it has ended, follow it up as its next turn (ask --to {token})"
            ))),
        };
    }
    let mut event = Event::new(EventKind::Message, &inbox_session(token));
    event.token = Some(token);
    event.role = Some(rec.role);
    event.text = Some(text.to_owned());
    store.events().append(event).map(|e| Sent::ToInbox(Box::new(e)))
}

/// The next message sent to the task this runs in, waiting up to `limit`: a `timeout` event
/// when none came. Each message is read once.
pub async fn inbox(store: &Store, limit: Duration, holder: &Holder) -> Result<Event> {
    inbox_of(store, own_task(store, "inbox")?.token, limit, holder).await
}

/// `inbox` for task `token`.
pub async fn inbox_of(store: &Store, token: Token, limit: Duration, holder: &Holder) -> Result<Event> {
    wait_event(store, Some(&inbox_session(token)), &[EventKind::Message], limit, holder).await
}
