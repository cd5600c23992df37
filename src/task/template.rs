//! Agent templates: the argv that runs a role, with `{placeholders}` filled in (never via a shell).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{BackendKind, Bytes, Limits, RetryOn, RetryPolicy, SlurmSettings};
use crate::agent::AgentKind;
use crate::error::Error;

/// The longest single argv element Linux accepts (MAX_ARG_STRLEN, 32 pages, less the NUL).
pub const ARG_MAX_ELEMENT: usize = 32 * 4096 - 1;

/// One `[agents.ROLE]` (or `[default]`) entry of `agents.toml`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Template {
    pub command: Vec<String>,
    /// The agent CLI it runs (`claude`, `codex`…); unset: recognised from the command's program.
    pub agent: Option<AgentKind>,
    /// The most each of its tasks may spend.
    pub budget: Option<super::Budget>,
    pub cwd: Option<PathBuf>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub timeout: Option<String>,
    /// Where the agent's final answer is found (see `ResultFrom`); unset: the agent's file
    /// when the command names `{result_file}`, else its last response.
    pub result: Option<ResultFrom>,
    /// The exit codes and output texts that mean a run was rate-limited and is run again.
    pub retry_on: Option<RetryOn>,
    /// How often a rate-limited run is run again (default 3).
    pub max_retries: Option<u32>,
    /// The wait before the first retry, doubled for each one after (default 10s).
    pub backoff: Option<String>,
    /// Run each task in a git worktree of its own (as `--worktree`).
    #[serde(default)]
    pub worktree: bool,
    /// The pool its tasks wait in for a place (`[pools.NAME]`); `default` if none.
    pub pool: Option<String>,
    /// Memory its processes may use together (`"512M"`, `"2G"`), over its pool's.
    pub memory: Option<Bytes>,
    /// CPUs' worth of time they may use (`1.5`), over its pool's.
    pub cpus: Option<f64>,
    /// How many processes they may be at once, over its pool's.
    pub pids: Option<u64>,
    /// Where the agent runs: `local` (here), or `slurm` (a job step, with `[….slurm]`'s options);
    /// unset: its pool's choice, else `local`.
    pub backend: Option<BackendKind>,
    pub slurm: Option<SlurmSettings>,
    /// A command run once for every end of its tasks.
    pub on_end: Option<Vec<String>>,
    /// What its agent may touch (`[….sandbox]`, or a `[sandboxes.NAME]` profile's name).
    pub sandbox: Option<super::SandboxChoice>,
}

/// Where a task's final answer (its summary) comes from: a template's `result` setting.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum ResultFrom {
    /// `last-response`: the text after the last response marker (kiro-cli's coloured `> `),
    /// without kiro's closing status lines; the whole output when there is no marker.
    #[default]
    LastResponse,
    /// `output`: the whole output, escapes stripped.
    Output,
    /// `file`: the file the agent wrote at `{result_file}`; the output if it wrote none.
    File,
    /// `json:FIELD`: a string field of the last JSON object the agent printed
    /// (`claude -p --output-format json` → `json:result`); the output if there is none.
    Json(String),
    /// `agent:KIND`: where the agent kind finds it (its structured stream's answer), the
    /// default of a kind agentctl reads.
    Agent(AgentKind),
}

impl ResultFrom {
    const KINDS: &str =
        "`last-response`, `output`, `file`, `json:FIELD` (like `json:result`) or `agent:KIND` (like `agent:codex`)";
}

impl TryFrom<String> for ResultFrom {
    type Error = String;
    fn try_from(s: String) -> Result<ResultFrom, String> {
        match s.as_str() {
            "last-response" => Ok(ResultFrom::LastResponse),
            "output" => Ok(ResultFrom::Output),
            "file" => Ok(ResultFrom::File),
            _ => match (s.strip_prefix("json:"), s.strip_prefix("agent:")) {
                (Some(field), _) if !field.is_empty() => Ok(ResultFrom::Json(field.to_owned())),
                (_, Some(kind)) if !kind.is_empty() => AgentKind::parse(kind).map(ResultFrom::Agent),
                _ => Err(format!("unknown result `{s}`; use {}", ResultFrom::KINDS)),
            },
        }
    }
}

