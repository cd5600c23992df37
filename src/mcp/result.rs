//! Rendering `ops` answers as tool results: structured content plus a short readable copy,
//! within the server's budget; task failures and refusals as `isError` results that say which
//! tool to call next.

use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;

use super::budget::{self, TaskResult};
use crate::error::{Error, Frontend, Result};
use crate::task::Status;

/// A structured result whose text copy is `text`.
pub fn structured<T: Serialize>(value: &T, text: String, is_error: bool) -> CallToolResult {
    let json = serde_json::to_value(value).unwrap_or_default();
    let mut r = CallToolResult::structured(json);
    r.content = vec![ContentBlock::text(text)];
    r.is_error = Some(is_error);
    r
}

/// The bytes of both copies of a result.
fn size<T: Serialize>(value: &T, text: &str) -> usize {
    serde_json::to_string(value).map_or(0, |j| j.len()) + text.len()
}

/// The result of `make(n)` for the largest `n` from `start` down that fits `budget` (both
/// copies), each try's `n` scaled by how far the last one went over; `make(min)` if none does.
pub fn shrink_to_fit<T: Serialize>(
    budget: usize,
    start: usize,
    min: usize,
    mut make: impl FnMut(usize) -> Result<(T, String)>,
) -> Result<CallToolResult> {
    let mut n = start.max(min);
    loop {
        let (value, text) = make(n)?;
        let used = size(&value, &text);
        if used <= budget || n <= min {
            return Ok(structured(&value, text, false));
        }
        n = (n * budget / used).min(n - 1).max(min);
    }
}

/// A task answer within `budget`; a task that ended other than `completed` is an error result,
/// unless that end is what was asked for (`halt`).
pub fn task(mut r: TaskResult, expected: Option<Status>, budget: usize) -> CallToolResult {
    let failed = r.status.is_final() && r.status != Status::Completed && Some(r.status) != expected;
    budget::fit(std::slice::from_mut(&mut r), budget, |t| size(&t[0], &t[0].text()));
    let text = r.text();
    structured(&r, text, failed)
}

/// `await`'s structured result: the tasks that ended (earliest end first), then those still
/// running.
#[derive(Serialize, schemars::JsonSchema)]
pub struct AwaitResult {
    pub tasks: Vec<TaskResult>,
    /// What to call next.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

impl AwaitResult {
    fn text(&self) -> String {
        let mut parts: Vec<String> = self.tasks.iter().map(TaskResult::text).collect();
        parts.extend(self.next.iter().map(|n| format!("next: {n}")));
        parts.join("\n\n")
    }
}

/// An `await` answer within `budget`: an error result when every task it returns has ended
/// and one of them did not complete.
pub fn awaited(mut a: AwaitResult, budget: usize) -> CallToolResult {
    let failed = a.tasks.iter().all(|t| t.status.is_final()) && a.tasks.iter().any(|t| t.status != Status::Completed);
    let next = a.next.take();
    let mut tasks = std::mem::take(&mut a.tasks);
    // Both copies hold each task and `next` once, and a few bytes of framing.
    let framing = 2 * next.as_ref().map_or(0, |n| n.len() + 16) + 32;
    budget::fit(&mut tasks, budget, |ts| framing + ts.iter().map(|t| size(t, &t.text()) + 4).sum::<usize>());
    let a = AwaitResult { tasks, next };
    let text = a.text();
    structured(&a, text, failed)
}

/// A refusal or failure, with the message that says what to do (in tools, not command lines).
pub fn error(e: &Error) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!("{} ({})", e.message(Frontend::Mcp), e.kind()))])
}
