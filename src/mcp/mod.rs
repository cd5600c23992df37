//! The MCP server (`agentctl mcp`): rmcp tool adapters over `ops`, on stdio. No rules here:
//! parameters are converted, `ops` decides, results are rendered.

mod params;
mod result;
mod server;

pub use server::{Options, serve};