impl From<ResultFrom> for String {
    fn from(r: ResultFrom) -> String {
        match r {
            ResultFrom::LastResponse => "last-response".into(),
            ResultFrom::Output => "output".into(),
            ResultFrom::File => "file".into(),
            ResultFrom::Json(field) => format!("json:{field}"),
            ResultFrom::Agent(kind) => format!("agent:{kind}"),
        }
    }
}

/// The values placeholders stand for.
#[derive(Default)]
pub struct Vars<'a> {
    pub role: &'a str,
    pub question: &'a str,
    pub question_file: &'a str,
    pub result_file: &'a str,
    pub token: &'a str,
    /// The answers of the tasks it waited for (`--after`), and the file that holds them.
    pub after: &'a str,
    pub after_file: &'a str,
}

impl Template {
    /// The built-in template for roles that `agents.toml` does not name (and for `kiro`):
    /// kiro-cli's headless chat, trusting its tools, since without `--trust-all-tools` it stops
    /// at the first tool that needs approval (see `agents::builtin`).
    pub fn builtin_default() -> Template {
        let command = ["kiro-cli", "chat", "--no-interactive", "--trust-all-tools", "--agent", "{role}", "{question}"];
        Template { command: command.map(String::from).to_vec(), agent: Some(AgentKind::Kiro), ..Template::default() }
    }

    /// Refuse a `timeout` that is not a duration, saying where it is.
    pub fn check_timeout(&self, where_: &str) -> Result<(), String> {
        match self.timeout.as_deref().map(super::parse_duration) {
            Some(Err(e)) => Err(format!("{where_} timeout: {}", e.message(crate::error::Frontend::Cli))),
            _ => Ok(()),
        }
    }

    /// When a run of this template is run again (rate-limited), if ever.
    pub fn retry_policy(&self) -> Result<Option<RetryPolicy>, Error> {
        RetryPolicy::from_settings(self.retry_on.as_ref(), self.max_retries, self.backoff.as_deref())
    }

    /// This template's resource limits (each unset one is its pool's); `where_` names it.
    pub fn limits(&self, where_: &str) -> Result<Limits, String> {
        Limits::from_settings(self.memory, self.cpus, self.pids, where_)
    }

    /// The agent CLI this template runs: its `agent`, else its program's.
    pub fn agent_kind(&self) -> AgentKind {
        self.agent.unwrap_or_else(|| AgentKind::of_program(self.command.first().map_or("", String::as_str)))
    }

    /// Where this template's answer comes from: its `result`; else the file its command names;
    /// else where its agent kind finds it (the last response for kiro and any other program).
    pub fn result_from(&self) -> ResultFrom {
        match (&self.result, self.agent_kind()) {
            (Some(r), _) => r.clone(),
            _ if self.uses_result_file() => ResultFrom::File,
            (None, AgentKind::Kiro | AgentKind::Generic) => ResultFrom::LastResponse,
            (None, kind) => ResultFrom::Agent(kind),
        }
    }

    /// Whether the agent writes its answer to a file agentctl names.
    pub fn uses_result_file(&self) -> bool {
        self.command.iter().any(|a| uses(a, "{result_file}"))
    }

    /// Whether the agent reads the question from a file rather than from argv.
    pub fn uses_question_file(&self) -> bool {
        self.command.iter().any(|a| uses(a, "{question_file}"))
    }

    /// Fill in the placeholders of every argv element, refusing what argv cannot carry.
    pub fn render(&self, vars: &Vars<'_>) -> Result<Vec<String>, Error> {
        if self.command.is_empty() || self.command[0].is_empty() {
            return Err(Error::Usage(format!(
                "the agent template for role `{}` has an empty `command`; give it the agent's argv, like [\"claude\", \"-p\", \"{{question}}\"]",
                vars.role
            )));
        }
        let argv: Vec<String> = self.command.iter().map(|a| substitute(a, vars)).collect();
        if argv.iter().any(|a| a.contains('\0')) {
            return Err(Error::Usage("the question contains a NUL byte, which a command line cannot carry".into()));
        }
        if let Some(long) = argv.iter().find(|a| a.len() > ARG_MAX_ELEMENT) {
            return Err(Error::Usage(format!(
                "one argument of role `{}` would be {} bytes, more than the {ARG_MAX_ELEMENT} bytes Linux allows; \
                 give the role a template in agents.toml that passes the question as a file with {{question_file}}",
                vars.role,
                long.len()
            )));
        }
        Ok(argv)
    }
}

/// The placeholders a template's command may hold.
pub const PLACEHOLDERS: [&str; 7] =
    ["{role}", "{question}", "{question_file}", "{result_file}", "{token}", "{after}", "{after_file}"];

