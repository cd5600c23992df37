//! Codex CLI (`codex exec --json --output-last-message {result_file}`), and any agent that writes
//! its answer to the file agentctl names (`result = "file"`, implied by `{result_file}` in the
//! command): that file is its answer; without one, the last `agent_message` of its stream, else
//! its whole output.
//!
//! Its stream (`--json`): `thread.started` names the thread (the session), `item.*` events its
//! steps, and `turn.completed` its usage. Codex counts cached tokens (read and written) inside
//! `input_tokens`: the uncached input is what is left. Turns are `turn.completed` events (one
//! per `exec`: Codex says nothing of its model calls). The usage is the thread's running total,
//! so after `codex exec resume` it includes the earlier runs' spend: until the supervisor knows
//! the total before (`resumed_run_usage`), a resumed run's usage is its thread's.

use serde_json::Value;

use super::stream::{self, Reader, Seen, Todo};
use super::{Agent, AgentKind, Usage, json};
use crate::summary::{Found, Tail};

/// An agent that writes its answer to `{result_file}`.
pub struct Codex;

impl Agent for Codex {
    fn kind(&self) -> AgentKind {
        AgentKind::Codex
    }

    fn answer_in_file(&self) -> bool {
        true
    }

    /// Only when it wrote no file: its last message in the stream, else its output, whole.
    fn answer(&self, tail: &Tail<'_>) -> Found {
        let last = json::last_event(tail, &["item.completed"], |e| {
            let item = e.get("item")?;
            (item.get("type")?.as_str()? == "agent_message").then(|| item.get("text")?.as_str().map(str::to_owned))?
        });
        match last {
            Some(text) => json::cleaned(tail, &text),
            None => tail.output(),
        }
    }

    fn reader(&self) -> Option<Box<dyn Reader>> {
        Some(Box::new(CodexStream))
    }

    /// `resume S` before the prompt (before `--` if the command has one: `exec`'s own options,
    /// `--sandbox` among them, stay before it). A fork (`exec fork`) is not made: its stream
    /// counts the original thread's spend as its own.
    fn resume(&self, mut argv: Vec<String>, session: &str, fork: bool) -> Result<Vec<String>, String> {
        if fork {
            return Err("agentctl does not fork Codex threads yet".into());
        }
        let at = match argv.iter().position(|a| a == "--") {
            Some(dashes) => dashes,
            None => argv.len().saturating_sub(1).max(1.min(argv.len())),
        };
        argv.splice(at..at, ["resume".to_owned(), session.to_owned()]);
        Ok(argv)
    }

    fn resumed_usage_is_total(&self) -> bool {
        true
    }

    /// `$CODEX_HOME`, else `~/.codex`: its config, credentials and threads.
    fn state(&self, env: &super::Env) -> Vec<std::path::PathBuf> {
        super::var(env, "CODEX_HOME").or_else(|| super::at_home(env, ".codex")).into_iter().collect()
    }

    /// `--sandbox danger-full-access` in place of its own sandbox (`--sandbox`/`-s MODE`,
    /// `--full-auto`): its bubblewrap cannot make the namespaces it needs inside agentctl's.
    fn in_sandbox(&self, mut argv: Vec<String>) -> Vec<String> {
        let options = argv.iter().position(|a| a == "--").unwrap_or(argv.len());
        let unfenced =
            |a: &String| a.contains("danger-full-access") || a == "--dangerously-bypass-approvals-and-sandbox";
        if argv[..options].iter().any(unfenced) {
            return argv;
        }
        let mode = argv[..options].iter().position(|a| a == "--sandbox" || a == "-s");
        if let Some(value) = mode.map(|at| at + 1).filter(|&v| v < options) {
            argv[value] = "danger-full-access".to_owned();
        } else if let Some(flag) = argv[..options].iter_mut().find(|a| a.starts_with("--sandbox=")) {
            *flag = "--sandbox=danger-full-access".to_owned();
        } else {
            let at = if argv.get(1).is_some_and(|a| a == "exec") { 2 } else { 1.min(argv.len()) };
            argv.splice(at..at, ["--sandbox".to_owned(), "danger-full-access".to_owned()]);
        }
        argv.retain(|a| a != "--full-auto");
        argv
    }
}

