//! How what the store keeps is written as rows: records and specs as JSON text, and an event's
//! insert, numbered and timed.

use std::time::SystemTime;

use rusqlite::{Connection, params};

use super::db::err;
use crate::error::{Error, Result};
use crate::task::{Event, Token, unix_ms};

/// A record or spec as stored.
pub(super) fn to_json<T: serde::Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Error::Internal(format!("cannot encode: {e}")))
}

pub(super) fn from_json<T: serde::de::DeserializeOwned>(t: Token, text: &str) -> Result<T> {
    serde_json::from_str(text)
        .map_err(|e| Error::Internal(format!("the stored record of task {t} is damaged ({e}); prune it")))
}

/// Insert `event` in the transaction `tx`, numbered and timed now.
pub(super) fn insert(tx: &Connection, mut event: Event) -> Result<Event> {
    event.seq = None;
    insert_as(tx, event, None, false)
}

/// Insert `event` in `tx` with its own seq if that is still free (else the next), at its own
/// time (`at`, else now, which then becomes its `time`), delivered or waiting.
pub(super) fn insert_as(tx: &Connection, mut event: Event, at: Option<SystemTime>, delivered: bool) -> Result<Event> {
    let what = || "cannot record an event".to_owned();
    let next: i64 = tx
        .query_row("SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0) + 1", [], |r| r.get(0))
        .map_err(err(what))?;
    let seq = event.seq.map(|s| s as i64).filter(|&s| s >= next).unwrap_or(next);
    event.seq = Some(seq as u64);
    let at = at.unwrap_or_else(|| {
        let now = SystemTime::now();
        event.time = Some(humantime::format_rfc3339_millis(now).to_string());
        now
    });
    let body = serde_json::to_string(&event).map_err(|e| Error::Internal(format!("cannot encode an event: {e}")))?;
    tx.execute(
        "INSERT INTO events (seq, session, kind, token, at_ms, body, state) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            seq,
            event.session,
            event.kind.as_str(),
            event.token.map(|t| t.to_string()),
            unix_ms(at) as i64,
            body,
            if delivered { 2 } else { 0 }
        ],
    )
    .map_err(err(what))?;
    Ok(event)
}
