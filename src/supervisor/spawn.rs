//! The one step that starts a run's process (the agent, or what its backend runs it through).
//!
//! The agent is started the way `posix_spawn` starts a program: a child that shares our memory
//! (`CLONE_VM | CLONE_VFORK`) on a stack of its own, doing only system calls until it executes
//! the agent, while we wait. A fork would copy our page tables for a child that keeps none of
//! them, and make us fault on every page we write afterwards. `posix_spawn` itself cannot be
//! used: it has no way to set the parent-death signal, which is what kills the agent with a
//! killed supervisor.

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

use nix::sys::wait::waitpid;
use nix::unistd::Pid;

use super::backend::Backend;
use super::sandbox::Roads;
use crate::task::{TaskCgroup, TaskSpec};

/// Start the agent in its own process group (and `cgroup`), output to `log`, input from `stdin`
/// (else nothing), nothing else inherited.
pub(super) fn spawn_agent(
    log: &File,
    stdin: Option<&OwnedFd>,
    spec: &TaskSpec,
    cgroup: Option<&TaskCgroup>,
    backend: &dyn Backend,
    roads: Option<Roads>,
) -> std::result::Result<Pid, String> {
    let name = &spec.argv[0];
    let null = File::open("/dev/null").map_err(|e| format!("cannot open /dev/null: {e}"))?;
    let exec = Exec::new(spec, backend, roads).map_err(|e| format!("cannot run `{name}`: {e}"))?;
    let joins = cgroup.map(super::cgroup::join_files).transpose()?.unwrap_or_default();
    let mut join = [-1; MAX_JOINS];
    for (slot, f) in join.iter_mut().zip(&joins) {
        *slot = f.as_raw_fd();
    }
    // Born in its v2 cgroup where the kernel can (clone3): the child then joins only v1 ones.
    let v2_dir = cgroup.and_then(|cg| File::open(&cg.path).ok());
    let mut child = Child {
        exec: &exec,
        join,
        joined: AtomicI32::new(MAX_JOINS as i32),
        stdin: stdin.map_or(null.as_raw_fd(), |fd| fd.as_raw_fd()),
        log: log.as_raw_fd(),
        supervisor: std::process::id() as libc::pid_t,
        nofile: AGENT_NOFILE.load(Ordering::Relaxed),
        ignored: ignored_signals(),
        errno: AtomicI32::new(0),
    };
    // Reserved, not zeroed: the child touches only the few pages at the top, and zeroing the
    // rest would fault them all in on every start.
    let mut stack = Vec::<u8>::with_capacity(CHILD_STACK);
    // The stack grows down from its 16-byte aligned top.
    let base = (stack.as_mut_ptr() as usize + 15) & !15;
    let top = (stack.as_mut_ptr() as usize + CHILD_STACK) & !15;
    // No signal handler may run in the child, on memory it shares with us: block everything
    // until it has set every action back to the default.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    let born_in_cgroup;
    // SAFETY: sigset operations on local sets; clone runs `start` on its own stack with `child`,
    // which outlives it (CLONE_VFORK: we resume only once the child has executed or exited).
    let pid = unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let into = v2_dir.as_ref().and_then(|dir| {
            child.join[0] = -1;
            let arg = &child as *const Child as *mut libc::c_void;
            let born = clone_into_cgroup(start, base, top - base, arg, dir.as_raw_fd());
            // Not available (an older kernel, a seccomp filter): the child joins it itself.
            child.join[0] = joins.first().map_or(-1, |f| f.as_raw_fd());
            born
        });
        born_in_cgroup = into.is_some();
        let pid = into.unwrap_or_else(|| {
            libc::clone(
                start,
                top as *mut libc::c_void,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                &child as *const Child as *mut libc::c_void,
            )
        });
        let spawn_error = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid == -1 {
            return Err(format!("cannot run `{name}`: {spawn_error}"));
        }
        pid
    };
    drop(stack);
    let pid = Pid::from_raw(pid);
    match child.errno.load(Ordering::SeqCst) {
        0 => Ok(pid),
        errno => {
            let _ = waitpid(pid, None);
            let error = io::Error::from_raw_os_error(errno);
            // The cgroups written so far (the v2 one aside for a child born in it).
            let joined = child.joined.load(Ordering::SeqCst) as usize + usize::from(born_in_cgroup);
            match cgroup.filter(|_| joined < joins.len()) {
                Some(cg) => {
                    let dir = std::iter::once(&cg.path).chain(&cg.v1).nth(joined).unwrap_or(&cg.path);
                    Err(format!("cannot move the agent into its cgroup {}: {error}", dir.display()))
                }
                None => Err(format!("cannot run `{name}`: {error}")),
            }
        }
    }
}