/// The usage of one resumed run: its thread's total (`total`, as the stream reports it) less
/// the total before it (`before`). Turns, model, cost and session are the run's own.
pub fn resumed_run_usage(total: &Usage, before: &Usage) -> Usage {
    let less = |t: Option<u64>, b: Option<u64>| t.map(|t| t.saturating_sub(b.unwrap_or(0)));
    Usage {
        input_tokens: less(total.input_tokens, before.input_tokens),
        output_tokens: less(total.output_tokens, before.output_tokens),
        cache_read_tokens: less(total.cache_read_tokens, before.cache_read_tokens),
        cache_write_tokens: less(total.cache_write_tokens, before.cache_write_tokens),
        ..total.clone()
    }
}

/// Codex's stream: everything it says is in the event at hand.
struct CodexStream;

impl Reader for CodexStream {
    fn line(&mut self, line: &[u8], seen: &mut Seen) {
        // A finished command's event repeats its whole output: nothing in it is needed.
        if !line.starts_with(b"{") || (json::starts_with_type(line, "item.completed") && !worth_reading(line)) {
            return;
        }
        let Ok(event) = serde_json::from_slice::<Value>(line) else { return };
        match event.get("type").and_then(Value::as_str) {
            Some("thread.started") => {
                if let Some(id) = event.get("thread_id").and_then(Value::as_str) {
                    seen.usage.session_id = Some(id.to_owned());
                }
            }
            Some("turn.completed") => turn(&event, seen),
            Some("item.started" | "item.updated" | "item.completed") => item(&event["item"], seen),
            _ => {}
        }
    }
}

