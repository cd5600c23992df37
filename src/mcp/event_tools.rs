//! The event tools: wait_for_event, notify.

use rmcp::handler::server::tool::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, tool, tool_router};

use schemars::JsonSchema;
use serde::Serialize;

use super::budget::{self, TaskResult};
use super::delivery::Delivery;
use super::params::{NotifyParams, ReplyParams, SendParams, WaitForEventParams};
use super::result;
use super::server::{AgentctlServer, answer};
use crate::error::Error;
use crate::ops;
use crate::task::{Event, EventKind, QuestionState, Status, Token};

/// An event as a tool result: what a model can use, nothing null. A `task_finished` carries
/// the task's answer within the server's budget, so collecting a task takes no other call.
#[derive(Clone, Serialize, JsonSchema)]
struct EventResult {
    #[serde(rename = "type")]
    kind: EventKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exit_code: Option<i32>,
    /// For `task_finished`: the answer (head and tail when long, with the `logs` call for the rest).
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<String>,
    /// For `message` and `question`: what the task said.
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    /// For a question: its id for `reply`, and the answers offered.
    #[serde(skip_serializing_if = "Option::is_none")]
    question_id: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    choices: Vec<String>,
    /// For `task_finished` of a task in a worktree: what it changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    changes: Option<crate::worktree::Changes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    /// For `task_finished`: what its agent spent (not in the published schema, kept small).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    usage: Option<crate::agent::Usage>,
    /// What to call next.
    next: String,
}

impl EventResult {
    fn text(&self) -> String {
        let who = match (&self.token, &self.role) {
            (Some(t), Some(r)) => format!(" {t} ({r})"),
            (Some(t), None) => format!(" {t}"),
            _ => String::new(),
        };
        let mut out = format!("{}{who}", self.kind);
        if let Some(s) = self.status {
            out.push_str(&format!(" {s}"));
        }
        if let Some(c) = self.exit_code {
            out.push_str(&format!(" exit {c}"));
        }
        for part in [&self.note, &self.text, &self.summary].into_iter().flatten() {
            out.push_str(&format!("\n{part}"));
        }
        if !self.choices.is_empty() {
            out.push_str(&format!("\nchoices: {}", self.choices.join(", ")));
        }
        if let Some(c) = &self.changes {
            out.push_str(&format!("\nchanges: {}", c.line()));
        }
        if let Some(u) = &self.usage {
            out.push_str(&format!("\nusage: {}", u.brief()));
        }
        out.push_str(&format!("\nnext: {}", self.next));
        out
    }
}

#[tool_router(router = event_router, vis = "pub(super)")]
impl AgentctlServer {
    #[tool(
        description = "The next event of your session, waiting up to {max_wait}: task_finished (with the answer), \
                       or a task's message or question. Each comes once.",
        annotations(title = "Wait for an event", read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schema_for_output::<EventResult>()
    )]
    async fn wait_for_event(
        &self,
        Parameters(p): Parameters<WaitForEventParams>,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResult, ErrorData> {
        answer(
            async {
                let kinds = p.kinds()?;
                let max = self.options.max_wait;
                let limit = max.cap("timeout_secs", p.timeout_secs, max.0)?;
                let session = ops::session_of(Some(p.session.as_deref().unwrap_or(&self.conn.session)))?;
                self.conn.arrived(&self.store)?;
                let mut key: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
                key.sort_unstable();
                let mut superseded = self.conn.supersede(format!("{session} {}", key.join(",")));
                let started = tokio::time::Instant::now();
                let progress = || format!("waiting for an event for {:.0}s", started.elapsed().as_secs_f64());
                let wait = async {
                    tokio::select! {
                        e = ops::wait_event(&self.store, Some(&session), &kinds, limit.wait, &self.conn.holder) => e.map(Some),
                        _ = superseded.changed() => Ok(None),
                    }
                };
                let cancelled = || {
                    let why = self.why_cut_short();
                    Err(Error::Usage(format!("{why}; the session's events stay queued for `wait_for_event`")))
                };
                let again = "call `wait_for_event` again to keep waiting";
                let Some(event) = self.watch(wait, &ctx, progress).await.unwrap_or_else(cancelled)? else {
                    let note = "a newer wait_for_event of this connection took over this one";
                    let r = EventResult::bare(EventKind::Timeout, Some(note.into()), again.into());
                    return Ok(result::structured(&r, r.text(), false));
                };
                if let Some(seq) = event.seq {
                    match Delivery::of(&ctx) {
                        Some(delivery) => delivery.carries(seq),
                        None => self.conn.answered(seq),
                    }
                }
                let note = limit.note_if(event.kind == EventKind::Timeout);
                let r = self.event_result(event, note);
                Ok(result::structured(&r, r.text(), false))
            }
            .await,
        )
    }

    #[tool(
        description = "Post a message (or with question: true a question) to a session's wait_for_event.",
        annotations(title = "Notify a session", read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schema_for_output::<Posted>()
    )]
    async fn notify(&self, Parameters(p): Parameters<NotifyParams>) -> std::result::Result<CallToolResult, ErrorData> {
        answer(
            async {
                let session = p.session.unwrap_or_else(|| self.conn.session.clone());
                let notice = ops::notice(&self.store, Some(&session), p.question)?;
                // With the calls in flight beside it, in one write.
                let e = self.poster.post(ops::worded(notice, &p.message)?).await?;
                // Not the text again: the caller has it.
                let posted = Posted { kind: e.kind, session: e.session, seq: e.seq };
                let text = format!("posted {} to session {}", posted.kind, posted.session);
                Ok(result::structured(&posted, text, false))
            }
            .await,
        )
    }
}

