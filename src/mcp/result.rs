//! Rendering `ops` answers as tool results: structured content plus a readable text copy;
//! task failures and refusals as `isError` results an LLM can act on.

use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;

use crate::error::{Error, Frontend};
use crate::ops::TaskView;
use crate::task::Status;

/// A structured result whose text copy is `text`.
pub fn structured<T: Serialize>(value: &T, text: String, is_error: bool) -> CallToolResult {
    let json = serde_json::to_value(value).unwrap_or_default();
    let mut r = CallToolResult::structured(json);
    r.content = vec![ContentBlock::text(text)];
    r.is_error = Some(is_error);
    r
}

/// A task answer; a task that ended other than `completed` is an error result, unless that
/// end is what was asked for (`halt`).
pub fn task(v: &TaskView, expected: Option<Status>) -> CallToolResult {
    let failed = v.status.is_final() && v.status != Status::Completed && Some(v.status) != expected;
    structured(v, v.text(), failed)
}

/// Add `note` to what the view notes already.
pub fn add_note(v: &mut TaskView, note: String) {
    v.note = Some(match v.note.take() {
        Some(n) => format!("{note}; {n}"),
        None => note,
    });
}

/// A refusal or failure, with the message that says what to do (in tools, not command lines).
pub fn error(e: &Error) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!("{} ({})", e.message(Frontend::Mcp), e.kind()))])
}
