//! Where cgroups are: the hierarchies mounted here and this process's place in each, where the
//! tasks' cgroups go (beside an enclosing task's, never in it), and leaving an enclosing task's.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::task::Token;

/// The directory that holds the tasks' cgroups.
pub(super) const TASKS_DIR: &str = "agentctl";

/// Write `value` to the cgroup file `file`, which must exist: never created, nor reached
/// through a symlink.
pub(super) fn write_to(file: &Path, value: &str) -> io::Result<()> {
    fs::OpenOptions::new().write(true).custom_flags(libc::O_NOFOLLOW).open(file)?.write_all(value.as_bytes())
}

/// The cgroup hierarchies and where this process is in each: v2's mount and path, and each v1
/// hierarchy's mount, controllers and path.
pub(super) struct Hierarchies {
    pub(super) v2: Option<(Mount, String)>,
    pub(super) v1: Vec<(Mount, (String, String))>,
}

/// A mounted cgroup hierarchy: its mount point, and the cgroup mounted there (`/` unless a
/// container was given part of the tree).
#[derive(Clone)]
pub(super) struct Mount {
    pub(super) point: PathBuf,
    pub(super) root: String,
}

impl Hierarchies {
    pub(super) fn read() -> Hierarchies {
        let read = |path| crate::supervisor::unix::read_pseudo(path).unwrap_or_default();
        Hierarchies::parse(&read("/proc/self/mountinfo"), &read("/proc/self/cgroup"))
    }

    /// From `/proc/self/mountinfo` and `/proc/self/cgroup`: for each hierarchy, the first mount
    /// that shows this process's cgroup.
    fn parse(mountinfo: &str, own: &str) -> Hierarchies {
        let mut v2 = None;
        let mut v1: Vec<(Mount, (String, String))> = Vec::new();
        for line in mountinfo.lines() {
            // ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER_OPTIONS
            let Some((head, tail)) = line.split_once(" - ") else { continue };
            let f: Vec<&str> = head.split(' ').collect();
            let t: Vec<&str> = tail.split(' ').collect();
            let (Some(root), Some(point), Some(kind)) = (f.get(3), f.get(4), t.first()) else { continue };
            let mount = Mount { point: PathBuf::from(unescape(point)), root: unescape(root) };
            match *kind {
                "cgroup2" if v2.is_none() => {
                    if let Some(path) = own.lines().find_map(|l| l.strip_prefix("0::"))
                        && in_mount(&mount, path).is_some()
                    {
                        v2 = Some((mount, path.to_owned()));
                    }
                }
                "cgroup" => {
                    // The hierarchy whose controllers (`cpu,cpuacct`) are all among the mount's options.
                    let opts: Vec<&str> = t.get(2).copied().unwrap_or("").split(',').collect();
                    let found = own.lines().find_map(|l| {
                        let mut p = l.splitn(3, ':');
                        let (_, cs, path) = (p.next()?, p.next()?, p.next()?);
                        let named = !cs.is_empty() && !cs.contains('=');
                        (named && cs.split(',').all(|c| opts.contains(&c))).then(|| (cs.to_owned(), path.to_owned()))
                    });
                    if let Some(found) = found
                        && in_mount(&mount, &found.1).is_some()
                        && !v1.iter().any(|(_, (cs, _))| *cs == found.0)
                    {
                        v1.push((mount, found));
                    }
                }
                _ => {}
            }
        }
        Hierarchies { v2, v1 }
    }
}

/// Mount-info fields escape space, tab, newline and backslash as octal.
fn unescape(field: &str) -> String {
    field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
}

/// The directory of cgroup `path` under `mount`, if the mount shows it.
pub(super) fn in_mount(mount: &Mount, path: &str) -> Option<PathBuf> {
    let root = mount.root.trim_end_matches('/');
    let rest = if root.is_empty() { path } else { path.strip_prefix(root)? };
    if !(rest.is_empty() || rest.starts_with('/')) || rest.split('/').any(|c| c == "..") {
        return None;
    }
    Some(mount.point.join(rest.trim_start_matches('/')))
}

/// The part of cgroup `path` above any task's cgroup (`…/agentctl/<token>.<pid>`): a task
/// started from inside another makes its cgroup beside the other's, not in it.
pub(super) fn outside_tasks(path: &str) -> &str {
    let mut at = 0;
    let mut rest = path;
    while let Some(i) = rest.find(&format!("/{TASKS_DIR}/")) {
        let leaf = rest[i + TASKS_DIR.len() + 2..].split('/').next().unwrap_or("");
        if is_task_name(leaf) {
            return &path[..at + i];
        }
        at += i + 1;
        rest = &rest[i + 1..];
    }
    path
}

