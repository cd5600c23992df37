//! The event tools: wait_for_event, notify.

use rmcp::handler::server::tool::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, tool, tool_router};

use schemars::JsonSchema;
use serde::Serialize;

use super::params::{NotifyParams, WaitForEventParams};
use super::result;
use super::server::{AgentctlServer, answer};
use crate::error::Error;
use crate::ops;
use crate::task::{Event, EventKind};

/// `wait_for_event`'s structured result: the event, and a note when the wait asked for was
/// longer than this server waits.
#[derive(Serialize, JsonSchema)]
struct EventAnswer {
    #[serde(flatten)]
    event: Event,
    /// Set when the wait was shortened to the server's limit.
    note: Option<String>,
}

#[tool_router(router = event_router, vis = "pub(super)")]
impl AgentctlServer {
    #[tool(
        description = "Block until the next event of a session: a task finishing (task_finished), or a message \
                       or question a task posted. Returns the oldest one not yet taken, at once if one is queued; \
                       each event goes to one caller only. After timeout_secs (default and at most {max_wait}, \
                       this server's limit for one call) returns {type: timeout}: call again to keep waiting.",
        annotations(title = "Wait for an event", read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schema_for_output::<EventAnswer>()
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
                let cancelled = || Err(Error::Usage("the wait was cancelled; the session's events stay queued".into()));
                let Some(event) = self.watch(wait, &ctx, progress).await.unwrap_or_else(cancelled)? else {
                    let note = "a newer wait_for_event of this connection took over this one";
                    return Ok(result::structured(
                        &EventAnswer { event: Event::new(EventKind::Timeout, &session), note: Some(note.into()) },
                        note.into(),
                        false,
                    ));
                };
                if let Some(seq) = event.seq {
                    self.conn.answered(seq);
                }
                let mut text = event.describe();
                if let Some(note) = &limit.note {
                    text.push_str(&format!("\nnote: {note}"));
                }
                Ok(result::structured(&EventAnswer { event, note: limit.note }, text, false))
            }
            .await,
        )
    }

    #[tool(
        description = "Post a message (or, with question: true, a question) to a session, where wait_for_event \
                       returns it.",
        annotations(title = "Notify a session", read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schema_for_output::<Event>()
    )]
    async fn notify(&self, Parameters(p): Parameters<NotifyParams>) -> std::result::Result<CallToolResult, ErrorData> {
        answer((|| {
            let session = p.session.unwrap_or_else(|| self.conn.session.clone());
            let e = ops::notify(&self.store, Some(&session), p.question, &p.message)?;
            Ok(result::structured(&e, e.describe(), false))
        })())
    }
}
