//! A new task's sandbox: which one it asks for, checked before anything of the task is made,
//! and what it needs of its home once it has a token.

use std::path::{Path, PathBuf};

use super::blocking::blocking;
use crate::agents::Agents;
use crate::error::{Error, IoContext, Result};
use crate::store::Store;
use crate::supervisor;
use crate::task::{BackendKind, Role, Sandbox, SandboxSettings, Template, Token};

/// The sandbox a task asked for, as made for the directory it was checked in.
pub(super) struct Chosen {
    name: String,
    settings: SandboxSettings,
    checked: PathBuf,
    made: Sandbox,
}

/// The sandbox a task of `template` in `pool` runs in (`own`: its `--sandbox`), checked for
/// `cwd`; refused, saying why, where this machine or this task cannot have it.
pub(super) fn choose(
    store: &Store,
    agents: &Agents,
    (own, template, pool): (Option<&str>, &Template, &str),
    backend: Option<BackendKind>,
    cwd: &Path,
) -> Result<Option<Chosen>> {
    let Some((name, settings)) = agents.sandbox(own, template, pool)? else { return Ok(None) };
    if backend == Some(BackendKind::Slurm) {
        return Err(Error::Usage(format!("sandbox `{name}`: a Slurm task cannot run in a sandbox yet")));
    }
    let made =
        settings.for_task(&name, cwd, store.home()).map_err(|e| Error::Usage(format!("sandbox `{name}`: {e}")))?;
    blocking(|| supervisor::sandbox::available(store.home()))?;
    Ok(Some(Chosen { name, settings, checked: cwd.to_owned(), made }))
}

impl Chosen {
    /// The sandbox of task `token` of `role`, working in `cwd` with `env` (made anew only when
    /// that is not where it was checked: its worktree), and its command `argv` as it runs there.
    /// With what it needs of its home: its question file to read, the link to this agentctl its
    /// PATH may start with, and the file its agent writes its answer to (made, empty, for the
    /// sandbox to let it through); with what its agent CLI needs: its own state, where its
    /// conversation goes on from, and its tools run in this sandbox rather than its own.
    pub(super) fn for_task(
        &self,
        store: &Store,
        template: &Template,
        (role, token): (&Role, Token),
        (cwd, env): (&Path, &crate::agent::Env),
        argv: Vec<String>,
    ) -> Result<(Vec<String>, Sandbox)> {
        let mut sandbox = match cwd == self.checked {
            true => self.made.clone(),
            false => self.settings.for_task(&self.name, cwd, store.home()).map_err(Error::Usage)?,
        };
        if template.uses_question_file() {
            sandbox.read.push(store.question_path(role, token));
        }
        let links = store.home().join("bin");
        if links.is_dir() {
            sandbox.read.push(links);
        }
        if template.uses_result_file() {
            let answer = store.result_path(role, token);
            let made = crate::store::files::create(&answer, b"");
            made.ctx(|| format!("cannot create {}", answer.display()))?;
            sandbox.write.push(answer);
        }
        let agent = crate::agent::kind(template.agent_kind());
        let state = agent.state(env);
        // A directory of it made if missing, as the CLI would make it (a file, `~/.claude.json`,
        // only if it exists).
        for dir in state.iter().filter(|p| !p.exists() && p.extension().is_none()) {
            let _ = std::fs::create_dir_all(dir);
        }
        sandbox.add_writable(state);
        Ok((agent.in_sandbox(argv), sandbox))
    }
}
