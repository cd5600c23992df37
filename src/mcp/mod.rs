//! The MCP server (`agentctl mcp`): rmcp tool adapters over `ops`, on stdio. No rules here:
//! parameters are converted, `ops` decides, results are rendered.

mod event_tools;
mod params;
mod result;
mod server;
mod task_tools;

pub use server::{Options, serve};
