//! Running an agent in its sandbox, with bubblewrap (`bwrap`, Debian's `bubblewrap`): a
//! mount namespace whose root is the machine's, read-only, with the profile's `write` paths
//! bound writable (`/tmp` too only if listed), its `hide` paths and the home emptied; a user namespace
//! without capabilities that cannot make another (no `mount`, no `unshare`, no `ptrace` of
//! anything outside); a PID namespace, so that it sees only its own processes; and with
//! `network = "none"`, a network namespace with only a loopback of its own.
//!
//! bubblewrap rather than namespaces and Landlock set up here: hiding a directory inside a
//! readable tree, and an empty home, need a mount namespace, which Landlock alone cannot give,
//! and bubblewrap is the setup Flatpak and the agent CLIs' own sandboxes rely on.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use super::network::{self, Plan};
use crate::error::{Error, Result};
use crate::store::Store;
use crate::task::{Network, Sandbox, TaskSpec, Token};

/// Where bubblewrap is: `AGENTCTL_BWRAP` (empty: nowhere), else the first of the places a
/// distribution installs it, else `PATH`'s absolute directories.
fn bwrap() -> Option<PathBuf> {
    static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            if let Some(set) = std::env::var_os("AGENTCTL_BWRAP") {
                return Some(PathBuf::from(set)).filter(|p| p.is_absolute() && p.is_file());
            }
            let path = std::env::var_os("PATH").unwrap_or_default();
            ["/usr/bin", "/bin", "/usr/local/bin"]
                .into_iter()
                .map(PathBuf::from)
                .chain(std::env::split_paths(&path).filter(|d| d.is_absolute()))
                .map(|d| d.join("bwrap"))
                .find(|p| p.is_file())
        })
        .clone()
}

/// Refuse a sandbox this machine cannot give, saying what is missing: bubblewrap, or the
/// namespaces it needs. Tried once per process (an MCP server starts many) and, once it worked,
/// once per boot for `home` (its `sandbox.ok` says which boot and which bubblewrap): trying
/// costs as much as the rest of a start. A machine that loses user namespaces later still never
/// runs an agent unfenced: bubblewrap then fails its start.
pub fn available(home: &Path) -> Result<()> {
    static TRIED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    let tried = TRIED.get_or_init(|| {
        let mark = home.join("sandbox.ok");
        let worked = bwrap().zip(boot()).map(|(b, boot)| format!("{boot} {}\n", b.display()));
        if worked.as_ref().is_some_and(|w| std::fs::read_to_string(&mark).is_ok_and(|m| m == *w)) {
            return Ok(());
        }
        try_bwrap().map_err(|e| e.message(crate::error::Frontend::Cli))?;
        if let Some(w) = worked {
            // Another boot's, or another bubblewrap's, goes.
            let _ = std::fs::remove_file(&mark);
            let _ = crate::store::files::create(&mark, w.as_bytes());
        }
        Ok(())
    });
    tried.clone().map_err(Error::Usage)
}

/// This boot's id, and the settings that turn user namespaces off as they are now: what a
/// preflight that worked holds for.
fn boot() -> Option<String> {
    let read = |p: &str| super::unix::read_pseudo(p).map(|t| t.trim().to_owned()).unwrap_or_default();
    let boot = read("/proc/sys/kernel/random/boot_id");
    let settings = [
        "/proc/sys/user/max_user_namespaces",
        "/proc/sys/kernel/unprivileged_userns_clone",
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
    ]
    .map(read);
    (!boot.is_empty()).then(|| format!("{boot} {}", settings.join(" ")))
}

