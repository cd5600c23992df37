//! Programs on PATH: where a command's program is found (as execvp would), and how an agent
//! reaches the agentctl that started it: workers call `agentctl ask-lead`, `notify` and
//! `inbox`, and the agentctl a launcher was started by path (an MCP client's config, `cargo
//! run`) may not be on PATH, or a different one may be found first.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::store::Store;

/// The PATH the agent gets, if `path_var` would not find this very binary as `agentctl`: a
/// directory of the home holding nothing but an `agentctl` link to it, put first, so that no
/// other program is shadowed. `None`: `path_var` finds it already (an installed agentctl), or
/// this binary cannot be found.
pub(super) fn agent_path(store: &Store, path_var: &str, cwd: &Path) -> Option<String> {
    let exe = own_binary()?;
    let me = std::fs::metadata(&exe).ok()?;
    let same = |p: &Path| std::fs::metadata(p).is_ok_and(|m| (m.dev(), m.ino()) == (me.dev(), me.ino()));
    if find_program("agentctl", cwd, path_var).is_some_and(|found| same(&found)) {
        return None;
    }
    let dir = link_dir(store, &exe)?;
    let dir = dir.to_str().filter(|d| !d.contains(':'))?;
    Some(if path_var.is_empty() { dir.to_owned() } else { format!("{dir}:{path_var}") })
}

/// The path this binary was started from. One rebuilt or upgraded since (`cargo build` under a
/// running MCP server) reads `… (deleted)`: the file now at that path is the agentctl meant.
fn own_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    match exe.to_str().and_then(|p| p.strip_suffix(" (deleted)")) {
        Some(now) if !exe.exists() => Some(PathBuf::from(now)),
        _ => Some(exe),
    }
}

/// `<home>/bin/<hash of the binary's path>/`, its `agentctl` linked to `exe` (made, or made
/// again if it names another file). One directory per binary: two agentctl builds sharing a
/// home do not change each other's tasks' link.
fn link_dir(store: &Store, exe: &Path) -> Option<PathBuf> {
    let rel = Path::new("bin").join(format!("{:016x}", fnv1a(exe.as_os_str().as_encoded_bytes())));
    // Checked as every directory of the home is: no symlink on the way.
    let dir = store.private_dir(&rel).ok()?;
    let link = dir.join("agentctl");
    let right = || std::fs::read_link(&link).is_ok_and(|to| to == exe);
    if right() {
        return Some(dir);
    }
    // Made beside it and renamed over it: a task starting meanwhile never finds it missing. Its
    // name is this launch's own, as two threads of a server may make it at once.
    static MADE: AtomicU64 = AtomicU64::new(0);
    let n = MADE.fetch_add(1, Ordering::Relaxed);
    let fresh = dir.join(format!(".agentctl.{}.{n}", std::process::id()));
    let _ = std::fs::remove_file(&fresh);
    let made = std::os::unix::fs::symlink(exe, &fresh).and_then(|()| std::fs::rename(&fresh, &link));
    if made.is_err() {
        let _ = std::fs::remove_file(&fresh);
    }
    // Another launch may have made the same link meanwhile.
    (made.is_ok() || right()).then_some(dir)
}

/// A stable 64-bit hash (FNV-1a) of `bytes`: the same name for the same binary in every process.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Where `program` would be found: relative to `cwd` if it has a `/`, else on `path_var`.
pub(super) fn find_program(program: &str, cwd: &Path, path_var: &str) -> Option<PathBuf> {
    let executable = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        let p = cwd.join(program);
        return executable(&p).then_some(p);
    }
    path_var.split(':').map(|d| cwd.join(if d.is_empty() { "." } else { d }).join(program)).find(|p| executable(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_programs_like_execvp() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("tool");
        std::fs::write(&bin, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("/nonexistent:{}", dir.path().display());
        assert_eq!(find_program("tool", Path::new("/"), &path), Some(bin.clone()));
        assert_eq!(find_program("./tool", dir.path(), ""), Some(bin.clone()));
        assert_eq!(find_program("missing", Path::new("/"), &path), None);
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(find_program("tool", Path::new("/"), &path), None);
    }
}
