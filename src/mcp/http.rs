//! `agentctl mcp --http`: the same server over Streamable HTTP (rmcp's service, in axum), for
//! leads on other machines. Every request is checked here before the MCP service sees it: its
//! Host and Origin, its bearer token (`http_auth`), its size, and for a read-only token what it
//! calls. Each token is a client of its own: its tasks report to the session named after it,
//! and its waits take that session's events, whichever connection or request they come on.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE, HOST};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use futures_util::StreamExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::delivery::Delivery;
use super::http_auth::{self, Call, ENDPOINT, METADATA};
use super::http_early;
use super::server::{AgentctlServer, Connection, Options, stop_signal};
use crate::error::{Error, Result};
use crate::ops::{self, Identity};
use crate::store::Store;

/// The largest request body taken (an `ask` with a long prompt fits many times over).
pub const MAX_BODY: usize = 4 * 1024 * 1024;

/// Where and how the HTTP server listens (`agentctl mcp --http …`).
#[derive(Clone, Debug)]
pub struct HttpOptions {
    pub listen: SocketAddr,
    /// Host names (or `host:port`) requests may name, beside loopback's.
    pub allowed_hosts: Vec<String>,
    /// Listen on an address other machines reach, without TLS.
    pub insecure_http: bool,
    /// The most calls one token has under way at once.
    pub max_calls: usize,
    /// The certificate chain and private key (PEM files) to serve over TLS with.
    pub tls: Option<(PathBuf, PathBuf)>,
}

type Service = StreamableHttpService<AgentctlServer, LocalSessionManager>;

/// The server's state: the home, and a client (MCP service and connection) per token name.
struct Http {
    store: Store,
    options: Options,
    allowed_hosts: Vec<String>,
    clients: Mutex<HashMap<String, Client>>,
    max_calls: usize,
    /// `http` or `https`.
    scheme: &'static str,
    /// Cancelled at SIGINT or SIGTERM: waiting calls answer, new requests are refused.
    stopping: CancellationToken,
    /// Cancelled once the calls under way are answered: ends every session and stream.
    closing: CancellationToken,
    /// The POST requests under way, and a bell rung as each ends.
    in_flight: AtomicUsize,
    ended: Notify,
}

/// One token's client: its MCP service, its connection, and its calls under way.
#[derive(Clone)]
struct Client {
    service: Service,
    conn: Arc<Connection>,
    calls: Arc<Semaphore>,
}

/// How long a stop waits for the calls under way to be answered.
const DRAIN: Duration = Duration::from_secs(10);

/// How long a request's body may take to arrive: a client that sends a byte a second holds
/// nothing for longer.
const BODY_TIME: Duration = Duration::from_secs(30);

/// Serve MCP over HTTP until SIGINT or SIGTERM; calls under way are answered first.
pub async fn serve_http(store: Store, options: Options, http: HttpOptions) -> Result<()> {
    if !http.listen.ip().is_loopback() && !http.insecure_http && http.tls.is_none() {
        return Err(Error::Usage(format!(
            "--http {} would send tokens and tasks in clear text to other machines; give --tls-cert and \
             --tls-key, or listen on 127.0.0.1 behind a TLS proxy, or pass --insecure-http if the network is trusted",
            http.listen
        )));
    }
    let tls = http.tls.as_ref().map(|(cert, key)| super::http_listen::tls(cert, key)).transpose()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    if let Some(file) = &options.agents_file {
        ops::check_agents_file(&store, file)?;
    }
    let listener = tokio::net::TcpListener::bind(http.listen)
        .await
        .map_err(|e| Error::Usage(format!("cannot listen on {}: {e}", http.listen)))?;
    let bound = listener.local_addr().map_err(|e| Error::Internal(format!("cannot read the bound address: {e}")))?;
    let mut allowed_hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).into();
    allowed_hosts.push(bound.ip().to_string());
    allowed_hosts.extend(http.allowed_hosts);
    let state = Arc::new(Http {
        store: store.clone(),
        options,
        allowed_hosts,
        clients: Mutex::default(),
        max_calls: http.max_calls,
        scheme,
        stopping: CancellationToken::new(),
        closing: CancellationToken::new(),
        in_flight: AtomicUsize::new(0),
        ended: Notify::new(),
    });
    let app = Router::new()
        .route(ENDPOINT, any(mcp))
        .route(METADATA, get(metadata))
        .route(&format!("{METADATA}{ENDPOINT}"), get(metadata))
        .with_state(state.clone());
    let stop = stop_signal().map_err(|e| Error::Internal(format!("cannot watch for SIGINT and SIGTERM: {e}")))?;
    // The address as bound (port 0 picks one): scripts and tests read it here.
    eprintln!("agentctl mcp: serving MCP at {scheme}://{bound}{ENDPOINT}");
    let draining = state.clone();
    let shutdown = async move {
        stop.await;
        draining.stop().await;
    };
    super::http_listen::serve(listener, app, tls, shutdown).await;
    let clients: Vec<Arc<Connection>> = state.clients().values().map(|c| c.conn.clone()).collect();
    for conn in clients {
        conn.halted().await;
        ops::undelivered(&store, &conn.holder, None)?;
    }
    store.checkpoint();
    Ok(())
}