#[tool_router(router = converse_router, vis = "pub(super)")]
impl AgentctlServer {
    #[tool(
        description = "Answer a task's question; the waiting task goes on with it.",
        annotations(destructive_hint = false, open_world_hint = false),
        output_schema = schema_for_output::<Replied>()
    )]
    async fn reply(&self, Parameters(p): Parameters<ReplyParams>) -> std::result::Result<CallToolResult, ErrorData> {
        answer(p.target().and_then(|target| ops::reply(&self.store, target, &p.answer)).map(|q| {
            let text = format!("answered {} of task {}; `await` it for what it does next", q.id, q.token);
            // Not the question and the answer again: the caller has both.
            let replied = Replied { question_id: q.id, token: q.token.to_string(), state: q.state };
            result::structured(&replied, text, false)
        }))
    }

    #[tool(
        description = "Message a running task: into a claude agent's conversation, else its inbox.",
        annotations(destructive_hint = false, open_world_hint = false),
        output_schema = schema_for_output::<SentTo>()
    )]
    async fn send(&self, Parameters(p): Parameters<SendParams>) -> std::result::Result<CallToolResult, ErrorData> {
        let sent = match Token::parse(&p.token) {
            Ok(t) => ops::send(&self.store, t, &p.message).await.map(|s| (t, s)),
            Err(e) => Err(e),
        };
        answer(sent.map(|(token, sent)| {
            let meaning = sent.meaning();
            let (to, session, seq, text) = match sent {
                ops::Sent::ToAgent => ("agent", None, None, format!("sent to task {token}'s agent: {meaning}")),
                ops::Sent::ToInbox(e) => {
                    ("inbox", Some(e.session), e.seq, format!("posted to task {token}'s inbox: {meaning}"))
                }
            };
            result::structured(&SentTo { to, session, seq }, text, false)
        }))
    }
}

/// What `reply` answers.
#[derive(Serialize, JsonSchema)]
struct Replied {
    question_id: String,
    token: String,
    state: QuestionState,
}

/// What `send` answers: where the message went (`agent` or `inbox`).
#[derive(Serialize, JsonSchema)]
struct SentTo {
    to: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seq: Option<u64>,
}

/// What `notify` answers.
#[derive(Serialize, JsonSchema)]
struct Posted {
    #[serde(rename = "type")]
    kind: EventKind,
    session: String,
    seq: Option<u64>,
}

impl EventResult {
    /// An event with nothing but its kind, a note and what to call next.
    fn bare(kind: EventKind, note: Option<String>, next: String) -> EventResult {
        EventResult {
            kind,
            token: None,
            role: None,
            status: None,
            exit_code: None,
            summary: None,
            text: None,
            question_id: None,
            choices: Vec::new(),
            changes: None,
            note,
            usage: None,
            next,
        }
    }
}

impl AgentctlServer {
    /// `event` as a result: a finished task's answer read whole and fitted to the budget.
    fn event_result(&self, event: Event, note: Option<String>) -> EventResult {
        let again = "call `wait_for_event` again for the next event".to_owned();
        let mut r = EventResult::bare(event.kind, note, again);
        r.token = event.token.map(|t| t.to_string());
        r.role = event.role.map(|t| t.to_string());
        r.status = event.status;
        r.exit_code = event.exit_code;
        r.text = event.text;
        r.question_id = event.question_id;
        r.choices = event.choices;
        r.changes = event.changes;
        r.usage = event.usage;
        match event.kind {
            EventKind::Timeout => {
                r.next = "nothing arrived in time: call `wait_for_event` again to keep waiting".into()
            }
            EventKind::TaskFinished => {
                let Some(token) = event.token else { return r };
                let view = ops::status(&self.store, token);
                let mut task = match &view {
                    Ok(v) => TaskResult::of(v, None),
                    Err(_) => return EventResult { summary: event.summary, ..r },
                };
                if r.status.is_some_and(|s| s != Status::Completed) {
                    r.next = format!("call `logs` with token {token} to read its output; {}", r.next);
                }
                // Both copies of the whole result, as it will go out, within the budget.
                budget::fit(std::slice::from_mut(&mut task), self.options.budget, |t| {
                    let probe = EventResult { summary: t[0].summary.clone(), ..r.clone() };
                    serde_json::to_string(&probe).map_or(0, |j| j.len()) + probe.text().len()
                });
                r.summary = task.summary;
            }
            EventKind::Question => {
                if let (Some(id), Some(token)) = (&r.question_id, &r.token) {
                    r.next = format!(
                        "task {token} waits for your answer: call `reply` with question_id {id} and the answer; then {}",
                        r.next
                    );
                }
            }
            EventKind::Message => {}
        }
        r
    }
}
