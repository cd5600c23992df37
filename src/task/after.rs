//! A task that waits for others (`--after TOKEN,…`): which ones, whether it starts only if each
//! completed, and, where its question or template names their answers (`{after}`,
//! `{after_file}`), its question, to be rendered again once they are known.

use serde::{Deserialize, Serialize};

use super::{Role, Status, Token};

/// What a task waits for before it starts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct After {
    pub tokens: Vec<Token>,
    /// Start whatever they ended as (`--after-any-end`); else only if each completed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub any_end: bool,
    /// The question, when its command is rendered again with their answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// A `run`'s command as given, rendered again with their answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
}

/// How a task it waited for ended, and its answer.
#[derive(Clone, Debug)]
pub struct Awaited {
    pub token: Token,
    pub role: Role,
    pub status: Status,
    pub answer: String,
}

impl After {
    /// Why the task does not start, once `ended` (those it waited for) are known: the first that
    /// did not complete, unless any end will do.
    pub fn refusal(&self, ended: &[Awaited]) -> Option<String> {
        let failed = ended.iter().find(|a| a.status != Status::Completed).filter(|_| !self.any_end)?;
        Some(format!(
            "it never ran: task {} ({}), which it waited for, ended {} rather than completed",
            failed.token, failed.role, failed.status
        ))
    }
}

/// The answers of the tasks waited for, as `{after}` stands for them: each headed by its token,
/// role and how it ended.
pub fn answers(ended: &[Awaited]) -> String {
    let parts: Vec<String> = ended
        .iter()
        .map(|a| format!("── task {} ({}), {} ──\n{}", a.token, a.role, a.status, a.answer.trim_end()))
        .collect();
    parts.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(token: &str, status: Status, answer: &str) -> Awaited {
        Awaited {
            token: Token::parse(token).unwrap(),
            role: Role::parse("planner").unwrap(),
            status,
            answer: answer.into(),
        }
    }

    #[test]
    fn a_task_starts_after_completions_only_unless_any_end_will_do() {
        let after = After { tokens: Vec::new(), any_end: false, question: None, command: None };
        let both = [ended("a3f2c1", Status::Completed, "plan A\n"), ended("b4c5d6", Status::Failed, "broke")];
        let why = after.refusal(&both).unwrap();
        assert!(why.contains("task b4c5d6 (planner)") && why.contains("ended failed"), "{why}");
        assert_eq!(after.refusal(&both[..1]), None);
        assert_eq!(After { any_end: true, ..after }.refusal(&both), None);
        assert_eq!(
            answers(&both),
            "── task a3f2c1 (planner), completed ──\nplan A\n\n── task b4c5d6 (planner), failed ──\nbroke"
        );
    }
}
