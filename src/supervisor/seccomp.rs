//! The system calls a sandboxed agent may not make, as a seccomp program bubblewrap loads
//! (`--seccomp FD`): `socket(AF_UNIX, …)`. A read-only mount does not stop a `connect` to a
//! Unix socket on it, and through one (a tmux server's, the user's D-Bus, Docker's) the agent
//! could have a process outside its sandbox run anything. `socketpair`, which makes a
//! connected pair and reaches nothing, stays allowed (Node.js pipes its children with it).

use std::collections::BTreeMap;
use std::io::Write;
use std::os::fd::OwnedFd;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};

/// The program, as the bytes of its `struct sock_filter`s.
pub fn program() -> Result<Vec<u8>, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| format!("no seccomp program for this machine: {e}"))?;
    let unix = || {
        SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, libc::AF_UNIX as u64)
            .and_then(|c| SeccompRule::new(vec![c]))
            .map_err(|e| e.to_string())
    };
    let mut rules = BTreeMap::new();
    rules.insert(libc::SYS_socket, vec![unix()?]);
    // x86_64's x32 calling convention numbers the same call apart.
    #[cfg(target_arch = "x86_64")]
    rules.insert(libc::SYS_socket | 0x4000_0000, vec![unix()?]);
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)
        .map_err(|e| e.to_string())?;
    let program: BpfProgram = filter.try_into().map_err(|e: seccompiler::BackendError| e.to_string())?;
    Ok(program
        .iter()
        .flat_map(|i| [&i.code.to_ne_bytes()[..], &[i.jt, i.jf], &i.k.to_ne_bytes()[..]].concat())
        .collect())
}

/// A pipe holding `program`, to read from its returned end, which children inherit.
pub fn pipe(program: &[u8]) -> std::io::Result<OwnedFd> {
    let (read, write) = nix::unistd::pipe().map_err(std::io::Error::from)?;
    std::fs::File::from(write).write_all(program)?;
    Ok(read)
}
