//! `roles` as text: the roles `ask` knows, one a line (the file's, then the built-in ones of
//! the agent kinds), and what runs every other role.

use std::io::{self, Write};

use super::term::{columns, fit};
use crate::ops::{BUILT_IN, RoleInfo, Roles, shell_words};

/// The widest a role is shown; longer ones are cut.
const ROLE_MAX: usize = 24;

/// Print `r` on `w`, each line cut to `width` characters when given.
pub fn write(w: &mut dyn Write, r: &Roles, width: Option<usize>) -> io::Result<()> {
    match &r.file {
        Some(file) => writeln!(w, "roles of {}:", file.display())?,
        None => writeln!(w, "no agents file (--agents, <home>/agents.toml or $XDG_CONFIG_HOME/agentctl/agents.toml)")?,
    }
    let all = r.roles.iter().chain(&r.builtin).chain(std::iter::once(&r.other_roles));
    let shown = |i: &RoleInfo| if i.source == BUILT_IN { format!("{} (built-in)", i.role) } else { i.role.clone() };
    let role_w = all.clone().map(|i| columns(&shown(i))).max().unwrap_or(0).clamp(4, ROLE_MAX);
    let pool_w = all.clone().map(|i| columns(&i.pool)).max().unwrap_or(0).max(4);
    let line = |role: &str, pool: &str, backend: &str, command: &str| {
        let row = format!("{:<role_w$}  {:<pool_w$}  {:<7}  {command}", fit(role, role_w), pool, backend);
        width.map_or(row.clone(), |w| fit(&row, w)).trim_end().to_owned()
    };
    writeln!(w, "{}", line("ROLE", "POOL", "BACKEND", "COMMAND"))?;
    for i in all {
        writeln!(w, "{}", line(&shown(i), &i.pool, i.backend, &shell_words(&i.command)))?;
    }
    writeln!(w, "* is every other role: it runs {}", r.other_roles.source)
}
