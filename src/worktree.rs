//! Git worktrees for tasks (`--worktree`, `worktree = true`): each task works in a checkout of
//! its own, on branch `agentctl/<token>` from a base commit, with the untracked files the
//! repository lists in `.worktreeinclude` (an `.env`, say) copied in. When it ends, its
//! `changes` against the base are counted from the working tree (commits, edits, new files),
//! writing nothing: no index the user or the agent uses, and no object into the repository.
//! Everything here runs `git`, with the caller's repository variables (`GIT_DIR`,
//! `GIT_INDEX_FILE`…) taken out and a time limit.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::task::Token;

mod changes;

pub use changes::{Changes, MAX_LISTED, changes};

/// How often `git worktree add` is tried when another git process holds a lock of the
/// repository (tasks started at once in one repository).
const ADD_TRIES: u32 = 20;

/// A task's worktree: where it is, its branch, the commit it started from, its repository,
/// and the files copied in (not the agent's changes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Worktree {
    pub path: PathBuf,
    pub branch: String,
    pub base: String,
    pub repo: PathBuf,
    #[serde(default)]
    pub included: Vec<String>,
}

/// How long one `git` may take before it is given up (a hung filter or hook, a huge tree).
const GIT_LIMIT: Duration = Duration::from_secs(120);

/// The variables through which a caller (a git hook, say) points git at its own repository
/// or index: taken out, so that git finds the repository from the directory it runs in.
pub const REPO_VARIABLES: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_PREFIX",
    "GIT_NAMESPACE",
    "GIT_QUARANTINE_PATH",
];

/// Run `git` with `args` in `dir`; its stdout, or an error with its stderr. Nothing is asked
/// of a terminal or an editor, no optional lock is taken, and it is stopped after `GIT_LIMIT`.
fn git<I, S>(dir: &Path, args: I) -> std::result::Result<Vec<u8>, String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    git_with_index(dir, None, args)
}

/// `git`, with `index` (if given) as its index file instead of the worktree's own.
fn git_with_index<I, S>(dir: &Path, index: Option<&Path>, args: I) -> std::result::Result<Vec<u8>, String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(dir).args(["-c", "core.safecrlf=false"]).args(args);
    for v in REPO_VARIABLES {
        cmd.env_remove(v);
    }
    if let Some(index) = index {
        cmd.env("GIT_INDEX_FILE", index);
    }
    cmd.env("GIT_TERMINAL_PROMPT", "0").env("GIT_EDITOR", "true").env("GIT_OPTIONAL_LOCKS", "0");
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| format!("cannot run git: {e}"))?;
    // Read as it writes (a full pipe would stop it), and give up on it after the limit.
    let (mut out, mut err) = (child.stdout.take().expect("piped"), child.stderr.take().expect("piped"));
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut buf);
        buf
    });
    let mut errors = Vec::new();
    let deadline = Instant::now() + GIT_LIMIT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let _ = std::io::Read::read_to_end(&mut err, &mut errors);
    let stdout = reader.join().unwrap_or_default();
    match status {
        Some(s) if s.success() => Ok(stdout),
        Some(_) => Err(String::from_utf8_lossy(&errors).trim().to_owned()),
        None => Err(format!("git took longer than {}s and was stopped", GIT_LIMIT.as_secs())),
    }
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8_lossy(&bytes).trim_end_matches('\n').to_owned()
}

/// Where a task's worktree comes from, checked before anything is made: the repository's top,
/// the commit, and where in it the task starts.
#[derive(Clone, Debug)]
pub struct Source {
    top: PathBuf,
    prefix: String,
    base: String,
}

/// Check that a worktree can be made for the repository at `cwd` from `base` (a ref or commit;
/// HEAD if none), starting in the same directory: `cwd` is in a git working tree, `base` names
/// a commit, and that commit has the directory. Makes nothing.
pub fn source(cwd: &Path, base: Option<&str>) -> Result<Source> {
    let refuse = |what: String| Error::Usage(what);
    let top = git(cwd, ["rev-parse", "--show-toplevel"]).map(text).map_err(|e| {
        refuse(format!(
            "--worktree needs the working tree of a git repository, and {} is not in one ({e})",
            cwd.display()
        ))
    })?;
    let top = PathBuf::from(top);
    let prefix = git(cwd, ["rev-parse", "--show-prefix"]).map(text).unwrap_or_default();
    let wanted = base.unwrap_or("HEAD");
    let base = git(&top, ["rev-parse", "--verify", "--quiet", "--end-of-options", &format!("{wanted}^{{commit}}")])
        .map(text)
        .map_err(|_| match base {
            Some(b) => refuse(format!("--base {b}: no such commit in {}", top.display())),
            None => refuse(format!(
                "{} has no commit yet: a worktree starts from one (commit, or give --base)",
                top.display()
            )),
        })?;
    let dir = format!("{base}:{}", prefix.trim_end_matches('/'));
    if !prefix.is_empty() && git(&top, ["rev-parse", "--verify", "--quiet", "--end-of-options", &dir]).is_err() {
        return Err(refuse(format!(
            "{} is not in commit {}: start the task from a directory the commit has (its top: {})",
            cwd.display(),
            &base[..base.len().min(12)],
            top.display()
        )));
    }
    Ok(Source { top, prefix, base })
}

