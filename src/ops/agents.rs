//! The agent templates file a long-running front-end (the MCP server) was given, checked
//! when it starts.

use std::path::Path;

use crate::agents::Agents;
use crate::error::Result;
use crate::store::Store;

/// Check an `--agents FILE`: one that does not exist or does not parse is refused now, as
/// `ask` would refuse it, rather than at the first question. Each `ask` reads it again, so
/// later edits take effect.
pub fn check_agents_file(store: &Store, file: &Path) -> Result<()> {
    Agents::load(store.home(), Some(file)).map(drop)
}
