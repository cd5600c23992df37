//! The `mcp_tasks` table: the MCP tasks (`io.modelcontextprotocol/tasks`) handed out for
//! agentctl tasks. A client's taskId is a bearer token: 128 random bits, so that no one who was
//! not handed it can guess it; any server process on the home finds the task by it, before
//! and after a restart, until the task is pruned.

use std::time::SystemTime;

use rusqlite::{Connection, OptionalExtension, params};

use super::Store;
use super::db::{self, err};
use crate::error::{Error, Result};
use crate::task::{Token, unix_ms};

fn what() -> String {
    "cannot record an MCP task in the store".to_owned()
}

/// An MCP task: its id, the agentctl task (and turn of it) it stands for, and when it was
/// handed out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpTask {
    pub id: String,
    pub token: Token,
    pub turn: u32,
    pub created_at_ms: u64,
}

/// A fresh task id: 32 lowercase hex digits from the OS's generator, or nothing if it has none
/// to give (a guessable id would let anyone read or cancel the task).
fn fresh_id() -> Option<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).ok()?;
    Some(format!("{:032x}", u128::from_be_bytes(bytes)))
}

/// Whether `id` has the shape of a task id (anything else is not looked up).
fn well_formed(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Store {
    /// Hand out an MCP task for turn `turn` of task `token`, recorded durably before it is
    /// returned (a `tasks/get` for it must find it at once). A task pruned meanwhile gets none.
    pub fn create_mcp_task(&self, token: Token, turn: u32) -> Result<McpTask> {
        let id = fresh_id().ok_or_else(|| Error::Internal("the system gave no random numbers for a task id".into()))?;
        let created_at_ms = unix_ms(SystemTime::now());
        let conn = self.db()?;
        let tx = db::write_durably(&conn).map_err(err(what))?;
        let added = tx
            .execute(
                "INSERT INTO mcp_tasks (id, token, created_at_ms, turn) \
                 SELECT ?1, ?2, ?3, ?4 WHERE EXISTS (SELECT 1 FROM tasks WHERE token = ?2)",
                params![id, token.as_str(), created_at_ms as i64, turn],
            )
            .map_err(err(what))?;
        if added == 0 {
            return Err(Error::UnknownToken { token, home: self.home().to_path_buf() });
        }
        tx.commit().map_err(err(what))?;
        Ok(McpTask { id, token, turn, created_at_ms })
    }

    /// The MCP task with this id, if this home handed it out and still has its task.
    pub fn mcp_task(&self, id: &str) -> Result<Option<McpTask>> {
        if !well_formed(id) {
            return Ok(None);
        }
        let conn = self.db()?;
        let row = conn
            .query_row("SELECT token, created_at_ms, turn FROM mcp_tasks WHERE id = ?1", [id], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?, r.get::<_, u32>(2)?))
            })
            .optional()
            .map_err(err(|| "cannot read an MCP task from the store".to_owned()))?;
        let Some((token, created, turn)) = row else { return Ok(None) };
        let token = Token::parse(&token)?;
        Ok(Some(McpTask { id: id.to_owned(), token, turn, created_at_ms: created.max(0) as u64 }))
    }

    /// Remove the MCP tasks of `tasks` (pruned).
    pub(super) fn remove_mcp_tasks(tx: &Connection, tasks: &[Token]) -> Result<()> {
        let mut stmt = tx.prepare_cached("DELETE FROM mcp_tasks WHERE token = ?1").map_err(err(what))?;
        for t in tasks {
            stmt.execute([t.as_str()]).map_err(err(what))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_128_random_bits_in_hex_and_only_that_shape_is_looked_up() {
        let a = fresh_id().unwrap();
        let b = fresh_id().unwrap();
        assert_ne!(a, b);
        assert!(well_formed(&a), "{a}");
        for bad in ["", "abc", &a.to_uppercase(), &format!("{a}0"), &a[1..], "../../../../etc/passwd0000000000"] {
            assert!(!well_formed(bad), "{bad}");
        }
    }
}
