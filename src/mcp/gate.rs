//! A gate in front of the stdio transport for what the server's handler never sees: protocol
//! 2026-07-28 has no `ping`, but rmcp answers a ping itself while no lifecycle is chosen yet
//! (even one that names 2026-07-28), and one without `_meta` in a stateless session fails as
//! missing metadata. Here every ping on that protocol gets "method not found".

use std::future::Future;

use rmcp::RoleServer;
use rmcp::model::{ClientRequest, ErrorData, GetMeta, JsonRpcMessage, PingRequestMethod};
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

    /// Whether `request` has to be refused as a ping on a protocol that has none; notes the
    /// session's lifecycle on the way.
    fn refuses(&mut self, request: &ClientRequest) -> bool {
        let stateless_meta = request.get_meta().protocol_version().map(|v| !v.has_initialize());
        match request {
            ClientRequest::PingRequest(_) => stateless_meta.or(self.stateless).unwrap_or(false),
            // Discovery opens no lifecycle; the first other request chooses one.
            ClientRequest::DiscoverRequest(_) => false,
            ClientRequest::InitializeRequest(_) => {
                self.stateless.get_or_insert(false);
                false
            }
            _ => {
                if let Some(s) = stateless_meta {
                    self.stateless.get_or_insert(s);
                }
                false
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
            if !self.refuses(&req.request) {
                return Some(msg);
            }
            let refusal =
                JsonRpcMessage::error(ErrorData::method_not_found::<PingRequestMethod>(), Some(req.id.clone()));
            // Sent on its own: `receive` may be dropped at any await (rmcp polls it in a
            // `select!`), and the answer must not be lost with it.
            tokio::spawn(self.inner.send(refusal));
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), T::Error>> + Send {
        self.inner.close()
    }
}
