//! A question a task asks its lead (`agentctl ask-lead`): its own id, the text, the choices
//! offered, and what became of it.

use serde::{Deserialize, Serialize};

use super::Token;
use crate::error::Error;

/// Where a question stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QuestionState {
    Pending,
    Answered,
    /// Its asker stopped waiting (timed out, or the task ended): an answer would reach nobody.
    Withdrawn,
}

impl QuestionState {
    /// The state as stored.
    pub fn code(self) -> i64 {
        match self {
            QuestionState::Pending => 0,
            QuestionState::Answered => 1,
            QuestionState::Withdrawn => 2,
        }
    }

    /// The state stored as `code`.
    pub fn from_code(code: i64) -> QuestionState {
        match code {
            0 => QuestionState::Pending,
            1 => QuestionState::Answered,
            _ => QuestionState::Withdrawn,
        }
    }
}

/// One question and, once answered, its answer.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Question {
    pub id: String,
    /// The task that asks.
    #[schemars(with = "String")]
    pub token: Token,
    pub text: String,
    /// The answers offered, if any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<String>,
    pub state: QuestionState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// The process that waits for the answer.
    #[serde(skip)]
    pub asker: String,
}

/// The longest question, and the longest choice: a question is read by a model in every
/// result that shows it.
pub const MAX_QUESTION: usize = 4096;
pub const MAX_CHOICE: usize = 200;

/// A question id: `q` and 10 hex characters.
pub fn question_id() -> String {
    format!("q{:010x}", super::random_u64() & 0xff_ffff_ffff)
}

/// Whether `s` looks like a question id rather than a token.
pub fn is_question_id(s: &str) -> bool {
    s.len() == 11 && s.starts_with('q') && s[1..].bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// Parse `--choices a,b,c`: trimmed, none empty, at most 20.
pub fn parse_choices(s: &str) -> Result<Vec<String>, Error> {
    let choices: Vec<String> = s.split(',').map(|c| c.trim().to_owned()).collect();
    if choices.iter().any(|c| c.is_empty() || c.len() > MAX_CHOICE) || choices.len() > 20 {
        return Err(Error::Usage(format!(
            "choices `{s}` are not a list like `main,dev`: 1 to 20 answers of at most {MAX_CHOICE} bytes, none empty, separated by commas"
        )));
    }
    Ok(choices)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_choices() {
        let id = question_id();
        assert!(is_question_id(&id), "{id}");
        assert!(!is_question_id("a3f2c1") && !is_question_id("qXYZ0000000"));
        assert_eq!(parse_choices(" main, dev ").unwrap(), ["main", "dev"]);
        assert!(parse_choices("a,,b").is_err() && parse_choices("").is_err());
    }
}