/// The most cgroup directories an agent joins: v2, and v1 memory, cpu and pids.
const MAX_JOINS: usize = 4;

/// `struct clone_args` of `clone3`, up to `cgroup` (Linux 5.7).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// Start `f(arg)` as a child that shares our memory (`CLONE_VM | CLONE_VFORK`, as `clone` above)
/// on the stack `[base, base + size)`, born in the cgroup whose directory is open as `dir`
/// (`CLONE_INTO_CGROUP`): moving it there afterwards would cost a quarter of a millisecond,
/// the kernel waiting for an RCU grace period. `None` where clone3 or the flag is refused.
///
/// # Safety
/// As for `clone`: `f` must only make system calls until it executes or exits, `arg` must
/// outlive it, and the stack must be ours and 16-byte aligned at `base + size`.
#[cfg(target_arch = "x86_64")]
unsafe fn clone_into_cgroup(
    f: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    base: usize,
    size: usize,
    arg: *mut libc::c_void,
    dir: libc::c_int,
) -> Option<libc::pid_t> {
    const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
    let args = CloneArgs {
        flags: (libc::CLONE_VM | libc::CLONE_VFORK) as u64 | CLONE_INTO_CGROUP,
        exit_signal: libc::SIGCHLD as u64,
        stack: base as u64,
        stack_size: size as u64,
        cgroup: dir as u64,
        ..CloneArgs::default()
    };
    let mut ret = libc::SYS_clone3;
    // SAFETY: the caller's promises. The child resumes after `syscall` with rax = 0 on its new
    // stack, where nothing of ours may be used: it calls `f(arg)` from registers and exits with
    // what `f` returns. The parent (rax = pid or -errno) goes on at `2:`, its stack untouched.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "mov rdi, r12",
            "call r13",
            "mov edi, eax",
            "mov eax, {exit}",
            "syscall",
            "ud2",
            "2:",
            exit = const libc::SYS_exit,
            inout("rax") ret,
            in("rdi") &args as *const CloneArgs,
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") arg,
            in("r13") f as usize,
            out("rcx") _,
            out("r11") _,
        );
    }
    (ret > 0).then_some(ret as libc::pid_t)
}

/// Elsewhere the child joins its cgroup itself.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn clone_into_cgroup(
    _f: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    _base: usize,
    _size: usize,
    _arg: *mut libc::c_void,
    _dir: libc::c_int,
) -> Option<libc::pid_t> {
    None
}

const CHILD_STACK: usize = 64 * 1024;

/// The descriptor limit the supervisor started with, given back to the agent (0: unchanged).
pub(super) static AGENT_NOFILE: AtomicU64 = AtomicU64::new(0);

/// What the child needs, prepared beforehand: it may not allocate.
struct Child<'a> {
    exec: &'a Exec,
    /// The `cgroup.procs` files the child writes itself into (-1: none), and how many it has.
    join: [libc::c_int; MAX_JOINS],
    joined: AtomicI32,
    stdin: libc::c_int,
    log: libc::c_int,
    supervisor: libc::pid_t,
    /// The descriptor limit to give the agent (0: as it is).
    nofile: libc::rlim_t,
    /// The signals to set back to their default action (bit `n - 1` for signal `n`).
    ignored: u64,
    /// Why the agent could not be started, written by the child before it exits.
    errno: AtomicI32,
}

