"""Figure 17: a task in a sandbox. `run --sync -- true` without a sandbox, in a profile (a
writable directory, a hidden one, no network) and in one with a network allow-list (its proxy
and forwards set up inside), beside bubblewrap running `true` with the same namespaces and
mounts and the OS running it bare: what a sandbox adds to a task, and how much of that is bubblewrap's."""

import shutil

from common import Agentctl, fmt, quiet, row, stats, wall_ms
from counts import strace_counts

BWRAP = ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
         "--disable-userns", "--cap-drop", "ALL", "--unshare-net", "--ro-bind", "/", "/", "--dev", "/dev",
         "--proc", "/proc"]


def fig_sandbox(ag, pq, tmp, n=40):
    bwrap = shutil.which("bwrap")
    if not bwrap:
        row("17. a task in a sandbox", "skipped: bubblewrap is not installed", "", "", "")
        return
    home = Agentctl(tmp, "sandbox-home", binary=ag.binary)
    work = tmp / "sandbox-work"
    (work / "hidden").mkdir(parents=True, exist_ok=True)
    (home.home / "agents.toml").write_text(
        f'[sandboxes.fenced]\nwrite = ["{work}"]\nhide = ["{work}/hidden"]\nnetwork = "none"\n\n'
        f'[sandboxes.listed]\nwrite = ["{work}"]\nnetwork = ["127.0.0.1:9", "api.example.com:443"]\n'
    )
    cases = {
        "none": home.cmd("run", "--sync", "--sandbox", "none", "--", "true"),
        "fenced": home.cmd("run", "--sync", "--sandbox", "fenced", "--", "true"),
        "listed": home.cmd("run", "--sync", "--sandbox", "listed", "--", "true"),
        # The same namespaces and mounts as `fenced`, with nothing of agentctl's.
        "bwrap": [bwrap, *BWRAP, "--bind", str(work), str(work), "--tmpfs", str(home.home), "--tmpfs",
                  str(work / "hidden"), "--remount-ro", str(home.home), "--remount-ro", str(work / "hidden"),
                  "--", "/bin/true"],
        "OS": ["/bin/true"],
    }
    res = {}
    for name, cmd in cases.items():
        env = home.env if cmd[0] == home.binary else None
        for _ in range(3):
            quiet(cmd, env=env, cwd=work)
        res[name] = stats([wall_ms(cmd, env=env, cwd=work)[0] for _ in range(n)])
    m = {k: v["median"] for k, v in res.items()}
    # System calls, which load does not change: what agentctl's own part of a sandbox costs.
    calls = {k: strace_counts(cases[k], env=home.env if k != "bwrap" else None)[0] for k in ("none", "fenced", "bwrap")}
    row(
        "17. a task in a sandbox (`run --sync -- true`)",
        f"fenced {fmt(res['fenced'], 'ms', 1)}; allow-list {fmt(res['listed'], 'ms', 1)}",
        f"no sandbox {fmt(res['none'], 'ms', 1)}; bubblewrap alone {fmt(res['bwrap'], 'ms', 1)}; "
        f"the OS alone {fmt(res['OS'], 'ms', 1)}",
        f"the sandbox adds {m['fenced'] - m['none']:.1f} ms ({(m['fenced'] - m['none']) / (m['bwrap'] - m['OS']):.1f}× "
        f"bubblewrap's own), the allow-list {m['listed'] - m['fenced']:.1f} ms more; system calls: "
        f"{calls['fenced']} fenced, {calls['none']} without, {calls['bwrap']} bubblewrap alone",
        "≤ 2× bubblewrap's own",
    )
