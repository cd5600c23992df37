//! `agentctl token`: the access tokens of the HTTP server (`mcp --http`), made, listed and
//! revoked.

use std::io::Write;
use std::process::ExitCode;
use std::time::SystemTime;

use clap::{Args, Subcommand};

use super::render::Out;
use crate::error::Result;
use crate::ops::{self, AccessView};
use crate::store::Store;
use crate::task::{parse_duration, unix_ms};

#[derive(Debug, Args)]
pub struct AccessArgs {
    #[command(subcommand)]
    pub action: AccessAction,
}

#[derive(Debug, Subcommand)]
pub enum AccessAction {
    /// Make a token and print it (once: the home keeps only its hash)
    Create {
        /// What to call it (who or what holds it): letters, digits, `_`, `-`; the session its
        /// client's tasks report to
        name: String,
        /// It may list, read, await and wait, but not ask, run, halt, reply or send
        #[arg(long)]
        read_only: bool,
        /// It stops working after D (e.g. 30d, 12h)
        #[arg(long, value_name = "D")]
        expires: Option<String>,
    },
    /// List the tokens: name, access, state (active, expired, revoked), age
    List,
    /// Revoke a token: requests with it are refused from the next one on
    Revoke {
        /// The token's name, as `token list` shows it
        name: String,
    },
}

/// Run `agentctl token …`.
pub fn run(args: AccessArgs, store: &Store, out: &Out) -> Result<ExitCode> {
    match args.action {
        AccessAction::Create { name, read_only, expires } => {
            let expires = expires.as_deref().map(parse_duration).transpose()?;
            let made = ops::create_access(store, &name, read_only, expires)?;
            if out.json {
                let mut v = serde_json::to_value(&made.token).unwrap_or_default();
                v["token"] = made.secret.clone().into();
                println!("{v}");
            } else {
                // The secret alone on stdout, so that `$(agentctl token create NAME)` is it.
                println!("{}", made.secret);
                eprintln!(
                    "agentctl: token `{name}` ({}{}): keep it now, it is not shown again; \
                     clients send it as `Authorization: Bearer <token>`",
                    access(&made.token),
                    made.token.expires_at_ms.map(|at| format!(", expires in {}", until(at))).unwrap_or_default(),
                );
            }
        }
        AccessAction::List => {
            let tokens = ops::list_access(store)?;
            let mut w = std::io::stdout().lock();
            if out.json {
                for t in &tokens {
                    let _ = writeln!(w, "{}", serde_json::to_value(t).unwrap_or_default());
                }
            } else if tokens.is_empty() {
                let _ = writeln!(w, "no tokens; make one with `agentctl token create NAME`");
            } else {
                let _ = writeln!(w, "{:<24} {:<10} {:<8} {:<10} EXPIRES", "NAME", "ACCESS", "STATE", "AGE");
                for t in &tokens {
                    let expires = t.expires_at_ms.map_or_else(
                        || "never".to_owned(),
                        |at| match t.state {
                            "active" => format!("in {}", until(at)),
                            _ => format!("{} ago", since(at)),
                        },
                    );
                    let _ = writeln!(
                        w,
                        "{:<24} {:<10} {:<8} {:<10} {expires}",
                        t.name,
                        access(t),
                        t.state,
                        since(t.created_at_ms)
                    );
                }
            }
        }
        AccessAction::Revoke { name } => {
            let t = ops::revoke_access(store, &name)?;
            if out.json {
                println!("{}", serde_json::to_value(&t).unwrap_or_default());
            } else {
                println!("revoked token `{}`: requests with it are refused from now on", t.name);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn access(t: &AccessView) -> &'static str {
    if t.read_only { "read-only" } else { "full" }
}

fn since(at_ms: u64) -> String {
    ops::human_duration(unix_ms(SystemTime::now()).saturating_sub(at_ms))
}

fn until(at_ms: u64) -> String {
    ops::human_duration(at_ms.saturating_sub(unix_ms(SystemTime::now())))
}
