//! The tools' typed parameters (their input schemas) and their conversion to `ops` types.

use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use super::limits::{CappedWait, MaxWait};
use crate::error::{Error, Result};
use crate::ops::{GoOn, Launch, ListFilter, MAX_PAGE_LINES, PageRequest, Wait, What, Window};
use crate::task::{Budget, EventKind, Role, Status, Token, duration_from_secs};

/// The most tokens one `await` takes: each brings its answer or progress line.
pub const MAX_AWAITED: usize = 100;

/// How many tasks `list` returns unless told, and at most.
pub const LIST_PAGE: usize = 50;
pub const MAX_LIST_PAGE: usize = 200;

// Descriptions may hold `{max_wait}` and `{hybrid_wait}`: the server fills them in with its
// configured values when it starts (see `publish`).

/// How to start a task and how long to wait for it: shared by `ask` and `run`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct LaunchOptions {
    /// Return the token at once.
    #[serde(default, rename = "async")]
    pub run_async: bool,
    /// Wait N s for the answer (default {hybrid_wait}).
    pub wait_secs: Option<f64>,
    /// Working directory.
    pub cwd: Option<String>,
    /// Halt it (`expired`) after N s.
    pub timeout_secs: Option<f64>,
    /// Session told of its end.
    pub session: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "budget_schema")]
    pub budget: Option<Budget>,
    /// Tokens: start once each completed.
    #[serde(default)]
    pub after: Vec<String>,
    /// …or once each ended.
    #[serde(default)]
    pub after_any_end: bool,
    /// Sandbox profile.
    pub sandbox: Option<String>,
}

