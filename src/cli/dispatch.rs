//! From parsed arguments to an `ops` call and an exit code.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use super::args::{Cli, Command, LaunchArgs, WaitArgs};
use super::render::{self, Out};
use crate::error::{Error, IoContext, Result};
use crate::ops::{self, Launch, ListFilter, TaskView, Wait, What};
use crate::store::{Store, resolve_home};
use crate::task::{EventKind, Role, Status, Token, parse_duration};

/// Run the command line and return the process exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let out = Out { json: cli.json, home_flag: cli.home.clone() };
    if let Command::Supervise(args) = &cli.command {
        // Before any runtime exists: the supervisor forks and must be single-threaded.
        return match (resolve_home(cli.home.clone()), Token::parse(&args.token)) {
            (Ok(home), Ok(token)) => crate::supervisor::supervise(&home, token),
            (Err(e), _) | (_, Err(e)) => out.error(&e),
        };
    }
    let runtime = match &cli.command {
        // The server answers several requests at once; everything else does one thing.
        Command::Mcp(_) => tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build(),
        _ => tokio::runtime::Builder::new_current_thread().enable_all().build(),
    };
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            return out.error(&Error::Internal(format!("cannot start the async runtime: {e}")));
        }
    };
    match runtime.block_on(run(cli.command, cli.home, cli.agents, &out)) {
        Ok(code) => code,
        // Whoever read our output went away (`logs --follow | head`): nothing left to say.
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => out.error(&e),
    }
}

async fn run(command: Command, home: Option<PathBuf>, agents: Option<PathBuf>, out: &Out) -> Result<ExitCode> {
    let store = Store::open(&resolve_home(home)?)?;
    match command {
        Command::Ask(a) => {
            let question = if a.question == "-" { read_stdin()? } else { a.question };
            let what = What::Ask { question, agents_file: agents };
            launch(&store, out, &a.role, what, &a.wait, &a.launch).await
        }
        Command::Run(r) => launch(&store, out, &r.role, What::Run { argv: r.command }, &r.wait, &r.launch).await,
        Command::Await(a) => {
            let limit = duration_or(a.timeout.as_deref(), ops::AWAIT_TIMEOUT)?;
            let v = ops::await_task(&store, Token::parse(&a.token)?, Some(limit)).await?;
            Ok(out.task(&v))
        }
        Command::Halt(h) => {
            let grace = duration_or(h.grace.as_deref(), ops::DEFAULT_GRACE)?;
            let v = ops::halt(&store, Token::parse(&h.token)?, grace, h.purge).await?;
            out.task(&v);
            Ok(ExitCode::SUCCESS)
        }
        Command::Status(s) => Ok(out.task(&ops::status(&store, Token::parse(&s.token)?)?)),
        Command::List(l) => {
            let status = l.status.as_deref().map(Status::parse_filter).transpose()?;
            let role = l.role.as_deref().map(Role::parse).transpose()?;
            out.list(&ops::list(&store, &ListFilter { status, role })?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Logs(l) => {
            let token = Token::parse(&l.token)?;
            let mut stdout = std::io::stdout().lock();
            if out.json && !l.follow {
                let mut text = Vec::new();
                let v = ops::read_log(&store, token, l.tail, l.raw, &mut text)?;
                render::log_json(&v, &String::from_utf8_lossy(&text));
            } else if out.json {
                let mut lines = render::JsonLines::new(token, &mut stdout);
                let v = ops::follow(&store, token, l.tail, l.raw, &mut lines).await?;
                lines.finish().ctx(|| "cannot write to stdout".into())?;
                drop(stdout);
                out.task(&v);
            } else if l.follow {
                ops::follow(&store, token, l.tail, l.raw, &mut stdout).await?;
            } else {
                ops::read_log(&store, token, l.tail, l.raw, &mut stdout)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Wait(w) => {
            let kinds = match &w.types {
                Some(t) => EventKind::parse_list(t)?,
                None => Vec::new(),
            };
            let event = ops::wait_event(
                &store,
                w.session.as_deref(),
                &kinds,
                duration_or(w.timeout.as_deref(), ops::AWAIT_TIMEOUT)?,
            )
            .await?;
            Ok(out.event(&event))
        }
        Command::Notify(n) => {
            let event = ops::notify(&store, n.session.as_deref(), n.question, &n.message)?;
            out.event(&event);
            Ok(ExitCode::SUCCESS)
        }
        Command::Events(e) => {
            if e.follow {
                ops::follow_events(&store, e.session.as_deref(), |ev| out.logged_event(ev)).await?;
            } else {
                out.events(&ops::read_events(&store, e.session.as_deref())?);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Prune(p) => {
            let rule = ops::PruneRule {
                older_than: p.older_than.as_deref().map(parse_duration).transpose()?,
                keep: p.keep,
                dry_run: p.dry_run,
            };
            out.pruned(&ops::prune(&store, rule)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Mcp(m) => {
            let max_wait = crate::mcp::MaxWait(parse_duration(&m.max_wait)?);
            let options = crate::mcp::Options { allow_run: m.allow_run, agents_file: agents, max_wait };
            crate::mcp::serve(store, options).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Supervise(_) => Err(Error::Internal("__supervise is handled before the runtime starts".into())),
    }
}

async fn launch(store: &Store, out: &Out, role: &str, what: What, w: &WaitArgs, l: &LaunchArgs) -> Result<ExitCode> {
    let wait = if w.r#async {
        Wait::Async
    } else if w.sync {
        Wait::Sync
    } else {
        Wait::For(duration_or(w.wait.as_deref(), ops::HYBRID_WAIT)?)
    };
    let req = Launch {
        role: Role::parse(role)?,
        what,
        cwd: l.cwd.clone(),
        session: l.session.clone(),
        deadline: l.timeout.as_deref().map(parse_duration).transpose()?,
        wait,
    };
    let v: TaskView = ops::start(store, req).await?;
    Ok(out.task(&v))
}

/// A duration the user gave, or the default when they gave none.
fn duration_or(given: Option<&str>, default: Duration) -> Result<Duration> {
    given.map(parse_duration).transpose().map(|d| d.unwrap_or(default))
}

fn read_stdin() -> Result<String> {
    let mut bytes = Vec::new();
    std::io::stdin().lock().read_to_end(&mut bytes).ctx(|| "cannot read the question from stdin".into())?;
    String::from_utf8(bytes).map_err(|_| Error::Usage("the question on stdin is not valid UTF-8".into()))
}