/// Whether a completed item may say something new: a message, reasoning or a todo list (which
/// come completed only, or change), not a finished tool call.
fn worth_reading(line: &[u8]) -> bool {
    use super::scan::{Key, early};
    static KINDS: [Key; 3] = [Key::new(r#""agent_message""#), Key::new(r#""reasoning""#), Key::new(r#""todo_list""#)];
    KINDS.iter().any(|t| early(line, t, 192))
}

/// The end of a turn: the thread's usage so far.
fn turn(event: &Value, seen: &mut Seen) {
    seen.usage.turns = Some(seen.usage.turns.unwrap_or(0) + 1);
    let Some(usage) = event.get("usage").filter(|u| u.is_object()) else { return };
    let n = |k: &str| usage.get(k).and_then(Value::as_u64);
    let (cached, written) = (n("cached_input_tokens"), n("cache_write_input_tokens"));
    let u = &mut seen.usage;
    u.input_tokens = n("input_tokens").map(|i| i.saturating_sub(cached.unwrap_or(0) + written.unwrap_or(0)));
    (u.cache_read_tokens, u.cache_write_tokens, u.output_tokens) = (cached, written, n("output_tokens"));
}

/// An item of the thread: what the agent does now.
fn item(item: &Value, seen: &mut Seen) {
    let s = |k: &str| item.get(k).and_then(Value::as_str);
    seen.step = match s("type") {
        Some("command_execution") => match s("command") {
            Some(cmd) => stream::step(format!("shell: {}", unwrap_shell(cmd))),
            None => stream::step("shell"),
        },
        Some("file_change") => {
            let paths: Vec<&str> = item
                .get("changes")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| c.get("path")?.as_str())
                .collect();
            match paths.as_slice() {
                [] => stream::step("editing"),
                [one] => stream::step(format!("editing {one}")),
                [first, rest @ ..] => stream::step(format!("editing {first} (+{})", rest.len())),
            }
        }
        Some("mcp_tool_call") => match (s("server"), s("tool")) {
            (Some(server), Some(tool)) => stream::step(format!("{server}.{tool}")),
            _ => stream::step("mcp tool"),
        },
        Some("web_search") => match s("query") {
            Some(q) => stream::step(format!("web_search: {q}")),
            None => stream::step("web_search"),
        },
        Some("reasoning") => stream::step("thinking"),
        Some("agent_message") => stream::step("answering"),
        Some("todo_list") => {
            let items = item.get("items").and_then(Value::as_array).into_iter().flatten();
            seen.todo = items
                .filter_map(|t| {
                    let text = t.get("text")?.as_str()?;
                    let status = match t.get("completed").and_then(Value::as_bool) {
                        Some(true) => "completed",
                        _ => "pending",
                    };
                    Some(Todo::new(text, status))
                })
                .collect();
            return;
        }
        _ => return,
    };
}

/// `cmd` without the shell Codex wraps it in (`/bin/bash -lc 'echo hi'` -> `echo hi`) when what
/// it wraps has no quote of its own to undo.
fn unwrap_shell(cmd: &str) -> &str {
    for flag in [" -lc '", " -c '"] {
        if let Some((shell, rest)) = cmd.split_once(flag)
            && !shell.contains(' ')
            && shell.ends_with("sh")
            && let Some(inner) = rest.strip_suffix('\'')
            && !inner.contains('\'')
        {
            return inner;
        }
    }
    cmd
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;
    use crate::summary::{DEFAULT_CAP, read_answer};

    const STREAM: &str = include_str!("../../fixtures/transcripts/codex-stream.jsonl");
    const ANSWER: &str = include_str!("../../fixtures/transcripts/answer.md");

    fn read(stream: &str) -> Seen {
        crate::agent::stream::read_all(Codex.reader(), stream)
    }

    fn answer(log: &str) -> String {
        read_answer(&mut Cursor::new(log), DEFAULT_CAP, |tail| Codex.answer(tail)).unwrap()
    }

    #[test]
    fn in_a_sandbox_its_tools_run_in_agentctls() {
        let words = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        for (before, after) in [
            (
                "codex exec --json --sandbox workspace-write -- Go",
                "codex exec --json --sandbox danger-full-access -- Go",
            ),
            ("codex exec -s read-only Go", "codex exec -s danger-full-access Go"),
            ("codex exec --sandbox=read-only Go", "codex exec --sandbox=danger-full-access Go"),
            ("codex exec --full-auto Go", "codex exec --sandbox danger-full-access Go"),
            (
                "codex exec --dangerously-bypass-approvals-and-sandbox Go",
                "codex exec --dangerously-bypass-approvals-and-sandbox Go",
            ),
            ("codex exec -- -s read-only", "codex exec --sandbox danger-full-access -- -s read-only"),
        ] {
            assert_eq!(Codex.in_sandbox(words(before)), words(after), "{before}");
        }
    }

    #[test]
    fn a_recorded_stream_gives_its_uncached_input_its_session_and_its_last_message() {
        let seen = read(STREAM);
        let u = &seen.usage;
        assert_eq!(u.figures(), [Some(330), Some(60), Some(800), Some(200), Some(1)]);
        assert_eq!((u.cost_usd, u.model.as_deref()), (None, None));
        assert_eq!(u.session_id.as_deref(), Some("01a218a5-71a2-7160-85a1-3e089fbeab22"));
        assert_eq!(seen.step.unwrap().what, "answering");
        assert_eq!(answer(STREAM), ANSWER.trim_end());
        // The one-shot recording's output, when it wrote no file.
        assert_eq!(answer(include_str!("../../fixtures/transcripts/codex.stdout")), ANSWER.trim_end());
    }

    #[test]
    fn steps_say_the_command_and_the_file() {
        let upto = |n: usize| read(&STREAM.lines().take(n).collect::<Vec<_>>().join("\n"));
        assert_eq!(upto(4).step.unwrap().what, "shell: echo step one");
        assert_eq!(upto(6).step.unwrap().what, "editing /work/scratch/rec/work-codex/notes.txt");
        assert_eq!(upto(3).usage, Usage { session_id: upto(1).usage.session_id, ..Usage::default() });
        let todo = r#"{"type":"item.updated","item":{"id":"i","type":"todo_list","items":[{"text":"Read it","completed":true},{"text":"Fix it","completed":false}]}}"#;
        let seen = read(todo);
        let got: Vec<_> = seen.todo.iter().map(|t| (t.text.as_str(), t.status.as_str())).collect();
        assert_eq!(got, [("Read it", "completed"), ("Fix it", "pending")]);
        let mcp = r#"{"type":"item.started","item":{"type":"mcp_tool_call","server":"docs","tool":"search","status":"in_progress"}}"#;
        assert_eq!(read(mcp).step.unwrap().what, "docs.search");
        let web = r#"{"type":"item.started","item":{"type":"web_search","query":"rust memchr"}}"#;
        assert_eq!(read(web).step.unwrap().what, "web_search: rust memchr");
        let think = r#"{"type":"item.completed","item":{"type":"reasoning","text":"hmm"}}"#;
        assert_eq!(read(think).step.unwrap().what, "thinking");
        for (cmd, shown) in [
            ("/bin/bash -lc 'echo hi'", "echo hi"),
            ("bash -c 'ls -la'", "ls -la"),
            ("/bin/bash -lc 'echo '\"'\"'hi'\"'\"''", "/bin/bash -lc 'echo '\"'\"'hi'\"'\"''"),
            ("python -c 'print(1)'", "python -c 'print(1)'"),
            ("ls", "ls"),
        ] {
            assert_eq!(unwrap_shell(cmd), shown, "{cmd}");
        }
    }

    #[test]
    fn a_resumed_run_reports_its_threads_total_which_the_total_before_turns_into_its_own() {
        let resumed = read(include_str!("../../fixtures/transcripts/codex-resume.jsonl")).usage;
        assert_eq!(resumed.figures(), [Some(660), Some(120), Some(1600), Some(400), Some(1)]);
        let before = read(STREAM).usage;
        let run = resumed_run_usage(&resumed, &before);
        assert_eq!(run.figures(), [Some(330), Some(60), Some(800), Some(200), Some(1)]);
        assert_eq!(run.session_id, before.session_id);
        assert_eq!(resumed_run_usage(&Usage::default(), &before).figures(), [None; 5]);
    }

    #[test]
    fn broken_lines_and_wrong_types_leave_what_is_unknown_unknown() {
        let seen = read(concat!(
            "Reading additional input from stdin...\n{\"type\":\"thread.started\",\"thread_id\":7}\n",
            "{\"type\":\"turn.completed\",\"usage\":[1]}\n{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":\"9\"}}\n",
            "{\"type\":\"item.started\",\"item\":{\"type\":\"file_change\",\"changes\":\"x\"}}\n{\"type\":\"turn.compl",
        ));
        assert_eq!(seen.usage.figures(), [None, None, None, None, Some(2)]);
        assert_eq!((seen.usage.session_id, seen.step.unwrap().what), (None, "editing".to_owned()));
        // A turn that says less than the recorded one: what it does not say stays unknown.
        let seen = read(r#"{"type":"turn.completed","usage":{"input_tokens":100,"output_tokens":5}}"#);
        assert_eq!(seen.usage.figures(), [Some(100), Some(5), None, None, Some(1)]);
        assert_eq!(
            answer("not json\n{\"type\":\"item.completed\",\"item\":{\"type\":\"agent_message\",\"text\":3}}"),
            "not json\n{\"type\":\"item.completed\",\"item\":{\"type\":\"agent_message\",\"text\":3}}"
        );
    }
}
