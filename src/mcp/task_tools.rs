//! The task tools: ask, run, await, halt, list, logs.

use rmcp::handler::server::tool::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResponse, CallToolResult};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, tool, tool_router};
use serde::Serialize;

use super::budget::{self, TaskResult};
use super::limits::seconds_text;
use super::native;
use super::params::{AskParams, AwaitParams, HaltParams, LaunchRequest, ListParams, LogsParams, RunParams};
use super::result::{self, AwaitResult};
use super::server::{AgentctlServer, answer};
use crate::error::Result;
use crate::ops::{self, Halted, LogPage, TaskView};
use crate::task::{Status, Token, one_line_preview};

/// `list`'s structured result: one page, newest first.
#[derive(Serialize, schemars::JsonSchema)]
struct TaskList {
    tasks: Vec<TaskRow>,
    count: usize,
    /// Each pool's places, running and queued tasks, and spend: what it can take now.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pools: Vec<ops::PoolCapacity>,
    /// Pass as `cursor` for the next (older) page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<String>,
}

/// One task in a listing: what tells tasks apart (`await` or `logs` say the rest).
#[derive(Clone, Serialize, schemars::JsonSchema)]
struct TaskRow {
    token: String,
    role: String,
    status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    exit_code: Option<i32>,
    elapsed_ms: u64,
    line_count: u64,
    question: String,
    /// The question it waits on you to answer with `reply`.
    #[serde(skip_serializing_if = "Option::is_none")]
    asks: Option<String>,
    /// Its cost (`~` estimated) and, while it runs, its agent's step (not in the published schema).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    cost: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    step: Option<String>,
}

#[tool_router(router = task_router, vis = "pub(super)")]
impl AgentctlServer {
    /// Launch, then settle with progress and cancellation. A client that takes MCP tasks gets
    /// one for a task still running after `native::DIRECT_WAIT`.
    async fn start(&self, req: Result<LaunchRequest>, ctx: RequestContext<RoleServer>) -> Result<CallToolResponse> {
        let LaunchRequest { mut launch, capped } = req?;
        // A follow-up's turn keeps its task's session. Its MCP task stands for that turn: one
        // handed out for an earlier turn keeps that turn's end.
        if !matches!(launch.from, Some(ops::GoOn::Turn(_))) {
            launch.session.get_or_insert_with(|| self.conn.session.clone());
        }
        let offered = native::offered(&ctx);
        let wait = if offered { native::first_wait(launch.wait) } else { launch.wait };
        let rec = ops::start(&self.store, launch, None).await?;
        let token = rec.token;
        let settled = self.watch(ops::settle(&self.store, rec, wait), &ctx, || self.task_progress(token)).await;
        let v = settled.unwrap_or_else(|| Err(self.cut_short(&[token])))?;
        let mut r = TaskResult::of(&v, self.next_step(&v));
        if offered && !v.status.is_final() {
            match self.store.create_mcp_task(token, v.turn) {
                Ok(t) => return Ok(self.created(&t, &v).into()),
                // The task runs all the same: its token is the answer, as without the extension.
                Err(e) => r.add_note(native::not_handed_out(&e)),
            }
        }
        // The wait ran out: the task still runs, and asks nothing.
        if let Some(note) = capped.note_if(!v.status.is_final() && v.pending_question.is_none()) {
            r.add_note(note);
        }
        Ok(result::task(r, None, self.options.budget).into())
    }

    /// What to call after `v`.
    pub(super) fn next_step(&self, v: &TaskView) -> Option<String> {
        budget::next_step(v, &seconds_text(self.options.max_wait.0))
    }

