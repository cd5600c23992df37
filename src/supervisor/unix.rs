//! Linux process plumbing for the supervisor: its children, their descendants, and signals sent
//! only to processes that are provably the task's.

use std::fs;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// The text of a small file of /proc or /sys in as few system calls as it takes (an open, a
/// read or two, a close): `fs::read_to_string` asks first for a size such files do not have,
/// then reads them in growing pieces.
pub fn read_pseudo(path: impl AsRef<std::path::Path>) -> std::io::Result<String> {
    use std::io::Read;
    let mut file = fs::File::open(path)?;
    let mut text = Vec::new();
    // Most are a few hundred bytes; /proc/self/mountinfo takes a few reads on a busy host.
    let mut chunk = [0u8; 8192];
    loop {
        match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => text.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    String::from_utf8(text).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// The supervisor's direct children (it is single-threaded, so its main thread has them all).
/// Reparented orphans land here too, because the supervisor is a child subreaper.
pub fn own_children() -> Vec<Pid> {
    let me = std::process::id();
    match read_pseudo(format!("/proc/{me}/task/{me}/children")) {
        Ok(s) => s.split_whitespace().filter_map(|p| p.parse().ok()).map(Pid::from_raw).collect(),
        // Kernels without CONFIG_PROC_CHILDREN: the parent links say the same, more slowly.
        Err(_) => {
            parent_links().into_iter().filter(|&(_, pp)| pp == me as i32).map(|(p, _)| Pid::from_raw(p)).collect()
        }
    }
}

/// (pid, parent pid) of every process.
fn parent_links() -> Vec<(i32, i32)> {
    let mut links = Vec::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
            if let Some(ppid) = parent_of(pid) {
                links.push((pid, ppid));
            }
        }
    }
    links
}

/// Every live descendant of `root`, found through `/proc/*/stat` parent links, except other
/// tasks: a supervisor below us (a task started from inside ours) and all it runs are left out.
pub fn descendants(root: Pid) -> Vec<Pid> {
    let links = parent_links();
    let mut found = vec![root.as_raw()];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        let children = links.iter().filter(|(_, pp)| *pp == parent).map(|(p, _)| *p);
        found.extend(children.filter(|&p| !is_supervisor(Pid::from_raw(p))).collect::<Vec<_>>());
        i += 1;
    }
    found.into_iter().skip(1).map(Pid::from_raw).collect()
}

/// The name (`comm`) every supervisor gives itself, by which it is told from an agent's
/// processes. At most 15 bytes.
const SUPERVISOR_NAME: &std::ffi::CStr = c"agentctl-sv";

/// Name this process a supervisor, before it forks the one that lives on, so that no moment
/// exists when an adopting supervisor could take it for a leftover.
pub fn name_supervisor() {
    let _ = nix::sys::prctl::set_name(SUPERVISOR_NAME);
}

/// Whether `pid` is another task's supervisor: this same binary, named `SUPERVISOR_NAME`. A
/// task started from inside ours lands below us (we are a subreaper), but it has a life, a
/// record and a `halt` of its own: it is never one of our leftovers.
pub fn is_supervisor(pid: Pid) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(comm) = read_pseudo(format!("/proc/{pid}/comm")) else { return false };
    if comm.trim_end_matches('\n').as_bytes() != SUPERVISOR_NAME.to_bytes() {
        return false;
    }
    match (fs::metadata(format!("/proc/{pid}/exe")), fs::metadata("/proc/self/exe")) {
        (Ok(theirs), Ok(ours)) => theirs.dev() == ours.dev() && theirs.ino() == ours.ino(),
        _ => false,
    }
}

/// Show `words` as this process's command line (`ps`, `/proc/PID/cmdline`), in the space the
/// original arguments took, cut short if they were shorter. A forked supervisor would otherwise
/// show the launcher's command line.
pub fn set_cmdline(words: &[&str]) {
    let Some(fields) = stat_fields("self") else { return };
    let mut f = fields.split(' ').skip(45).map(|n| n.parse::<usize>().ok());
    let (Some(Some(start)), Some(Some(end))) = (f.next(), f.next()) else { return };
    if start == 0 || end <= start {
        return;
    }
    let text = words.join("\0");
    let len = end - start;
    let n = text.len().min(len - 1);
    // SAFETY: [arg_start, arg_end) is this process's own argument area on its initial stack:
    // mapped, writable, and read by nothing else of ours after launch. It stays NUL-terminated.
    unsafe {
        std::ptr::write_bytes(start as *mut u8, 0, len);
        std::ptr::copy_nonoverlapping(text.as_ptr(), start as *mut u8, n);
    }
}

