//! `agents.toml`: which argv runs which role (its own entry, else the built-in template of the
//! agent kind of its name, else `[default]`, else kiro-cli's), and the prices, pools and
//! budgets it sets.

mod builtin;
mod check;
mod sandboxes;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::agent::{AgentKind, Prices};
use crate::error::{Error, Result};
use crate::task::{
    BackendKind, Budget, Bytes, HOOK_LIMIT, Hook, Limits, Role, SandboxChoice, SandboxSettings, SlurmSettings, Spend,
    Template, parse_duration,
};

pub use builtin::KINDS as BUILTIN_KINDS;
pub use sandboxes::NO_SANDBOX;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentsFile {
    default: Option<Template>,
    #[serde(default)]
    agents: BTreeMap<String, Template>,
    #[serde(default)]
    pools: BTreeMap<String, PoolSettings>,
    /// `[prices."MODEL"]`: what a model's tokens cost, for agents that report tokens only.
    #[serde(default)]
    prices: Prices,
    /// `[hooks]`: what runs at every task's end, unless its template or pool says.
    #[serde(default)]
    hooks: Hooks,
    /// The memory that must be available for a task of any pool to start, unless its pool says.
    min_available_memory: Option<Bytes>,
    /// `[sandboxes.NAME]`: sandbox profiles, by name.
    #[serde(default)]
    sandboxes: BTreeMap<String, SandboxSettings>,
    /// The sandbox of every task whose template and pool choose none.
    sandbox: Option<SandboxChoice>,
}

/// `[hooks]`: the home's `on_end` command, and how long any hook may run.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Hooks {
    on_end: Option<Vec<String>>,
    timeout: Option<String>,
}

/// `[pools.NAME]`: how many of the pool's tasks run at once.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolSettings {
    #[serde(default = "default_parallel")]
    pub parallel: u32,
    /// Limits for each of its tasks, unless the task's template sets its own.
    pub memory: Option<Bytes>,
    pub cpus: Option<f64>,
    pub pids: Option<u64>,
    /// Where its tasks' agents run, unless their template says: `local` or `slurm`.
    pub backend: Option<BackendKind>,
    /// The Slurm options of its tasks' jobs, under their template's own.
    pub slurm: Option<SlurmSettings>,
    /// The most each of its tasks may spend, under its template's and its own.
    pub budget: Option<Budget>,
    /// What its tasks may spend together over a sliding window; past it, new tasks wait.
    pub spend: Option<Spend>,
    /// A command run once for every end of its tasks, unless their template has its own.
    pub on_end: Option<Vec<String>>,
    /// The memory that must be available (on the machine, or in agentctl's cgroup) for one of
    /// its tasks to start; below it, they wait.
    pub min_available_memory: Option<Bytes>,
    /// The sandbox of its tasks whose template chooses none.
    pub sandbox: Option<SandboxChoice>,
}

fn default_parallel() -> u32 {
    DEFAULT_PARALLEL
}

/// The pool of tasks that name none, and its limit unless `[pools.default]` sets one.
pub const DEFAULT_POOL: &str = "default";
pub const DEFAULT_PARALLEL: u32 = 16;
/// The most a pool may run at once.
const MOST_PARALLEL: u32 = 100_000;

/// The agent templates in force, and where they came from.
#[derive(Debug, Default)]
pub struct Agents {
    path: Option<PathBuf>,
    file: AgentsFile,
}

/// A role's template and a description of where it was found, for error messages.
pub struct Resolved {
    pub template: Template,
    pub source: String,
}

impl Agents {
    /// Load `explicit`, else `<home>/agents.toml`, else `$XDG_CONFIG_HOME/agentctl/agents.toml`.
    pub fn load(home: &Path, explicit: Option<&Path>) -> Result<Agents> {
        let candidates: Vec<PathBuf> = match explicit {
            Some(p) => {
                if !p.is_file() {
                    return Err(Error::Usage(format!("agents file {} does not exist", p.display())));
                }
                vec![p.to_owned()]
            }
            None => {
                let config = std::env::var_os("XDG_CONFIG_HOME")
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
                    .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
                let mut c = vec![home.join("agents.toml")];
                c.extend(config.map(|d| d.join("agentctl/agents.toml")));
                c
            }
        };
        let in_home = home.join("agents.toml");
        let Some(path) =
            candidates.into_iter().find(|p| if *p == in_home { p.symlink_metadata().is_ok() } else { p.is_file() })
        else {
            return Ok(Agents::default());
        };
        // The home's own file is read as every file of the home is: no symlink, nothing but a
        // regular file.
        let bytes = if path == in_home { crate::store::files::read(&path, 1 << 20) } else { std::fs::read(&path) };
        let text = bytes.map(|b| String::from_utf8_lossy(&b).into_owned()).map_err(|e| {
            Error::Usage(format!("cannot read agents file {}: {}", path.display(), crate::store::files::describe(&e)))
        })?;
        let file: AgentsFile = toml::from_str(&text)
            .map_err(|e| Error::Usage(format!("agents file {} is not valid: {e}", path.display())))?;
        check::file(&file).map_err(|e| Error::Usage(format!("agents file {}: {e}", path.display())))?;
        let agents = Agents { path: Some(path), file };
        for (role, t) in agents
            .file
            .agents
            .iter()
            .map(|(r, t)| (format!("[agents.{r}]"), t))
            .chain(agents.file.default.iter().map(|t| ("[default]".to_owned(), t)))
        {
            if let Some(pool) = &t.pool {
                agents
                    .check_pool(pool)
                    .map_err(|e| Error::Usage(format!("{role}: {}", e.message(crate::error::Frontend::Cli))))?;
            }
        }
        Ok(agents)
    }

