//! What tasks spent, read for `usage` totals: one query over the tasks that ended in a window
//! (the end index) and those still open, reading each record's `usage` alone and the column
//! its group needs.

use rusqlite::params;

use super::Store;
use super::db::err;
use crate::error::Result;
use crate::task::Token;

/// What usage totals are grouped by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SpendBy {
    Role,
    Pool,
    /// The session the task reports to.
    Session,
    /// The agent kind its spec names (`generic` for specs older than kinds).
    Agent,
}

impl SpendBy {
    /// The SQL giving a row's group (a task without a pool is in none: NULL).
    fn column(self) -> &'static str {
        match self {
            SpendBy::Role => "role",
            SpendBy::Pool => "pool",
            SpendBy::Session => "json_extract(record, '$.session')",
            SpendBy::Agent => {
                "coalesce(json_extract(coalesce((SELECT spec FROM specs WHERE specs.token = tasks.token), spec), \
                 '$.agent'), 'generic')"
            }
        }
    }

    /// Its name, as `--by` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            SpendBy::Role => "role",
            SpendBy::Pool => "pool",
            SpendBy::Session => "session",
            SpendBy::Agent => "agent",
        }
    }

    /// `--by`'s value, checked.
    pub fn parse(s: &str) -> std::result::Result<SpendBy, String> {
        [SpendBy::Role, SpendBy::Pool, SpendBy::Session, SpendBy::Agent]
            .into_iter()
            .find(|b| b.as_str() == s)
            .ok_or_else(|| format!("cannot group usage by `{s}`; use role, pool, session or agent"))
    }
}

/// One task as totals read it.
#[derive(Debug)]
pub struct SpendRow {
    pub token: Token,
    /// Its group, when grouped (none: a task without a pool, by pool).
    pub group: Option<String>,
    /// Not yet ended: its record holds no final usage.
    pub open: bool,
    /// Its record's `usage`, as JSON text.
    pub usage: Option<String>,
    /// Its record's earlier `turns`, as JSON text (a task followed up).
    pub turns: Option<String>,
}

impl Store {
    /// Every task that ended at or after `since_ms` or has not ended, with its usage and its
    /// group by `by`.
    pub fn spend_rows(&self, since_ms: u64, by: Option<SpendBy>) -> Result<Vec<SpendRow>> {
        let what = || "cannot read what the tasks spent".to_owned();
        let conn = self.db()?;
        let group = by.map_or("NULL", SpendBy::column);
        // Two indexed parts (the ended ones by their end, the open ones), not one scan.
        let sql = format!(
            "SELECT token, {group}, 0, json_extract(record, '$.usage'), json_extract(record, '$.turns') FROM tasks \
             WHERE ended_at_ms >= ?1 \
             UNION ALL \
             SELECT token, {group}, 1, json_extract(record, '$.usage'), json_extract(record, '$.turns') FROM tasks \
             WHERE ended_at_ms IS NULL"
        );
        let mut stmt = conn.prepare(&sql).map_err(err(what))?;
        let rows = stmt
            .query_map(params![since_ms.min(i64::MAX as u64) as i64], |r| {
                Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .map_err(err(what))?;
        let mut out = Vec::new();
        for row in rows {
            let (token, group, open, usage, turns) = row.map_err(err(what))?;
            let Ok(token) = Token::parse(&token) else { continue };
            out.push(SpendRow { token, group, open, usage, turns });
        }
        Ok(out)
    }
}
