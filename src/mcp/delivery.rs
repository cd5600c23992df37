//! Which events an HTTP answer carries, and whether it reached its client: over HTTP an answer
//! may be lost (the client went away before it was written), so the events a wait took are
//! confirmed once its answer is sent, and put back for the next wait if it never was. A call
//! whose client went away stops waiting. (On stdio a client's next wait shows that the last
//! answers arrived: `Connection::arrived`.)

use std::sync::{Arc, Mutex};

use rmcp::RoleServer;
use rmcp::service::RequestContext;
use tokio_util::sync::CancellationToken;

use crate::ops::{self, Holder};
use crate::store::Store;

/// The events one HTTP request's answer carries (in the request's extensions).
pub struct Delivery {
    store: Store,
    holder: Holder,
    state: Mutex<State>,
    /// Cancelled when the client went away before its answer was sent.
    pub gone: CancellationToken,
}

enum State {
    /// Not sent yet: the events it carries.
    Open(Vec<u64>),
    Sent,
    Lost,
}

impl Delivery {
    pub fn new(store: Store, holder: Holder) -> Delivery {
        Delivery { store, holder, state: Mutex::new(State::Open(Vec::new())), gone: CancellationToken::new() }
    }

    /// The delivery of the HTTP request `ctx` serves, if it came over HTTP.
    pub fn of(ctx: &RequestContext<RoleServer>) -> Option<Arc<Delivery>> {
        let parts = ctx.extensions.get::<axum::http::request::Parts>()?;
        parts.extensions.get::<Arc<Delivery>>().cloned()
    }

    /// The answer carries event `seq` (or would have: if it was lost already, the event goes
    /// back at once).
    pub fn carries(&self, seq: u64) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match &mut *state {
            State::Open(seqs) => seqs.push(seq),
            State::Sent => self.settle(seq, true),
            State::Lost => self.settle(seq, false),
        }
    }

    /// The answer was sent (`true`: its events are delivered) or dropped (they go back, and
    /// the call stops waiting).
    pub fn done(&self, sent: bool) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let was = std::mem::replace(&mut *state, if sent { State::Sent } else { State::Lost });
        if let State::Open(seqs) = was {
            for seq in seqs {
                self.settle(seq, sent);
            }
        }
        if !sent {
            self.gone.cancel();
        }
    }

    fn settle(&self, seq: u64, sent: bool) {
        let done = match sent {
            true => ops::delivered(&self.store, &self.holder, Some(seq)),
            false => ops::undelivered(&self.store, &self.holder, Some(seq)),
        };
        if let Err(e) = done {
            eprintln!("agentctl mcp: event {seq}: {}", e.message(crate::error::Frontend::Mcp));
        }
    }
}