    #[tool(
        description = "Ask a role's sub-agent: its answer if it ends within wait_secs (default {hybrid_wait}, at \
                       most {max_wait}), else its token. Slow work: async: true.",
        annotations(title = "Ask a sub-agent", read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = true),
        output_schema = schema_for_output::<TaskResult>()
    )]
    async fn ask(
        &self,
        Parameters(p): Parameters<AskParams>,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        let req = p.into_launch(self.options.agents_file.clone(), self.options.max_wait);
        answer(self.start(req, ctx).await)
    }

    #[tool(
        description = "Run a command (argv, no shell) as a supervised task; otherwise like `ask`.",
        annotations(title = "Run a command", read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = true),
        output_schema = schema_for_output::<TaskResult>()
    )]
    async fn run(
        &self,
        Parameters(p): Parameters<RunParams>,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        let req = p.into_launch(self.options.agents_file.clone(), self.options.max_wait);
        answer(self.start(req, ctx).await)
    }

    #[tool(
        name = "await",
        description = "Wait up to {max_wait} for a task's answer. With tokens: [...], returns once any ends, with \
                       all ended by then; the rest listed as running.",
        annotations(title = "Await tasks", read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<AwaitResult>()
    )]
    async fn await_task(
        &self,
        Parameters(p): Parameters<AwaitParams>,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResult, ErrorData> {
        answer(
            async {
                let tokens = p.tokens()?;
                let max = self.options.max_wait;
                let limit = max.cap("timeout_secs", p.timeout_secs, max.0)?;
                let wait = ops::await_any(&self.store, &tokens, Some(limit.wait));
                let progress = || match tokens.as_slice() {
                    [one] => self.task_progress(*one),
                    many => format!("waiting for any of {} tasks", many.len()),
                };
                let a = self.watch(wait, &ctx, progress).await.unwrap_or_else(|| Err(self.cut_short(&tokens)))?;
                let note = limit.note_if(a.timed_out);
                if let (1, Some(v)) = (tokens.len(), a.ended.first().or(a.running.first())) {
                    // One task: its result, as `ask` gives it.
                    let mut r = TaskResult::of(v, self.next_step(v));
                    r.timed_out = a.timed_out;
                    if let Some(note) = note {
                        r.add_note(note);
                    }
                    return Ok(result::task(r, None, self.options.budget));
                }
                let mut tasks: Vec<TaskResult> = a.ended.iter().map(|v| TaskResult::of(v, self.next_step(v))).collect();
                tasks.extend(a.running.iter().map(|v| TaskResult::of(v, None)));
                let running: Vec<String> = a.running.iter().map(|v| v.token.to_string()).collect();
                let asking: Vec<String> =
                    a.running.iter().filter(|v| v.pending_question.is_some()).map(|v| v.token.to_string()).collect();
                let mut next = (!running.is_empty()).then(|| {
                    if !asking.is_empty() {
                        // Awaiting them again would return at once: they wait for answers.
                        return format!(
                            "tasks [{}] wait for your answer: call `reply` with each token and its answer, then \
                             `await` again",
                            asking.join(", ")
                        );
                    }
                    format!(
                        "call `await` with tokens [{}] to keep waiting (up to {} a call); `halt` stops a task",
                        running.join(", "),
                        seconds_text(max.0)
                    )
                });
                if let Some(note) = note {
                    next = Some(match next {
                        Some(n) => format!("{n} ({note})"),
                        None => note,
                    });
                }
                Ok(result::awaited(AwaitResult { tasks, next }, self.options.budget))
            }
            .await,
        )
    }

    #[tool(
        description = "Stop a task: SIGTERM, then SIGKILL after grace_secs (default 5). Returns it as it ended.",
        annotations(title = "Halt a task", read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<TaskResult>()
    )]
    async fn halt(&self, Parameters(p): Parameters<HaltParams>) -> std::result::Result<CallToolResult, ErrorData> {
        answer(
            async {
                let token = Token::parse(&p.token)?;
                // A halt blocks for its grace period: no longer than any other call.
                let grace = self.options.max_wait.cap("grace_secs", p.grace_secs, ops::DEFAULT_GRACE)?;
                Ok(match ops::halt_if_running(&self.store, token, grace.wait, false).await? {
                    Halted::Stopped(v) => {
                        let mut r = TaskResult::of(&v, None);
                        if let Some(note) = grace.note {
                            r.add_note(note);
                        }
                        result::task(r, Some(Status::Cancelled), self.options.budget)
                    }
                    // Halting is idempotent: the task's end is the answer, not an error.
                    Halted::AlreadyEnded(v) => {
                        result::task(TaskResult::of(&v, None), Some(v.status), self.options.budget)
                    }
                })
            }
            .await,
        )
    }

    #[tool(
        description = "Tasks, newest first, 50 a page (cursor: the last page's next_cursor), filtered by status or \
                       role.",
        annotations(title = "List tasks", read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<TaskList>()
    )]
    async fn list(&self, Parameters(p): Parameters<ListParams>) -> std::result::Result<CallToolResult, ErrorData> {
        let pools = ops::capacity(&self.store, self.options.agents_file.as_deref());
        answer(
            p.filter()
                .and_then(|f| ops::list(&self.store, &f))
                .map(|listing| {
                    let rows: Vec<TaskRow> = listing
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
                            asks: v
                                .pending_question
                                .as_ref()
                                .map(|q| format!("{} ({})", one_line_preview(&q.text, 80), q.id)),
                            cost: ops::cost_text(v.usage.as_ref()),
                            step: v.step.as_ref().filter(|_| !v.status.is_final()).map(|s| s.what.clone()),
                        })
                        .collect();
                    // Over the budget (long role names and questions): a shorter page, and a cursor.
                    let all = rows.len();
                    result::shrink_to_fit(self.options.budget, all, all.min(1), |n| {
                        let more = listing.more || n < all;
                        let next_cursor = more.then(|| n.checked_sub(1).and_then(|i| listing.cursor(i))).flatten();
                        let text = list_text(&rows[..n], next_cursor.as_deref(), &pools);
                        Ok((TaskList { count: n, next_cursor, tasks: rows[..n].to_vec(), pools: pools.clone() }, text))
                    })
                })
                .and_then(|r| r),
        )
    }

    #[tool(
        description = "A page of a task's output (or with summary: true, of its whole answer): the last \
                       tail_lines, or from offset (and column). Go on with next_offset and next_column.",
        annotations(title = "Read a task's log", read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<LogPage>()
    )]
    async fn logs(&self, Parameters(p): Parameters<LogsParams>) -> std::result::Result<CallToolResult, ErrorData> {
        answer((|| {
            let token = Token::parse(&p.token)?;
            // Both copies carry the lines: each gets somewhat under half the budget, less if the
            // lines' escaping in JSON makes it more.
            let first = self.options.budget.saturating_sub(600) / 2;
            result::shrink_to_fit(self.options.budget, first, 64, |max_bytes| {
                let page = ops::log_page(&self.store, token, p.request(max_bytes))?;
                let text = page_text(&page, p.summary);
                Ok((page, text))
            })
        })())
    }
}