/// Whether `name` is a task cgroup's: `<token>.<pid>[.<n>]`.
pub(super) fn is_task_name(name: &str) -> bool {
    let mut parts = name.split('.');
    let token = parts.next().is_some_and(|t| Token::parse(t).is_ok());
    let rest: Vec<&str> = parts.collect();
    token
        && (1..=2).contains(&rest.len())
        && rest.iter().all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Move process `pid` (0: this one) out of any task's cgroup, into the cgroup the task's was
/// made beside: a supervisor started by an agent has its own task, which its parent's halt must
/// not end. (`pid` is ours or our child, in our cgroups.)
pub fn leave_task_cgroups(pid: u32) -> Result<(), String> {
    let own = crate::supervisor::unix::read_pseudo("/proc/self/cgroup").unwrap_or_default();
    let pid = if pid == 0 { std::process::id() } else { pid };
    // The cheap look first: almost every supervisor is in no task's cgroup.
    let in_task = |path: &str| outside_tasks(path).len() < path.len();
    if !own.lines().any(|l| in_task(l.splitn(3, ':').nth(2).unwrap_or(""))) {
        return Ok(());
    }
    let h = Hierarchies::read();
    let all = h.v2.iter().map(|(m, p)| (m, p)).chain(h.v1.iter().map(|(m, (_, p))| (m, p)));
    // Into the enclosing supervisor's own cgroup, in every hierarchy that can be left.
    let mut failed = Vec::new();
    for (mount, path) in all {
        let outside = outside_tasks(path);
        if outside.len() < path.len()
            && let Some(dir) = in_mount(mount, outside)
            && let Err(e) = write_to(&dir.join("cgroup.procs"), &pid.to_string())
        {
            failed.push(format!("cannot leave the enclosing task's cgroup {path} for {}: {e}", dir.display()));
        }
    }
    if failed.is_empty() { Ok(()) } else { Err(failed.join("; ")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_cgroups_are_made_beside_the_enclosing_task() {
        assert_eq!(outside_tasks("/"), "/");
        assert_eq!(outside_tasks("/user.slice/s.scope"), "/user.slice/s.scope");
        assert_eq!(outside_tasks("/agentctl/abc123.42"), "");
        assert_eq!(outside_tasks("/a/agentctl/abc123.42/x"), "/a");
        assert_eq!(outside_tasks("/a/agentctl/abc123.42.2"), "/a");
        // Not a task's: a user's own `agentctl` unit, a name that is no token.
        assert_eq!(outside_tasks("/agentctl/mcp.service"), "/agentctl/mcp.service");
        assert_eq!(outside_tasks("/x/agentctl/zzzzzz.1"), "/x/agentctl/zzzzzz.1");
        assert_eq!(outside_tasks("/agentctl/abc123.x1"), "/agentctl/abc123.x1");
        assert_eq!(outside_tasks("/agentctl/x/agentctl/abc123.7"), "/agentctl/x");
        assert_eq!(outside_tasks("/agentctl/é.7/agentctl/abc123.7"), "/agentctl/é.7");
    }

    #[test]
    fn cgroup_paths_map_into_their_mount() {
        let m = Mount { point: "/sys/fs/cgroup/unified".into(), root: "/".into() };
        assert_eq!(in_mount(&m, "/"), Some(PathBuf::from("/sys/fs/cgroup/unified/")));
        assert_eq!(in_mount(&m, "/a/b"), Some(PathBuf::from("/sys/fs/cgroup/unified/a/b")));
        assert_eq!(in_mount(&m, "/a/../b"), None);
        let m = Mount { point: "/sys/fs/cgroup".into(), root: "/docker/x".into() };
        assert_eq!(in_mount(&m, "/docker/x/y"), Some(PathBuf::from("/sys/fs/cgroup/y")));
        assert_eq!(in_mount(&m, "/docker/xy"), None);
        assert_eq!(in_mount(&m, "/other"), None);
    }

    #[test]
    fn hierarchies_are_found_on_hybrid_and_pure_v2_hosts() {
        let hybrid = "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n\
                      35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
                      40 31 0:37 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd\n\
                      41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate\n";
        let own = "9:name=systemd:/\n4:memory:/box/1\n1:cpu,cpuacct:/\n0::/\n";
        let h = Hierarchies::parse(hybrid, own);
        let (m, p) = h.v2.unwrap();
        assert_eq!((m.point, p.as_str()), (PathBuf::from("/sys/fs/cgroup/unified"), "/"));
        let v1: Vec<(PathBuf, String, String)> = h.v1.into_iter().map(|(m, (c, p))| (m.point, c, p)).collect();
        assert_eq!(
            v1,
            [
                ("/sys/fs/cgroup/cpu,cpuacct".into(), "cpu,cpuacct".into(), "/".into()),
                ("/sys/fs/cgroup/memory".into(), "memory".into(), "/box/1".into())
            ]
        );
        // A container's own view of part of the tree: the mount that shows our cgroup counts.
        let pure = "50 40 0:30 /other /mnt/elsewhere rw - cgroup2 cgroup2 rw\n\
                    51 40 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let (m, p) = Hierarchies::parse(pure, "0::/user.slice/s.scope\n").v2.unwrap();
        assert_eq!((m.point, p.as_str()), (PathBuf::from("/sys/fs/cgroup"), "/user.slice/s.scope"));
    }
}
