//! Which sandbox a task runs in: `--sandbox NAME` (MCP `sandbox`), else its template's, else
//! its pool's, else the file's `sandbox`; `none` asks for none. A name is a `[sandboxes.NAME]`.

use super::Agents;
use crate::error::{Error, Result};
use crate::task::{SandboxChoice, SandboxSettings, Template};

/// The name that asks for no sandbox (`--sandbox none`).
pub const NO_SANDBOX: &str = "none";

impl Agents {
    /// The sandbox profile a task of `template` in `pool` runs in, with its name for `status`;
    /// `own` is the task's own choice. None: it runs unsandboxed.
    pub fn sandbox(
        &self,
        own: Option<&str>,
        template: &Template,
        pool: &str,
    ) -> Result<Option<(String, SandboxSettings)>> {
        let pool_choice = self.file.pools.get(pool).and_then(|p| p.sandbox.as_ref());
        let (choice, whose) = match own {
            Some(NO_SANDBOX) => return Ok(None),
            Some(name) => (SandboxChoice::Profile(name.to_owned()), "--sandbox".to_owned()),
            None => match (&template.sandbox, pool_choice, &self.file.sandbox) {
                (Some(c), _, _) => (c.clone(), "its template's".to_owned()),
                (None, Some(c), _) => (c.clone(), format!("[pools.{pool}] sandbox")),
                (None, None, Some(c)) => (c.clone(), "the file's `sandbox`".to_owned()),
                (None, None, None) => return Ok(None),
            },
        };
        match choice {
            SandboxChoice::Inline(s) => Ok(Some((format!("{whose} sandbox"), s))),
            SandboxChoice::Profile(name) if name == NO_SANDBOX => Ok(None),
            SandboxChoice::Profile(name) => match self.file.sandboxes.get(&name) {
                Some(s) => Ok(Some((name, s.clone()))),
                None => Err(self.unknown_sandbox(&name, &whose)),
            },
        }
    }

    fn unknown_sandbox(&self, name: &str, whose: &str) -> Error {
        let file = self.path.as_ref().map_or_else(|| "agents.toml".to_owned(), |p| p.display().to_string());
        let known: Vec<&str> = self.file.sandboxes.keys().map(String::as_str).collect();
        let known = match known.is_empty() {
            true => "none is defined".to_owned(),
            false => format!("defined: {}", known.join(", ")),
        };
        Error::Usage(format!(
            "sandbox `{}` ({whose}) is not defined ({known}); define it in {file} as\n  [sandboxes.{name}]\n  \
             write = [\"{{cwd}}\"]\n  network = \"none\"",
            crate::task::input_preview(name),
        ))
    }
}
