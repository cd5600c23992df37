//! A task's `on_end` hook in the store: taken by the one process that runs it, once its record
//! is final, then marked done with what its run adds to the task's note.

use rusqlite::{OptionalExtension, params};

use super::Store;
use super::db::{self, err};
use crate::error::Result;
use crate::task::{HookState, Token};

impl Store {
    /// Take task `t`'s hook to run it: for the one caller that finds it due (its record
    /// final), durably, so that no other runs it again, the turn whose end it is for (the
    /// count of its earlier turns); `None` for any other caller.
    pub fn take_hook(&self, t: Token) -> Result<Option<i64>> {
        let what = || format!("cannot take the hook of task {t}");
        let conn = self.db()?;
        let tx = db::write_durably(&conn).map_err(err(what))?;
        let taken = tx
            .query_row(
                "UPDATE tasks SET record = json_set(record, '$.hook', 'running') \
                 WHERE token = ?1 AND ended_at_ms IS NOT NULL AND json_extract(record, '$.hook') = 'due' \
                 RETURNING COALESCE(json_array_length(record, '$.turns'), 0)",
                [t.as_str()],
                |r| r.get::<_, i64>(0),
            )
            .optional()
            .map_err(err(what))?;
        tx.commit().map_err(err(what))?;
        Ok(taken)
    }

    /// Task `t`'s hook for the end of turn `turn` (as `take_hook` gave it) ran: done, with
    /// `note` (how it failed, if it did) added to the task's. A task followed up meanwhile is
    /// left as it is: its next turn's hook due, or taken by its own process, which marks it.
    pub fn hook_done(&self, t: Token, turn: i64, note: Option<&str>) -> Result<()> {
        let what = || format!("cannot record the hook of task {t}");
        let conn = self.db()?;
        let tx = db::write_durably(&conn).map_err(err(what))?;
        let done = serde_json::to_value(HookState::Done).unwrap_or_default();
        tx.execute(
            "UPDATE tasks SET record = json_set(record, '$.hook', ?2, '$.ended.note', \
                 CASE WHEN ?3 IS NULL THEN json_extract(record, '$.ended.note') \
                      WHEN json_extract(record, '$.ended.note') IS NULL THEN ?3 \
                      ELSE json_extract(record, '$.ended.note') || '; ' || ?3 END) \
             WHERE token = ?1 AND json_extract(record, '$.hook') = 'running' AND ended_at_ms IS NOT NULL \
               AND COALESCE(json_array_length(record, '$.turns'), 0) = ?4",
            params![t.as_str(), done.as_str(), note, turn],
        )
        .map_err(err(what))?;
        tx.commit().map_err(err(what))
    }
}
