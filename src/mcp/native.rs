//! Native MCP tasks (the `io.modelcontextprotocol/tasks` extension of protocol 2026-07-28):
//! `ask` and `run` answer a client that declares the extension with a task handle, whose
//! `tasks/get` carries the same result `await` would give; `tasks/cancel` halts the task and
//! `tasks/update` answers its question. A handle is a row of the home's store (taskId →
//! token), so any server process on the home serves it, before and after a restart.

use std::time::{Duration, UNIX_EPOCH};

use rmcp::model::{
    CancelTaskParams, CreateTaskResult, DetailedTask, GetTaskParams, GetTaskResult, InputRequest, InputRequests,
    JsonObject, ProtocolVersion, Task, TaskPayload, TaskStatus, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use super::budget::TaskResult;
use super::result;
use super::server::AgentctlServer;
use crate::error::{Error, Frontend};
use crate::ops::{self, Halted, TaskView, Wait, human_duration};
use crate::store::McpTask;
use crate::task::{Question, Status, one_line_preview};

/// The longest a task-returning call waits for the task to end before it hands back a task:
/// one that ends within it is answered directly, as the extension allows.
pub const DIRECT_WAIT: Duration = Duration::from_secs(1);

/// How often a client is asked to poll at first, and at most later on.
const POLL_FIRST: Duration = Duration::from_secs(1);
const POLL_MOST: Duration = Duration::from_secs(5);

/// Whether the request may be answered with a task: it is on protocol 2026-07-28 or later and
/// declares the extension in its own capabilities (an older session never gets one).
pub fn offered(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.meta.protocol_version().is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
        && ctx.client_capabilities().is_some_and(|c| c.supports_tasks())
}

/// Whether the client can put a question to its user (elicitation): then a task's question
/// is an input request, else it stays in the status message for `reply`.
fn elicits(ctx: &RequestContext<RoleServer>) -> bool {
    // Forms are what it asks for: declared, or implied by an empty `elicitation` object.
    ctx.client_capabilities().and_then(|c| c.elicitation).is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// How long a task-returning call waits before it hands back the task: no longer than
/// `DIRECT_WAIT`, and not at all when asked for at once.
pub fn first_wait(asked: Wait) -> Wait {
    match asked {
        Wait::Async => Wait::Async,
        Wait::For(d) => Wait::For(d.min(DIRECT_WAIT)),
        Wait::Sync => Wait::For(DIRECT_WAIT),
    }
}

fn iso(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// The poll interval for a task that has run `elapsed_ms`: a second at first, then a thirtieth
/// of its age, up to five seconds (a thousand long tasks are not polled a thousand times a
/// second).
fn poll_interval(elapsed_ms: u64) -> u64 {
    (elapsed_ms / 30).clamp(POLL_FIRST.as_millis() as u64, POLL_MOST.as_millis() as u64)
}

/// The task as the extension shows it, with `status` and a message. Kept as long as the task's
/// record (until `agentctl prune`): no time to live.
fn base(t: &McpTask, v: &TaskView, status: TaskStatus, message: String) -> Task {
    let created = iso(t.created_at_ms);
    // A task that ended before its handle was made was last updated then.
    let updated = v.ended_at.clone().filter(|e| *e > created).unwrap_or_else(|| created.clone());
    let mut task = Task::new(&t.id, status, created, updated).with_status_message(message);
    task.ttl_ms = None;
    if !v.status.is_final() {
        task = task.with_poll_interval_ms(poll_interval(v.elapsed_ms));
    }
    task
}

/// What a running task is doing, in one line that names its token (for the other tools).
fn progress(v: &TaskView) -> String {
    let summary = v.summary.as_deref().map(|s| one_line_preview(s, 200)).unwrap_or_default();
    format!("agentctl task {} ({}): {summary}", v.token, v.role)
}

/// A pending question, as the status message says it (the newest, when there are several).
fn asking(v: &TaskView, q: &Question, elicited: bool) -> String {
    let choices = if q.choices.is_empty() { String::new() } else { format!(" [{}]", q.choices.join(", ")) };
    let how = if elicited {
        "answer it here, or with `reply`".to_owned()
    } else {
        format!("answer with `reply` (token {}, or question_id {})", v.token, q.id)
    };
    format!("agentctl task {} ({}) asks: {}{choices}; {how}", v.token, v.role, one_line_preview(&q.text, 400))
}

/// The question as an elicitation: a form with one `answer` field (one of the choices, if
/// it offers some).
fn input_request(v: &TaskView, q: &Question) -> Option<InputRequest> {
    let mut answer =
        json!({"type": "string", "title": "Answer", "description": format!("for task {}", v.token), "minLength": 1});
    if !q.choices.is_empty() {
        answer["enum"] = json!(q.choices);
    }
    serde_json::from_value(json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": format!("Task {} ({}) asks: {}", v.token, v.role, q.text),
            "requestedSchema": {"type": "object", "properties": {"answer": answer}, "required": ["answer"]},
        },
    }))
    .ok()
}

