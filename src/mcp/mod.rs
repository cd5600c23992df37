//! The MCP server (`agentctl mcp`): rmcp tool adapters over `ops`, on stdio or HTTP. No rules here:
//! parameters are converted, `ops` decides, results are rendered.

mod arguments;
mod budget;
mod delivery;
mod event_tools;
mod gate;
mod http;
mod http_auth;
mod http_early;
mod http_listen;
mod limits;
mod native;
mod params;
mod publish;
mod result;
mod server;
mod shape;
mod task_tools;
mod usage_tool;
mod wire;

pub use budget::{DEFAULT_BUDGET, MAX_BUDGET, MIN_BUDGET};
pub use http::{HttpOptions, serve_http};
pub use limits::MaxWait;
pub use server::{Options, serve};
