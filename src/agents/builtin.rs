//! The built-in templates: one per agent CLI agentctl knows, each asking for its structured
//! stream and choosing a permission mode for unattended work in the task's own directory. Each
//! runs the role of its kind's name when the agents file has no entry of that name; kiro's also
//! runs every other role the file does not define.

use crate::agent::AgentKind;
use crate::task::Template;

/// The kinds with a built-in template, in the order listings show them (`generic` has none:
/// it is any other command).
pub const KINDS: [AgentKind; 6] =
    [AgentKind::Claude, AgentKind::Codex, AgentKind::Gemini, AgentKind::Copilot, AgentKind::Opencode, AgentKind::Kiro];

/// The built-in template of `kind`, if it has one.
///
/// Each may edit files in its working directory and run commands there, and none waits for a
/// person at a prompt (nobody is there to answer):
/// - claude: `acceptEdits` lets it edit inside its directory; `--allowedTools Bash` lets it run
///   commands, which `claude -p` would otherwise refuse. `bypassPermissions` is not used: Claude
///   Code refuses it as root (unless `IS_SANDBOX=1`), and it would allow edits anywhere.
/// - codex: `codex exec` never asks; `--sandbox workspace-write` lets it write in its directory
///   (its default, `read-only`, could fix nothing).
/// - gemini: `--approval-mode yolo` runs its tools (headless, any other mode refuses shell
///   commands); `--skip-trust`, since Gemini CLI exits (55) in a folder nobody trusted.
/// - copilot: `--allow-all-tools` (required without a prompt; file access stays in its
///   directory), `--no-ask-user` so that it never waits on a question, `--no-auto-update` so
///   that a task does not download a new copilot.
/// - opencode: its own defaults allow edits and commands; what would ask (a path outside its
///   directory) is refused by `opencode run` (`--auto` would approve it).
/// - kiro: `--trust-all-tools`: without it `kiro-cli chat --no-interactive` stops at the first
///   tool that needs approval.
///
/// Questions go after `--`, or as `--prompt=…`, where the CLI allows it, so that a question
/// starting with `-` is not read as an option. Claude's comes on its stdin
/// (`--input-format stream-json`), where `send` can add to its conversation as it runs.
pub fn template(kind: AgentKind) -> Option<Template> {
    let command: &[&str] = match kind {
        AgentKind::Claude => &[
            "claude",
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--replay-user-messages",
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            "Bash",
        ],
        AgentKind::Codex => &[
            "codex",
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--sandbox",
            "workspace-write",
            "--output-last-message",
            "{result_file}",
            "--",
            "{question}",
        ],
        AgentKind::Gemini => &[
            "gemini",
            "--prompt={question}",
            "--output-format",
            "stream-json",
            "--approval-mode",
            "yolo",
            "--skip-trust",
        ],
        AgentKind::Copilot => &[
            "copilot",
            "--prompt={question}",
            "--output-format",
            "json",
            "--allow-all-tools",
            "--no-ask-user",
            "--no-auto-update",
        ],
        AgentKind::Opencode => &["opencode", "run", "--format", "json", "{question}"],
        AgentKind::Kiro => return Some(Template::builtin_default()),
        AgentKind::Generic => return None,
    };
    let command = command.iter().map(|a| a.to_string()).collect();
    Some(Template { command, agent: Some(kind), ..Template::default() })
}

/// The built-in template of the kind named `role` (`claude`, `codex`…), if there is one.
pub fn for_role(role: &str) -> Option<Template> {
    KINDS.into_iter().find(|k| k.as_str() == role).and_then(template)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{ResultFrom, Vars};

    fn argv(role: &str, question: &str) -> Vec<String> {
        let vars = Vars { role, question, question_file: "/q", result_file: "/r", token: "t", ..Vars::default() };
        for_role(role).unwrap().render(&vars).unwrap()
    }

    #[test]
    fn each_kind_runs_its_cli_asking_for_its_stream_in_a_mode_that_needs_nobody() {
        // Claude's question comes on its stdin, as its first user message.
        let mut claude = argv("claude", "-v fix it");
        assert_eq!(claude[..5], ["claude", "-p", "--input-format", "stream-json", "--output-format"]);
        assert!(claude.ends_with(&["--permission-mode", "acceptEdits", "--allowedTools", "Bash"].map(String::from)));
        let first = crate::agent::first_message(AgentKind::Claude, &mut claude, "-v fix it");
        assert_eq!(
            first.as_deref(),
            Some("{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"-v fix it\"}}\n")
        );
        assert_eq!(claude, argv("claude", ""), "it writes its messages back as it is");
        assert_eq!(
            argv("codex", "q")[..6],
            ["codex", "exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write"]
        );
        assert_eq!(argv("codex", "q")[6..], ["--output-last-message", "/r", "--", "q"]);
        assert_eq!(argv("gemini", "-q")[1], "--prompt=-q");
        assert!(argv("gemini", "q").ends_with(&["--approval-mode".into(), "yolo".into(), "--skip-trust".into()]));
        assert_eq!(argv("copilot", "q")[1..3], ["--prompt=q", "--output-format"]);
        assert_eq!(argv("opencode", "q"), ["opencode", "run", "--format", "json", "q"]);
        assert_eq!(
            argv("kiro", "q"),
            ["kiro-cli", "chat", "--no-interactive", "--trust-all-tools", "--agent", "kiro", "q"]
        );
        assert_eq!(for_role("generic"), None);
        assert_eq!(for_role("Claude"), None);
    }

    #[test]
    fn each_says_its_kind_and_the_kind_finds_its_answer() {
        for kind in KINDS {
            let t = template(kind).unwrap();
            assert_eq!((t.agent, t.agent_kind()), (Some(kind), kind));
            assert_eq!(t.check_placeholders(kind.as_str()), Ok(()));
            let want = match kind {
                AgentKind::Codex => ResultFrom::File,
                AgentKind::Kiro => ResultFrom::LastResponse,
                k => ResultFrom::Agent(k),
            };
            assert_eq!(t.result_from(), want, "{kind}");
        }
    }

    #[test]
    fn each_kind_resumes_its_session_with_its_own_flags_and_forks_where_it_can() {
        let resumed = |role: &str, fork: bool| {
            let kind = crate::agent::kind(for_role(role).unwrap().agent_kind());
            kind.resume(argv(role, "more"), "S", fork).map(|a| a.join(" "))
        };
        let ok = |role, fork| resumed(role, fork).unwrap();
        assert!(ok("claude", false).starts_with("claude --resume S -p "), "{}", ok("claude", false));
        assert!(ok("claude", true).starts_with("claude --resume S --fork-session -p "));
        // `--sandbox` and the other exec options stay before `resume`; the prompt after it.
        assert!(ok("codex", false).ends_with("--output-last-message /r resume S -- more"), "{}", ok("codex", false));
        assert!(ok("gemini", false).starts_with("gemini --resume S --prompt=more"));
        assert!(ok("copilot", false).starts_with("copilot --resume=S --prompt=more"));
        assert_eq!(ok("opencode", true), "opencode run --session S --fork --format json more");
        for (role, fork) in [("codex", true), ("gemini", true), ("copilot", true), ("kiro", false)] {
            assert!(resumed(role, fork).is_err(), "{role} {fork}");
        }
    }
}
