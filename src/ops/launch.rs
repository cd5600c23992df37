//! Starting tasks: `ask` (a role's template) and `run` (any argv); `settle` is the wait after.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::blocking::blocking;
use super::events::session_of;
use super::own_path::find_program;
use super::settle::{Wait, handed_back};
use super::view::TaskView;
use super::wait::DEFAULT_GRACE;
use crate::agents::{Agents, DEFAULT_POOL};
use crate::error::{Error, Frontend, IoContext, Result};
use crate::store::Store;
use crate::supervisor;
use crate::task::{
    After, Budget, HookState, PoolRef, Role, TaskRecord, TaskSpec, Template, Token, Vars, one_line_preview,
    parse_duration, unix_ms,
};

/// The most characters of a question (or command) a task keeps for listings, which cut it
/// further to fit a terminal.
const PREVIEW: usize = 160;

/// What to run.
#[derive(Clone, Debug)]
pub enum What {
    /// Ask a role: its template from `agents.toml` (or `agents_file`) gets the question.
    Ask { question: String, agents_file: Option<PathBuf> },
    /// Run this argv as it is (`agents_file` says its pool's limit).
    Run { argv: Vec<String>, agents_file: Option<PathBuf> },
}

/// A request to start a task.
#[derive(Clone, Debug)]
pub struct Launch {
    pub role: Role,
    pub what: What,
    pub cwd: Option<PathBuf>,
    pub session: Option<String>,
    /// Halt the task (as `expired`) once it has run this long.
    pub deadline: Option<Duration>,
    pub wait: Wait,
    /// Run it in a git worktree of its own, from this base (`None`: HEAD); the template's
    /// `worktree = true` asks for one from HEAD too.
    pub worktree: Option<Option<String>>,
    /// The pool it waits in for a place (`--pool`), instead of its template's.
    pub pool: Option<String>,
    /// The most it may spend (`--budget-usd`…), over its template's.
    pub budget: Budget,
    /// An ended task whose conversation it goes on with (`ask --to`, `--fork`); none: a new one.
    pub from: Option<GoOn>,
    /// The tasks it waits for before it starts (`--after`), and whether it starts whatever they
    /// ended as (`--after-any-end`; else only if each completed).
    pub after: Vec<Token>,
    pub after_any_end: bool,
    /// The sandbox profile it runs in (`--sandbox`; `none`: none), instead of its template's.
    pub sandbox: Option<String>,
}

/// Who hands a new task back the moment it is saved, before its supervisor is forked (the
/// CLI's `--async`: see `supervisor::launch`); unused where the start cannot do that.
pub type HandBack = Box<dyn FnOnce(&TaskView) + Send>;

/// How a request goes on with an ended task's conversation.
#[derive(Clone, Copy, Debug)]
pub enum GoOn {
    /// As that task's next turn, under its token.
    Turn(Token),
    /// As a new task, from a copy of it.
    Fork(Token),
}

/// The conversation a forked task starts from: its agent's session id, and the template command
/// of the task that had it.
#[derive(Clone, Debug)]
pub(super) struct Fork {
    pub session: String,
    pub command: Vec<String>,
    pub kind: crate::agent::AgentKind,
    /// The directory it ran in, where its agent keeps the conversation.
    pub cwd: PathBuf,
}

/// Start a task and return its record as it was saved: its supervisor starts its agent (or
/// waits for a place) meanwhile. Bad input and commands that cannot be found are refused before
/// the task is created; an agent that cannot start at all ends the task as failed, saying why.
pub async fn launch(store: &Store, req: Launch, hand_back: Option<HandBack>) -> Result<TaskRecord> {
    launch_from(store, req, None, hand_back).await
}