/// A program, its arguments and environment as C arrays, plus the `sh` fallback `execvp` makes
/// for a file that is no binary and has no `#!` line.
struct Exec {
    program: CString,
    cwd: CString,
    _strings: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    sh_argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    /// The seccomp program's pipe, open until the child has it.
    _seccomp: Option<OwnedFd>,
    /// The agent's ends of its sandbox's roads, open until the child has them.
    _roads: Option<Roads>,
}

impl Exec {
    fn new(spec: &TaskSpec, backend: &dyn Backend, roads: Option<Roads>) -> io::Result<Exec> {
        let c = |bytes: &[u8]| {
            CString::new(bytes).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in an argument"))
        };
        let program = spec.program.clone().unwrap_or_else(|| spec.argv[0].clone().into());
        // In its sandbox, bubblewrap runs the agent, with the seccomp program it reads from a
        // pipe the child inherits.
        let (program, argv, seccomp) = match &spec.sandbox {
            Some(sandbox) => {
                let pipe = super::seccomp::pipe(&super::seccomp::program().map_err(io::Error::other)?)?;
                let fd = pipe.as_raw_fd();
                let network = roads.as_ref().and_then(|r| r.network.as_ref()).map(|(fd, plan)| (fd.as_raw_fd(), plan));
                let (program, argv) = super::sandbox::command(sandbox, &program, &spec.argv, &spec.cwd, fd, network)
                    .map_err(|e| io::Error::new(io::ErrorKind::NotFound, e))?;
                (program, argv, Some(pipe))
            }
            None => (program, spec.argv.clone(), None),
        };
        let program = c(program.as_os_str().as_bytes())?;
        let cwd = c(spec.cwd.as_os_str().as_bytes())?;
        // The launcher's environment (in a sandbox, the variables it lets through), with the
        // task's variables on top.
        let mut env: BTreeMap<OsString, OsString> = std::env::vars_os()
            .filter(|(k, _)| spec.sandbox.as_ref().is_none_or(|s| super::sandbox::passes(s, &k.to_string_lossy())))
            .collect();
        if spec.worktree.is_some() {
            // Its git works on its own worktree, not whatever repository the launcher's
            // caller (a git hook, say) pointed at.
            for v in crate::worktree::REPO_VARIABLES {
                env.remove(OsStr::new(v));
            }
        }
        backend.environment(&mut env);
        env.extend(spec.env.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))));
        if let Some(roads) = &roads {
            env.insert(crate::ops::gateway::FD_VARIABLE.into(), roads.gateway.as_raw_fd().to_string().into());
            let proxy = roads.network.iter().flat_map(|(_, plan)| plan.environment());
            env.extend(proxy.map(|(k, v)| (OsString::from(k), OsString::from(v))));
        }
        let args = argv.iter().map(|a| c(a.as_bytes())).collect::<io::Result<Vec<_>>>()?;
        let vars = env
            .into_iter()
            .map(|(k, v)| {
                let mut kv = k.into_vec();
                kv.push(b'=');
                kv.extend(v.into_vec());
                c(&kv)
            })
            .collect::<io::Result<Vec<_>>>()?;
        let sh = c(b"/bin/sh")?;
        let terminated = |v: &[&CString]| v.iter().map(|s| s.as_ptr()).chain([std::ptr::null()]).collect::<Vec<_>>();
        let argv = terminated(&args.iter().collect::<Vec<_>>());
        let sh_argv = terminated(&[&sh, &program].into_iter().chain(args.iter().skip(1)).collect::<Vec<_>>());
        let envp = terminated(&vars.iter().collect::<Vec<_>>());
        // The pointers point into the strings' heap buffers, which do not move with the Vecs.
        let mut strings = args;
        strings.extend(vars);
        strings.push(sh);
        Ok(Exec { program, cwd, _strings: strings, argv, sh_argv, envp, _seccomp: seccomp, _roads: roads })
    }
}