/// Whether this process runs one thread, so that a forked child may go on running Rust code.
pub fn single_threaded() -> bool {
    stat_fields("self").is_some_and(|f| f.split(' ').nth(17) == Some("1"))
}

/// `/proc/PID/stat` from field 3 (state) on. The command name (field 2) may hold spaces and
/// parentheses: the fields resume after the last ')'.
pub(super) fn stat_fields(pid: &str) -> Option<String> {
    let stat = read_pseudo(format!("/proc/{pid}/stat")).ok()?;
    Some(stat[stat.rfind(')')? + 2..].to_owned())
}

/// Our direct children that belong to this task (not other tasks' supervisors), agent excluded.
pub fn own_leftovers(agent: Pid) -> Vec<Pid> {
    own_children().into_iter().filter(|&p| p != agent && !is_supervisor(p)).collect()
}

/// Fields 3 to 6 of `/proc/PID/stat`: state, parent, process group, session.
pub(super) fn stat_of(pid: i32) -> Option<(char, i32, i32, i32)> {
    let fields = stat_fields(&pid.to_string())?;
    let mut f = fields.split(' ');
    let state = f.next()?.chars().next()?;
    let num = |s: Option<&str>| s?.parse().ok();
    Some((state, num(f.next())?, num(f.next())?, num(f.next())?))
}

fn parent_of(pid: i32) -> Option<i32> {
    stat_of(pid).map(|(_, ppid, _, _)| ppid)
}

/// Send `sig` to a whole process group, ignoring a group that is already gone.
pub fn signal_group(pgid: Pid, sig: Signal) {
    match killpg(pgid, sig) {
        Ok(()) | Err(Errno::ESRCH) => {}
        Err(e) => eprintln!("agentctl supervisor: killpg({pgid}, {sig}): {e}"),
    }
}

/// Whether a signal of ours reaches process `pid`: not one of another user (after a setuid
/// program), which refuses every signal but SIGCONT.
pub fn may_signal(pid: Pid) -> bool {
    kill(pid, None) != Err(Errno::EPERM)
}

/// Send `sig` to one process, ignoring one that has just exited.
pub fn signal_pid(pid: Pid, sig: Signal) {
    match kill(pid, sig) {
        Ok(()) | Err(Errno::ESRCH) => {}
        Err(e) => eprintln!("agentctl supervisor: kill({pid}, {sig}): {e}"),
    }
}

/// Send `sig` through pidfd `fd`: to the process it was opened on, or to none.
pub fn pidfd_send(fd: impl std::os::fd::AsFd, sig: Signal) -> rustix::io::Result<()> {
    let sig = rustix::process::Signal::from_named_raw(sig as i32).expect("a named signal");
    rustix::process::pidfd_send_signal(fd, sig)
}

/// Close every descriptor from `from` up, so nothing the launcher held reaches the agent.
pub fn close_fds_from(from: i32) {
    // SAFETY: close_range only closes descriptors; none of those above `from` are in use yet.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, from as libc::c_uint, libc::c_uint::MAX, 0) };
    if rc != 0 {
        // Kernels before 5.9: walk the open descriptors instead.
        if let Ok(dir) = fs::read_dir("/proc/self/fd") {
            let fds: Vec<i32> = dir.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect();
            for fd in fds.into_iter().filter(|&fd| fd >= from) {
                // SAFETY: closing a descriptor this process does not use any more.
                unsafe { libc::close(fd) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_child_among_descendants() {
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let me = Pid::from_raw(std::process::id() as i32);
        let found = descendants(me);
        assert!(found.contains(&Pid::from_raw(child.id() as i32)), "{found:?}");
        assert_eq!(parent_of(child.id() as i32), Some(me.as_raw()));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
