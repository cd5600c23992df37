//! Starting tasks from the command line: `ask` (a role's question, or a follow-up of an ended
//! task with `--to`) and `run`, then what their start gave within the wait.

use std::process::ExitCode;

use super::args::{AskArgs, LaunchArgs, WaitArgs};
use super::dispatch::{duration_or, read_stdin};
use super::progress::{self, Watched};
use super::render::{self, Out};
use crate::error::{Error, Result};
use crate::ops::{self, GoOn, Launch, Wait, What};
use crate::store::Store;
use crate::task::{Budget, Role, TaskRecord, Token, parse_duration};

/// `agentctl ask`: a role's question; with `--to` the next turn of an ended task, with `--fork`
/// a new task from a copy of its conversation.
pub async fn ask(
    a: AskArgs,
    home: &std::path::Path,
    agents: Option<std::path::PathBuf>,
    out: &Out,
) -> Result<ExitCode> {
    // With --to or --fork, the one argument is the question; else the role, then the question.
    let from = a.to.as_ref().map(|t| ("--to", t)).or(a.fork.as_ref().map(|t| ("--fork", t)));
    let (role, question) = match (from, a.question) {
        (Some(_), None) => (None, a.role),
        (Some((flag, token)), Some(_)) => {
            return Err(Error::Usage(format!(
                "{flag} {token} takes the question alone: its role is the task's; give QUESTION only"
            )));
        }
        (None, Some(q)) => (Some(a.role), q),
        (None, None) => {
            return Err(Error::Usage(
                "ask needs a role and a question (`agentctl ask ROLE QUESTION`), or --to TOKEN and a question".into(),
            ));
        }
    };
    let from_stdin = question == "-";
    let question = if from_stdin { read_stdin(None)? } else { question };
    if from_stdin && question.trim().is_empty() {
        return Err(Error::Usage(
            "nothing came on stdin for the question (`-` reads it from there): pipe it in, or give it as an argument"
                .into(),
        ));
    }
    let what = What::Ask { question, agents_file: agents };
    let mut req = launch_request(role.as_deref().unwrap_or("run"), what, &a.wait, &a.launch, out)?;
    req.from = match (&a.to, &a.fork) {
        (Some(to), _) => Some(GoOn::Turn(Token::parse(to)?)),
        (None, Some(from)) => Some(GoOn::Fork(Token::parse(from)?)),
        (None, None) => None,
    };
    // A follow-up or fork needs the home its task is in.
    let store = if req.from.is_some() { Store::existing(home)? } else { Store::at(home)? };
    started(out, &store, req, a.wait.quiet).await
}

/// The launch request `ask` or `run` stands for, checked.
pub(super) fn launch_request(role: &str, what: What, w: &WaitArgs, l: &LaunchArgs, out: &Out) -> Result<Launch> {
    if w.quiet && out.json {
        return Err(Error::Usage(
            "--quiet prints the token alone and --json the whole task as one object; give one of them".into(),
        ));
    }
    let wait = if w.r#async {
        Wait::Async
    } else if w.sync {
        Wait::Sync
    } else {
        Wait::For(duration_or(w.wait.as_deref(), ops::HYBRID_WAIT)?)
    };
    if let Some(s) = &l.session {
        ops::session_of(Some(s))?;
    }
    Ok(Launch {
        role: Role::parse(role)?,
        what,
        cwd: l.cwd.clone(),
        session: l.session.clone(),
        deadline: l.timeout.as_deref().map(parse_duration).transpose()?,
        wait,
        worktree: (l.worktree || l.base.is_some()).then(|| l.base.clone()),
        pool: l.pool.clone(),
        budget: Budget { usd: l.budget_usd, tokens: l.budget_tokens, turns: l.budget_turns },
        from: None,
        after: l.after.iter().map(|t| Token::parse(t.trim())).collect::<Result<_>>()?,
        after_any_end: l.after_any_end,
        sandbox: l.sandbox.clone(),
    })
}

/// Start a task and print what its start gave (`quiet`: its token alone). `--async` asked for
/// the token alone: its exit is 0 even when the task asked a question before the answer was
/// printed.
pub(super) async fn started(out: &Out, store: &Store, req: Launch, quiet: bool) -> Result<ExitCode> {
    let wait = req.wait;
    // Handed back as soon as it is saved: the supervisor starts with nothing of ours open.
    let said = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hand_back: Option<ops::HandBack> = matches!(wait, Wait::Async).then(|| {
        let (said, out) = (said.clone(), out.clone());
        Box::new(move |v: &ops::TaskView| {
            said.store(true, std::sync::atomic::Ordering::Relaxed);
            if quiet {
                println!("{}", v.token);
            } else {
                out.task(v);
            }
        }) as ops::HandBack
    });
    let rec = ops::start(store, req, hand_back).await?;
    if said.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok(ExitCode::SUCCESS);
    }
    shown(out, store, rec, wait, quiet).await
}

/// Print what a task that just began (a new one, or a follow-up's turn) gave within `wait`.
async fn shown(out: &Out, store: &Store, rec: TaskRecord, wait: Wait, quiet: bool) -> Result<ExitCode> {
    let handed_back = matches!(wait, Wait::Async);
    let token = rec.token;
    // The token alone, as it was saved: nothing more to look at.
    if handed_back && quiet {
        println!("{token}");
        return Ok(ExitCode::SUCCESS);
    }
    let v = match progress::watch(store, &[token], !out.json, ops::settle(store, rec, wait)).await? {
        Watched::Done(v) => v,
        // The task goes on: --quiet still gives the token alone.
        Watched::Interrupted if quiet => {
            return Ok(out.interrupted_quietly(&progress::interrupted_views(store, &[token])));
        }
        Watched::Interrupted => return Ok(out.interrupted(&progress::interrupted_views(store, &[token]))),
    };
    let code = if quiet {
        println!("{token}");
        render::exit_code(&v)
    } else {
        out.task(&v)
    };
    Ok(if handed_back && code == ExitCode::from(render::ASKS) { ExitCode::SUCCESS } else { code })
}