/// `launch`, for a fork: from a copy of `fork`'s conversation, with its command.
pub(super) async fn launch_from(
    store: &Store,
    req: Launch,
    fork: Option<Fork>,
    hand_back: Option<HandBack>,
) -> Result<TaskRecord> {
    let session = session_of(req.session.as_deref())?;
    req.budget.check("the task's budget").map_err(Error::Usage)?;
    let agents_file = match &req.what {
        What::Ask { agents_file, .. } | What::Run { agents_file, .. } => agents_file.as_deref(),
    };
    let agents = Agents::load(store.home(), agents_file)?;
    let (template, source, question, place) = match &req.what {
        What::Ask { question, .. } => {
            if question.trim().is_empty() {
                return Err(Error::Usage(format!(
                    "the question for role `{}` is empty: say what it should do",
                    req.role
                )));
            }
            let mut r = agents.template_for(&req.role)?;
            if let Some(fork) = &fork {
                (r.template.command, r.template.agent) = (fork.command.clone(), Some(fork.kind));
            }
            let hint = format!(
                "install it, or give role `{role}` a template in {}:\n  [agents.{role}]\n  command = [\"claude\", \"-p\", \"{{question}}\"]",
                agents.config_hint(store.home()).display(),
                role = req.role
            );
            let place = format!("role `{}` ({})", req.role, r.source);
            (r.template, format!("role `{}` uses {}; {hint}", req.role, r.source), question.clone(), place)
        }
        What::Run { argv, .. } => {
            let t = Template { command: argv.clone(), ..Template::default() };
            (t, "check the command".to_owned(), String::new(), String::new())
        }
    };
    let base = std::env::current_dir().ctx(|| "cannot read the current directory".into())?;
    let cwd = base.join(req.cwd.as_ref().or(template.cwd.as_ref()).map_or(Path::new("."), |p| p.as_path()));
    if !cwd.is_dir() {
        return Err(Error::Usage(format!("working directory {} does not exist", cwd.display())));
    }
    let worktree = req.worktree.clone().or_else(|| template.worktree.then_some(None));
    // Checked before anything is created, so a refusal leaves nothing behind.
    let worktree = match worktree {
        Some(base) => Some(blocking(|| crate::worktree::source(&cwd, base.as_deref()))?),
        None => None,
    };
    let pool_name = req.pool.clone().or_else(|| template.pool.clone()).unwrap_or_else(|| DEFAULT_POOL.to_owned());
    agents.check_pool(&pool_name)?;
    // A task started from inside another one (a sub-agent's own sub-agents) does not wait for a
    // place: its parent holds one, and waiting behind it could never end.
    let nested = super::events::enclosing_token().is_some();
    // Its limits hold in any case.
    let pool_limits = agents.pool_limits(&pool_name);
    // The template's choice, else its pool's (a nested task's too).
    let (pool_kind, pool_slurm) = agents.pool_backend(&pool_name);
    let asked = (req.sandbox.as_deref(), &template, pool_name.as_str());
    let sandbox = super::sandbox::choose(store, &agents, asked, template.backend.or(pool_kind), &cwd)?;
    let budget = agents.budget(req.budget, &template, &pool_name);
    let hook = agents.hook(&template, &pool_name);
    let backend = supervisor::backend::prepare(&template, (&pool_name, pool_kind, pool_slurm));
    let pool = (!nested).then(|| PoolRef {
        parallel: Some(agents.parallel(&pool_name)),
        spend: agents.pool_spend(&pool_name),
        min_memory: agents.pool_min_memory(&pool_name).map(|b| b.0),
        name: pool_name,
        // The supervisor runs in `/`: the file by its absolute name.
        agents_file: agents.path().map(|p| base.join(p)),
    });
    let limits = template.limits(&place).map_err(Error::Usage)?.or(&pool_limits);
    if let Some(why) = crate::supervisor::cgroup::mode_refuses(&limits) {
        return Err(Error::Usage(format!("cannot contain the task: {why}")));
    }
    let retry = template.retry_policy().map_err(|e| Error::Usage(format!("{place}: {}", e.message(Frontend::Cli))))?;
    let deadline = match (req.deadline, &template.timeout) {
        (Some(d), _) => Some(d),
        (None, Some(t)) => Some(parse_duration(t)?),
        (None, None) => None,
    };
    // Render once without a token to refuse bad input before anything is created.
    let probe =
        template.render(&Vars { role: req.role.as_str(), question: &question, token: "000000", ..Vars::default() })?;
    let path_var = template.env.get("PATH").cloned().or_else(|| std::env::var("PATH").ok()).unwrap_or_default();
    // The agent's own command, or what runs it elsewhere (srun), must be found here.
    let local = backend.program(&probe[0]);
    let Some(program) = find_program(local, &cwd, &path_var) else {
        return Err(Error::LaunchFailed(
            backend
                .missing(&place)
                .unwrap_or_else(|| format!("command `{local}` was not found or is not executable; {source}")),
        ));
    };

    let after = awaited(store, &req.after)?;

    // Everything is checked: only now is anything created.
    store.create()?;
    // A start never opens the database itself when it need not: a store a newer release wrote
    // is refused here all the same.
    store.check_schema()?;
    let (token, lock) = store.create_task(&req.role)?;
    crate::crash::point("launch.created");
    let prepare = || -> Result<(TaskRecord, TaskSpec)> {
        let question_file = store.question_path(&req.role, token);
        if template.uses_question_file() {
            write_private(&question_file, question.as_bytes())?;
        }
        let argv = command_of(store, &template, &req.role, token, &question, "")?;
        let mut argv = match &fork {
            Some(fork) => crate::agent::kind(fork.kind).resume(argv, &fork.session, true).map_err(Error::Usage)?,
            None => argv,
        };
        let input = match &req.what {
            What::Ask { .. } => crate::agent::first_message(template.agent_kind(), &mut argv, &question),
            What::Run { .. } => None,
        };
        let mut env = template.env.clone();
        env.insert("AGENTCTL_TOKEN".into(), token.to_string());
        env.insert("AGENTCTL_SESSION".into(), session.clone());
        env.insert("AGENTCTL_HOME".into(), store.home().to_string_lossy().into_owned());
        // Its `agentctl ask-lead`, `notify`, `inbox` reach this agentctl, wherever it is.
        if let Some(path) = super::own_path::agent_path(store, &path_var, &cwd) {
            env.insert("PATH".into(), path);
        }
        backend.environment(&mut env);
        let preview = match &req.what {
            What::Ask { question, .. } => one_line_preview(question, PREVIEW),
            What::Run { argv, .. } => one_line_preview(&shell_words(argv), PREVIEW),
        };
        write_private(&store.log_path(&req.role, token), b"")?;
        let (worktree, cwd) = match &worktree {
            Some(source) => {
                let (wt, inside) = blocking(|| crate::worktree::create(token, source, &store.worktree_path(token)))?;
                // A fork in a worktree of its own: its agent must find the conversation there.
                if let Some(fork) = fork.as_ref().filter(|f| f.cwd != inside) {
                    let agent = crate::agent::kind(fork.kind);
                    if let Err(why) = agent.carry_session(&fork.session, &fork.cwd, &inside, &template.env) {
                        crate::worktree::remove(&wt, true);
                        return Err(Error::Usage(format!("cannot fork into a worktree of its own: {why}")));
                    }
                }
                (Some(wt), inside)
            }
            None => (None, cwd.clone()),
        };
        // In its worktree, if it has one.
        let deadline_ms = deadline.map(|d| d.as_millis() as u64);
        let (argv, backend) = backend.command(argv, &program, token, &cwd, deadline_ms);
        let (argv, sandbox) = match &sandbox {
            Some(s) => {
                s.for_task(store, &template, (&req.role, token), (&cwd, &env), argv).map(|(a, s)| (a, Some(s)))?
            }
            None => (argv, None),
        };
        let spec = TaskSpec {
            argv,
            program: Some(program.clone()),
            cwd,
            env,
            deadline_ms: deadline.map(|d| d.as_millis() as u64),
            grace_ms: DEFAULT_GRACE.as_millis() as u64,
            result: template.result_from(),
            retry: retry.clone(),
            worktree,
            pool: pool.clone(),
            limits: limits.clone(),
            backend,
            agent: Some(template.agent_kind()),
            budget,
            // Only what the file sets: a task keeps no table of its own.
            prices: agents.prices().clone(),
            template: matches!(req.what, What::Ask { .. }).then(|| template.command.clone()),
            input,
            on_end: hook.clone(),
            sandbox,
            after: (!after.is_empty()).then(|| After {
                tokens: after.clone(),
                any_end: req.after_any_end,
                question: matches!(req.what, What::Ask { .. }).then(|| question.clone()),
                command: matches!(req.what, What::Run { .. }).then(|| template.command.clone()),
            }),
        };
        let rec = TaskRecord {
            token,
            role: req.role.clone(),
            session: session.clone(),
            preview,
            created_at_ms: unix_ms(SystemTime::now()),
            started: None,
            ended: None,
            queued: pool.is_some() || !after.is_empty(),
            retries: 0,
            retry_at_ms: None,
            rate_limited: Vec::new(),
            run_start: 0,
            changes: None,
            containment: None,
            slurm_job: None,
            slurm_pending: None,
            limit_kept: None,
            usage: None,
            spend_held: None,
            memory_short: None,
            frees_at_ms: None,
            turns: Vec::new(),
            waiting_for: after.clone(),
            hook: hook.as_ref().map(|_| HookState::Due),
        };
        Ok((rec, spec))
    };
    let (mut rec, spec) = prepare().inspect_err(|_| {
        // Not a task yet (a full disk, say): nothing of it is left behind.
        store.discard_task(&req.role, token);
    })?;
    let announce = hand_back.map(|hand_back| -> supervisor::Announced<'_> {
        Box::new(|saved: &TaskRecord| {
            if let Ok(v) = handed_back(store, &launched(saved.clone(), &spec), true) {
                hand_back(&v);
            }
        })
    });
    // Blocking work (milliseconds): a multi-threaded runtime (the MCP server) lets other calls go
    // on meanwhile; the CLI does it in place, single-threaded, so that it can fork its supervisor.
    rec.queued = blocking(|| supervisor::launch(store, &rec, &spec, lock, announce)).inspect_err(|_| {
        // A task that was not saved leaves no worktree either.
        if let (Some(wt), Err(Error::UnknownToken { .. })) = (&spec.worktree, store.read_record(token)) {
            crate::worktree::remove(wt, true);
        }
    })?;
    Ok(launched(rec, &spec))
}

