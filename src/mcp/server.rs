//! The rmcp server: its options, how it serves, and what every tool shares: progress
//! notifications and cancellation for the calls that wait, errors as results. The tools are
//! in `task_tools` and `event_tools`.

use std::collections::HashMap;
use std::future::Future;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    CallToolResult, CancelTaskParams, CompleteRequestMethod, CompleteRequestParams, CompleteResult, GetTaskParams,
    GetTaskResult, Implementation, InitializeRequestParams, InitializeResult, ListPromptsRequestMethod,
    ListPromptsResult, ListResourceTemplatesRequestMethod, ListResourceTemplatesResult, ListResourcesRequestMethod,
    ListResourcesResult, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, ServerConfig,
    TASKS_EXTENSION_ID, UpdateTaskParams,
};
use rmcp::service::{RequestContext, ServerInitializeError};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, tool_handler};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::gate::Gate;
use super::limits::MaxWait;
use super::wire::Wire;
use super::{arguments, publish, result};
use crate::error::{Error, Frontend, Result};
use crate::ops::{self, STILL_RUNNING};
use crate::store::Store;
use crate::task::Token;

/// How often a waiting call reports progress to a client that asked for it.
const PROGRESS_EVERY: Duration = Duration::from_secs(3);

/// What the server tells its clients at start; `{max_wait}` and `{hybrid_wait}` are filled in.
const INSTRUCTIONS: &str = "agentctl runs sub-agents (claude, codex, kiro-cli…) as tasks that outlive \
this server. `ask` (role, question) answers in the call if the task ends within {hybrid_wait}, else \
returns its token (an MCP task if your client takes them); for slow work pass \
async: true and start every task first. Collect with `wait_for_event` (each \
task_finished carries an answer: N tasks, N calls) or `await` with tokens: [...] (returns when any ends). A task \
may ask you a question (in await or wait_for_event): `reply` to it. `send` messages a running task. \
No call blocks over {max_wait}: on `timeout` or `running`, call again. `ask` with `to` (a token) goes on with an \
ended task's conversation (`fork`: in a new task, from a copy). `halt` stops; `list`, `logs` read. Failed calls name the next tool.";

/// How the server was started (`agentctl mcp` and the global flags).
#[derive(Clone, Debug)]
pub struct Options {
    /// Offer the `run` tool.
    pub allow_run: bool,
    /// `--agents FILE`: the agent templates `ask` uses, as for the CLI.
    pub agents_file: Option<PathBuf>,
    /// `--max-wait`: the longest one call blocks.
    pub max_wait: MaxWait,
    /// `--result-budget`: the most bytes of one result, both copies together.
    pub budget: usize,
}

/// The MCP server over one home, for one client connection.
#[derive(Clone)]
pub struct AgentctlServer {
    pub(super) store: Store,
    pub(super) options: Options,
    pub(super) conn: Arc<Connection>,
    /// Writes the events `notify` calls post, those in flight together in one transaction.
    pub(super) poster: Arc<ops::Poster>,
    /// Cancelled when the server stops: calls that wait answer at once (see `watch`).
    pub(super) stopping: CancellationToken,
    tool_router: ToolRouter<AgentctlServer>,
    instructions: String,
}

/// What belongs to one client connection: its default session, and the events handed to it.
pub(super) struct Connection {
    /// Where its tasks report and its waits look, unless a call names another session.
    pub session: String,
    /// Holds the events its waits were handed, until its next wait shows they arrived.
    pub holder: ops::Holder,
    /// The seqs of the events its waits answered with since its last wait began.
    answered: Mutex<Vec<u64>>,
    /// The latest wait of each (session, types): a newer one supersedes it (see
    /// `supersede`).
    waits: Mutex<HashMap<String, watch::Sender<u64>>>,
    /// The halts `tasks/cancel` left running: the server waits for them before it exits.
    halts: Mutex<Vec<JoinHandle<()>>>,
    /// Whether a newer wait supersedes an older one (stdio). Over HTTP a client that gives up
    /// on a call closes its request, and one token's calls may rightly wait side by side.
    supersedes: bool,
    /// What a wait that nothing supersedes watches: it never changes.
    never: watch::Sender<u64>,
}

/// Numbers the connections of this process.
static CONNECTIONS: AtomicU64 = AtomicU64::new(0);

impl Connection {
    fn new() -> Result<Connection> {
        Ok(Connection { supersedes: true, ..Connection::named(ops::connection_session()?) })
    }

    /// An HTTP client's connection, whose tasks report to `session` (its token's name).
    pub(super) fn named(session: String) -> Connection {
        let n = CONNECTIONS.fetch_add(1, Ordering::Relaxed);
        Connection {
            session,
            holder: ops::Holder::new(n),
            answered: Mutex::default(),
            waits: Mutex::default(),
            halts: Mutex::default(),
            supersedes: false,
            never: watch::channel(0).0,
        }
    }

