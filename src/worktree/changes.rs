//! A task's `changes`: what it changed in its worktree against its base, counted as `git
//! diff` counts them (a symlink is its target's path; what git does not track is skipped)
//! without writing anything and without opening anything but regular files.

use std::ffi::OsStr;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{Worktree, git, text};

/// The most file names a task's `changes` lists (the counts cover them all).
pub const MAX_LISTED: usize = 100;

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

/// What changed in `wt` against its base: its working tree, whatever was committed, staged
/// or left as is, and new files that are not ignored (the copied-in ones aside). Nothing is
/// written: the lines of new files are counted here, as `git diff` would count them.
pub fn changes(wt: &Worktree) -> std::result::Result<Changes, String> {
    use std::os::unix::ffi::OsStrExt;
    let tracked =
        git(&wt.path, ["diff", "--numstat", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", &wt.base])?;
    let mut c = parse_numstat(&tracked);
    let new = git(&wt.path, ["ls-files", "-z", "--others", "--exclude-standard"])?;
    let mut big = None;
    for name in new.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let shown = String::from_utf8_lossy(name).into_owned();
        if wt.included.contains(&shown) {
            continue;
        }
        let big = *big.get_or_insert_with(|| big_file_threshold(&wt.path));
        // Gone, or become something git does not track, since it was listed.
        let Some(lines) = new_file_lines(&wt.path.join(OsStr::from_bytes(name)), big) else { continue };
        c.files += 1;
        c.added += lines;
        if c.paths.len() < MAX_LISTED {
            c.paths.push(shown);
        }
    }
    Ok(c)
}

/// Above this size git takes a file for binary without reading it (`core.bigFileThreshold`).
fn big_file_threshold(dir: &Path) -> u64 {
    git(dir, ["config", "--type=int", "--get", "core.bigFileThreshold"])
        .ok()
        .and_then(|v| text(v).parse().ok())
        .unwrap_or(512 << 20)
}

/// The lines `git diff` counts in a new file at `path`, `None` for what git does not track (a
/// FIFO, a socket, a device). A symlink is its target's path, never followed; a file is opened
/// so that the open cannot block or follow a link swapped in since, and is one still once open.
fn new_file_lines(path: &Path, big: u64) -> Option<u64> {
    use std::io::Read;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;
    let kind = std::fs::symlink_metadata(path).ok()?.file_type();
    if kind.is_symlink() {
        let target = std::fs::read_link(path).ok()?;
        return Some(LineCount::of(target.as_os_str().as_bytes()));
    }
    if kind.is_dir() {
        // A repository inside the worktree, listed as `dir/`: a file with no lines.
        return Some(0);
    }
    if !kind.is_file() {
        return None;
    }
    let flags = libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
    let Ok(mut f) = std::fs::OpenOptions::new().read(true).custom_flags(flags).open(path) else { return Some(0) };
    let meta = f.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    if meta.len() > big {
        return Some(0);
    }
    let mut count = LineCount::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match f.read(&mut buf) {
            Ok(0) | Err(_) => return Some(count.lines()),
            Ok(n) if !count.feed(&buf[..n]) => return Some(0),
            Ok(_) => {}
        }
    }
}

/// Lines as `git diff` counts them: a last line without a newline counts, and a text with a
/// NUL in its first 8000 bytes is binary (no lines).
#[derive(Default)]
struct LineCount {
    read: u64,
    newlines: u64,
    /// The last byte read, if any.
    last: Option<u8>,
}

impl LineCount {
    /// The lines of the whole of `bytes`.
    fn of(bytes: &[u8]) -> u64 {
        let mut c = LineCount::default();
        if c.feed(bytes) { c.lines() } else { 0 }
    }

    /// Count the next bytes; false once they show the text is binary.
    fn feed(&mut self, bytes: &[u8]) -> bool {
        let head = 8000u64.saturating_sub(self.read).min(bytes.len() as u64) as usize;
        if bytes[..head].contains(&0) {
            return false;
        }
        self.read += bytes.len() as u64;
        self.newlines += memchr::memchr_iter(b'\n', bytes).count() as u64;
        self.last = bytes.last().copied().or(self.last);
        true
    }

    fn lines(&self) -> u64 {
        self.newlines + u64::from(self.last.is_some_and(|b| b != b'\n'))
    }
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

    #[test]
    fn lines_count_as_git_counts_them() {
        for (bytes, lines) in [
            (&b""[..], 0),
            (b"a", 1),
            (b"a\n", 1),
            (b"a\nb", 2),
            (b"\n\n", 2),
            (b"bin\0ary\n", 0),
            (b"../target/path", 1),
        ] {
            assert_eq!(LineCount::of(bytes), lines, "{bytes:?}");
        }
        // Only a NUL in the first 8000 bytes makes it binary, however they were read.
        let mut c = LineCount::default();
        assert!(c.feed(&[b'\n'; 7999]) && !c.feed(b"\0"));
        let mut c = LineCount::default();
        assert!(c.feed(&[b'\n'; 7999]) && c.feed(b"x\0\n"));
        assert_eq!(c.lines(), 8000);
    }
}
