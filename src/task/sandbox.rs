//! A task's sandbox: what its agent may write, what it may not even read, which network it
//! has and which variables reach it. `SandboxSettings` is what `agents.toml` says (a
//! template's or pool's `[….sandbox]`, or a named `[sandboxes.NAME]`); `Sandbox` is the same
//! made concrete for one task (`{cwd}` and `~` filled in), kept in its spec.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// `[agents.ROLE.sandbox]`, `[pools.NAME.sandbox]` or `[sandboxes.NAME]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSettings {
    /// What the agent may write (`{cwd}`: its working directory, its worktree if it has one);
    /// everything else is read-only.
    #[serde(default)]
    pub write: Vec<String>,
    /// What it may not even read: each is empty inside.
    #[serde(default)]
    pub hide: Vec<String>,
    #[serde(default)]
    pub network: Network,
    /// The only variables of the launcher's environment that reach it (agentctl's own
    /// `AGENTCTL_*` always do); unset: all of them.
    pub env: Option<Vec<String>>,
}

/// A template's or pool's `sandbox`: a table of its own, or a profile's name.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum SandboxChoice {
    Profile(String),
    Inline(SandboxSettings),
}

/// The network a sandboxed agent has.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// Only a loopback of its own.
    #[default]
    None,
    /// The machine's, as without a sandbox.
    Host,
    /// Only these `host:port`s (`task::allow`): those on this machine's loopback directly,
    /// the others through a proxy outside.
    #[serde(untagged)]
    Allow(Vec<String>),
}

/// One task's sandbox, its paths absolute (kept in the task's spec).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sandbox {
    /// The profile's name, or where the table came from (`[agents.builder.sandbox]`).
    pub name: String,
    pub write: Vec<PathBuf>,
    /// Paths hidden from it that exist (one that does not has nothing to hide).
    pub hide: Vec<PathBuf>,
    pub network: Network,
    pub env: Option<Vec<String>>,
    /// The home, hidden but for what the task needs of it.
    pub home: PathBuf,
    /// Files of the home it reads (its question file).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<PathBuf>,
}

impl SandboxSettings {
    /// This profile for a task working in `cwd` of `home`, with `~` the launcher's `$HOME`.
    pub fn for_task(&self, name: &str, cwd: &Path, home: &Path) -> Result<Sandbox, String> {
        let user_home = std::env::var_os("HOME").map(PathBuf::from);
        let expand = |p: &str| -> Result<PathBuf, String> {
            let path = if p == "{cwd}" {
                cwd.to_owned()
            } else if let Some(rest) = p.strip_prefix("{cwd}/") {
                cwd.join(rest)
            } else if p == "~" || p.starts_with("~/") {
                let Some(h) = &user_home else {
                    return Err(format!("`{p}` names the home directory, but HOME is not set"));
                };
                h.join(p.trim_start_matches('~').trim_start_matches('/'))
            } else {
                PathBuf::from(p)
            };
            match path.is_absolute() {
                // Without `.` parts (`{cwd}` of `--cwd .`).
                true => Ok(path.components().collect()),
                false => Err(format!("`{p}` is not an absolute path; write it from `/`, `~/` or `{{cwd}}/`")),
            }
        };
        // Each as the file system names it (no `..`, no symlink on the way), so that the one
        // inside another is mounted after it whatever way it was written.
        let mut write = Vec::new();
        for p in &self.write {
            let path = expand(p)?;
            match std::fs::canonicalize(&path) {
                Ok(real) => write.push(real),
                Err(_) => {
                    return Err(format!(
                        "`{p}` ({}) does not exist; make it first, or leave it out of `write`",
                        path.display()
                    ));
                }
            }
        }
        let hide = self.hide.iter().map(|p| expand(p)).collect::<Result<Vec<_>, _>>()?;
        let hide = hide.iter().filter_map(|p| std::fs::canonicalize(p).ok()).collect();
        let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_owned());
        if let Network::Allow(entries) = &self.network {
            super::allow::endpoints(entries)?;
        }
        Ok(Sandbox {
            name: name.to_owned(),
            write,
            hide,
            network: self.network.clone(),
            env: self.env.clone(),
            home,
            read: Vec::new(),
        })
    }
}

impl Sandbox {
    /// Let it write `paths` too (an agent CLI's own state, which its conversation goes on
    /// from): each that exists, as the file system names it; none the profile hides, nor
    /// already writable.
    pub fn add_writable(&mut self, paths: Vec<PathBuf>) {
        for path in paths {
            let Ok(real) = std::fs::canonicalize(&path) else { continue };
            if !self.write.iter().chain(&self.hide).any(|w| real.starts_with(w)) {
                self.write.push(real);
            }
        }
    }

    /// One line of what it allows, for `status`.
    pub fn line(&self) -> String {
        let paths = |ps: &[PathBuf]| ps.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
        let network = match &self.network {
            Network::None => "none".to_owned(),
            Network::Host => "the machine's".to_owned(),
            Network::Allow(to) => to.join(", "),
        };
        let mut line = format!("{} (writes {}; network {network}", self.name, paths(&self.write));
        if !self.hide.is_empty() {
            line.push_str(&format!("; hides {}", paths(&self.hide)));
        }
        if let Some(env) = &self.env {
            line.push_str(&format!("; environment {}", env.join(", ")));
        }
        line.push(')');
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_read_as_a_table_or_a_profile_name() {
        #[derive(Deserialize)]
        struct T {
            sandbox: SandboxChoice,
        }
        let t: T = toml::from_str("sandbox = \"strict\"").unwrap();
        assert_eq!(t.sandbox, SandboxChoice::Profile("strict".into()));
        let t: T = toml::from_str("[sandbox]\nwrite = [\"{cwd}\"]\nnetwork = \"host\"").unwrap();
        let SandboxChoice::Inline(s) = t.sandbox else { panic!("a table") };
        assert_eq!((s.write, s.network), (vec!["{cwd}".to_owned()], Network::Host));
        let t: T = toml::from_str("[sandbox]\nnetwork = [\"127.0.0.1:8080\"]").unwrap();
        let SandboxChoice::Inline(s) = t.sandbox else { panic!("a table") };
        assert_eq!(s.network, Network::Allow(vec!["127.0.0.1:8080".into()]));
    }

    #[test]
    fn cwd_and_relative_paths() {
        let s = SandboxSettings { write: vec!["{cwd}".into(), "/tmp".into()], ..Default::default() };
        let b = s.for_task("p", Path::new("/"), Path::new("/h")).unwrap();
        assert_eq!(b.write, vec![PathBuf::from("/"), PathBuf::from("/tmp")]);
        let s = SandboxSettings { write: vec!["rel".into()], ..Default::default() };
        assert!(s.for_task("p", Path::new("/"), Path::new("/h")).unwrap_err().contains("not an absolute path"));
        let s = SandboxSettings { write: vec!["/no/such/dir/x".into()], ..Default::default() };
        assert!(s.for_task("p", Path::new("/"), Path::new("/h")).unwrap_err().contains("does not exist"));
    }
}