    /// The file the templates come from, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Refuse a pool this file does not define (`default` always exists).
    pub fn check_pool(&self, pool: &str) -> Result<()> {
        if pool == DEFAULT_POOL || self.file.pools.contains_key(pool) {
            return Ok(());
        }
        let known: Vec<&str> =
            std::iter::once(DEFAULT_POOL).chain(self.file.pools.keys().map(String::as_str)).collect();
        Err(Error::Usage(format!(
            "pool `{}` is not defined; define it in {} as\n  [pools.{pool}]\n  parallel = 2\nor use one of: {}",
            crate::task::input_preview(pool),
            self.path.as_ref().map_or_else(|| "agents.toml".to_owned(), |p| p.display().to_string()),
            known.join(", ")
        )))
    }

    /// The limits each task of `pool` gets unless its template sets its own (checked at load).
    pub fn pool_limits(&self, pool: &str) -> Limits {
        let p = self.file.pools.get(pool);
        p.and_then(|p| Limits::from_settings(p.memory, p.cpus, p.pids, "").ok()).unwrap_or_default()
    }

    /// A task's budget: each limit its own (`--budget-usd`…), else its template's, else its
    /// pool's (`[pools.NAME] budget`, per task).
    pub fn budget(&self, own: Budget, template: &Template, pool: &str) -> Budget {
        let pool = self.file.pools.get(pool).and_then(|p| p.budget).unwrap_or_default();
        own.or(template.budget.unwrap_or_default()).or(pool)
    }

    /// The hook a task of `template` in `pool` runs at its end: the template's `on_end`, else
    /// its pool's, else `[hooks]`'s; bounded by `[hooks] timeout` (checked at load).
    pub fn hook(&self, template: &Template, pool: &str) -> Option<Hook> {
        let pool = self.file.pools.get(pool).and_then(|p| p.on_end.clone());
        let argv = template.on_end.clone().or(pool).or_else(|| self.file.hooks.on_end.clone())?;
        let limit = self.file.hooks.timeout.as_deref().and_then(|t| parse_duration(t).ok()).unwrap_or(HOOK_LIMIT);
        Some(Hook { argv, limit_ms: limit.as_millis() as u64 })
    }

    /// The prices of `[prices]`, by model.
    pub fn prices(&self) -> &Prices {
        &self.file.prices
    }

    /// Where a task of `pool` whose template chose nothing runs its agent, and the Slurm options
    /// its template's own go over.
    pub fn pool_backend(&self, pool: &str) -> (Option<BackendKind>, SlurmSettings) {
        let p = self.file.pools.get(pool);
        (p.and_then(|p| p.backend), p.and_then(|p| p.slurm.clone()).unwrap_or_default())
    }

    /// How many tasks of `pool` run at once: its `parallel`, or (a pool no longer defined, or
    /// `default` without settings) the default limit.
    pub fn parallel(&self, pool: &str) -> u32 {
        self.defined_parallel(pool).unwrap_or(DEFAULT_PARALLEL)
    }

    /// The template for `role` that `ask` runs: as `resolve`, but a role with no entry of its own
    /// whose name is close to a defined one (`reviwer` beside `reviewer`) is refused, so that a
    /// typo never silently runs another agent.
    ///
    /// The built-in roles are defined too: `claude` runs even beside a defined `claudia` or
    /// `claude1`. They are never what a typo is near, though: a role one letter from a kind's
    /// name (`coder` beside `codex`) is a role of its own, as it was before there were built-in
    /// roles, and runs `[default]`.
    pub fn template_for(&self, role: &Role) -> Result<Resolved> {
        // A defined role (the usual case) is not compared with every other.
        if !self.file.agents.contains_key(role.as_str())
            && builtin::for_role(role.as_str()).is_none()
            && let Some((_, near)) = self.roles().into_iter().filter_map(|r| Some((near(role.as_str(), r)?, r))).min()
        {
            return Err(Error::UnknownRole {
                role: role.to_string(),
                near: near.to_owned(),
                roles: self.roles().into_iter().map(str::to_owned).collect(),
                file: self.path.clone().unwrap_or_default(),
            });
        }
        Ok(self.resolve(role))
    }