/// The child: system calls only, then the agent. Its errors go to `Child::errno`.
extern "C" fn start(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Child` the parent keeps alive until we have executed or exited.
    let c = unsafe { &*(arg as *const Child) };
    // SAFETY: each call is a plain system call on this child's own descriptors and state.
    unsafe {
        reset_dispositions(c.ignored);
        if libc::dup2(c.stdin, 0) == -1 || libc::dup2(c.log, 1) == -1 || libc::dup2(c.log, 2) == -1 {
            fail(c);
        }
        if libc::chdir(c.exec.cwd.as_ptr()) == -1 || libc::setpgid(0, 0) == -1 {
            fail(c);
        }
        // Into the task's cgroup before anything runs: all it starts is born there. ("0" is
        // the writer itself.)
        c.joined.store(0, Ordering::SeqCst);
        for &fd in c.join.iter().filter(|&&fd| fd >= 0) {
            if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                fail(c);
            }
            c.joined.fetch_add(1, Ordering::SeqCst);
        }
        c.joined.store(MAX_JOINS as i32, Ordering::SeqCst);
        // The agent dies with its supervisor rather than running on unsupervised.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if c.nofile != 0 {
            let mut limit: libc::rlimit = std::mem::zeroed();
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
            limit.rlim_cur = c.nofile;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
        if libc::getppid() != c.supervisor {
            libc::_exit(1);
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        libc::execve(c.exec.program.as_ptr(), c.exec.argv.as_ptr(), c.exec.envp.as_ptr());
        if io::Error::last_os_error().raw_os_error() == Some(libc::ENOEXEC) {
            libc::execve(c.exec.sh_argv[0], c.exec.sh_argv.as_ptr(), c.exec.envp.as_ptr());
        }
    }
    fail(c)
}

/// Report the last error to the parent and end the child.
fn fail(c: &Child) -> ! {
    c.errno.store(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO), Ordering::SeqCst);
    // SAFETY: leaving the child without touching anything shared.
    unsafe { libc::_exit(127) }
}

/// Set the signals of `ignored` back to their default action. Exec resets caught signals but
/// keeps ignored ones, so an agentctl started under `nohup` (or a runner that ignores SIGTERM)
/// would hand its agents a SIGTERM they cannot receive; no handler of ours can run in the child
/// (every signal is blocked until it executes). The raw system call also reaches the two
/// real-time signals libc reserves for itself. Async-signal-safe.
fn reset_dispositions(ignored: u64) {
    // The kernel's `struct sigaction` all zero: SIG_DFL, no flags, no restorer, empty mask.
    let default = [0u64; 4];
    for sig in (1..=64).filter(|&sig| ignored & (1 << (sig - 1)) != 0) {
        if sig != libc::SIGKILL && sig != libc::SIGSTOP {
            // SAFETY: the kernel reads 32 bytes of `default` (8-byte mask); no old action is
            // returned.
            unsafe {
                libc::syscall(libc::SYS_rt_sigaction, sig, default.as_ptr(), std::ptr::null_mut::<u64>(), 8usize);
            }
        }
    }
}

/// The signals this process ignores (`SigIgn` of `/proc/self/status`), read once: every signal
/// if it cannot be read.
fn ignored_signals() -> u64 {
    static IGNORED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *IGNORED.get_or_init(|| {
        let status = super::unix::read_pseudo("/proc/self/status").unwrap_or_default();
        let mask = status.lines().find_map(|l| l.strip_prefix("SigIgn:")).map(str::trim);
        mask.and_then(|m| u64::from_str_radix(m, 16).ok()).unwrap_or(u64::MAX)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signals_ignored_here_are_read() {
        // The test harness, as Rust programs do, ignores SIGPIPE.
        assert_ne!(ignored_signals() & (1 << (libc::SIGPIPE - 1)), 0);
        assert_ne!(ignored_signals(), u64::MAX);
    }
}