/// A budget's schema, short: every client reads it, and a model pays for each byte.
fn budget_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "description": "Spend limit (halts `over_budget`).",
        "properties": {"usd": {"type": "number"}, "tokens": {"type": "integer"}, "turns": {"type": "integer"}}
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AskParams {
    /// e.g. `reviewer` (see agents.toml).
    #[serde(default)]
    pub role: Option<String>,
    /// The task for the agent.
    pub question: String,
    /// An ended task to follow up.
    #[serde(default, deserialize_with = "some_token_text")]
    pub to: Option<String>,
    #[serde(default)]
    pub fork: bool,
    #[serde(flatten)]
    pub options: LaunchOptions,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunParams {
    /// Program and arguments.
    pub command: Vec<String>,
    /// Role to file it under.
    pub role: Option<String>,
    #[serde(flatten)]
    pub options: LaunchOptions,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AwaitParams {
    /// A task's token.
    #[serde(default, deserialize_with = "some_token_text")]
    pub token: Option<String>,
    /// Several tokens: returns when any ends.
    #[serde(default)]
    pub tokens: Vec<String>,
    /// Seconds to wait at most (default {max_wait}).
    pub timeout_secs: Option<f64>,
}

impl AwaitParams {
    /// The tokens to wait for: `token` and `tokens` together.
    pub fn tokens(&self) -> Result<Vec<Token>> {
        let all: Vec<Token> = self.token.iter().chain(&self.tokens).map(|t| Token::parse(t)).collect::<Result<_>>()?;
        if all.is_empty() {
            return Err(Error::Usage(
                "`await` needs `token` (a task's token, like a3f2c1) or `tokens` (a list of them): call `await` \
                 again with one (`list` shows the tasks)"
                    .into(),
            ));
        }
        if all.len() > MAX_AWAITED {
            return Err(Error::Usage(format!(
                "{} tokens is more than one `await` takes ({MAX_AWAITED}); `wait_for_event` collects any number",
                all.len()
            )));
        }
        Ok(all)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct HaltParams {
    /// The task's token.
    #[serde(deserialize_with = "token_text")]
    pub token: String,
    /// SIGTERM to SIGKILL, in s.
    pub grace_secs: Option<f64>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct ListParams {
    /// running, completed, failed…
    pub status: Option<String>,
    /// Only tasks of this role.
    pub role: Option<String>,
    /// Most to return.
    pub limit: Option<usize>,
    /// The previous page's next_cursor.
    pub cursor: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct LogsParams {
    /// The task's token.
    #[serde(deserialize_with = "token_text")]
    pub token: String,
    /// The last N lines (default 100).
    pub tail_lines: Option<u64>,
    /// First line (0-based): a page's next_offset.
    pub offset: Option<u64>,
    /// Lines from offset (default 200).
    pub limit: Option<u64>,
    /// A page's next_column.
    pub column: Option<u64>,
    /// Its whole answer instead of its output.
    #[serde(default)]
    pub summary: bool,
    /// Keep escape sequences.
    #[serde(default)]
    pub raw: bool,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct WaitForEventParams {
    /// Only these: task_finished, message, question.
    pub types: Option<Vec<String>>,
    /// Seconds to wait at most (default {max_wait}).
    pub timeout_secs: Option<f64>,
    /// Session to wait on (default: yours).
    pub session: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct NotifyParams {
    /// The text.
    pub message: String,
    /// Post it as a question.
    #[serde(default)]
    pub question: bool,
    /// Session to post to (default: yours).
    pub session: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReplyParams {
    /// The question's id, or else:
    pub question_id: Option<String>,
    /// the asking task's token.
    #[serde(default, deserialize_with = "some_token_text")]
    pub token: Option<String>,
    /// The answer.
    pub answer: String,
}

impl ReplyParams {
    /// What the answer goes to: a question id or a token.
    pub fn target(&self) -> Result<&str> {
        match (&self.question_id, &self.token) {
            (Some(id), None) => Ok(id),
            (None, Some(token)) => Ok(token),
            _ => Err(Error::Usage(
                "`reply` needs one of `question_id` (the question's id) and `token` (the asking task's token): call \
                 `reply` again with one of them and `answer`"
                    .into(),
            )),
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SendParams {
    /// The running task's token.
    #[serde(deserialize_with = "token_text")]
    pub token: String,
    /// The message.
    pub message: String,
}

impl WaitForEventParams {
    /// The event types asked for (empty: any).
    pub fn kinds(&self) -> Result<Vec<EventKind>> {
        EventKind::parse_list(&self.types.as_deref().unwrap_or_default().join(","))
    }
}

/// A `token` argument as text. Clients that coerce `key=value` arguments send an all-digit
/// token (older versions made them) as a number: it stands for its digits, zero-padded to six.
/// The published schema stays `type: string`.
fn token_text<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<String, D::Error> {
    struct TokenText;
    impl Visitor<'_> for TokenText {
        type Value = String;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a task token: 6 hex characters, like a3f2c1")
        }
        fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<String, E> {
            Ok(s.to_owned())
        }
        fn visit_u64<E: de::Error>(self, n: u64) -> std::result::Result<String, E> {
            Ok(format!("{n:06}"))
        }
    }
    d.deserialize_any(TokenText)
}

/// An optional `token` argument, read as `token_text` reads one.
fn some_token_text<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<String>, D::Error> {
    token_text(d).map(Some)
}

/// Seconds from a client, checked, or `default` when none were given.
pub fn seconds_or(what: &str, secs: Option<f64>, default: Duration) -> Result<Duration> {
    secs.map(|s| seconds(what, s)).transpose().map(|d| d.unwrap_or(default))
}

/// Seconds from a client, checked.
pub fn seconds(what: &str, secs: f64) -> Result<Duration> {
    duration_from_secs(what, secs)
}

/// A launch request, and its wait as capped (with no note for `async`, which does not wait).
pub struct LaunchRequest {
    pub launch: Launch,
    pub capped: CappedWait,
}

impl LaunchOptions {
    /// The launch request for `role` running `what` with these options, waiting at most `max`.
    fn into_launch(self, role: &str, what: What, max: MaxWait) -> Result<LaunchRequest> {
        // Checked even with `async`, which does not wait: a number out of range is refused.
        let mut capped = max.cap("wait_secs", self.wait_secs, max.hybrid())?;
        let wait = if self.run_async {
            capped.note = None;
            Wait::Async
        } else {
            Wait::For(capped.wait)
        };
        let launch = Launch {
            role: Role::parse(role)?,
            what,
            cwd: self.cwd.map(PathBuf::from),
            session: self.session,
            deadline: self.timeout_secs.map(|s| seconds("timeout_secs", s)).transpose()?,
            wait,
            worktree: None,
            pool: None,
            budget: self.budget.unwrap_or_default(),
            from: None,
            after: self.after.iter().map(|t| Token::parse(t)).collect::<Result<_>>()?,
            after_any_end: self.after_any_end,
            sandbox: self.sandbox,
        };
        Ok(LaunchRequest { launch, capped })
    }
}

impl AskParams {
    /// The launch request this stands for, with the role's template from `agents_file` (else
    /// the home's or the config dir's agents.toml, as for the CLI).
    pub fn into_launch(self, agents_file: Option<PathBuf>, max: MaxWait) -> Result<LaunchRequest> {
        let to = self.to.as_deref().map(Token::parse).transpose()?;
        let role = match (self.role, to) {
            (Some(role), None) => role,
            (None, Some(_)) => "run".to_owned(),
            (Some(_), Some(t)) => {
                return Err(Error::Usage(format!(
                    "give `role` for a new task or `to` to follow up task {t}, not both: a follow-up keeps its task's role"
                )));
            }
            (None, None) => {
                return Err(Error::Usage(
                    "`ask` needs `role` (who answers, like `reviewer`) or `to` (an ended task's token, to follow it up)".into(),
                ));
            }
        };
        let what = What::Ask { question: self.question, agents_file };
        if self.fork && to.is_none() {
            return Err(Error::Usage("`fork` copies the conversation of the task `to` names: give `to` too".into()));
        }
        let mut req = self.options.into_launch(&role, what, max)?;
        req.launch.from = to.map(|t| if self.fork { GoOn::Fork(t) } else { GoOn::Turn(t) });
        Ok(req)
    }
}

impl RunParams {
    /// The launch request this stands for.
    pub fn into_launch(self, agents_file: Option<PathBuf>, max: MaxWait) -> Result<LaunchRequest> {
        if self.command.is_empty() {
            return Err(Error::Usage("`command` is empty; give the program and its arguments".into()));
        }
        let role = self.role.unwrap_or_else(|| "run".into());
        self.options.into_launch(&role, What::Run { argv: self.command, agents_file }, max)
    }
}

impl ListParams {
    /// The filter this stands for.
    pub fn filter(&self) -> Result<ListFilter> {
        let status = self.status.as_deref().map(Status::parse_filter).transpose()?;
        Ok(ListFilter {
            status,
            role: self.role.as_deref().map(Role::parse).transpose()?,
            offset: 0,
            limit: Some(self.limit.unwrap_or(LIST_PAGE).clamp(1, MAX_LIST_PAGE)),
            before: self.cursor.clone(),
        })
    }
}

impl LogsParams {
    /// The window this asks for.
    pub fn request(&self, max_bytes: usize) -> PageRequest {
        let window = match (self.offset, self.column) {
            (Some(offset), column) => Window::Range {
                offset,
                limit: self.limit.unwrap_or(200).min(MAX_PAGE_LINES),
                column: column.unwrap_or(0),
            },
            // A column alone reads the first line from there.
            (None, Some(column)) => Window::Range { offset: 0, limit: self.limit.unwrap_or(200), column },
            (None, None) => Window::Tail(self.tail_lines.unwrap_or(100).min(MAX_PAGE_LINES)),
        };
        PageRequest { window, raw: self.raw, summary: self.summary, max_bytes }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_token_may_come_as_a_number() {
        for (given, text) in [(json!("a3f2c1"), "a3f2c1"), (json!(4217), "004217"), (json!(0), "000000")] {
            let p: AwaitParams = serde_json::from_value(json!({ "token": given })).unwrap();
            assert_eq!(p.token.as_deref(), Some(text));
        }
        for bad in [json!(-1), json!(4.5), json!(true), json!(null), json!([1])] {
            assert!(serde_json::from_value::<HaltParams>(json!({ "token": bad })).is_err(), "{bad}");
        }
        let schema = schemars::schema_for!(LogsParams);
        assert_eq!(schema.as_value()["properties"]["token"]["type"], "string");
    }
}
