//! The operations both front-ends offer (ask, run, await, halt, status, list, logs): the only
//! place where the rules live. The CLI and the MCP server convert types and render.
//!
//! Each file imports only files of the layers below its own (`tests/imports.rs` checks it):
//! 1. `blocking`, `lost` (a record as it stands), `own_path`, `watch`, `scroll`, `agents`,
//!    `access` (the HTTP server's tokens)
//! 2. `events` (sessions, waiting for events), then `posting` (events in bulk)
//! 3. `converse` (questions and messages between a task and its lead)
//! 4. `view` (a task as shown), then `wait` (await, halt)
//! 5. `launch`, `follow` (follow-ups), `query` (status, list, logs), `usage` (totals), then
//!    `page`, `prune`, `stop`

mod access;
mod agents;
mod blocking;
mod capacity;
mod converse;
mod events;
mod follow;
pub mod gateway;
mod hook;
mod hook_start;
mod launch;
mod lead;
mod lost;
mod own_path;
mod page;
mod posting;
mod prune;
mod query;
mod sandbox;
mod scroll;
mod settle;
mod stop;
mod usage;
mod view;
mod wait;
mod watch;

pub use crate::store::SpendBy;
pub use access::{AccessView, Denied, Identity, NewAccess, authenticate, create_access, list_access, revoke_access};
pub use agents::{BUILT_IN, RoleInfo, Roles, check_agents_file, roles};
pub use capacity::{PoolCapacity, PoolSpend, capacity};
pub use converse::{Asked, Sent, all_pending, ask_lead, ask_lead_as, inbox, inbox_of, reply, running_task, send};
pub use events::{
    Holder, LoggedEvent, MAX_MESSAGE, connection_session, delivered, follow_events, notice, notice_from, notify,
    read_events, session_of, undelivered, wait_event, worded,
};
pub use follow::start;
pub use hook::run_detached as run_hook;
pub use hook_start::start_hook;
pub(crate) use launch::command_of;
pub use launch::{GoOn, HandBack, Launch, What, shell_words};
pub use lead::{ask_lead_from, inbox_from, notify_from};
pub use lost::refresh;
pub use page::{LogPage, MAX_PAGE_BYTES, MAX_PAGE_LINES, PageRequest, Window, log_page};
pub use posting::{Poster, post_lines};
pub use prune::{PruneRule, Pruned, prune};
pub use query::{LINE_PIECE, ListFilter, Listing, follow, list, live, peek, read_log, status};
pub use scroll::{LogScroll, Move};
pub use settle::{HYBRID_WAIT, Wait, settle};
pub use stop::{Halted, halt_if_running};
pub use usage::{Spend, UsageTotals, nano_usd, usage};
pub use view::{TaskView, cost_text, human_duration};
pub use wait::{AWAIT_TIMEOUT, Awaited, DEFAULT_GRACE, STILL_RUNNING, await_any, await_task, halt};
pub use watch::Watch;
pub(crate) use watch::{LOOK_EVERY, Look};
