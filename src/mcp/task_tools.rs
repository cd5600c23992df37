//! The task tools: ask, run, await, halt, list, logs.

use rmcp::handler::server::tool::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, tool, tool_router};
use serde::Serialize;

use super::limits::seconds_text;
use super::params::{AskParams, AwaitParams, HaltParams, LaunchRequest, ListParams, LogsParams, RunParams};
use super::result;
use super::server::{AgentctlServer, answer, cancelled};
use crate::error::Result;
use crate::ops::{self, Halted, LogPage, TaskView};
use crate::task::{Status, Token};

/// `list`'s structured result: one page, newest first.
#[derive(Serialize, schemars::JsonSchema)]
struct TaskList {
    tasks: Vec<TaskRow>,
    count: usize,
    /// Pass as `cursor` for the next (older) page; absent on the last page.
    next_cursor: Option<String>,
}

/// One task in a listing: what tells tasks apart (`await` or `logs` say the rest).
#[derive(Serialize, schemars::JsonSchema)]
struct TaskRow {
    token: String,
    role: String,
    status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    exit_code: Option<i32>,
    elapsed_ms: u64,
    line_count: u64,
    question: String,
}

/// The most a `list` answer carries, both copies together.
const LIST_BUDGET: usize = 14 * 1024;

#[tool_router(router = task_router, vis = "pub(super)")]
impl AgentctlServer {
    /// Launch, then settle with progress and cancellation.
    async fn start(&self, req: Result<LaunchRequest>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult> {
        let LaunchRequest { mut launch, note } = req?;
        launch.session.get_or_insert_with(|| self.conn.session.clone());
        let wait = launch.wait;
        let rec = ops::launch(&self.store, launch).await?;
        let token = rec.token;
        let settled = self.watch(ops::settle(&self.store, rec, wait), &ctx, || self.task_progress(token)).await;
        let mut v = settled.unwrap_or_else(|| Err(cancelled(token)))?;
        if !v.status.is_final() {
            // Handed back: say how long this server's `await` blocks.
            v.message = Some(format!(
                "Task {token} is running in the background. Call `await` with its token for the result (each \
                 call waits up to {}; call it again to keep waiting), `wait_for_event` for whichever task of \
                 session {} ends first, or `halt` to stop it.",
                seconds_text(self.options.max_wait.0),
                v.session
            ));
        }
        if let Some(note) = note {
            result::add_note(&mut v, note);
        }
        Ok(result::task(&v, None))
    }

    #[tool(
        description = "Ask a role's sub-agent a question. Returns the answer if it finishes within wait_secs \
                       (default {hybrid_wait}, at most {max_wait}), else a token to pass to `await`. async: true \
                       returns the token at once.",
        annotations(title = "Ask a sub-agent", read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = true),
        output_schema = schema_for_output::<TaskView>()
    )]
    async fn ask(
        &self,
        Parameters(p): Parameters<AskParams>,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResult, ErrorData> {
        let req = p.into_launch(self.options.agents_file.clone(), self.options.max_wait);
        answer(self.start(req, ctx).await)
    }

    #[tool(
        description = "Run any command (argv, no shell) as a supervised task, like `ask` without a role template. \
                       Enabled by `agentctl mcp --allow-run`.",
        annotations(title = "Run a command", read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = true),
        output_schema = schema_for_output::<TaskView>()
    )]
    async fn run(
        &self,
        Parameters(p): Parameters<RunParams>,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResult, ErrorData> {
        answer(self.start(p.into_launch(self.options.max_wait), ctx).await)
    }

    #[tool(
        name = "await",
        description = "Wait for a task to end, up to timeout_secs (default and at most {max_wait}, this \
                       server's limit for one call). Returns its status, line count and, once it has ended, its \
                       summary. If it says the task is still running, call await again.",
        annotations(title = "Await a task", read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<TaskView>()
    )]
    async fn await_task(
        &self,
        Parameters(p): Parameters<AwaitParams>,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResult, ErrorData> {
        answer(
            async {
                let token = Token::parse(&p.token)?;
                let max = self.options.max_wait;
                let limit = max.cap("timeout_secs", p.timeout_secs, max.0)?;
                let wait = ops::await_task(&self.store, token, Some(limit.wait));
                let mut v = self
                    .watch(wait, &ctx, || self.task_progress(token))
                    .await
                    .unwrap_or_else(|| Err(cancelled(token)))?;
                if let Some(note) = limit.note {
                    result::add_note(&mut v, note);
                }
                Ok(result::task(&v, None))
            }
            .await,
        )
    }

    #[tool(
        description = "Stop a task: SIGTERM to all its processes, SIGKILL after grace_secs (default 5, at most \
                       {max_wait}). Returns \
                       its partial summary. A task that already ended is left as it is and its final state \
                       returned, with a note that nothing was stopped.",
        annotations(title = "Halt a task", read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<TaskView>()
    )]
    async fn halt(&self, Parameters(p): Parameters<HaltParams>) -> std::result::Result<CallToolResult, ErrorData> {
        answer(
            async {
                let token = Token::parse(&p.token)?;
                // A halt blocks for its grace period: no longer than any other call.
                let grace = self.options.max_wait.cap("grace_secs", p.grace_secs, ops::DEFAULT_GRACE)?;
                Ok(match ops::halt_if_running(&self.store, token, grace.wait).await? {
                    Halted::Stopped(mut v) => {
                        if let Some(note) = grace.note {
                            result::add_note(&mut v, note);
                        }
                        result::task(&v, Some(Status::Cancelled))
                    }
                    // Halting is idempotent here: the task's end is the answer, not an error.
                    Halted::AlreadyEnded(mut v) => {
                        let note = format!("task {token} had already ended ({}); nothing was stopped", v.status);
                        result::add_note(&mut v, note);
                        result::structured(&v, v.text(), false)
                    }
                })
            }
            .await,
        )
    }

    #[tool(
        description = "List tasks, newest first, 50 at a time: token, role, status, elapsed time, log lines and \
                       question preview. Optional filters: status, role; pass next_cursor back as cursor for older \
                       ones.",
        annotations(title = "List tasks", read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<TaskList>()
    )]
    async fn list(&self, Parameters(p): Parameters<ListParams>) -> std::result::Result<CallToolResult, ErrorData> {
        answer(p.filter().and_then(|f| ops::list(&self.store, &f)).map(|listing| {
            let mut rows: Vec<TaskRow> = listing
                .tasks
                .iter()
                .map(|v| TaskRow {
                    token: v.token.to_string(),
                    role: v.role.to_string(),
                    status: v.status,
                    exit_code: v.exit_code,
                    elapsed_ms: v.elapsed_ms,
                    line_count: v.line_count,
                    question: v.question.clone(),
                })
                .collect();
            let mut more = listing.more;
            loop {
                let next_cursor = more.then(|| rows.len().checked_sub(1).and_then(|i| listing.cursor(i))).flatten();
                let text = list_text(&rows, next_cursor.as_deref());
                let list = TaskList { count: rows.len(), next_cursor, tasks: std::mem::take(&mut rows) };
                let size = serde_json::to_string(&list).map_or(0, |j| j.len()) + text.len();
                // Over the budget (long role names and questions): a shorter page, and a cursor.
                if size <= LIST_BUDGET || list.tasks.len() <= 1 {
                    return result::structured(&list, text, false);
                }
                rows = list.tasks;
                rows.truncate(rows.len() * LIST_BUDGET / size);
                more = true;
            }
        }))
    }

    #[tool(
        description = "Read a task's output one page at a time (escape codes stripped): the last tail_lines \
                       (default 100), or `limit` lines from `offset`. Pages never exceed 1000 lines or 64 KiB; \
                       follow next_offset for more.",
        annotations(title = "Read a task's log", read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<LogPage>()
    )]
    async fn logs(&self, Parameters(p): Parameters<LogsParams>) -> std::result::Result<CallToolResult, ErrorData> {
        answer(Token::parse(&p.token).and_then(|token| ops::log_page(&self.store, token, p.window(), p.raw)).map(
            |page| {
                let mut text = page.lines.join("\n");
                if let Some(next) = page.next_offset {
                    text.push_str(&format!(
                        "\n[lines {}-{} of {}; next page: offset {next}]",
                        page.offset, next, page.line_count
                    ));
                }
                result::structured(&page, text, false)
            },
        ))
    }
}

/// `list`'s readable copy: a line per task, and how to page on.
fn list_text(rows: &[TaskRow], next: Option<&str>) -> String {
    if rows.is_empty() {
        return "no tasks".to_owned();
    }
    let mut text: Vec<String> = rows
        .iter()
        .map(|r| {
            format!("{} {} {} {}ms {} lines: {}", r.token, r.role, r.status, r.elapsed_ms, r.line_count, r.question)
        })
        .collect();
    if let Some(cursor) = next {
        text.push(format!("[older tasks: call list with cursor {cursor}]"));
    }
    text.join("\n")
}