    /// The roles with an entry of their own, in name order.
    pub fn roles(&self) -> Vec<&str> {
        self.file.agents.keys().map(String::as_str).collect()
    }

    /// The built-in roles the file leaves as they are (no entry of that name), each with its
    /// kind and template, in the order of `BUILTIN_KINDS`.
    pub fn builtin_roles(&self) -> Vec<(AgentKind, Template)> {
        BUILTIN_KINDS
            .into_iter()
            .filter(|k| !self.file.agents.contains_key(k.as_str()))
            .filter_map(|k| Some((k, builtin::template(k)?)))
            .collect()
    }

    /// What runs a role with no entry of its own, and where that comes from.
    pub fn fallback(&self) -> Resolved {
        match &self.file.default {
            Some(t) => Resolved { template: t.clone(), source: "[default]".into() },
            None => Resolved { template: Template::builtin_default(), source: "the built-in default template".into() },
        }
    }

    /// Whether the file says nothing at all (or there is none).
    pub fn is_empty(&self) -> bool {
        self.file.default.is_none()
            && self.file.agents.is_empty()
            && self.file.pools.is_empty()
            && self.file.prices.is_empty()
            && self.file.hooks.on_end.is_none()
    }

    /// What `pool`'s tasks may spend together, if its section says.
    pub fn pool_spend(&self, pool: &str) -> Option<Spend> {
        self.file.pools.get(pool).and_then(|p| p.spend.clone())
    }

    /// The memory that must be available for a task of `pool` to start: its own setting, else
    /// the file's.
    pub fn pool_min_memory(&self, pool: &str) -> Option<Bytes> {
        self.file.pools.get(pool).and_then(|p| p.min_available_memory).or(self.file.min_available_memory)
    }

    /// The pools the file defines, by name.
    pub fn pool_names(&self) -> Vec<&str> {
        self.file.pools.keys().map(String::as_str).collect()
    }

    /// The `parallel` of `pool`'s own section, if the file has one.
    pub fn defined_parallel(&self, pool: &str) -> Option<u32> {
        self.file.pools.get(pool).map(|p| p.parallel)
    }

    /// The template for `role`: its own entry, else the built-in template of the kind it names
    /// (`claude`, `codex`…), else `[default]`, else the built-in default.
    pub fn resolve(&self, role: &Role) -> Resolved {
        let at = |what: &str| match &self.path {
            Some(p) => format!("{what} in {}", p.display()),
            None => what.to_owned(),
        };
        if let Some(t) = self.file.agents.get(role.as_str()) {
            return Resolved { template: t.clone(), source: at(&format!("[agents.{role}]")) };
        }
        if let Some(t) = builtin::for_role(role.as_str()) {
            return Resolved { template: t, source: format!("the built-in `{role}` template") };
        }
        if let Some(t) = &self.file.default {
            return Resolved { template: t.clone(), source: at("[default]") };
        }
        Resolved { template: Template::builtin_default(), source: "the built-in default template".into() }
    }

    /// Where a user should put a template (the file in use, or the home's).
    pub fn config_hint(&self, home: &Path) -> PathBuf {
        self.path.clone().unwrap_or_else(|| home.join("agents.toml"))
    }
}

/// The most role names a message or a tool's description lists.
const MOST_NAMED: usize = 20;

/// `names` as a message lists them: the first 20, then how many more.
pub fn name_list(names: &[impl AsRef<str>]) -> String {
    let shown: Vec<&str> = names.iter().take(MOST_NAMED).map(AsRef::as_ref).collect();
    match names.len().saturating_sub(MOST_NAMED) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

/// How far `asked` is from `defined`, if it looks like a misspelling of it: the same but for
/// case, or within one edit (a letter left out, added, changed or two swapped) per four
/// characters. Names that differ only in their digits (`worker2` beside `worker1`) are roles
/// of their own, not typos.
fn near(asked: &str, defined: &str) -> Option<usize> {
    let (a, d) = (asked.to_lowercase(), defined.to_lowercase());
    let letters = |s: &str| s.chars().filter(|c| !c.is_ascii_digit()).collect::<String>();
    if a != d && letters(&a) == letters(&d) {
        return None;
    }
    let allowed = a.chars().count().max(d.chars().count()) / 4;
    Some(strsim::damerau_levenshtein(&a, &d)).filter(|&edits| edits <= allowed)
}

#[cfg(test)]
mod tests;
