//! The MCP server (`agentctl mcp`): rmcp tool adapters over `ops`, on stdio. No rules here:
//! parameters are converted, `ops` decides, results are rendered.

mod event_tools;
mod gate;
mod limits;
mod params;
mod publish;
mod result;
mod server;
mod task_tools;

pub use limits::MaxWait;
pub use server::{Options, serve};