/// Make task `token`'s worktree at `path` from `source`. Returns it and the directory inside it
/// that stands for the directory the task was started from. Whatever fails leaves no worktree
/// and no branch behind.
pub fn create(token: Token, source: &Source, path: &Path) -> Result<(Worktree, PathBuf)> {
    let Source { top, prefix, base } = source.clone();
    if let Some(dir) = path.parent() {
        use std::os::unix::fs::DirBuilderExt;
        let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir);
    }
    let branch = format!("agentctl/{token}");
    let wt = Worktree {
        path: path.to_owned(),
        branch: branch.clone(),
        base: base.clone(),
        repo: top.clone(),
        included: Vec::new(),
    };
    let mut tries = 0;
    loop {
        let added = git(
            &top,
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
            // Another task's git holds a lock of the repository (config, refs): undo what this
            // try made, and try again.
            Err(e) if e.contains(".lock") && tries < ADD_TRIES => {
                remove(&wt, true);
                tries += 1;
                std::thread::sleep(Duration::from_millis(50 * u64::from(tries)));
            }
            Err(e) => {
                // A hook that failed after the checkout leaves a worktree: it goes too.
                remove(&wt, true);
                return Err(Error::LaunchFailed(format!("cannot make a worktree of {}: {e}", top.display())));
            }
        }
    }
    let inside = path.join(&prefix);
    if !inside.is_dir() {
        // Checked in `source`; a sparse checkout may still leave it out.
        remove(&wt, true);
        return Err(Error::LaunchFailed(format!("the worktree of {} has no {prefix}", top.display())));
    }
    match include(&top, path) {
        Ok(included) => Ok((Worktree { included, ..wt }, inside)),
        Err(e) => {
            remove(&wt, true);
            Err(Error::LaunchFailed(format!("cannot copy the files .worktreeinclude lists: {e}")))
        }
    }
}

/// Copy into the worktree at `to` the untracked files of `top` that `.worktreeinclude` lists
/// (gitignore syntax, as git reads it); their paths. Never through a symlink, and never over
/// what the checkout put there.
fn include(top: &Path, to: &Path) -> std::result::Result<Vec<String>, String> {
    use std::os::unix::ffi::OsStrExt;
    if !top.join(".worktreeinclude").is_file() {
        return Ok(Vec::new());
    }
    let listed = git(top, ["ls-files", "-z", "--others", "--ignored", "--exclude-from=.worktreeinclude"])?;
    let mut copied = Vec::new();
    for name in listed.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let rel = Path::new(OsStr::from_bytes(name));
        let from = top.join(rel);
        if !std::fs::symlink_metadata(&from).is_ok_and(|m| m.is_file()) {
            continue;
        }
        if copy_in(&from, to, rel).map_err(|e| format!("{}: {e}", rel.display()))? {
            copied.push(String::from_utf8_lossy(name).into_owned());
        }
    }
    Ok(copied)
}

/// Copy `from` to `rel` under `root`, making its directories; false when something is there
/// already. A symlink on the way is refused: the copy stays inside `root`.
fn copy_in(from: &Path, root: &Path, rel: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    let mut dir = root.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        dir.push(part);
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(std::io::Error::other("a directory on its way is a symlink or a file")),
            Err(_) => std::fs::DirBuilder::new().mode(0o755).create(&dir)?,
        }
    }
    let dest = root.join(rel);
    if std::fs::symlink_metadata(&dest).is_ok() {
        return Ok(false);
    }
    let mut src = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(from)?;
    let mode = src.metadata()?.permissions().mode() & 0o777;
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&dest)?;
    std::io::copy(&mut src, &mut out)?;
    Ok(true)
}

/// A commit of worktree `wt` as it is now, for a fork to start from: its edits and its new files
/// (those git does not ignore, as `git add -A` takes them) over its branch's commit, made with
/// an index of its own, so that the worktree, its index and its branch stay as they were. Its
/// branch's commit when nothing changed.
pub fn snapshot(wt: &Worktree) -> Result<String> {
    let refuse =
        |e: String| Error::LaunchFailed(format!("cannot take the state of worktree {}: {e}", wt.path.display()));
    let head = git(&wt.path, ["rev-parse", "--verify", "HEAD^{commit}"]).map(text).map_err(refuse)?;
    let index = PathBuf::from(text(
        git(&wt.path, ["rev-parse", "--path-format=absolute", "--git-path", "agentctl-fork-index"]).map_err(refuse)?,
    ));
    let tree = (|| {
        git_with_index(&wt.path, Some(&index), ["read-tree", "HEAD"])?;
        git_with_index(&wt.path, Some(&index), ["add", "-A", "."])?;
        git_with_index(&wt.path, Some(&index), ["write-tree"]).map(text)
    })();
    let _ = std::fs::remove_file(&index);
    let tree = tree.map_err(refuse)?;
    if git(&wt.path, ["rev-parse", "HEAD^{tree}"]).map(text).is_ok_and(|t| t == tree) {
        return Ok(head);
    }
    let message = format!("agentctl: worktree {} as it was when forked", wt.branch);
    let who = ["-c", "user.name=agentctl", "-c", "user.email=agentctl@localhost"];
    git(&wt.path, who.iter().copied().chain(["commit-tree", &tree, "-p", &head, "-m", &message]))
        .map(text)
        .map_err(refuse)
}

/// Remove the worktree (whatever is in it) and, with `branch`, its branch too. Best effort: a
/// repository that is gone leaves only the directory to remove.
pub fn remove(wt: &Worktree, branch: bool) {
    let removed =
        git(&wt.repo, [OsStr::new("worktree"), OsStr::new("remove"), OsStr::new("--force"), wt.path.as_os_str()]);
    if removed.is_err() {
        let _ = std::fs::remove_dir_all(&wt.path);
        let _ = git(&wt.repo, ["worktree", "prune"]);
    }
    if branch {
        let _ = git(&wt.repo, ["branch", "-D", "--", &wt.branch]);
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
