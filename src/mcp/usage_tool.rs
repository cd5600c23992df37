//! The `usage` tool: what the tasks of a window spent, in total or per group.

use rmcp::handler::server::tool::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{ErrorData, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::result;
use super::server::{AgentctlServer, answer};
use crate::error::Error;
use crate::ops::{self, SpendBy, UsageTotals};
use crate::task::duration_from_secs;

/// Kept small: every client reads the tool list (`by` is checked when called, not by an enum).
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct UsageParams {
    /// Tasks ended in the last N s, and running ones.
    pub since_secs: Option<f64>,
    /// Group by role, pool, session or agent.
    pub by: Option<String>,
}

#[tool_router(router = usage_router, vis = "pub(super)")]
impl AgentctlServer {
    #[tool(
        description = "Tokens, turns and cost of tasks (running: so far), in total or by group.",
        annotations(title = "Usage totals", read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<UsageTotals>()
    )]
    async fn usage(&self, Parameters(p): Parameters<UsageParams>) -> std::result::Result<CallToolResult, ErrorData> {
        answer((|| {
            let since = p.since_secs.map(|s| duration_from_secs("since_secs", s)).transpose()?;
            let by = p.by.as_deref().map(SpendBy::parse).transpose().map_err(Error::Usage)?;
            let totals = ops::usage(&self.store, since, by)?;
            let text = text(&totals);
            Ok(result::structured(&totals, text, false))
        })())
    }
}

/// The readable copy: a line per group, then the total.
fn text(t: &UsageTotals) -> String {
    let mut lines: Vec<String> =
        t.groups.iter().map(|g| format!("{}: {}", g.group.as_deref().unwrap_or("(none)"), g.line())).collect();
    lines.push(format!("total: {}", t.total.line()));
    lines.join("\n")
}
