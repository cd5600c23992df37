//! `agents.toml`: which argv runs which role, with the built-in kiro-cli default.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::task::{Role, Template};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentsFile {
    default: Option<Template>,
    #[serde(default)]
    agents: BTreeMap<String, Template>,
}

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
        for name in file.agents.keys() {
            Role::parse(name).map_err(|e| Error::Usage(format!("agents file {}: {e}", path.display())))?;
        }
        Ok(Agents { path: Some(path), file })
    }

    /// The template for `role`: its own entry, else `[default]`, else the built-in default.
    pub fn resolve(&self, role: &Role) -> Resolved {
        let at = |what: &str| match &self.path {
            Some(p) => format!("{what} in {}", p.display()),
            None => what.to_owned(),
        };
        if let Some(t) = self.file.agents.get(role.as_str()) {
            return Resolved { template: t.clone(), source: at(&format!("[agents.{role}]")) };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_fall_back_to_default_then_builtin() {
        let dir = tempfile::tempdir().unwrap();
        let reviewer = Role::parse("reviewer").unwrap();
        let none = Agents::load(dir.path(), None).unwrap();
        assert_eq!(none.resolve(&reviewer).template, Template::builtin_default());

        std::fs::write(
            dir.path().join("agents.toml"),
            "[default]\ncommand = [\"d\", \"{question}\"]\n[agents.reviewer]\ncommand = [\"r\"]\ntimeout = \"30m\"\n",
        )
        .unwrap();
        let a = Agents::load(dir.path(), None).unwrap();
        assert_eq!(a.resolve(&reviewer).template.command, ["r"]);
        assert!(a.resolve(&reviewer).source.contains("[agents.reviewer]"));
        assert_eq!(a.resolve(&Role::parse("other").unwrap()).template.command, ["d", "{question}"]);
    }

    #[test]
    fn bad_files_are_usage_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.toml");
        std::fs::write(&p, "[agents.reviewer]\ncomand = [\"x\"]\n").unwrap();
        let e = Agents::load(dir.path(), Some(&p)).unwrap_err().to_string();
        assert!(e.contains("not valid"), "{e}");
        std::fs::write(&p, "[agents.\"../x\"]\ncommand = [\"x\"]\n").unwrap();
        assert!(Agents::load(dir.path(), Some(&p)).is_err());
        assert!(Agents::load(dir.path(), Some(&dir.path().join("missing.toml"))).is_err());
    }
}
