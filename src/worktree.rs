//! Git worktrees for tasks (`--worktree`, `worktree = true`): each task works in a checkout of
//! its own, on branch `agentctl/<token>` from a base commit, with the untracked files the
//! repository lists in `.worktreeinclude` (an `.env`, say) copied in. When it ends, its
//! `changes` against the base are counted through an index of agentctl's own, so no index the
//! user or the agent uses is touched, and new files count too. Everything here runs `git`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::task::Token;

/// The most file names a task's `changes` lists (the counts cover them all).
pub const MAX_LISTED: usize = 100;

/// How often `git worktree add` is tried when another git process holds a lock of the
/// repository (tasks started at once in one repository).
const ADD_TRIES: u32 = 20;

/// A task's worktree: where it is, its branch, the commit it started from, its repository.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Worktree {
    pub path: PathBuf,
    pub branch: String,
    pub base: String,
    pub repo: PathBuf,
}

/// What a task changed in its worktree, against its base commit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Changes {
    /// Files added, changed or removed.
    pub files: u64,
    /// Lines added and removed (binary files count no lines).
    pub added: u64,
    pub removed: u64,
    /// The files' paths, at most `MAX_LISTED`.
    pub paths: Vec<String>,
}

impl Changes {
    /// One line: `3 files changed, +10 -2: a.rs, b.rs, new.txt`.
    pub fn line(&self) -> String {
        let mut s = format!("{} file(s) changed, +{} -{}", self.files, self.added, self.removed);
        if !self.paths.is_empty() {
            s.push_str(&format!(": {}", self.paths.join(", ")));
            if (self.paths.len() as u64) < self.files {
                s.push_str(&format!(" and {} more", self.files - self.paths.len() as u64));
            }
        }
        s
    }
}

/// Run `git` with `args` in `dir` (and `index` as its index file); its stdout, or an error
/// with its stderr.
fn git<I, S>(dir: &Path, index: Option<&Path>, args: I) -> std::result::Result<Vec<u8>, String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(dir).args(args).stdin(Stdio::null());
    // Nothing from the user's terminal or editor, whatever their configuration says.
    cmd.env("GIT_TERMINAL_PROMPT", "0").env("GIT_EDITOR", "true");
    if let Some(index) = index {
        cmd.env("GIT_INDEX_FILE", index);
    }
    let out = cmd.output().map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() { Ok(out.stdout) } else { Err(String::from_utf8_lossy(&out.stderr).trim().to_owned()) }
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8_lossy(&bytes).trim_end_matches('\n').to_owned()
}

/// Make task `token`'s worktree at `path`, for the repository at `cwd`, from `base` (a ref or
/// commit; HEAD if none). Returns it and the directory inside it that stands for `cwd`.
pub fn create(token: Token, cwd: &Path, base: Option<&str>, path: &Path) -> Result<(Worktree, PathBuf)> {
    let refuse = |what: String| Error::Usage(what);
    let top = git(cwd, None, ["rev-parse", "--show-toplevel"])
        .map(text)
        .map_err(|e| refuse(format!("--worktree needs a git repository, and {} is in none ({e})", cwd.display())))?;
    let top = PathBuf::from(top);
    let prefix = git(cwd, None, ["rev-parse", "--show-prefix"]).map(text).unwrap_or_default();
    let wanted = base.unwrap_or("HEAD");
    let base =
        git(&top, None, ["rev-parse", "--verify", "--quiet", "--end-of-options", &format!("{wanted}^{{commit}}")])
            .map(text)
            .map_err(|_| {
                refuse(format!(
                    "--base {wanted}: no such commit in {}{}",
                    top.display(),
                    if base.is_none() { " (a repository without commits has no HEAD to start from)" } else { "" }
                ))
            })?;
    let branch = format!("agentctl/{token}");
    let mut tries = 0;
    loop {
        let added = git(
            &top,
            None,
            [
                OsStr::new("worktree"),
                OsStr::new("add"),
                OsStr::new("--quiet"),
                OsStr::new("-b"),
                OsStr::new(&branch),
                path.as_os_str(),
                OsStr::new(&base),
            ],
        );
        match added {
            Ok(_) => break,
            // Another task's git holds a lock of the repository (config, refs): try again.
            Err(e) if e.contains(".lock") && tries < ADD_TRIES => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(50 * u64::from(tries)));
            }
            Err(e) => {
                return Err(Error::LaunchFailed(format!("cannot make a worktree of {}: {e}", top.display())));
            }
        }
    }
    let wt = Worktree { path: path.to_owned(), branch, base, repo: top.clone() };
    if let Err(e) = include(&top, path) {
        remove(&wt, true);
        return Err(Error::LaunchFailed(format!("cannot copy the files .worktreeinclude lists: {e}")));
    }
    let inside = path.join(&prefix);
    Ok((wt, inside))
}

