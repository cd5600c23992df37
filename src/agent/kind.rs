//! Which agent CLI a task runs: a template's `agent` setting, else the command's program name.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// An agent CLI agentctl knows, or `generic` for any other command.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AgentKind {
    Claude,
    Codex,
    Gemini,
    Copilot,
    Opencode,
    Kiro,
    #[default]
    Generic,
}

impl AgentKind {
    /// Every kind, in the order the docs list them.
    pub const ALL: [AgentKind; 7] = [
        AgentKind::Claude,
        AgentKind::Codex,
        AgentKind::Gemini,
        AgentKind::Copilot,
        AgentKind::Opencode,
        AgentKind::Kiro,
        AgentKind::Generic,
    ];

    /// The kind's name, as templates write it.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::Claude => "claude",
            AgentKind::Codex => "codex",
            AgentKind::Gemini => "gemini",
            AgentKind::Copilot => "copilot",
            AgentKind::Opencode => "opencode",
            AgentKind::Kiro => "kiro",
            AgentKind::Generic => "generic",
        }
    }

    /// The kind named `s`, or an error that lists them.
    pub fn parse(s: &str) -> Result<AgentKind, String> {
        AgentKind::ALL.into_iter().find(|k| k.as_str() == s).ok_or_else(|| {
            let all: Vec<_> = AgentKind::ALL.iter().map(|k| k.as_str()).collect();
            format!("unknown agent `{s}`; use one of: {}", all.join(", "))
        })
    }

    /// The kind a command runs, recognised from its program's file name (`claude`,
    /// `/usr/local/bin/codex`, `kiro-cli`); `generic` for any other program.
    pub fn of_program(program: &str) -> AgentKind {
        let name = Path::new(program).file_name().and_then(|n| n.to_str()).unwrap_or(program);
        match name {
            "kiro-cli" | "kiro" => AgentKind::Kiro,
            _ => {
                AgentKind::ALL.into_iter().find(|k| *k != AgentKind::Generic && k.as_str() == name).unwrap_or_default()
            }
        }
    }
}

impl fmt::Display for AgentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl TryFrom<String> for AgentKind {
    type Error = String;
    fn try_from(s: String) -> Result<AgentKind, String> {
        AgentKind::parse(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_recognised_from_the_program_name_only() {
        for (program, kind) in [
            ("claude", AgentKind::Claude),
            ("/opt/npm/bin/codex", AgentKind::Codex),
            ("gemini", AgentKind::Gemini),
            ("copilot", AgentKind::Copilot),
            ("opencode", AgentKind::Opencode),
            ("kiro-cli", AgentKind::Kiro),
            ("generic", AgentKind::Generic),
            ("claude-wrapper", AgentKind::Generic),
            ("sh", AgentKind::Generic),
            ("", AgentKind::Generic),
        ] {
            assert_eq!(AgentKind::of_program(program), kind, "{program}");
        }
    }

    #[test]
    fn names_read_back_and_a_wrong_one_lists_them() {
        for k in AgentKind::ALL {
            assert_eq!(AgentKind::parse(k.as_str()), Ok(k));
        }
        let e = AgentKind::parse("claud").unwrap_err();
        assert!(e.contains("claude, codex, gemini, copilot, opencode, kiro, generic"), "{e}");
    }
}
