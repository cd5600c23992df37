//! A gate in front of the stdio transport for what the server's handler never sees: protocol
//! 2026-07-28 has no `ping`, but rmcp answers a ping itself while no lifecycle is chosen yet
//! (even one that names 2026-07-28), and one without `_meta` in a stateless session fails as
//! missing metadata. Here every ping on that protocol gets "method not found". So do the
//! `tasks/*` methods in an `initialize` session: they belong to the tasks extension of
//! 2026-07-28, which rmcp would otherwise ask such a client to declare.

use std::future::Future;

use rmcp::RoleServer;
use rmcp::model::{
    CancelTaskMethod, ClientRequest, ErrorData, GetMeta, GetTaskMethod, JsonRpcMessage, PingRequestMethod,
    UpdateTaskMethod,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

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

    /// The refusal ("method not found") `request` gets, if any: a ping on a protocol that has
    /// none, a `tasks/*` method in a session that began with `initialize`. Notes the
    /// session's lifecycle on the way.
    fn refusal(&mut self, request: &ClientRequest) -> Option<ErrorData> {
        let stateless_meta = request.get_meta().protocol_version().map(|v| !v.has_initialize());
        let legacy = stateless_meta.or(self.stateless) == Some(false);
        match request {
            ClientRequest::PingRequest(_) => {
                (stateless_meta.or(self.stateless) == Some(true)).then(ErrorData::method_not_found::<PingRequestMethod>)
            }
            ClientRequest::GetTaskRequest(_) => legacy.then(ErrorData::method_not_found::<GetTaskMethod>),
            ClientRequest::UpdateTaskRequest(_) => legacy.then(ErrorData::method_not_found::<UpdateTaskMethod>),
            ClientRequest::CancelTaskRequest(_) => legacy.then(ErrorData::method_not_found::<CancelTaskMethod>),
            // Discovery opens no lifecycle; the first other request chooses one.
            ClientRequest::DiscoverRequest(_) => None,
            ClientRequest::InitializeRequest(_) => {
                self.stateless.get_or_insert(false);
                None
            }
            _ => {
                if let Some(s) = stateless_meta {
                    self.stateless.get_or_insert(s);
                }
                None
            }
        }
    }
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
