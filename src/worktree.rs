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

/// The most file names a task's `changes` lists (the counts cover them all).
pub const MAX_LISTED: usize = 100;

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

/// Run `git` with `args` in `dir`; its stdout, or an error with its stderr. Nothing is asked
/// of a terminal or an editor, no optional lock is taken, and it is stopped after `GIT_LIMIT`.
fn git<I, S>(dir: &Path, args: I) -> std::result::Result<Vec<u8>, String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(dir).args(["-c", "core.safecrlf=false"]).args(args);
    for v in REPO_VARIABLES {
        cmd.env_remove(v);
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

/// What changed in `wt` against its base: its working tree, whatever was committed, staged
/// or left as is, and new files that are not ignored (the copied-in ones aside). Nothing is
/// written: the lines of new files are counted here.
pub fn changes(wt: &Worktree) -> std::result::Result<Changes, String> {
    use std::os::unix::ffi::OsStrExt;
    let tracked =
        git(&wt.path, ["diff", "--numstat", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", &wt.base])?;
    let mut c = parse_numstat(&tracked);
    let new = git(&wt.path, ["ls-files", "-z", "--others", "--exclude-standard"])?;
    for name in new.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let shown = String::from_utf8_lossy(name).into_owned();
        if wt.included.contains(&shown) {
            continue;
        }
        c.files += 1;
        c.added += count_lines(&wt.path.join(OsStr::from_bytes(name)));
        if c.paths.len() < MAX_LISTED {
            c.paths.push(shown);
        }
    }
    Ok(c)
}

/// The lines of a new file, as `git diff` counts them: none for a binary one (a NUL in its
/// first 8000 bytes), and a last line without a newline counts.
fn count_lines(path: &Path) -> u64 {
    use std::io::Read;
    let Ok(mut f) = std::fs::OpenOptions::new().read(true).open(path) else { return 0 };
    let (mut lines, mut first, mut last) = (0u64, true, b'\n');
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if first && buf[..n.min(8000)].contains(&0) {
            return 0;
        }
        first = false;
        lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        last = buf[n - 1];
    }
    lines + u64::from(last != b'\n')
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
