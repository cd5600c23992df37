//! The agent templates file as front-ends show it: checking one a long-running front-end (the
//! MCP server) was given, and the roles it defines (`agentctl roles`).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::agent::AgentKind;
use crate::agents::{Agents, DEFAULT_POOL};
use crate::error::Result;
use crate::store::Store;
use crate::task::{BackendKind, Template};

/// Check an `--agents FILE`: one that does not exist or does not parse is refused now, as
/// `ask` would refuse it, rather than at the first question. Each `ask` reads it again, so
/// later edits take effect.
pub fn check_agents_file(store: &Store, file: &Path) -> Result<()> {
    Agents::load(store.home(), Some(file)).map(drop)
}

/// The `source` of a built-in role.
pub const BUILT_IN: &str = "built-in";

/// The roles `ask` knows, and what runs every other role.
#[derive(Clone, Debug, Serialize)]
pub struct Roles {
    /// The agents file they come from (none: no file, every role runs the built-in default).
    pub file: Option<PathBuf>,
    /// The roles with an entry of their own, in name order.
    pub roles: Vec<RoleInfo>,
    /// The built-in roles, one per agent kind (`claude`, `codex`…), that no entry overrides.
    pub builtin: Vec<RoleInfo>,
    /// What runs a role without one: `[default]`, or the built-in template.
    pub other_roles: RoleInfo,
}

/// One role's template, as far as choosing a role needs it.
#[derive(Clone, Debug, Serialize)]
pub struct RoleInfo {
    /// Its name (`*` for every other role).
    pub role: String,
    pub command: Vec<String>,
    /// The agent CLI it runs (`claude`, `codex`…, `generic` for any other command).
    pub agent: AgentKind,
    pub pool: String,
    /// `local` or `slurm`.
    pub backend: &'static str,
    pub timeout: Option<String>,
    /// Where the template is: `[agents.NAME]`, `[default]`, `built-in`, or the built-in default.
    pub source: String,
}

impl RoleInfo {
    fn of(role: &str, t: &Template, source: String) -> RoleInfo {
        RoleInfo {
            role: role.to_owned(),
            command: t.command.clone(),
            agent: t.agent_kind(),
            pool: t.pool.clone().unwrap_or_else(|| DEFAULT_POOL.to_owned()),
            backend: match t.backend.unwrap_or_default() {
                BackendKind::Local => "local",
                BackendKind::Slurm => "slurm",
            },
            timeout: t.timeout.clone(),
            source,
        }
    }
}

/// The roles of the agents file in force for `home` (or `file`), read as `ask` reads it.
pub fn roles(home: &Path, file: Option<&Path>) -> Result<Roles> {
    let agents = Agents::load(home, file)?;
    let roles = agents
        .roles()
        .into_iter()
        .map(|name| {
            let role = crate::task::Role::parse(name)?;
            Ok(RoleInfo::of(name, &agents.resolve(&role).template, format!("[agents.{name}]")))
        })
        .collect::<Result<_>>()?;
    let builtin = agents.builtin_roles().iter().map(|(k, t)| RoleInfo::of(k.as_str(), t, BUILT_IN.into())).collect();
    let fallback = agents.fallback();
    Ok(Roles {
        file: agents.path().map(Path::to_owned),
        roles,
        builtin,
        other_roles: RoleInfo::of("*", &fallback.template, fallback.source),
    })
}
