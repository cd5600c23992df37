//! Events: what a session's waiters wake on. `task_finished` when a final record is written,
//! `message`/`question` posted by a task, and the synthetic `timeout` answer.
//!
//! The saved form is one flat object per event (optional fields by kind), so a line of the log
//! reads the same as the `--json` output.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{Role, Status, Token};
use crate::error::Error;

/// The kinds of event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    TaskFinished,
    Message,
    Question,
    /// Not stored: the answer of a wait that found nothing in time.
    Timeout,
}

impl EventKind {
    /// The kinds a waiter can ask for.
    pub const WAITABLE: [EventKind; 3] = [EventKind::TaskFinished, EventKind::Message, EventKind::Question];

    /// The kind as written in events and filters.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::TaskFinished => "task_finished",
            EventKind::Message => "message",
            EventKind::Question => "question",
            EventKind::Timeout => "timeout",
        }
    }

    /// Parse a comma-separated filter like `task_finished,question`.
    pub fn parse_list(s: &str) -> Result<Vec<EventKind>, Error> {
        s.split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|t| {
                EventKind::WAITABLE.into_iter().find(|k| k.as_str() == t).ok_or_else(|| {
                    Error::Usage(format!("unknown event type `{t}`; use task_finished, message or question"))
                })
            })
            .collect()
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One event of a session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Event {
    #[serde(rename = "type")]
    pub kind: EventKind,
    /// Position in the home's event log (absent for `timeout`).
    pub seq: Option<u64>,
    /// When it happened, RFC 3339.
    pub time: Option<String>,
    pub session: String,
    /// The task it is about (or from).
    #[schemars(with = "Option<String>")]
    pub token: Option<Token>,
    #[schemars(with = "Option<String>")]
    pub role: Option<Role>,
    /// For `task_finished`: the final status, exit code and the start of the summary.
    pub status: Option<Status>,
    pub exit_code: Option<i32>,
    pub summary: Option<String>,
    /// For `message` and `question`: what the task said.
    pub text: Option<String>,
    /// For a `question` asked with `ask-lead`: its id, for `reply`, and the answers offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<String>,
    /// For `task_finished` of a task in a worktree: what it changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<crate::worktree::Changes>,
    /// For `task_finished` of an agent whose usage is known: what it spent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<crate::agent::Usage>,
}

impl Event {
    /// A bare event of `kind` in `session`; the log assigns `seq` and `time`.
    pub fn new(kind: EventKind, session: &str) -> Event {
        Event {
            kind,
            seq: None,
            time: None,
            session: session.to_owned(),
            token: None,
            role: None,
            status: None,
            exit_code: None,
            summary: None,
            text: None,
            question_id: None,
            choices: Vec::new(),
            changes: None,
            usage: None,
        }
    }

    /// Whether a waiter of `session` interested in `kinds` (empty: any) takes this event.
    pub fn matches(&self, session: &str, kinds: &[EventKind]) -> bool {
        self.session == session && (kinds.is_empty() || kinds.contains(&self.kind))
    }

    /// One line for people.
    pub fn describe(&self) -> String {
        let who = match (&self.token, &self.role) {
            (Some(t), Some(r)) => format!("{t} ({r})"),
            (Some(t), None) => t.to_string(),
            _ => "-".to_owned(),
        };
        let seq = self.seq.map(|s| format!("#{s} ")).unwrap_or_default();
        match self.kind {
            EventKind::TaskFinished => {
                let status = self.status.map_or("?", Status::as_str);
                let code = self.exit_code.map(|c| format!(" exit {c}")).unwrap_or_default();
                let summary = self.summary.as_deref().unwrap_or("").replace('\n', " ");
                format!("{seq}[{}] task_finished {who} {status}{code}: {summary}", self.session)
            }
            EventKind::Message | EventKind::Question => {
                let id = self.question_id.as_ref().map(|q| format!(" {q}")).unwrap_or_default();
                let choices =
                    if self.choices.is_empty() { String::new() } else { format!(" [{}]", self.choices.join(", ")) };
                let text = self.text.as_deref().unwrap_or("");
                format!("{seq}[{}] {}{id} from {who}: {text}{choices}", self.session, self.kind)
            }
            EventKind::Timeout => format!("[{}] timeout: no matching event arrived", self.session),
        }
    }
}

/// The start of a summary, for events and listings.
pub fn summary_preview(summary: &str) -> String {
    const MAX: usize = 300;
    let s = summary.trim();
    if s.chars().count() <= MAX {
        return s.to_owned();
    }
    let cut: String = s.chars().take(MAX).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_parse_and_match() {
        assert_eq!(
            EventKind::parse_list("task_finished, question").unwrap(),
            [EventKind::TaskFinished, EventKind::Question]
        );
        assert!(EventKind::parse_list("timeout").is_err());
        assert!(EventKind::parse_list("nope").is_err());
        let e = Event::new(EventKind::Question, "lead");
        assert!(e.matches("lead", &[]));
        assert!(e.matches("lead", &[EventKind::Question]));
        assert!(!e.matches("lead", &[EventKind::TaskFinished]));
        assert!(!e.matches("other", &[]));
    }

    #[test]
    fn events_serialize_flat_with_a_type() {
        let mut e = Event::new(EventKind::TaskFinished, "default");
        e.seq = Some(3);
        let j = serde_json::to_value(&e).unwrap();
        assert_eq!(j["type"], "task_finished");
        assert_eq!(j["seq"], 3);
        assert_eq!(serde_json::from_value::<Event>(j).unwrap(), e);
    }

    #[test]
    fn previews_are_capped() {
        assert_eq!(summary_preview(" short "), "short");
        assert_eq!(summary_preview(&"x".repeat(500)).chars().count(), 301);
    }
}