/// Copy into the worktree at `to` the untracked files of `top` that `.worktreeinclude` lists
/// (gitignore syntax, as git reads it).
fn include(top: &Path, to: &Path) -> std::result::Result<(), String> {
    if !top.join(".worktreeinclude").is_file() {
        return Ok(());
    }
    let listed = git(top, None, ["ls-files", "-z", "--others", "--ignored", "--exclude-from=.worktreeinclude"])?;
    for name in listed.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let rel = Path::new(OsStr::new(std::str::from_utf8(name).map_err(|_| "a file name is not UTF-8")?));
        let (from, dest) = (top.join(rel), to.join(rel));
        let meta = std::fs::symlink_metadata(&from).map_err(|e| format!("{}: {e}", from.display()))?;
        if !meta.is_file() {
            continue;
        }
        if let Some(dir) = dest.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::copy(&from, &dest).map_err(|e| format!("{}: {e}", from.display()))?;
    }
    Ok(())
}

/// What changed in `wt` against its base: its whole tree (commits, edits, new files not
/// ignored), read through the index file `scratch`, which is removed afterwards.
pub fn changes(wt: &Worktree, scratch: &Path) -> std::result::Result<Changes, String> {
    let _ = std::fs::remove_file(scratch);
    let counted = (|| {
        git(&wt.path, Some(scratch), ["read-tree", &wt.base])?;
        git(&wt.path, Some(scratch), ["add", "--all", "--", "."])?;
        git(&wt.path, Some(scratch), ["diff", "--cached", "--numstat", "-z", "--no-renames", &wt.base])
    })();
    let _ = std::fs::remove_file(scratch);
    Ok(parse_numstat(&counted?))
}

/// `git diff --numstat -z`: `ADDED\tREMOVED\tPATH\0` per file (`-` for binary files).
fn parse_numstat(out: &[u8]) -> Changes {
    let mut c = Changes::default();
    for entry in out.split(|&b| b == 0).filter(|e| !e.is_empty()) {
        let mut f = entry.splitn(3, |&b| b == b'\t');
        let (Some(a), Some(r), Some(p)) = (f.next(), f.next(), f.next()) else { continue };
        let num = |s: &[u8]| std::str::from_utf8(s).ok().and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
        c.files += 1;
        c.added += num(a);
        c.removed += num(r);
        if c.paths.len() < MAX_LISTED {
            c.paths.push(String::from_utf8_lossy(p).into_owned());
        }
    }
    c
}

/// Remove the worktree (whatever is in it) and, with `branch`, its branch too. Best effort: a
/// repository that is gone leaves only the directory to remove.
pub fn remove(wt: &Worktree, branch: bool) {
    let removed =
        git(&wt.repo, None, [OsStr::new("worktree"), OsStr::new("remove"), OsStr::new("--force"), wt.path.as_os_str()]);
    if removed.is_err() {
        let _ = std::fs::remove_dir_all(&wt.path);
        let _ = git(&wt.repo, None, ["worktree", "prune"]);
    }
    if branch {
        let _ = git(&wt.repo, None, ["branch", "-D", "--", &wt.branch]);
    }
}

/// The bytes a worktree takes on disk (its files, not the repository's objects).
pub fn disk_use(path: &Path) -> u64 {
    fn walk(dir: &Path) -> u64 {
        let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
        entries
            .flatten()
            .map(|e| match e.file_type() {
                Ok(t) if t.is_dir() => walk(&e.path()),
                Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
                _ => 0,
            })
            .sum()
    }
    walk(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numstat_counts_lines_and_binary_files_and_lists_paths() {
        let c = parse_numstat(b"1\t2\ta.txt\x003\t0\tdir/new file.txt\x00-\t-\tlogo.png\x00");
        assert_eq!((c.files, c.added, c.removed), (3, 4, 2));
        assert_eq!(c.paths, ["a.txt", "dir/new file.txt", "logo.png"]);
        assert_eq!(c.line(), "3 file(s) changed, +4 -2: a.txt, dir/new file.txt, logo.png");
        assert_eq!(parse_numstat(b""), Changes::default());
    }
}