impl Http {
    /// Stop: the calls that wait answer at once and new requests are refused; once the calls
    /// under way are answered (or after `DRAIN`), every session and stream ends.
    async fn stop(&self) {
        self.stopping.cancel();
        let _ = tokio::time::timeout(DRAIN, async {
            loop {
                let ended = self.ended.notified();
                if self.in_flight.load(Ordering::SeqCst) == 0 {
                    break;
                }
                ended.await;
            }
        })
        .await;
        self.closing.cancel();
    }

    fn clients(&self) -> std::sync::MutexGuard<'_, HashMap<String, Client>> {
        self.clients.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The client `who` (made at its first request).
    fn client(&self, who: &Identity) -> Result<Client> {
        let mut clients = self.clients();
        if let Some(client) = clients.get(&who.name) {
            return Ok(client.clone());
        }
        let conn = Arc::new(Connection::named(who.name.clone()));
        let mut server = AgentctlServer::with_connection(self.store.clone(), self.options.clone(), conn.clone())?;
        server.stopping = self.stopping.clone();
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(self.allowed_hosts.clone())
            .with_max_request_body_bytes(MAX_BODY)
            // Clients and proxies that give up on a quiet stream (httpx: after 5 s) keep it.
            .with_sse_keep_alive(Some(Duration::from_secs(4)))
            .with_cancellation_token(self.closing.child_token());
        let service = StreamableHttpService::new(move || Ok(server.clone()), Arc::default(), config);
        let client = Client { service, conn, calls: Arc::new(Semaphore::new(self.max_calls)) };
        clients.insert(who.name.clone(), client.clone());
        Ok(client)
    }

    /// `http(s)://<the request's Host>`: where the client reached this server.
    fn base(&self, req: &Request) -> String {
        let host = req.headers().get(HOST).and_then(|h| h.to_str().ok()).unwrap_or("localhost");
        format!("{}://{host}", self.scheme)
    }
}

async fn metadata(State(h): State<Arc<Http>>, req: Request) -> Response {
    if !http_auth::host_allowed(req.headers(), &h.allowed_hosts) {
        return misdirected();
    }
    http_auth::metadata(&h.base(&req))
}

async fn mcp(State(h): State<Arc<Http>>, req: Request) -> Response {
    let started = Instant::now();
    let counted = (req.method() == axum::http::Method::POST).then(|| InFlight::count(&h));
    let mut log = Log {
        method: req.method().to_string(),
        call: "-".into(),
        who: "-".into(),
        status: 0,
        started,
        permit: None,
        delivery: None,
    };
    let response = answer(&h, req, &mut log).await;
    log.status = response.status().as_u16();
    Sent { _counted: counted, log, whole: false }.with(response)
}

/// What the request log says of a request, in one line once its answer is sent.
struct Log {
    method: String,
    call: String,
    who: String,
    status: u16,
    started: Instant,
    /// One of its token's calls under way (`HttpOptions::max_calls`).
    permit: Option<OwnedSemaphorePermit>,
    /// The events its answer carries.
    delivery: Option<Arc<Delivery>>,
}

/// What lasts as long as an answer's body: a streamed answer (SSE) is written after the
/// request's handler has returned, a session's stream (GET) until it closes.
struct Sent {
    _counted: Option<InFlight>,
    log: Log,
    /// Whether the whole body was written.
    whole: bool,
}

impl Sent {
    /// `response`, this kept until its body is written (then `whole`) or dropped.
    fn with(self, response: Response) -> Response {
        let (parts, body) = response.into_parts();
        // Reached only once the body's every chunk was taken; dropped unreached otherwise.
        let end = futures_util::stream::once(async move {
            let mut sent = self;
            sent.whole = true;
            drop(sent);
            None
        });
        let body = body.into_data_stream().map(Some).chain(end).filter_map(std::future::ready);
        Response::from_parts(parts, Body::from_stream(body))
    }
}

impl Drop for Sent {
    fn drop(&mut self) {
        if let Some(delivery) = &self.log.delivery {
            delivery.done(self.whole);
        }
        let l = &self.log;
        let ms = l.started.elapsed().as_secs_f64() * 1000.0;
        eprintln!("agentctl mcp: {} {} {} {} {ms:.1}ms", l.method, l.call, l.who, l.status);
    }
}