fn try_bwrap() -> Result<()> {
    let Some(bwrap) = bwrap() else {
        return Err(Error::Usage(
            "a sandbox needs bubblewrap (`bwrap`), which is not installed (nor named by AGENTCTL_BWRAP): \
             install Debian's or your distribution's `bubblewrap` package, or run the task without a \
             sandbox (`--sandbox none`)"
                .into(),
        ));
    };
    let tried = Command::new(&bwrap)
        .args(NAMESPACES)
        .args(["--unshare-net", "--ro-bind", "/", "/", "--proc", "/proc", "--", "/bin/true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| Error::Usage(format!("cannot run {}: {e}", bwrap.display())))?;
    match tried.status.success() {
        true => Ok(()),
        false => Err(Error::Usage(format!(
            "this machine cannot make a sandbox: {} says: {} (user namespaces may be turned off: \
             see `sysctl user.max_user_namespaces` and kernel.unprivileged_userns_clone)",
            bwrap.display(),
            String::from_utf8_lossy(&tried.stderr).trim()
        ))),
    }
}

/// What a sandboxed agent's process inherits from its supervisor: its road to the lead, and
/// with an allow-list, the one its listening sockets come back on (`network`), with the plan.
pub(super) struct Roads {
    pub gateway: OwnedFd,
    pub network: Option<(OwnedFd, Plan)>,
}

/// The roads of a task whose spec has a sandbox (none otherwise), for `spawn_agent`.
pub(super) fn roads(store: &Store, token: Token, spec: &TaskSpec) -> std::result::Result<Option<Roads>, String> {
    let Some(sandbox) = &spec.sandbox else { return Ok(None) };
    let gateway =
        super::gateway::open(store, token).map_err(|e| format!("cannot open its sandbox's road to the lead: {e}"))?;
    let network = match Plan::of(sandbox) {
        Some(plan) => {
            let road = network::open(plan.clone()).map_err(|e| format!("cannot open its sandbox's network: {e}"))?;
            Some((road, plan))
        }
        None => None,
    };
    Ok(Some(Roads { gateway, network }))
}

/// The namespaces every sandbox has, and what it may not do in them.
// Not `--die-with-parent`: a halt's SIGTERM reaches bubblewrap with the agent, and the agent
// must get its grace, not the SIGKILL bubblewrap's death would bring it.
const NAMESPACES: &[&str] = &[
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--disable-userns",
    "--cap-drop",
    "ALL",
];

/// The program and argv that run `program` (with `argv`'s arguments) in `sandbox`, in `cwd`,
/// with the seccomp program bubblewrap reads from descriptor `seccomp`, and for an allow-list,
/// agentctl's own first step (`network::enter`) handing its sockets back on descriptor
/// `network.0`.
pub(super) fn command(
    sandbox: &Sandbox,
    program: &Path,
    argv: &[String],
    cwd: &Path,
    seccomp: i32,
    network: Option<(i32, &Plan)>,
) -> std::result::Result<(PathBuf, Vec<String>), String> {
    let bwrap = bwrap().ok_or("bubblewrap (bwrap) is needed, and no longer found")?;
    let agentctl = match network {
        Some(_) => Some(own_program().ok_or("its network needs agentctl's own program, which is gone")?),
        None => None,
    };
    let mut args: Vec<String> = vec![bwrap.to_string_lossy().into_owned()];
    args.extend(NAMESPACES.iter().map(|s| s.to_string()));
    args.extend(["--seccomp".into(), seccomp.to_string()]);
    if sandbox.network != Network::Host {
        args.push("--unshare-net".into());
    }
    args.extend(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"].map(String::from));
    // Its answer file, which a retry or a follow-up removed, is there again to bind.
    for file in sandbox.write.iter().filter(|w| w.starts_with(&sandbox.home) && !w.exists()) {
        let _ = crate::store::files::open(file, crate::store::files::Access::ReadWriteCreate);
    }
    // Mounted shallowest first, so that a path inside another gets its own say.
    let mut mounts: Vec<(&Path, Mount)> = vec![(sandbox.home.as_path(), Mount::Hide)];
    mounts.extend(sandbox.write.iter().map(|p| (p.as_path(), Mount::Write)));
    // A repository it may write stays one whose configuration it cannot change: agentctl runs
    // git there after it (a hook or `core.fsmonitor` would run outside the sandbox).
    let gits: Vec<PathBuf> = sandbox.write.iter().map(|p| p.join(".git")).filter(|g| g.exists()).collect();
    mounts.extend(gits.iter().map(|g| (g.as_path(), Mount::Read)));
    mounts.extend(sandbox.read.iter().chain(&agentctl).map(|p| (p.as_path(), Mount::Read)));
    mounts.extend(sandbox.hide.iter().map(|p| (p.as_path(), Mount::Hide)));
    mounts.sort_by_key(|(p, _)| p.components().count());
    for (path, how) in mounts {
        let p = path.to_string_lossy().into_owned();
        match how {
            Mount::Write => args.extend(["--bind".into(), p.clone(), p]),
            Mount::Read => args.extend(["--ro-bind".into(), p.clone(), p]),
            Mount::Hide if path.is_dir() => args.extend(["--tmpfs".into(), p]),
            Mount::Hide => args.extend(["--ro-bind".into(), "/dev/null".into(), p]),
        }
    }
    // What it cannot see it cannot write either (once what is bound inside is in place).
    for hidden in std::iter::once(&sandbox.home).chain(&sandbox.hide).filter(|p| p.is_dir()) {
        args.extend(["--remount-ro".into(), hidden.to_string_lossy().into_owned()]);
    }
    args.extend(["--chdir".into(), cwd.to_string_lossy().into_owned(), "--".into()]);
    if let (Some(agentctl), Some((fd, plan))) = (&agentctl, network) {
        let listens: Vec<String> = plan.listens().iter().map(|a| a.to_string()).collect();
        args.extend([agentctl.to_string_lossy().into_owned(), network::COMMAND.into(), fd.to_string()]);
        args.extend([listens.join(","), "--".into()]);
    }
    args.push(program.to_string_lossy().into_owned());
    args.extend(argv.iter().skip(1).cloned());
    Ok((bwrap, args))
}

/// This program's path, for the sandbox to run it as the agent's first step: where it was
/// started from, or the agentctl installed there since (an upgrade replaces the file, and the
/// kernel then names the old one `PATH (deleted)`).
fn own_program() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    if exe.exists() {
        return Some(exe);
    }
    let text = exe.to_str()?;
    Some(PathBuf::from(text.strip_suffix(" (deleted)")?)).filter(|p| p.exists())
}

#[derive(Clone, Copy)]
enum Mount {
    Write,
    Read,
    Hide,
}

/// Whether variable `name` reaches an agent in `sandbox` (agentctl's own always do).
pub fn passes(sandbox: &Sandbox, name: &str) -> bool {
    sandbox.env.as_ref().is_none_or(|keep| name.starts_with("AGENTCTL_") || keep.iter().any(|k| k == name))
}

/// What the sandbox seems to have refused the agent, as its output says it (a write that found
/// a read-only file system, a call not permitted, a network unreachable), for the task's note:
/// how many such lines, and the first three that differ, each cut short.
pub fn refusals(output: &[u8]) -> Option<String> {
    const SIGNS: [&str; 5] = [
        "Read-only file system",
        "Operation not permitted",
        "Permission denied",
        "Network is unreachable",
        "Connection refused",
    ];
    let text = String::from_utf8_lossy(output);
    let mut shown: Vec<String> = Vec::new();
    let mut count = 0;
    for line in text.lines().filter(|l| SIGNS.iter().any(|s| l.contains(s))) {
        count += 1;
        let line = crate::task::one_line_preview(line.trim(), 120);
        if shown.len() < 3 && !shown.contains(&line) {
            shown.push(line);
        }
    }
    (count > 0).then(|| format!("its sandbox refused it {count} time(s), by its output: {}", shown.join(" | ")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn refusals_are_counted_from_the_output_and_the_first_three_shown() {
        let out = b"ok\nsh: 1: cannot create /etc/x: Read-only file system\nfine\ncat: k: Permission denied\n\
                    sh: 1: cannot create /etc/x: Read-only file system\nconnect: Network is unreachable\nmore\n";
        let note = super::refusals(out).unwrap();
        assert!(
            note.starts_with("its sandbox refused it 4 time(s), by its output: sh: 1: cannot create /etc/x"),
            "{note}"
        );
        assert!(note.contains(" | cat: k: Permission denied | connect: Network is unreachable"), "{note}");
        assert_eq!(super::refusals(b"all good\n"), None);
    }
}