    /// A wait answered with event `seq`.
    pub fn answered(&self, seq: u64) {
        self.answered.lock().unwrap_or_else(|e| e.into_inner()).push(seq);
    }

    /// A new wait began: the events the earlier ones answered with reached the client (it
    /// calls again). Not those a wait still under way has taken: its answer is not out yet.
    pub fn arrived(&self, store: &Store) -> Result<()> {
        let seqs = std::mem::take(&mut *self.answered.lock().unwrap_or_else(|e| e.into_inner()));
        for seq in seqs {
            ops::delivered(store, &self.holder, Some(seq))?;
        }
        Ok(())
    }

    /// A halt that goes on after its request was answered.
    pub fn halting(&self, halt: JoinHandle<()>) {
        let mut halts = self.halts.lock().unwrap_or_else(|e| e.into_inner());
        halts.retain(|h| !h.is_finished());
        halts.push(halt);
    }

    /// Wait for the halts still under way.
    pub(super) async fn halted(&self) {
        let halts = std::mem::take(&mut *self.halts.lock().unwrap_or_else(|e| e.into_inner()));
        for h in halts {
            let _ = h.await;
        }
    }

    /// Start a wait on `key`: an older wait of this connection on the same key ends when the
    /// returned receiver changes. A client that gave up on a wait without cancelling it and
    /// waits again must get the next event, not the abandoned call.
    pub fn supersede(&self, key: String) -> watch::Receiver<u64> {
        if !self.supersedes {
            return self.never.subscribe();
        }
        let mut waits = self.waits.lock().unwrap_or_else(|e| e.into_inner());
        let tx = waits.entry(key).or_insert_with(|| watch::channel(0).0);
        tx.send_modify(|g| *g += 1);
        tx.subscribe()
    }
}

/// Serve MCP on stdin/stdout until the client goes away (stdin at its end, before or after
/// initialization: a clean exit). A bad `--agents` file is refused before anything is served.
pub async fn serve(store: Store, options: Options) -> Result<()> {
    // Clients stop their servers with a signal as often as by closing stdin (Claude Code sends
    // SIGINT at `/exit`): either is a clean end, from the first moment.
    let mut stop =
        Box::pin(stop_signal().map_err(|e| Error::Internal(format!("cannot watch for SIGINT and SIGTERM: {e}")))?);
    if let Some(file) = &options.agents_file {
        ops::check_agents_file(&store, file)?;
    }
    if std::io::stdin().is_terminal() {
        // Someone started it by hand: say what it is rather than sit silently.
        eprintln!(
            "agentctl mcp: serving MCP on stdin/stdout; this is meant to be started by an MCP client \
             (see the README's \"MCP server\"); Ctrl-D to quit"
        );
    }
    let server = AgentctlServer::new(store.clone(), options)?;
    let conn = server.conn.clone();
    let started = tokio::select! {
        started = server.serve(Gate::new(Wire::stdio())) => started,
        () = &mut stop => return Ok(()),
    };
    let running = match started {
        Ok(running) => running,
        // Closed before any request chose a lifecycle: nothing was asked, nothing went wrong.
        Err(ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
        Err(e) => return Err(Error::Internal(format!("the MCP session could not start: {e}"))),
    };
    let cancel = running.cancellation_token();
    tokio::spawn(async move {
        stop.await;
        cancel.cancel();
    });
    let ended = running.waiting().await.map_err(|e| Error::Internal(format!("the MCP session failed: {e}")));
    // A task the client cancelled is not left half-halted.
    conn.halted().await;
    // The events its last waits were handed may never have arrived: they go to the next waiter.
    ops::undelivered(&store, &conn.holder, None)?;
    // Here, not as the last handle on the store goes: the poster's thread may hold that one as
    // the process exits.
    store.checkpoint();
    ended.map(drop)
}

/// Resolves at the first SIGINT or SIGTERM.
pub(super) fn stop_signal() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    })
}

impl AgentctlServer {
    /// The server over `store`, its tools published as `options` say.
    pub(super) fn new(store: Store, options: Options) -> Result<AgentctlServer> {
        AgentctlServer::with_connection(store, options, Arc::new(Connection::new()?))
    }

    /// The server for the client of `conn`.
    pub(super) fn with_connection(store: Store, options: Options, conn: Arc<Connection>) -> Result<AgentctlServer> {
        let mut tool_router =
            Self::task_router() + Self::event_router() + Self::converse_router() + Self::usage_router();
        if !options.allow_run {
            // Arbitrary commands are opt-in: without --allow-run the tool does not exist.
            tool_router.remove_route("run");
        }
        publish::publish(&mut tool_router, options.max_wait);
        // A file that cannot be read now is refused by `ask` itself, saying why.
        if let Ok(roles) = ops::roles(store.home(), options.agents_file.as_deref()) {
            publish::name_roles(&mut tool_router, &roles);
        }
        arguments::explain(&mut tool_router);
        let instructions = options.max_wait.fill(INSTRUCTIONS);
        let poster = Arc::new(ops::Poster::new(store.clone())?);
        Ok(AgentctlServer {
            store,
            options,
            conn,
            poster,
            stopping: CancellationToken::new(),
            tool_router,
            instructions,
        })
    }

