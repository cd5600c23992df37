//! Pages of tasks for `list` and `prune`: newest first, by status or role, through an index in
//! their order; and the tasks that ended longest ago.

use rusqlite::params;

use super::Store;
use super::db::err;
use super::rows::from_json;
use crate::error::Result;
use crate::task::{Role, Status, TaskRecord, Token};

/// Which page of tasks to read, newest first.
#[derive(Clone, Debug, Default)]
pub struct Page {
    pub status: Option<Status>,
    pub role: Option<Role>,
    /// Only tasks created before this one (a cursor: the last task of the previous page).
    pub before: Option<(u64, Token)>,
    pub offset: usize,
    /// At most this many (`None`: all).
    pub limit: Option<usize>,
}

impl Store {
    /// A page of records, newest first.
    pub fn page(&self, page: &Page) -> Result<Vec<TaskRecord>> {
        let what = || "cannot list the tasks".to_owned();
        let conn = self.db()?;
        let (sql, args) = page_query(page);
        let mut stmt = conn.prepare_cached(&sql).map_err(err(what))?;
        records(stmt.query(rusqlite::params_from_iter(args)).map_err(err(what))?)
    }

    /// The finished tasks after the `keep` most recently ended, that ended at or before
    /// `cutoff_ms` (if given), most recent first.
    pub fn finished(&self, keep: usize, cutoff_ms: Option<u64>) -> Result<Vec<TaskRecord>> {
        let what = || "cannot list the finished tasks".to_owned();
        let conn = self.db()?;
        let mut stmt = conn
            .prepare_cached(
                "SELECT token, record FROM (SELECT token, record, ended_at_ms FROM tasks \
                 WHERE ended_at_ms IS NOT NULL ORDER BY ended_at_ms DESC, token DESC LIMIT -1 OFFSET ?1) \
                 WHERE ended_at_ms <= ?2",
            )
            .map_err(err(what))?;
        let cutoff = cutoff_ms.map_or(i64::MAX, |c| c as i64);
        records(stmt.query(params![keep as i64, cutoff]).map_err(err(what))?)
    }
}

/// The query for `page` and its arguments.
fn page_query(page: &Page) -> (String, Vec<rusqlite::types::Value>) {
    let mut sql = String::from("SELECT token, record FROM tasks WHERE 1");
    let mut args: Vec<rusqlite::types::Value> = Vec::new();
    if let Some(s) = page.status {
        sql.push_str(" AND status = ?");
        args.push(s.as_str().to_owned().into());
    }
    if let Some(r) = &page.role {
        sql.push_str(" AND role = ?");
        args.push(r.as_str().to_owned().into());
    }
    if let Some((at, t)) = page.before {
        sql.push_str(" AND (created_at_ms, token) < (?, ?)");
        args.push((at as i64).into());
        args.push(t.as_str().to_owned().into());
    }
    sql.push_str(" ORDER BY created_at_ms DESC, token DESC LIMIT ? OFFSET ?");
    args.push(page.limit.map_or(-1, |l| l as i64).into());
    args.push((page.offset as i64).into());
    (sql, args)
}

/// The records of rows of (token, record): one damaged record is skipped, with a word on
/// stderr, so that it does not hide the others.
fn records(mut rows: rusqlite::Rows<'_>) -> Result<Vec<TaskRecord>> {
    let what = || "cannot list the tasks".to_owned();
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(err(what))? {
        let (token, text): (String, String) = (row.get(0).map_err(err(what))?, row.get(1).map_err(err(what))?);
        match Token::parse(&token).and_then(|t| from_json(t, &text)) {
            Ok(rec) => out.push(rec),
            Err(e) => eprintln!("agentctl: warning: skipping task {token}: {e}"),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_page_is_read_through_an_index_in_its_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let conn = store.db().unwrap();
        let (role, token) = (Role::parse("coder").unwrap(), Token::parse("abc123").unwrap());
        for (status, role, before) in [
            (None, None, None),
            (Some(Status::Running), None, None),
            (None, Some(role.clone()), None),
            (Some(Status::Lost), Some(role), Some((5, token))),
        ] {
            let page = Page { status, role, before, offset: 0, limit: Some(51) };
            let (sql, args) = page_query(&page);
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let plan: Vec<String> = stmt
                .query_map(rusqlite::params_from_iter(args), |r| r.get::<_, String>(3))
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            let filtered = page.status.is_some() || page.role.is_some() || page.before.is_some();
            // Filtered: straight to the matching tasks; else the newest first, no sort either way.
            let wanted = if filtered { "SEARCH tasks USING INDEX" } else { "SCAN tasks USING INDEX tasks_by_creation" };
            assert!(plan.len() == 1 && plan[0].starts_with(wanted), "{sql}: {plan:?}");
        }
    }
}
