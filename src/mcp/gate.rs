//! A gate in front of the stdio transport for what the server's handler never sees: protocol
//! 2026-07-28 has no `ping`, but rmcp answers a ping itself while no lifecycle is chosen yet
//! (even one that names 2026-07-28), and one without `_meta` in a stateless session fails as
//! missing metadata. Here every ping on that protocol gets "method not found". So do the
//! `tasks/*` methods in an `initialize` session: they belong to the tasks extension of
//! 2026-07-28, which rmcp would otherwise ask such a client to declare. A request of a method
//! served here whose params rmcp cannot read (a `taskId` that is a number, `_meta` a string)
//! reaches the gate as a custom request, which the handler would answer "method not found", as
//! if the method were not served: it gets "invalid params" (-32602), saying what is wrong.

use std::future::Future;

use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestMethod, CallToolRequestParams, CancelTaskMethod, CancelTaskParams, ClientRequest, ConstString,
    CustomRequest, DiscoverRequestMethod, DiscoverRequestParams, ErrorCode, ErrorData, GetMeta, GetTaskMethod,
    GetTaskParams, InitializeRequestParams, InitializeResultMethod, JsonRpcMessage, ListToolsRequestMethod,
    PaginatedRequestParams, PingRequestMethod, UpdateTaskMethod, UpdateTaskParams,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::shape;

/// The transport `T`, with pings on the stateless protocol refused.
pub struct Gate<T> {
    inner: T,
    /// Whether the session runs without `initialize` (2026-07-28 and later), once known.
    stateless: Option<bool>,
}

impl<T> Gate<T> {
    /// Gate `inner`.
    pub fn new(inner: T) -> Gate<T> {
        Gate { inner, stateless: None }
    }

    /// The refusal `request` gets, if any: "method not found" for a ping on a protocol that
    /// has none and a `tasks/*` method in a session that began with `initialize`; "invalid
    /// params" for a method served here whose params do not fit it. Notes the session's
    /// lifecycle on the way.
    fn refusal(&mut self, request: &ClientRequest) -> Option<ErrorData> {
        let stateless_meta = request.get_meta().protocol_version().map(|v| !v.has_initialize());
        let stateless = stateless_meta.or(self.stateless);
        // By name: a request whose params do not fit comes as a custom request of its method.
        let method = request.method();
        let absent = match method {
            PingRequestMethod::VALUE => stateless == Some(true),
            GetTaskMethod::VALUE | UpdateTaskMethod::VALUE | CancelTaskMethod::VALUE => stateless == Some(false),
            _ => false,
        };
        if absent {
            return Some(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, method.to_owned(), None));
        }
        match request {
            // rmcp's handler would say "method not found" of one it serves.
            ClientRequest::CustomRequest(r) => return misfit(r),
            // Discovery opens no lifecycle; the first other request chooses one.
            ClientRequest::DiscoverRequest(_) => {}
            ClientRequest::InitializeRequest(_) => {
                self.stateless.get_or_insert(false);
            }
            _ => {
                if let Some(s) = stateless_meta {
                    self.stateless.get_or_insert(s);
                }
            }
        }
        None
    }
}

/// A method served here, what its params hold (as a JSON schema, for `shape`), and how rmcp
/// reads them (whose error says what `shape` does not see).
struct Served {
    schema: Value,
    read: fn(Value) -> Option<String>,
}

/// rmcp's reason for refusing `params` as a `P`, if it does.
fn reads<P: DeserializeOwned>(params: Value) -> Option<String> {
    serde_json::from_value::<P>(params).err().map(|e| e.to_string())
}

fn served(method: &str) -> Option<Served> {
    let string = json!({"type": "string"});
    let object = json!({"type": "object"});
    let task_id = json!({"type": "object", "properties": {"taskId": string}, "required": ["taskId"]});
    Some(match method {
        InitializeResultMethod::VALUE => Served {
            schema: json!({
                "type": "object",
                "properties": {"protocolVersion": string, "capabilities": object, "clientInfo": object},
                "required": ["protocolVersion", "capabilities", "clientInfo"],
            }),
            read: reads::<InitializeRequestParams>,
        },
        DiscoverRequestMethod::VALUE => Served { schema: object, read: reads::<DiscoverRequestParams> },
        PingRequestMethod::VALUE => Served { schema: object, read: |_| None },
        ListToolsRequestMethod::VALUE => Served {
            schema: json!({"type": "object", "properties": {"cursor": string}}),
            read: reads::<PaginatedRequestParams>,
        },
        CallToolRequestMethod::VALUE => Served {
            schema: json!({
                "type": "object",
                "properties": {"name": string, "arguments": object, "inputResponses": object, "requestState": string},
                "required": ["name"],
            }),
            read: reads::<CallToolRequestParams>,
        },
        GetTaskMethod::VALUE => Served { schema: task_id, read: reads::<GetTaskParams> },
        CancelTaskMethod::VALUE => Served { schema: task_id, read: reads::<CancelTaskParams> },
        UpdateTaskMethod::VALUE => Served {
            schema: json!({
                "type": "object",
                "properties": {"taskId": string, "inputResponses": object},
                "required": ["taskId", "inputResponses"],
            }),
            read: reads::<UpdateTaskParams>,
        },
        _ => return None,
    })
}

/// "Invalid params", saying which and why, for a request of a method served here whose
/// params rmcp could not read; `None` for a method not served (the handler says so).
fn misfit(request: &CustomRequest) -> Option<ErrorData> {
    let method = request.method.as_str();
    let Served { schema, read } = served(method)?;
    let params = request.params.clone().unwrap_or_else(|| json!({}));
    let why = if !params.is_object() {
        "params must be an object".to_owned()
    } else if params.get("_meta").is_some_and(|m| !m.is_object()) {
        "`_meta` must be an object".to_owned()
    } else if let Some(m) = shape::misfit(&schema, &params) {
        m.describe()
    } else {
        read(params).unwrap_or_else(|| "they do not fit it".to_owned())
    };
    Some(ErrorData::invalid_params(format!("invalid params for {method}: {why}"), None))
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Gate<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), T::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let msg = self.inner.receive().await?;
            let JsonRpcMessage::Request(req) = &msg else { return Some(msg) };
            let Some(error) = self.refusal(&req.request) else { return Some(msg) };
            let refusal = JsonRpcMessage::error(error, Some(req.id.clone()));
            // Sent on its own: `receive` may be dropped at any await (rmcp polls it in a
            // `select!`), and the answer must not be lost with it.
            tokio::spawn(self.inner.send(refusal));
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), T::Error>> + Send {
        self.inner.close()
    }
}
