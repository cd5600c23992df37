//! The rmcp server: one tool per operation, each a thin adapter over `ops`, plus progress
//! notifications and cancellation for the calls that wait.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, Implementation, ProgressNotificationParam, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde::Serialize;

use super::params::{
    AWAIT_CAP, AskParams, AwaitParams, HaltParams, ListParams, LogsParams, NotifyParams, RunParams, WaitForEventParams,
    seconds_or,
};
use super::result;
use crate::error::{Error, Frontend, Result};
use crate::ops::{self, Halted, LogPage, STILL_RUNNING, TaskView};
use crate::store::Store;
use crate::task::{Event, Status, Token};

/// How often a waiting call reports progress to a client that asked for it.
const PROGRESS_EVERY: Duration = Duration::from_secs(3);

const INSTRUCTIONS: &str = "agentctl runs sub-agents (agent CLIs such as kiro-cli, claude -p, codex exec) as supervised \
background tasks. Use `ask` with a role and a question: a quick task answers in the call; a slow one returns a \
6-character token after about 10 s (or at once with async: true) while it keeps running. Then call `await` with \
the token: it blocks up to 55 s and returns the summary when the task ends; while it says the task is still \
running, call `await` again. `halt` stops a task and returns its partial output. `list` shows all tasks and \
`logs` pages through a task's output. Tasks survive this server's restart.";

/// `list`'s structured result.
#[derive(Serialize, schemars::JsonSchema)]
struct TaskList {
    tasks: Vec<TaskView>,
    count: usize,
}

/// How the server was started (`agentctl mcp` and the global flags).
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Offer the `run` tool.
    pub allow_run: bool,
    /// `--agents FILE`: the agent templates `ask` uses, as for the CLI.
    pub agents_file: Option<PathBuf>,
}

/// The MCP server over one home.
#[derive(Clone)]
pub struct AgentctlServer {
    store: Store,
    options: Options,
    tool_router: ToolRouter<AgentctlServer>,
}

/// Serve MCP on stdin/stdout until the client goes away. A bad `--agents` file is refused
/// before anything is served.
pub async fn serve(store: Store, options: Options) -> Result<()> {
    if let Some(file) = &options.agents_file {
        ops::check_agents_file(&store, file)?;
    }
    let server = AgentctlServer::new(store, options);
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| Error::Internal(format!("the MCP session could not start: {e}")))?;
    running.waiting().await.map_err(|e| Error::Internal(format!("the MCP session failed: {e}")))?;
    Ok(())
}

#[tool_router]
impl AgentctlServer {
    fn new(store: Store, options: Options) -> AgentctlServer {
        let mut tool_router = Self::tool_router() + Self::events_router();
        if !options.allow_run {
            // Arbitrary commands are opt-in: without --allow-run the tool does not exist.
            tool_router.remove_route("run");
        }
        AgentctlServer { store, options, tool_router }
    }

    /// Wait for `work`, sending `progress()` as a progress notification every few seconds when
    /// the client asked for them; `None` if the client cancelled (the work's subject, a task or
    /// an event, is never touched: dropping `work` only stops waiting).
    async fn watch<T>(
        &self,
        work: impl Future<Output = T>,
        ctx: &RequestContext<RoleServer>,
        progress: impl Fn() -> String,
    ) -> Option<T> {
        let progress_token = ctx.meta.get_progress_token();
        let started = tokio::time::Instant::now();
        let mut tick = tokio::time::interval_at(started + PROGRESS_EVERY, PROGRESS_EVERY);
        tokio::pin!(work);
        loop {
            tokio::select! {
                // Cancellation first: once the client has given up on this request, the work is
                // not polled again, so a wait cannot take an event whose answer nobody reads.
                biased;
                _ = ctx.ct.cancelled() => return None,
                r = &mut work => return Some(r),
                _ = tick.tick(), if progress_token.is_some() => {
                    let Some(pt) = progress_token.clone() else { continue };
                    let param = ProgressNotificationParam::new(pt, started.elapsed().as_secs_f64()).with_message(progress());
                    let _ = ctx.peer.notify_progress(param).await;
                }
            }
        }
    }

    /// How a task is doing, for progress notifications.
    fn task_progress(&self, token: Token) -> String {
        match ops::status(&self.store, token) {
            Ok(v) => v.summary.unwrap_or_default(),
            Err(e) => e.message(Frontend::Mcp),
        }
    }