async fn answer(h: &Http, req: Request, log: &mut Log) -> Response {
    if !http_auth::host_allowed(req.headers(), &h.allowed_hosts) {
        return misdirected();
    }
    if h.stopping.is_cancelled() {
        let says = "the server is stopping; call again once it is back (tasks keep running)";
        return refusal(StatusCode::SERVICE_UNAVAILABLE, says.into());
    }
    let who = match ops::authenticate(&h.store, http_auth::bearer(req.headers())) {
        Ok(who) => who,
        Err(denied) => return http_auth::unauthorized(&h.base(&req), &denied),
    };
    log.who = who.name.clone();
    let client = match h.client(&who) {
        Ok(c) => c,
        Err(e) => return refusal(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    if req.method() == axum::http::Method::POST {
        match client.calls.clone().try_acquire_owned() {
            Ok(permit) => log.permit = Some(permit),
            Err(_) => {
                let says = format!(
                    "token `{}` has {} calls under way, the most it may; wait for one to end",
                    who.name, h.max_calls
                );
                return refusal(StatusCode::TOO_MANY_REQUESTS, says);
            }
        }
    }
    let (mut parts, body) = req.into_parts();
    resume_after(&mut parts.headers);
    let bytes = match tokio::time::timeout(BODY_TIME, axum::body::to_bytes(body, MAX_BODY)).await {
        Ok(Ok(b)) => b,
        Ok(Err(_)) => {
            let says = format!("the request body is over {} MiB; send less at a time", MAX_BODY >> 20);
            return refusal(StatusCode::PAYLOAD_TOO_LARGE, says);
        }
        Err(_) => {
            let says = format!("the request body took over {} s to arrive", BODY_TIME.as_secs());
            return refusal(StatusCode::REQUEST_TIMEOUT, says);
        }
    };
    // GET (a session's stream) and DELETE (its end) carry no message.
    let call = match parts.method == axum::http::Method::POST {
        true => match Call::read(&bytes) {
            Ok(call) => call,
            Err(refused) => return refused.into_response(),
        },
        false => Call::default(),
    };
    log.call = call.label();
    if who.read_only && call.changes_tasks() {
        return http_auth::forbidden(&call, &who.name);
    }
    let delivery = Arc::new(Delivery::new(h.store.clone(), client.conn.holder.clone()));
    parts.extensions.insert(delivery.clone());
    log.delivery = Some(delivery);
    let ending = parts.method == axum::http::Method::DELETE;
    let posted = parts.method == axum::http::Method::POST;
    let served = async move {
        let mut response = client.service.handle(Request::from_parts(parts, Body::from(bytes))).await.map(Body::new);
        if ending && response.status() == StatusCode::ACCEPTED {
            // A session's end, done: rmcp says 202, where clients look for 200 or 204 (the
            // Python SDK warns "Session termination failed: 202").
            *response.status_mut() = StatusCode::NO_CONTENT;
            *response.body_mut() = Body::empty();
        }
        as_rpc_error(response, &call).await
    };
    match posted {
        true => http_early::begun(served).await,
        false => served.await,
    }
}

/// A stream resumed from `Last-Event-ID: N/R` must go on after event N, but rmcp's session
/// replays from N itself, so the client would get N twice: ask it for N + 1 onwards.
fn resume_after(headers: &mut axum::http::HeaderMap) {
    let Some(id) = headers.get("last-event-id").and_then(|v| v.to_str().ok()) else { return };
    let (index, rest) = id.split_once('/').map_or((id, None), |(i, r)| (i, Some(r)));
    let Ok(index) = index.parse::<usize>() else { return };
    let next = match rest {
        Some(request) => format!("{}/{request}", index.saturating_add(1)),
        None => index.saturating_add(1).to_string(),
    };
    if let Ok(value) = axum::http::HeaderValue::from_str(&next) {
        headers.insert("last-event-id", value);
    }
}

/// A refusal of the MCP service in plain text (no session, a session unknown, a header
/// missing) as a JSON-RPC error: what a client reads for every request it got wrong.
async fn as_rpc_error(response: Response, call: &Call) -> Response {
    let json = response.headers().get(CONTENT_TYPE).is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
    if !response.status().is_client_error() || json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024).await.unwrap_or_default();
    let message = String::from_utf8_lossy(&text).trim().to_owned();
    let mut r = http_auth::rpc_error(parts.status, call.id.clone(), -32600, message);
    for (name, value) in &parts.headers {
        if name != CONTENT_TYPE && name != CONTENT_LENGTH {
            r.headers_mut().insert(name, value.clone());
        }
    }
    r
}

/// One POST request under way (`Http::in_flight`), until its answer is sent (`Sent`).
struct InFlight(Arc<Http>);

impl InFlight {
    fn count(h: &Arc<Http>) -> InFlight {
        h.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(h.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.0.ended.notify_waiters();
    }
}

/// The answer to a request whose Host or Origin is not this server's.
fn misdirected() -> Response {
    let says = "the request's Host or Origin is not one this server answers (see --allowed-host)";
    refusal(StatusCode::FORBIDDEN, says.into())
}

/// A request refused before the MCP service saw it, saying why.
fn refusal(status: StatusCode, says: String) -> Response {
    (status, axum::Json(serde_json::json!({ "error": says }))).into_response()
}