/// `{word}` at the start of `s`, for a lowercase word: what a placeholder looks like.
fn word_at(s: &str) -> Option<&str> {
    let inner = s.strip_prefix('{')?;
    let n = inner.find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))?;
    (n > 0 && inner.as_bytes()[0].is_ascii_lowercase() && inner[n..].starts_with('}')).then(|| &s[..n + 2])
}

/// `{{word}}` at the start of `s`: the way to write a literal `{word}`; the `{word}` it stands for.
fn escaped_at(s: &str) -> Option<&str> {
    let w = word_at(s.strip_prefix('{')?)?;
    s[1 + w.len()..].starts_with('}').then_some(w)
}

/// The first `{word}` in `arg` that looks like a placeholder (a lowercase word in braces) but is
/// none: a misspelling that would reach the agent as it is. Other braces (`{print $1}`, JSON,
/// `{{word}}` for a literal `{word}`) are text.
#[cfg(test)]
fn unknown_placeholder(arg: &str) -> Option<&str> {
    pieces(arg).into_iter().find_map(|p| match p {
        Piece::Word(w) if !PLACEHOLDERS.contains(&w) => Some(w),
        _ => None,
    })
}

/// What a command argument holds, as a template reads it.
#[derive(Debug, PartialEq)]
enum Piece<'a> {
    /// `{word}`: a placeholder if it is one of `PLACEHOLDERS`.
    Word(&'a str),
    /// `{{word}}`: the text `{word}`.
    Escaped(&'a str),
}

/// The `{word}`s and `{{word}}`s of `arg`, in order.
fn pieces(arg: &str) -> Vec<Piece<'_>> {
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(open) = arg[at..].find('{') {
        let after = &arg[at + open..];
        if let Some(w) = escaped_at(after) {
            found.push(Piece::Escaped(w));
            at += open + w.len() + 2;
        } else if let Some(w) = word_at(after) {
            found.push(Piece::Word(w));
            at += open + w.len();
        } else {
            at += open + 1;
        }
    }
    found
}

/// Whether `arg` uses placeholder `name` (not written as `{{name}}`).
fn uses(arg: &str, name: &str) -> bool {
    pieces(arg).contains(&Piece::Word(name))
}