impl AgentctlServer {
    /// The handle `tools/call` answers with for task `v`, still running.
    pub(super) fn created(&self, t: &McpTask, v: &TaskView) -> CreateTaskResult {
        CreateTaskResult::new(base(t, v, TaskStatus::Working, progress(v)))
    }

    /// The task a client polls, as it is now.
    fn detailed(&self, t: &McpTask, v: &TaskView, elicited: bool) -> DetailedTask {
        if let Some(q) = &v.pending_question {
            let message = asking(v, q, elicited);
            if elicited {
                // Every question still waiting, each under its own id (a task's processes may
                // ask at once).
                let waiting = ops::all_pending(&self.store, v.token).unwrap_or_else(|_| vec![q.clone()]);
                let input_requests: InputRequests =
                    waiting.iter().filter_map(|q| Some((q.id.clone(), input_request(v, q)?))).collect();
                if !input_requests.is_empty() {
                    let task = base(t, v, TaskStatus::InputRequired, message);
                    return DetailedTask::new(task, TaskPayload::InputRequired { input_requests });
                }
            }
            return DetailedTask::new(base(t, v, TaskStatus::Working, message), TaskPayload::Working);
        }
        match v.status {
            s if !s.is_final() => DetailedTask::new(base(t, v, TaskStatus::Working, progress(v)), TaskPayload::Working),
            Status::Cancelled => {
                let message = format!(
                    "agentctl task {} ({}) was halted after {}, {} line(s) of output; `logs` with its token reads them",
                    v.token,
                    v.role,
                    human_duration(v.elapsed_ms),
                    v.line_count
                );
                DetailedTask::new(base(t, v, TaskStatus::Cancelled, message), TaskPayload::Cancelled)
            }
            _ => {
                // What `await` gives: a task that did not complete is a result with isError.
                let r = TaskResult::of(v, self.next_step(v));
                let call = result::task(r, None, self.options.budget);
                let result = match serde_json::to_value(&call) {
                    Ok(Value::Object(o)) => o,
                    _ => JsonObject::new(),
                };
                DetailedTask::new(base(t, v, TaskStatus::Completed, v.headline()), TaskPayload::Completed { result })
            }
        }
    }

    /// The handle `id` of this home, or the error the extension asks for (invalid params).
    fn handle(&self, id: &str) -> std::result::Result<McpTask, ErrorData> {
        match self.store.mcp_task(id) {
            Ok(Some(t)) => Ok(t),
            Ok(None) => Err(not_found(id)),
            Err(e) => Err(internal(&e)),
        }
    }

    /// `tasks/get`.
    pub(super) async fn get_native(
        &self,
        p: GetTaskParams,
        ctx: &RequestContext<RoleServer>,
    ) -> std::result::Result<GetTaskResult, ErrorData> {
        let t = self.handle(&p.task_id)?;
        let v = ops::status(&self.store, t.token).map_err(|e| match e {
            // Pruned between the two reads.
            Error::UnknownToken { .. } => not_found(&p.task_id),
            e => internal(&e),
        })?;
        // Handed out for a turn the task was since followed up from: that turn, as it ended.
        let v = v.as_of_turn(t.turn).unwrap_or(v);
        Ok(GetTaskResult::new(self.detailed(&t, &v, elicits(ctx))))
    }

