//! From parsed arguments to an `ops` call and an exit code.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use super::args::{Cli, Command};
use super::progress::{self, Watched};
use super::render::{self, Out};
use crate::error::{Error, IoContext, Result};
use crate::ops::{self, ListFilter, What};
use crate::store::{Store, resolve_home};
use crate::task::{EventKind, Role, Status, Token, parse_choices, parse_duration};

/// Run the command line and return the process exit code.
pub fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // The first step of an agent in a sandbox with an allow-list, inside it.
    if args.get(1).is_some_and(|a| a == crate::supervisor::network::COMMAND) {
        crate::supervisor::network::enter(args[2..].to_vec());
    }
    // A shell asking for completions gets them, and nothing else runs.
    super::complete::answer_shell();
    let parsed = super::narrow::parse(&args).map_or_else(|| Cli::try_parse_from(&args), Ok);
    let cli = match parsed {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => {
            // --help, --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // `agentctl` alone: the help, as a refusal.
            let _ = e.print();
            return ExitCode::from(2);
        }
        Err(e) => {
            let args: Vec<String> = std::env::args_os().skip(1).map(|a| a.to_string_lossy().into_owned()).collect();
            let (message, hints) = super::usage::usage_error(&e, &args);
            eprintln!("agentctl: error: {message}");
            for h in &hints {
                eprintln!("{h}");
            }
            // clap has not parsed --json, but whoever asked for JSON still gets one object,
            // with the hints (what an agent reading it needs most).
            let json = args.iter().take_while(|a| *a != "--").any(|a| a == "--json");
            let said = std::iter::once(message).chain(hints.iter().filter(|h| h.starts_with("hint: ")).cloned());
            let usage = Error::Usage(said.collect::<Vec<_>>().join("; "));
            return Out { json, home_flag: None, colour: false }.error_quietly(&usage);
        }
    };
    let g = &cli.globals;
    let out = Out { json: g.json, home_flag: g.home.clone(), colour: super::term::colour(g.color) };
    if let Command::Supervise(args) | Command::Hook(args) = &cli.command {
        // Before any runtime exists: the supervisor and a hook's runner fork, and must be
        // single-threaded.
        return match (resolve_home(cli.globals.home.clone()), Token::parse(&args.token), &cli.command) {
            (Ok(home), Ok(token), Command::Supervise(_)) => crate::supervisor::supervise(&home, token),
            (Ok(home), Ok(token), _) => ops::run_hook(&home, token),
            (Err(e), _, _) | (_, Err(e), _) => out.error(&e),
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
    let serves = matches!(cli.command, Command::Mcp(_));
    let ran = runtime.block_on(run(cli.command, cli.globals.home, cli.globals.agents, &out));
    if serves {
        // A server stopped by a signal still has a thread blocked reading stdin, which would
        // hold the runtime's drop for ever; everything it did is finished by now.
        runtime.shutdown_background();
    }
    match ran {
        Ok(code) => code,
        // Whoever read our output went away (`logs --follow | head`): nothing left to say.
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => out.error(&e),
    }
}

/// Each command checks what it was given before it touches the home; commands that only read
/// never create one.
async fn run(command: Command, home: Option<PathBuf>, agents: Option<PathBuf>, out: &Out) -> Result<ExitCode> {
    let home = resolve_home(home)?;
    match command {
        Command::Ask(a) => super::start::ask(a, &home, agents, out).await,
        Command::Run(r) => {
            let what = What::Run { argv: r.command, agents_file: agents };
            let req = super::start::launch_request(&r.role, what, &r.wait, &r.launch, out)?;
            super::start::started(out, &Store::at(&home)?, req, r.wait.quiet).await
        }
        Command::Await(a) => {
            let tokens = a.tokens.iter().map(|t| Token::parse(t)).collect::<Result<Vec<_>>>()?;
            let limit = duration_or(a.timeout.as_deref(), ops::AWAIT_TIMEOUT)?;
            let store = Store::existing(&home)?;
            let spin = !out.json;
            let watched = match tokens[..] {
                [token] => progress::watch(&store, &tokens, spin, ops::await_task(&store, token, Some(limit)))
                    .await?
                    .map(|v| out.task(&v)),
                _ => progress::watch(&store, &tokens, spin, ops::await_any(&store, &tokens, Some(limit)))
                    .await?
                    .map(|a| out.awaited(&a)),
            };
            Ok(match watched {
                Watched::Done(code) => code,
                Watched::Interrupted => out.interrupted(&progress::interrupted_views(&store, &tokens)),
            })
        }
        Command::Halt(h) => {
            let (token, grace) = (Token::parse(&h.token)?, duration_or(h.grace.as_deref(), ops::DEFAULT_GRACE)?);
            // A task that had already ended is reported as it ended: nothing was stopped.
            let halted = ops::halt_if_running(&Store::existing(&home)?, token, grace, h.purge).await?;
            out.task(halted.view());
            Ok(ExitCode::SUCCESS)
        }
        Command::Roles => {
            out.roles(&ops::roles(&home, agents.as_deref())?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Usage(u) => {
            let since = u.since.as_deref().map(parse_duration).transpose()?;
            let by = u.by.as_deref().map(ops::SpendBy::parse).transpose().map_err(Error::Usage)?;
            out.usage(&ops::usage(&Store::existing(&home)?, since, by)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Status(s) => {
            let token = Token::parse(&s.token)?;
            let mut v = ops::status(&Store::existing(&home)?, token)?;
            // Walked here only: a big worktree would slow every other view of the task.
            v.worktree_bytes = v.worktree.as_deref().map(crate::worktree::disk_use);
            Ok(out.task(&v))
        }
        Command::List(l) => {
            let status = l.status.as_deref().map(Status::parse_filter).transpose()?;
            let role = l.role.as_deref().map(Role::parse).transpose()?;
            let filter = ListFilter { status, role, offset: l.offset, limit: l.limit, before: None };
            // Newest first, as every listing (top, MCP `list`, prune) shows tasks.
            let store = Store::existing(&home)?;
            let listing = ops::list(&store, &filter)?;
            let pools = ops::capacity(&store, agents.as_deref());
            let next = listing.more.then(|| l.offset + listing.tasks.len());
            let mut again = String::from("agentctl list");
            for (flag, value) in [("--status", &l.status), ("--role", &l.role)] {
                if let Some(v) = value {
                    again.push_str(&format!(" {flag} {v}"));
                }
            }
            if let (Some(limit), Some(n)) = (l.limit, next) {
                again.push_str(&format!(" --limit {limit} --offset {n}"));
            }
            out.list(&listing.tasks, &pools, next, &again);
            Ok(ExitCode::SUCCESS)
        }
        Command::Logs(l) => {
            let token = Token::parse(&l.token)?;
            let store = Store::existing(&home)?;
            let mut stdout = std::io::stdout().lock();
            if out.json && !l.follow {
                return super::log_json::log_json(&mut stdout, |text| {
                    ops::read_log(&store, token, l.tail, l.raw, text)
                });
            } else if out.json {
                let mut lines = super::log_json::JsonLines::new(token, &mut stdout);
                let v = ops::follow(&store, token, l.tail, l.raw, &mut lines).await?;
                lines.finish().ctx(|| "cannot write to stdout".into())?;
                drop(stdout);
                // Followed to the end: the exit code says how the task ended.
                return Ok(out.task(&v));
            } else if l.follow {
                let v = ops::follow(&store, token, l.tail, l.raw, &mut stdout).await?;
                drop(stdout);
                // The output is on stdout; an end other than completing (halted, failed…) is
                // said apart from it.
                if v.status != Status::Completed {
                    eprint!("agentctl: {}", super::term::printable(&v.ending()));
                }
                return Ok(render::exit_code(&v));
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
            let limit = duration_or(w.timeout.as_deref(), ops::AWAIT_TIMEOUT)?;
            let session = ops::session_of(w.session.as_deref())?;
            // A lead may wait before its first task starts: the home is made here.
            let store = Store::open(&home)?;
            let holder = ops::Holder::new(0);
            let waited = ops::wait_event(&store, Some(&session), &kinds, limit, &holder);
            match progress::watch(&store, &[], !out.json, waited).await? {
                Watched::Done(event) => deliver(&store, &holder, out.event(&event)),
                Watched::Interrupted => {
                    // Whatever it took is for the next waiter.
                    ops::undelivered(&store, &holder, None)?;
                    Ok(out.interrupted(&[]))
                }
            }
        }
        Command::Notify(n) => {
            let message = n.message.map(text_arg).transpose()?;
            // Posting is the point: a reader of what was posted that went away (`| head`)
            // stops nothing.
            ops::notify_from(
                &home,
                (n.session.as_deref(), n.question),
                message.as_deref(),
                std::io::stdin().lock(),
                |e| {
                    let _ = out.posted(e);
                },
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Command::AskLead(a) => {
            let text = text_arg(a.question)?;
            let choices = a.choices.as_deref().map(parse_choices).transpose()?.unwrap_or_default();
            let limit = a.timeout.as_deref().map(parse_duration).transpose()?;
            match ops::ask_lead_from(&home, &text, &choices, limit).await? {
                ops::Asked::Answered(answer) => {
                    out.answer(&answer).ctx(|| "cannot write the answer to stdout".into())?;
                    Ok(ExitCode::SUCCESS)
                }
                ops::Asked::TimedOut => {
                    eprintln!("agentctl: nobody answered in time; the question is withdrawn");
                    Ok(ExitCode::from(124))
                }
            }
        }
        Command::Reply(r) => {
            let answer = text_arg(r.answer)?;
            let q = ops::reply(&Store::existing(&home)?, &r.target, &answer)?;
            let _ = out.replied(&q);
            Ok(ExitCode::SUCCESS)
        }
        Command::Send(s) => {
            let message = text_arg(s.message)?;
            let token = Token::parse(&s.token)?;
            let sent = ops::send(&Store::existing(&home)?, token, &message).await?;
            let _ = out.sent(token, &sent, message.len());
            Ok(ExitCode::SUCCESS)
        }
        Command::Inbox(i) => {
            let limit = duration_or(i.wait.as_deref(), Duration::ZERO)?;
            ops::inbox_from(&home, limit, |event| out.message(event)).await
        }
        Command::Events(e) => {
            if let Some(s) = &e.session {
                ops::session_of(Some(s))?;
            }
            let store = Store::existing(&home)?;
            if e.follow {
                ops::follow_events(&store, e.session.as_deref(), |ev| out.logged_event(ev)).await?;
            } else {
                out.events(&ops::read_events(&store, e.session.as_deref(), 0, None)?);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Prune(p) => {
            let rule = ops::PruneRule {
                older_than: p.older_than.as_deref().map(parse_duration).transpose()?,
                keep: p.keep,
                dry_run: p.dry_run,
                purge: p.purge,
            };
            out.pruned(&ops::prune(&Store::existing(&home)?, rule)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Mcp(m) => {
            let max_wait = crate::mcp::MaxWait(parse_duration(&m.max_wait)?);
            let (min, max) = (crate::mcp::MIN_BUDGET, crate::mcp::MAX_BUDGET);
            if !(min..=max).contains(&m.result_budget) {
                return Err(Error::Usage(format!(
                    "--result-budget {} is out of range; give {min} to {max} bytes",
                    m.result_budget
                )));
            }
            let options =
                crate::mcp::Options { allow_run: m.allow_run, agents_file: agents, max_wait, budget: m.result_budget };
            match m.http {
                Some(listen) => {
                    let http = crate::mcp::HttpOptions {
                        listen,
                        allowed_hosts: m.allowed_hosts,
                        insecure_http: m.insecure_http,
                        max_calls: m.max_calls.max(1),
                        tls: m.tls_cert.zip(m.tls_key),
                    };
                    crate::mcp::serve_http(Store::open(&home)?, options, http).await?
                }
                None => crate::mcp::serve(Store::open(&home)?, options).await?,
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Token(t) => super::access::run(t, &Store::open(&home)?, out),
        Command::Supervise(_) | Command::Hook(_) => {
            Err(Error::Internal("__supervise and __hook are handled before the runtime starts".into()))
        }
        Command::Completions(c) => {
            super::complete::script(c.shell, &mut std::io::stdout().lock())?;
            Ok(ExitCode::SUCCESS)
        }
        // A view of an empty home waits for its first task.
        Command::Top => super::top::run(&Store::open(&home)?).await,
        Command::Man(m) => {
            match m.dir {
                Some(dir) => println!("{}", super::complete::man_pages(&dir)?),
                None => super::complete::man(&mut std::io::stdout().lock())?,
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A duration the user gave, or the default when they gave none.
pub(super) fn duration_or(given: Option<&str>, default: Duration) -> Result<Duration> {
    given.map(parse_duration).transpose().map(|d| d.unwrap_or(default))
}

/// What `holder` took counts as delivered once `printed`; if it could not be printed, the next
/// waiter gets it.
fn deliver(store: &Store, holder: &ops::Holder, printed: std::io::Result<ExitCode>) -> Result<ExitCode> {
    match printed {
        Ok(code) => {
            ops::delivered(store, holder, None)?;
            Ok(code)
        }
        Err(e) => {
            ops::undelivered(store, holder, None)?;
            Err(e).ctx(|| "cannot write to stdout".into())
        }
    }
}

/// A message, question or answer argument: `-` reads it from stdin, enough of it to tell one
/// too long to carry from one that fits, and no more.
fn text_arg(arg: String) -> Result<String> {
    if arg == "-" { read_stdin(Some(ops::MAX_MESSAGE as u64 + 1)) } else { Ok(arg) }
}

/// Stdin as text, at most `max` bytes of it.
pub(super) fn read_stdin(max: Option<u64>) -> Result<String> {
    let mut bytes = Vec::new();
    std::io::stdin().lock().take(max.unwrap_or(u64::MAX)).read_to_end(&mut bytes).ctx(|| "cannot read stdin".into())?;
    String::from_utf8(bytes).map_err(|_| Error::Usage("what came on stdin is not valid UTF-8".into()))
}
