//! Where Claude Code keeps its conversations: `projects/SLUG/SESSION.jsonl` under its config
//! directory (`CLAUDE_CONFIG_DIR`, else `~/.claude`), SLUG being the directory it ran in with
//! every character but ASCII letters and digits made `-`. It finds a session to resume only
//! under the slug of the directory it runs in, so a fork that runs elsewhere (a worktree of its
//! own) gets a copy of the session file there first.

use std::path::{Path, PathBuf};

use crate::agent::Env;

/// The longest slug Claude Code uses as it is; a longer one gets a hash of the path appended,
/// which agentctl does not make.
const MAX_SLUG: usize = 200;

/// Copy conversation `session`, held for directory `from`, to where Claude Code looks for it
/// when it runs in `to`.
pub(super) fn carry(session: &str, from: &Path, to: &Path, env: &Env) -> Result<(), String> {
    // The id comes from the agent's stream: only what a session id is, never a path.
    if session.is_empty() || !session.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Err(format!("its session id `{session}` is not one Claude Code makes"));
    }
    let projects = config_dir(env)?.join("projects");
    let file = format!("{session}.jsonl");
    let found = std::iter::once(projects.join(slug(from)).join(&file))
        .chain(std::fs::read_dir(&projects).into_iter().flatten().flatten().map(|d| d.path().join(&file)))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("Claude Code's conversation {session} is not under {}", projects.display()))?;
    let there = slug(to);
    if there.len() > MAX_SLUG {
        return Err(format!("the fork's directory {} is too long a path for Claude Code to find it by", to.display()));
    }
    let dir = projects.join(there);
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::copy(&found, dir.join(&file)))
        .map(drop)
        .map_err(|e| format!("cannot copy Claude Code's conversation into {}: {e}", dir.display()))
}

/// Claude Code's config directory for a task with `env`.
pub(super) fn config_dir(env: &Env) -> Result<PathBuf, String> {
    super::super::var(env, "CLAUDE_CONFIG_DIR")
        .or_else(|| super::super::at_home(env, ".claude"))
        .ok_or_else(|| "neither CLAUDE_CONFIG_DIR nor HOME is set, so Claude Code's conversations are nowhere".into())
}

/// The name of the directory Claude Code keeps the conversations of `dir` in.
fn slug(dir: &Path) -> String {
    // As the process sees its directory: no trailing `/`, no `.` parts.
    let dir: PathBuf = dir.components().collect();
    dir.to_string_lossy().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_copied_to_where_claude_code_looks_from_the_new_directory() {
        let config = tempfile::tempdir().unwrap();
        let env: Env = [("CLAUDE_CONFIG_DIR".to_owned(), config.path().display().to_string())].into();
        let from = Path::new("/work/repo.git/src");
        assert_eq!(slug(from), "-work-repo-git-src");
        assert_eq!(slug(Path::new("/work/./repo/")), "-work-repo");
        let held = config.path().join("projects/-work-repo-git-src");
        std::fs::create_dir_all(&held).unwrap();
        std::fs::write(held.join("5e0c4a52-7d1f.jsonl"), "{}\n").unwrap();
        carry("5e0c4a52-7d1f", from, Path::new("/home/w/agentctl/worktrees/a3f2c1"), &env).unwrap();
        let copied = config.path().join("projects/-home-w-agentctl-worktrees-a3f2c1/5e0c4a52-7d1f.jsonl");
        assert_eq!(std::fs::read_to_string(copied).unwrap(), "{}\n");
        // Found under another directory's slug too (a path Claude Code hashed).
        carry("5e0c4a52-7d1f", Path::new("/elsewhere"), Path::new("/w2"), &env).unwrap();
        assert!(config.path().join("projects/-w2/5e0c4a52-7d1f.jsonl").is_file());
        for bad in ["../../etc/passwd", "", "a/b"] {
            assert!(carry(bad, from, Path::new("/w3"), &env).is_err(), "{bad}");
        }
        let err = carry("nope", from, Path::new("/w3"), &env).unwrap_err();
        assert!(err.contains("not under"), "{err}");
        let long = PathBuf::from(format!("/{}", "d".repeat(MAX_SLUG)));
        assert!(carry("5e0c4a52-7d1f", from, &long, &env).unwrap_err().contains("too long"));
    }
}