impl Template {
    /// Refuse a command holding a misspelled placeholder, naming it and the known ones.
    pub fn check_placeholders(&self, where_: &str) -> Result<(), String> {
        let all = self.command.iter().flat_map(|a| pieces(a));
        for piece in all {
            match piece {
                Piece::Word(w) if !PLACEHOLDERS.contains(&w) => {
                    return Err(format!(
                        "{where_}: unknown placeholder `{w}` in its command; the placeholders are {} (write \
                         `{{{w}}}` for the text {w})",
                        PLACEHOLDERS.join(", ")
                    ));
                }
                // `{{question}}` once meant the question in braces; now it is the word itself,
                // which is never what a template wants.
                Piece::Escaped(w) if PLACEHOLDERS.contains(&w) => {
                    return Err(format!(
                        "{where_}: `{{{w}}}` in its command would be the text {w}, not its value; write {w} \
                         (in braces of their own if the agent needs them: `{{ {w} }}`)"
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Replace each known `{name}` in one pass, so text inside the question is never re-expanded;
/// `{{word}}` is written `{word}`.
fn substitute(arg: &str, vars: &Vars<'_>) -> String {
    let mut out = String::with_capacity(arg.len());
    let mut rest = arg;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open..];
        if let Some(w) = escaped_at(after) {
            out.push_str(w);
            rest = &after[w.len() + 2..];
            continue;
        }
        let value = match word_at(after) {
            Some("{role}") => Some(vars.role),
            Some("{question}") => Some(vars.question),
            Some("{question_file}") => Some(vars.question_file),
            Some("{result_file}") => Some(vars.result_file),
            Some("{token}") => Some(vars.token),
            Some("{after}") => Some(vars.after),
            Some("{after_file}") => Some(vars.after_file),
            _ => None,
        };
        match (value, word_at(after)) {
            (Some(v), Some(name)) => {
                out.push_str(v);
                rest = &after[name.len()..];
            }
            _ => {
                out.push('{');
                rest = &after[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(q: &str) -> Vars<'_> {
        Vars {
            role: "reviewer",
            question: q,
            question_file: "/h/q.md",
            result_file: "/h/r.md",
            token: "abc123",
            ..Vars::default()
        }
    }

    #[test]
    fn default_template_passes_question_as_one_element() {
        let argv = Template::builtin_default().render(&vars("fix it; rm -rf / {token} $(x)")).unwrap();
        // The whole argv is `agents::builtin`'s to test.
        assert_eq!(argv[4..], ["--agent", "reviewer", "fix it; rm -rf / {token} $(x)"]);
    }

    #[test]
    fn placeholders_inside_elements() {
        let t = Template {
            command: vec!["agent".into(), "--q={question}".into(), "{question_file}".into(), "{X}{token}{".into()],
            ..Template::default()
        };
        assert!(t.uses_question_file());
        assert_eq!(t.check_placeholders("x"), Ok(()));
        assert_eq!(t.render(&vars("hi")).unwrap(), ["agent", "--q=hi", "/h/q.md", "{X}abc123{"]);
        assert_eq!(t.result_from(), ResultFrom::LastResponse);
        let t = Template { command: vec!["codex".into(), "--last={result_file}".into()], ..t };
        assert_eq!(t.render(&vars("hi")).unwrap(), ["codex", "--last=/h/r.md"]);
        assert_eq!(t.result_from(), ResultFrom::File);
    }

    #[test]
    fn misspelled_placeholders_are_found_and_other_braces_are_text() {
        for (arg, found) in [
            ("{questoin}", Some("{questoin}")),
            ("--file={result_fle}", Some("{result_fle}")),
            ("{role}-{tokn}", Some("{tokn}")),
            ("awk '{print $1}'", None),
            (r#"{"a": 1}"#, None),
            ("{}", None),
            ("{{question}}", None),
            ("{{role}} {tokn}", Some("{tokn}")),
            ("{{print}} {{x}}", None),
            ("{{print} {x}", Some("{print}")),
            ("{Question}", None),
            ("{question", None),
        ] {
            assert_eq!(unknown_placeholder(arg), found, "{arg}");
        }
        let t = Template { command: vec!["claude".into(), "-p".into(), "{questoin}".into()], ..Template::default() };
        let e = t.check_placeholders("[agents.w]").unwrap_err();
        let twice = Template { command: vec!["x".into(), "{{question}}".into()], ..Template::default() };
        assert!(twice.check_placeholders("w").unwrap_err().contains("would be the text {question}"));
        let file = Template { command: vec!["x".into(), "{{result_file}}".into()], ..Template::default() };
        assert!(!file.uses_result_file());
        let escaped = Template { command: vec!["awk".into(), "{{print}} {question}".into()], ..Template::default() };
        assert_eq!(escaped.check_placeholders("x"), Ok(()));
        assert_eq!(escaped.render(&vars("q")).unwrap(), ["awk", "{print} q"]);
        assert!(e.contains("unknown placeholder `{questoin}`") && e.contains("{question}, {question_file}"), "{e}");
    }

    #[test]
    fn result_settings_read_and_write_as_text() {
        for (text, want) in [
            ("last-response", ResultFrom::LastResponse),
            ("output", ResultFrom::Output),
            ("file", ResultFrom::File),
            ("json:result", ResultFrom::Json("result".into())),
            ("agent:codex", ResultFrom::Agent(AgentKind::Codex)),
        ] {
            assert_eq!(ResultFrom::try_from(text.to_owned()).unwrap(), want);
            assert_eq!(String::from(want), text);
        }
        let e = ResultFrom::try_from("agent:claud".to_owned()).unwrap_err();
        assert!(e.contains("unknown agent `claud`"), "{e}");
        for bad in ["", "json:", "last_response", "JSON:result", "agent:"] {
            let e = ResultFrom::try_from(bad.to_owned()).unwrap_err();
            assert!(e.contains("json:FIELD"), "{e}");
        }
    }

    #[test]
    fn refuses_what_argv_cannot_carry() {
        let long = "q".repeat(ARG_MAX_ELEMENT + 1);
        let err = Template::builtin_default().render(&vars(&long)).unwrap_err().to_string();
        assert!(err.contains("{question_file}"), "{err}");
        assert!(Template::builtin_default().render(&vars("a\0b")).is_err());
        let ok = "q".repeat(ARG_MAX_ELEMENT);
        assert!(Template::builtin_default().render(&vars(&ok)).is_ok());
    }
}