    /// Wait for `work`, sending `progress()` as a progress notification every few seconds when
    /// the client asked for them; `None` if the client cancelled or the server is stopping (the
    /// work's subject, a task or an event, is never touched: dropping `work` only stops waiting).
    pub(super) async fn watch<T>(
        &self,
        work: impl Future<Output = T>,
        ctx: &RequestContext<RoleServer>,
        progress: impl Fn() -> String,
    ) -> Option<T> {
        let progress_token = ctx.meta.get_progress_token();
        // Over HTTP: the client went away before the answer was sent.
        let gone = super::delivery::Delivery::of(ctx).map(|d| d.gone.clone()).unwrap_or_default();
        let started = tokio::time::Instant::now();
        let mut tick = tokio::time::interval_at(started + PROGRESS_EVERY, PROGRESS_EVERY);
        tokio::pin!(work);
        loop {
            tokio::select! {
                // Cancellation first: once the client has given up on this request, the work is
                // not polled again, so a wait cannot take an event whose answer nobody reads.
                biased;
                _ = ctx.ct.cancelled() => return None,
                // What waits is not touched, as for a cancelled call: the client calls again.
                _ = self.stopping.cancelled() => return None,
                _ = gone.cancelled() => return None,
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
    pub(super) fn task_progress(&self, token: Token) -> String {
        match ops::status(&self.store, token) {
            Ok(v) => match &v.pending_question {
                Some(q) => format!("task {token} asks ({}): {}", q.id, q.text),
                None => v.summary.unwrap_or_default(),
            },
            Err(e) => e.message(Frontend::Mcp),
        }
    }
}

impl AgentctlServer {
    /// What a wait for `tokens` answers when it ends early: the client cancelled it (clients
    /// normally discard the answer), or the server is stopping.
    pub(super) fn cut_short(&self, tokens: &[Token]) -> Error {
        let tokens: Vec<String> = tokens.iter().map(Token::to_string).collect();
        let why = self.why_cut_short();
        Error::Usage(format!("{why}; task {} keeps running. {STILL_RUNNING}", tokens.join(", ")))
    }

    /// Why a wait ended before its subject did.
    pub(super) fn why_cut_short(&self) -> &'static str {
        match self.stopping.is_cancelled() {
            true => "the server is stopping, so the wait ended (call again once it is back)",
            false => "the wait was cancelled",
        }
    }
}

/// A tool's answer: refusals and failures become results with `isError: true` and the message
/// that says what to do; only malformed requests are protocol errors (rmcp raises those).
pub(super) fn answer<T: From<CallToolResult>>(r: Result<T>) -> std::result::Result<T, ErrorData> {
    Ok(r.unwrap_or_else(|e| result::error(&e).into()))
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for AgentctlServer {
    fn get_info(&self) -> ServerConfig {
        // The tasks extension is offered where it exists (2026-07-28, `server/discover`);
        // `initialize` (older protocols) takes it out again.
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tasks().build())
            .with_server_info(Implementation::new("agentctl", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.instructions.clone())
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        // Protocols with `initialize` predate the tasks extension: their sessions are as before
        // (the gate refuses `tasks/*` in them).
        if let Some(extensions) = result.capabilities.extensions.as_mut() {
            extensions.remove(TASKS_EXTENSION_ID);
            if extensions.is_empty() {
                result.capabilities.extensions = None;
            }
        }
        Ok(result)
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<GetTaskResult, ErrorData> {
        self.get_native(request, &context).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _: RequestContext<RoleServer>,
    ) -> std::result::Result<(), ErrorData> {
        self.update_native(request)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _: RequestContext<RoleServer>,
    ) -> std::result::Result<(), ErrorData> {
        self.cancel_native(request)
    }

    // Only tools are advertised: whatever else a client asks for does not exist here
    // ("method not found"), rather than an empty list that looks like support.

    async fn list_prompts(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> std::result::Result<ListPromptsResult, ErrorData> {
        Err(ErrorData::method_not_found::<ListPromptsRequestMethod>())
    }

    async fn list_resources(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> std::result::Result<ListResourcesResult, ErrorData> {
        Err(ErrorData::method_not_found::<ListResourcesRequestMethod>())
    }

    async fn list_resource_templates(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> std::result::Result<ListResourceTemplatesResult, ErrorData> {
        Err(ErrorData::method_not_found::<ListResourceTemplatesRequestMethod>())
    }

    async fn complete(
        &self,
        _: CompleteRequestParams,
        _: RequestContext<RoleServer>,
    ) -> std::result::Result<CompleteResult, ErrorData> {
        Err(ErrorData::method_not_found::<CompleteRequestMethod>())
    }
}