    /// `tasks/cancel`: acknowledged at once; the halt (SIGTERM, the grace, SIGKILL) goes on
    /// in the background, and the server does not exit before it is done.
    pub(super) fn cancel_native(&self, p: CancelTaskParams) -> std::result::Result<(), ErrorData> {
        let t = self.handle(&p.task_id)?;
        // The turn it stands for ended; a later one runs on its own.
        if ops::status(&self.store, t.token).is_ok_and(|v| v.turn > t.turn) {
            return Ok(());
        }
        let store = self.store.clone();
        let halting = tokio::spawn(async move {
            match ops::halt_if_running(&store, t.token, ops::DEFAULT_GRACE, false).await {
                Ok(Halted::Stopped(_) | Halted::AlreadyEnded(_)) => {}
                Err(e) => eprintln!("agentctl mcp: task {} could not be halted: {}", t.token, e.message(Frontend::Mcp)),
            }
        });
        self.conn.halting(halting);
        Ok(())
    }

    /// `tasks/update`: answers to the task's questions. Keys that name no question of the
    /// task still waiting (answered already, withdrawn, never asked) are ignored, as the
    /// extension says, and so is `cancel` (the form was dismissed: the question stays open, for
    /// a later form or `reply`). `decline` tells the worker the user would not answer. An
    /// accepted answer that cannot be used (not a non-empty `answer` text within the limit) is
    /// refused, and the question stays open.
    pub(super) fn update_native(&self, p: UpdateTaskParams) -> std::result::Result<(), ErrorData> {
        let t = self.handle(&p.task_id)?;
        let waiting = ops::all_pending(&self.store, t.token).map_err(|e| internal(&e))?;
        for (id, response) in &p.input_responses {
            if !waiting.iter().any(|q| &q.id == id) {
                continue;
            }
            let answer = match response.get("action").and_then(Value::as_str) {
                Some("accept") => match response.pointer("/content/answer").and_then(Value::as_str) {
                    Some(a) => a.to_owned(),
                    None => {
                        return Err(ErrorData::invalid_params(
                            format!(
                                "the response to {id} accepts no `answer` text: send content {{\"answer\": \"…\"}}"
                            ),
                            None,
                        ));
                    }
                },
                Some("decline") => DECLINED.to_owned(),
                _ => continue,
            };
            if answer.is_empty() || answer.len() > ops::MAX_MESSAGE {
                return Err(ErrorData::invalid_params(
                    format!("the answer to {id} must be 1 to {} bytes of text", ops::MAX_MESSAGE),
                    None,
                ));
            }
            match ops::reply(&self.store, id, &answer) {
                // Refused: settled meanwhile (by `reply`, or the task ended); nothing to answer.
                Ok(_) | Err(Error::Usage(_)) => {}
                Err(e) => return Err(internal(&e)),
            }
        }
        Ok(())
    }
}

/// What a worker is told when the user declines its question.
const DECLINED: &str = "[no answer: the user declined to answer]";

/// The error for a taskId this home does not know (invalid params, as the extension says).
fn not_found(id: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "no task {id} in this server's home: it was handed out by another home, pruned, or never; `list` \
             shows this home's tasks"
        ),
        None,
    )
}

/// A failure of the store as a JSON-RPC internal error.
fn internal(e: &crate::error::Error) -> ErrorData {
    ErrorData::internal_error(e.message(Frontend::Mcp), None)
}

/// The note of a task `start` answers with its token because no handle could be recorded.
pub fn not_handed_out(e: &crate::error::Error) -> String {
    format!("answered with a token, not an MCP task: {}", e.message(Frontend::Mcp))
}
