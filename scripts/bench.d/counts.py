"""Figure 13: what one task's life costs, in figures that do not depend on the machine's load.

- System calls and fsyncs (fsync + fdatasync): `strace -f -c` over every process of it: for
  agentctl, `run --async -- true` followed until its supervisor exits, an `await` of an ended
  task, and a `notify`; for pueue, `add --immediate -- true` with its daemon traced until the
  task is done (its share: a 1 s window with the task less a 1 s window idle); for the
  shell, `nohup true &`.
- CPU time (user + system): the cgroup (v2) the launcher is started in, which its supervisor
  stays in, from `cpu.stat`, over lives run without strace. The agent itself runs in its task's
  own cgroup and is not counted (it is `true`). pueue: the client's cgroup and its daemon's
  threads' time on CPU (`schedstat`) over the same lives.
"""

import os
import pathlib
import signal
import subprocess
import time

from common import quiet, row, stats

CGROUP_ROOTS = [pathlib.Path("/sys/fs/cgroup/unified"), pathlib.Path("/sys/fs/cgroup")]


def strace_counts(cmd, env=None):
    """(system calls, fsyncs) of `cmd` and everything it starts, until the last of them exits."""
    out = pathlib.Path(f"/tmp/agentctl-bench-strace-{os.getpid()}")
    quiet(["strace", "-f", "-qq", "-c", "-o", str(out), *cmd], env=env)
    counts = parse(out.read_text())
    out.unlink()
    return counts


def daemon_window(pid, cmd=None, window=1.0):
    """(system calls, fsyncs, CPU ms) of running process `pid` (all its threads) over `window`
    seconds from when `cmd` (if any) is run; and (calls, fsyncs) of `cmd` itself."""
    out = pathlib.Path(f"/tmp/agentctl-bench-strace-{os.getpid()}.daemon")
    tracer = subprocess.Popen(
        ["strace", "-f", "-qq", "-c", "-o", str(out), "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    # strace says it attached on stderr, once per thread; without -qq it would say it there.
    time.sleep(0.5)
    cpu0 = threads_ns(pid)
    t0 = time.monotonic()
    own = strace_counts(cmd) if cmd else (0, 0)
    time.sleep(max(0.0, window - (time.monotonic() - t0)))
    cpu = (threads_ns(pid) - cpu0) / 1e6
    tracer.send_signal(signal.SIGINT)
    tracer.wait(timeout=30)
    calls, fsyncs = parse(out.read_text())
    out.unlink()
    return (calls, fsyncs, cpu), own


def parse(summary):
    """Total calls and fsync/fdatasync calls of a `strace -c` table."""
    calls = fsyncs = 0
    for line in summary.splitlines():
        parts = line.split()
        if len(parts) < 5 or not parts[3].isdigit():
            continue
        name = parts[-1]
        if name == "total":
            calls = int(parts[3])
        elif name in ("fsync", "fdatasync"):
            fsyncs += int(parts[3])
    return calls, fsyncs


class Cgroup:
    """A v2 cgroup of its own for the processes measured; removed on leaving `with`."""

    def __init__(self, name):
        root = next((r for r in CGROUP_ROOTS if (r / "cgroup.procs").exists()), None)
        self.path = root / f"agentctl-bench-{name}-{os.getpid()}" if root else None

    def __enter__(self):
        if self.path:
            self.path.mkdir()
        return self

    def __exit__(self, *exc):
        if self.path:
            end = time.monotonic() + 30
            while self.populated() and time.monotonic() < end:
                time.sleep(0.02)
            try:
                self.path.rmdir()
            except OSError:
                pass

    def enter(self):
        """For `preexec_fn`: the child joins it before it runs."""
        path = self.path

        def join():
            if path:
                (path / "cgroup.procs").write_text("0")

        return join

    def populated(self):
        return self.path and "populated 1" in (self.path / "cgroup.events").read_text()

    def cpu_us(self):
        """User + system CPU of everything that ran in it, once it is empty."""
        end = time.monotonic() + 30
        while self.populated() and time.monotonic() < end:
            time.sleep(0.02)
        stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
        return int(stat["usage_usec"])


def threads_ns(pid):
    """Time on CPU of every thread of `pid` (ns)."""
    total = 0
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        total += int((task / "schedstat").read_text().split()[0])
    return total


def fig_counts(ag, pq, tmp, n=20):
    if not shutil_which("strace"):
        row("13. system calls, fsyncs and CPU per task life", "strace is not installed", "", "", "")
        return
    env = dict(ag.env)
    ended = ag.start("true")
    ag.run("await", ended)
    # The store's log is emptied every few tasks (three syncs then): lives in a row, averaged.
    lives = [strace_counts(ag.cmd("run", "--async", "--", "true"), env=env) for _ in range(n)]
    ours = (sum(c for c, _ in lives) / n, sum(f for _, f in lives) / n)
    awaited = strace_counts(ag.cmd("await", ended), env=env)
    notified = strace_counts(ag.cmd("notify", "--session", "bench-counts", "hello"), env=env)

    pq.reset()
    daemon = pq.daemon_pid()
    # The daemon's share: a window with the task, less the same window idle.
    (idle_calls, _, idle_cpu), _ = daemon_window(daemon)
    (busy_calls, busy_fsyncs, busy_cpu), client = daemon_window(daemon, pq.cmd("add", "--immediate", "--", "true"))
    theirs = (client[0] + max(0, busy_calls - idle_calls), client[1] + busy_fsyncs)
    daemon_cpu = max(0.0, busy_cpu - idle_cpu)
    shell = strace_counts(["sh", "-c", "nohup true >/dev/null 2>&1 &"])

    # CPU, without strace: lives one after another, each in the cgroup.
    cpu_ours = []
    for _ in range(n):
        with Cgroup("agentctl") as cg:
            if not cg.path:
                break
            subprocess.run(ag.cmd("run", "--async", "--", "true"), env=env, preexec_fn=cg.enter(), check=True,
                           stdout=subprocess.DEVNULL)
            cpu_ours.append(cg.cpu_us() / 1000)
    cpu_theirs = []
    for _ in range(n):
        with Cgroup("pueue") as cg:
            if not cg.path:
                break
            subprocess.run(pq.cmd("add", "--immediate", "--", "true"), preexec_fn=cg.enter(), check=True,
                           stdout=subprocess.DEVNULL)
            cpu_theirs.append(cg.cpu_us() / 1000 + daemon_cpu)
    cpu = f"; CPU {stats(cpu_ours)['median']:.2f} ms" if cpu_ours else ""
    cpu_p = f"; CPU {stats(cpu_theirs)['median']:.2f} ms" if cpu_theirs else ""
    row(
        "13. per task life: system calls, fsyncs (strace -f -c) and CPU (user + system)",
        f"run {ours[0]:.0f} calls, {ours[1]:.2f} fsyncs (mean of {n} lives){cpu}; await of an ended task {awaited[0]} calls, "
        f"{awaited[1]} fsyncs; notify {notified[0]} calls, {notified[1]} fsyncs",
        f"pueue add --immediate (client, and its daemon's share over 1 s less 1 s idle) {theirs[0]} calls, "
        f"{theirs[1]} fsyncs{cpu_p}; "
        f"shell nohup {shell[0]} calls, {shell[1]} fsyncs",
        f"{ours[0] / max(theirs[0], 1):.2f}× pueue's calls",
        "≤ 365 calls (half of 730), ≤ 2 fsyncs",
    )


def shutil_which(name):
    import shutil

    return shutil.which(name)