/// `logs`' readable copy: the lines, and where the next page begins.
fn page_text(page: &LogPage, summary: bool) -> String {
    let mut text = page.lines.join("\n");
    if let Some(next) = page.next_offset {
        let column = page.next_column.map(|c| format!(", column {c}")).unwrap_or_default();
        let of = if summary { "summary" } else { "log" };
        text.push_str(&format!(
            "\n[lines {}-{next} of {} of the {of}; next page: offset {next}{column}]",
            page.offset, page.line_count
        ));
    }
    text
}

/// `list`'s readable copy: a line per task, and how to page on.
fn list_text(rows: &[TaskRow], next: Option<&str>, pools: &[ops::PoolCapacity]) -> String {
    if rows.is_empty() {
        return "no tasks".to_owned();
    }
    let mut text: Vec<String> = rows
        .iter()
        .map(|r| {
            let what = match (&r.asks, &r.step) {
                (Some(q), _) => format!("ASKS {q}"),
                (None, Some(step)) => format!("[{step}] {}", r.question),
                (None, None) => r.question.clone(),
            };
            let cost = r.cost.as_ref().map(|c| format!(" {c}")).unwrap_or_default();
            format!("{} {} {} {}ms {} lines{cost}: {what}", r.token, r.role, r.status, r.elapsed_ms, r.line_count)
        })
        .collect();
    if let Some(cursor) = next {
        text.push(format!("[older tasks: call list with cursor {cursor}]"));
    }
    text.extend(pools.iter().map(ops::PoolCapacity::line));
    text.join("\n")
}