    /// Launch, then settle with progress and cancellation.
    async fn start(&self, launch: Result<ops::Launch>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult> {
        let launch = launch?;
        let wait = launch.wait;
        let token = ops::launch(&self.store, launch).await?;
        let settled = self.watch(ops::settle(&self.store, token, wait), &ctx, || self.task_progress(token)).await;
        Ok(result::task(&settled.unwrap_or_else(|| Err(cancelled(token)))?, None))
    }

    #[tool(
        description = "Ask a role's sub-agent a question. Returns the answer if it finishes within wait_secs \
                       (default 10), else a token to pass to `await`. async: true returns the token at once.",
        annotations(title = "Ask a sub-agent", read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = true),
        output_schema = schema_for_output::<TaskView>()
    )]
    async fn ask(
        &self,
        Parameters(p): Parameters<AskParams>,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResult, ErrorData> {
        answer(self.start(p.into_launch(self.options.agents_file.clone()), ctx).await)
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
        answer(self.start(p.into_launch(), ctx).await)
    }

    #[tool(
        name = "await",
        description = "Wait for a task to end, up to timeout_secs (default 55, at most 300). Returns its status, \
                       line count and, once it has ended, its summary. If it says the task is still running, \
                       call await again.",
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
                let limit = seconds_or("timeout_secs", p.timeout_secs, ops::AWAIT_TIMEOUT)?.min(AWAIT_CAP);
                let wait = ops::await_task(&self.store, token, Some(limit));
                let v = self
                    .watch(wait, &ctx, || self.task_progress(token))
                    .await
                    .unwrap_or_else(|| Err(cancelled(token)))?;
                Ok(result::task(&v, None))
            }
            .await,
        )
    }

    #[tool(
        description = "Stop a task: SIGTERM to all its processes, SIGKILL after grace_secs (default 5). Returns \
                       its partial summary. A task that already ended is left as it is and its final state \
                       returned, with a note that nothing was stopped.",
        annotations(title = "Halt a task", read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<TaskView>()
    )]
    async fn halt(&self, Parameters(p): Parameters<HaltParams>) -> std::result::Result<CallToolResult, ErrorData> {
        answer(
            async {
                let token = Token::parse(&p.token)?;
                let grace = seconds_or("grace_secs", p.grace_secs, ops::DEFAULT_GRACE)?;
                Ok(match ops::halt_if_running(&self.store, token, grace).await? {
                    Halted::Stopped(v) => result::task(&v, Some(Status::Cancelled)),
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
        description = "List tasks (oldest first) with role, status, elapsed time, log lines and question preview. \
                       Optional filters: status, role.",
        annotations(title = "List tasks", read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<TaskList>()
    )]
    async fn list(&self, Parameters(p): Parameters<ListParams>) -> std::result::Result<CallToolResult, ErrorData> {
        answer(p.filter().and_then(|f| ops::list(&self.store, &f)).map(|tasks| {
            let text = tasks
                .iter()
                .map(|v| format!("{} {} {} {} lines: {}", v.token, v.role, v.status, v.line_count, v.question))
                .collect::<Vec<_>>()
                .join("\n");
            let text = if text.is_empty() { "no tasks".to_owned() } else { text };
            result::structured(&TaskList { count: tasks.len(), tasks }, text, false)
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

#[tool_router(router = events_router)]
impl AgentctlServer {
    #[tool(
        description = "Block until the next event of a session: a task finishing (task_finished), or a message \
                       or question a task posted. Returns the oldest one not yet taken, at once if one is queued; \
                       each event goes to one caller only. After timeout_secs (default 55, at most 300) returns \
                       {type: timeout}: call again to keep waiting.",
        annotations(title = "Wait for an event", read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schema_for_output::<Event>()
    )]
    async fn wait_for_event(
        &self,
        Parameters(p): Parameters<WaitForEventParams>,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResult, ErrorData> {
        answer(
            async {
                let kinds = p.kinds()?;
                let limit = seconds_or("timeout_secs", p.timeout_secs, ops::AWAIT_TIMEOUT)?.min(AWAIT_CAP);
                let started = tokio::time::Instant::now();
                let progress = || format!("waiting for an event for {:.0}s", started.elapsed().as_secs_f64());
                let wait = ops::wait_event(&self.store, p.session.as_deref(), &kinds, limit);
                let cancelled = || Err(Error::Usage("the wait was cancelled; the session's events stay queued".into()));
                let e = self.watch(wait, &ctx, progress).await.unwrap_or_else(cancelled)?;
                Ok(result::structured(&e, e.describe(), false))
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
            let session = p.session.map(Ok).unwrap_or_else(|| ops::session_of(None))?;
            let e = ops::notify(&self.store, Some(&session), p.question, &p.message)?;
            Ok(result::structured(&e, e.describe(), false))
        })())
    }
}

/// What a call the client cancelled answers (clients normally discard it).
fn cancelled(token: Token) -> Error {
    Error::Usage(format!("the wait was cancelled; task {token} keeps running. {STILL_RUNNING}"))
}

/// A tool's answer: refusals and failures become results with `isError: true` and the message
/// that says what to do; only malformed requests are protocol errors (rmcp raises those).
fn answer(r: Result<CallToolResult>) -> std::result::Result<CallToolResult, ErrorData> {
    Ok(r.unwrap_or_else(|e| result::error(&e)))
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for AgentctlServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("agentctl", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}