/// A new task as its start hands it back: with its place, and its supervisor starting it,
/// unless Slurm has yet to run its job.
fn launched(mut rec: TaskRecord, spec: &TaskSpec) -> TaskRecord {
    if !rec.queued {
        rec.slurm_pending = spec.backend.pending_at_start();
    }
    rec
}

/// The tasks a new one is to wait for (`--after`), each once, in order; each must exist. (None
/// can wait for the new one, which has no token yet: no cycle can form.)
fn awaited(store: &Store, tokens: &[Token]) -> Result<Vec<Token>> {
    let mut out: Vec<Token> = Vec::new();
    for &t in tokens {
        store.read_record(t)?;
        if !out.contains(&t) {
            out.push(t);
        }
    }
    Ok(out)
}

/// `template`'s command for task `token` of `role` asked `question`, its files where the store
/// keeps them; `after`: the answers of the tasks it waited for, if it did.
pub(crate) fn command_of(
    store: &Store,
    template: &Template,
    role: &Role,
    token: Token,
    question: &str,
    after: &str,
) -> Result<Vec<String>> {
    template.render(&Vars {
        role: role.as_str(),
        question,
        question_file: &store.question_path(role, token).to_string_lossy(),
        result_file: &store.result_path(role, token).to_string_lossy(),
        token: token.as_str(),
        after,
        after_file: &store.after_path(token).to_string_lossy(),
    })
}

/// `argv` as a shell would need it typed: an argument with spaces or shell characters in single
/// quotes, so that `["echo", "> hi"]` does not read as a redirect.
pub fn shell_words(argv: &[String]) -> String {
    let plain = |a: &str| !a.is_empty() && a.bytes().all(|b| b.is_ascii_alphanumeric() || b"_./:=@%+,-".contains(&b));
    argv.iter()
        .map(|a| if plain(a) { a.clone() } else { format!("'{}'", a.replace('\'', r"'\''")) })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Make a new private file of the task (its log, its question).
fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::store::files::create(path, bytes).ctx(|| format!("cannot create {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_shown_as_they_would_be_typed() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(shell_words(&argv(&["echo", "> hi"])), "echo '> hi'");
        assert_eq!(shell_words(&argv(&["make", "-j4", "test"])), "make -j4 test");
        assert_eq!(shell_words(&argv(&["sh", "-c", "it's"])), r"sh -c 'it'\''s'");
        assert_eq!(shell_words(&argv(&["x", ""])), "x ''");
    }
}
