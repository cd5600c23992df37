"""agentctl beside pueue, the shell and the OS floor, measured in one run; prints one table.

Run through scripts/bench, which builds agentctl, installs pueue and builds helper.c first.
Every figure is a median over repetitions (min-max shown), each peer measured the same way.
Figures 9 (history.py) and 11 (line.py) set agentctl beside itself: a home with a long history
against an empty one, a pool's long line against a short one.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

from common import (
    AGENTCTL, BUILD, GIB, HELPER, PUEUE, PUEUED, ROOT, ROWS, SUMMARIZE, Agentctl, fmt, private_kib, quiet, row, stats,
    wall_ms,
)
from counts import fig_counts
from history import fig_history, fill, take_seeds
from line import fig_line
from notify import fig_notify
from prune import fig_prune
from remote import fig_http
from sandbox import fig_sandbox
from stream import fig_stream


class Pueue:
    """A private pueue daemon: own config, data and socket; shut down and removed at the end."""

    def __init__(self, tmp):
        self.dir = tmp / "pueue"
        (self.dir / "run").mkdir(parents=True)
        self.config = self.dir / "pueue.yml"
        self.config.write_text(
            "shared:\n"
            f"  pueue_directory: {self.dir / 'data'}\n"
            f"  runtime_directory: {self.dir / 'run'}\n"
            "  use_unix_socket: true\n"
            f"  unix_socket_path: {self.dir / 'run' / 'pueue.sock'}\n"
            "daemon:\n"
            "  callback: null\n"
        )

    def __enter__(self):
        subprocess.Popen([PUEUED, "-c", str(self.config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.monotonic() + 30
        while True:
            try:
                self.run("status")
                break
            except subprocess.CalledProcessError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        try:
            self.run("kill", "--all")
        except subprocess.CalledProcessError:
            pass
        try:
            self.run("shutdown")
        except subprocess.CalledProcessError:
            pass

    def cmd(self, *args):
        return [PUEUE, "-c", str(self.config), *args]

    def run(self, *args):
        return quiet(self.cmd(*args)).stdout

    def reset(self):
        self.run("kill", "--all")
        self.run("reset", "--force")
        time.sleep(0.2)

    def daemon_pid(self):
        return int((self.dir / "run" / "pueue.pid").read_text())


def fig_start(ag, pq, tmp, n=40):
    log = tmp / "nohup.log"
    cases = {
        "agentctl": ag.cmd("run", "--async", "--", "true"),
        "pueue": pq.cmd("add", "--immediate", "--", "true"),
        "nohup": ["sh", "-c", f"nohup true >{log} 2>&1 & echo $!"],
        "OS floor": [HELPER, "detach", "true"],
    }
    res = {}
    for name, cmd in cases.items():
        env = ag.env if name == "agentctl" else None
        for _ in range(3):
            quiet(cmd, env=env)
        res[name] = stats([wall_ms(cmd, env=env)[0] for _ in range(n)])
    a = res["agentctl"]["median"]
    row(
        "1. start (run in background until the id is printed)",
        fmt(res["agentctl"], "ms", 2),
        f"pueue {fmt(res['pueue'], 'ms', 2)}; nohup {fmt(res['nohup'], 'ms', 2)}; OS floor {fmt(res['OS floor'], 'ms', 2)}",
        f"{a / res['pueue']['median']:.2f}× pueue, {a / res['OS floor']['median']:.2f}× floor, {a / res['nohup']['median']:.2f}× nohup",
        "≤ 0.5× pueue, ≤ 2× floor",
    )


def fig_slack(ag, pq, tmp, n=10):
    stamp = tmp / "stamp"

    def slack(start, wait):
        stamp.unlink(missing_ok=True)
        handle = start()
        wait(handle)
        returned = time.time_ns()
        return (returned - int(stamp.read_text())) / 1e6

    res = {
        "agentctl": [
            slack(lambda: ag.start(HELPER, "stamp", str(stamp), "0.2"), lambda t: ag.run("await", t))
            for _ in range(n)
        ],
        "pueue": [
            slack(
                lambda: pq.run("add", "--print-task-id", "--", HELPER, "stamp", str(stamp), "0.2").strip(),
                lambda i: pq.run("wait", i),
            )
            for _ in range(n)
        ],
        "shell": [
            slack(
                lambda: quiet(["sh", "-c", f"nohup {HELPER} stamp {stamp} 0.2 >/dev/null 2>&1 & echo $!"]).stdout.strip(),
                lambda pid: quiet(["sh", "-c", f"while kill -0 {pid} 2>/dev/null; do sleep 1; done"]),
            )
            for _ in range(n)
        ],
    }
    res = {k: stats(v) for k, v in res.items()}
    row(
        "2. completion slack (waiter returns − child exited)",
        fmt(res["agentctl"], "ms"),
        f"pueue wait {fmt(res['pueue'], 'ms', 0)}; shell kill -0 loop {fmt(res['shell'], 'ms', 0)}",
        f"{res['pueue']['median'] / res['agentctl']['median']:.0f}× less than pueue",
        "median ≤ 5 ms",
    )


def fig_throughput(ag, pq, tmp, n=200):
    t = time.perf_counter()
    tokens = [ag.start("true") for _ in range(n)]
    for tok in tokens:
        ag.run("await", tok)
    ours = n / (time.perf_counter() - t)

    pq.reset()
    pq.run("parallel", str(n))
    t = time.perf_counter()
    for _ in range(n):
        pq.run("add", "--", "true")
    pq.run("wait")
    theirs = n / (time.perf_counter() - t)

    t = time.perf_counter()
    pids = [quiet(["sh", "-c", "nohup true >/dev/null 2>&1 & echo $!"]).stdout.strip() for _ in range(n)]
    quiet(["sh", "-c", f"for p in {' '.join(pids)}; do while kill -0 $p 2>/dev/null; do sleep 1; done; done"])
    shell = n / (time.perf_counter() - t)
    row(
        f"3. throughput ({n} tasks of `true`, started then all waited for)",
        f"{ours:.0f} tasks/s",
        f"pueue {theirs:.0f} tasks/s; shell {shell:.0f} tasks/s",
        f"{ours / theirs:.1f}× pueue, {ours / shell:.1f}× shell",
        "≥ 3× pueue, ≥ 1.5× shell",
    )


def fig_memory(ag, pq, tmp, n=100):
    tokens = [ag.start("sleep", "600") for _ in range(n)]
    sups = [ag.record(t)["started"]["supervisor_pid"] for t in tokens]
    ours = sum(private_kib(p) for p in sups) / n
    for t in tokens:
        ag.run("halt", t, "--grace", "0.2s")

    pq.reset()
    pq.run("parallel", str(n))
    idle = private_kib(pq.daemon_pid())
    for _ in range(n):
        pq.run("add", "--", "sleep", "600")
    time.sleep(1)
    busy = private_kib(pq.daemon_pid())
    theirs = (busy - idle) / n
    pq.reset()
    # pueue runs tasks from its one daemon: its cost per task is the daemon's growth, which is
    # within measurement noise; its fixed cost is the daemon itself.
    row(
        f"4. private memory per running task ({n} `sleep` tasks)",
        f"{ours:.0f} KiB (the task's own supervisor)",
        f"pueue: daemon {busy / 1024:.1f} MiB in all, {theirs:+.0f} KiB per task",
        f"agentctl's {n} supervisors: {ours * n / 1024:.1f} MiB vs pueue's daemon {busy / 1024:.1f} MiB",
        "≤ 1024 KiB",
    )


def fig_log_capture(ag, pq, tmp, n=3):
    out = tmp / "direct.out"
    direct, ours = [], []
    for _ in range(n):
        direct.append(wall_ms(["sh", "-c", f"{HELPER} write {GIB} > {out}"])[0])
        out.unlink()
        ms, stdout = wall_ms(ag.cmd("--json", "run", "--sync", "--", HELPER, "write", str(GIB)), env=ag.env)
        ours.append(ms)
        log = pathlib.Path(json.loads(stdout)["log_path"])
        keep = tmp / "one-gib.log"
        if not keep.exists():
            log.rename(keep)
        else:
            log.unlink()
    d, a = stats(direct), stats(ours)
    row(
        "5. log capture (agent writes 1 GiB to stdout)",
        fmt(a, "ms", 0),
        f"redirect to a file {fmt(d, 'ms', 0)}",
        f"{d['median'] / a['median']:.2f}× the redirect's speed",
        "≥ 0.95×",
    )


def fig_summary(ag, pq, tmp, n=5):
    log = tmp / "one-gib.log"
    runs = [json.loads(quiet([SUMMARIZE, str(log)]).stdout) for _ in range(n)]
    ms = stats([r["ms"] for r in runs])
    peak = max(r["peak_rss_kib"] for r in runs)
    tail = stats([wall_ms(["tail", "-c", "65536", str(log)])[0] for _ in range(n)])
    row(
        "6. summary of a 1 GiB log",
        f"{fmt(ms, 'ms', 2)}, peak RSS {peak / 1024:.1f} MiB",
        f"`tail -c 64K` (process included) {fmt(tail, 'ms', 2)}",
        "-",
        "≤ 50 ms, ≤ 16 MiB",
    )


def fig_listing(ag, pq, tmp, n=10_000, reps=5):
    # 10 000 finished tasks: real ones, cloned under fresh tokens (see history.fill).
    fill(ag, take_seeds(ag), n, n, time.time_ns() // 1_000_000)
    ours = stats([wall_ms(ag.cmd("--json", "list"), env=ag.env)[0] for _ in range(reps)])

    pq.reset()
    subprocess.run(
        ["xargs", "-P", "4", "-n", "1", "sh", "-c", f'"{PUEUE}" -c "{pq.config}" add --stashed -- true >/dev/null'],
        input="\n".join("x" for _ in range(n)),
        text=True,
        check=True,
    )
    count = len(json.loads(pq.run("status", "--json"))["tasks"])
    theirs = stats([wall_ms(pq.cmd("status", "--json"))[0] for _ in range(reps)])
    pq.reset()
    row(
        f"7. listing {n} tasks as JSON",
        fmt(ours, "ms", 0),
        f"pueue status --json ({count} tasks) {fmt(theirs, 'ms', 0)}",
        f"{ours['median'] / theirs['median']:.2f}× pueue's time",
        "≤ 1× pueue",
    )


def fig_mcp(ag, pq, tmp, n=200):
    import anyio
    from mcp import Client, StdioServerParameters

    token = ag.start("true")
    ag.run("await", token)

    async def measure():
        params = StdioServerParameters(command=AGENTCTL, args=["mcp"], env={"AGENTCTL_HOME": str(ag.home)})
        async with Client(params) as c:
            for _ in range(20):
                await c.call_tool("await", {"token": token})
                await c.list_tools()
            awaits, lists = [], []
            for _ in range(n):
                t = time.perf_counter()
                await c.call_tool("await", {"token": token})
                awaits.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                await c.list_tools()
                lists.append((time.perf_counter() - t) * 1000)
            return stats(awaits), stats(lists)

    aw, ls = anyio.run(measure)
    row(
        "8. MCP round trip (Python SDK client over stdio)",
        f"await (finished task) {aw['median']:.2f} ms, p99 {aw['p99']:.2f} ms",
        f"tools/list {ls['median']:.2f} ms, p99 {ls['p99']:.2f} ms",
        "-",
        "await ≤ 2 ms median",
    )


def fig_slurm(ag, pq, tmp, n=10):
    """A Slurm task's end as its waiter sees it, beside srun's own return (the floor: agentctl
    learns of the end from srun). Needs a cluster: SLURM_CONF's, else a one-node one started
    here as root (scripts/slurm-cluster), stopped after."""
    started = None
    if not os.environ.get("SLURM_CONF"):
        if os.geteuid() != 0 or not shutil.which("slurmctld"):
            row("10. Slurm completion slack", "skipped", "needs SLURM_CONF, or root and Slurm's packages", "-", "-")
            return
        started = BUILD / "slurm"
        os.environ["SLURM_CONF"] = quiet([str(ROOT / "scripts" / "slurm-cluster"), "up", str(started)]).stdout.strip()
    try:
        stamp = tmp / "slurm-stamp"
        ours = Agentctl(tmp, "slurm-home")
        (ours.home / "agents.toml").write_text(
            '[agents.stamp]\nbackend = "slurm"\n'
            f'command = ["sh", "-c", "{HELPER} stamp {stamp} 0.5", "{{question}}"]\n'
        )

        def slack(run):
            stamp.unlink(missing_ok=True)
            run()
            return (time.time_ns() - int(stamp.read_text())) / 1e6

        def agentctl():
            token = json.loads(ours.run("--json", "ask", "stamp", "go", "--async"))["token"]
            ours.run("await", token)

        res = {
            "srun": stats([slack(lambda: quiet(["srun", "--quiet", "--", HELPER, "stamp", str(stamp), "0.5"])) for _ in range(n)]),
            "agentctl": stats([slack(agentctl) for _ in range(n)]),
        }
        a, floor = res["agentctl"]["median"], res["srun"]["median"]
        row(
            "10. Slurm completion slack (waiter returns − agent's last write, on a one-node cluster)",
            f"await {fmt(res['agentctl'], 'ms')}",
            f"srun itself returns {fmt(res['srun'], 'ms')}",
            f"+{a - floor:.1f} ms over srun",
            "≤ 100 ms after the step's end",
        )
    finally:
        if started:
            quiet([str(ROOT / "scripts" / "slurm-cluster"), "down", str(started)])
            del os.environ["SLURM_CONF"]


def machine():
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    mem = next(l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemTotal"))
    kernel = os.uname().release
    pueue = quiet([PUEUE, "--version"]).stdout.strip()
    return f"{os.cpu_count()} × {cpu}, {int(mem) // 1024 // 1024} GiB, Linux {kernel}, {pueue}"


def main():
    figures = [
        fig_start, fig_slack, fig_throughput, fig_memory, fig_log_capture, fig_summary, fig_listing, fig_mcp, fig_history,
        fig_slurm, fig_line, fig_stream, fig_counts, fig_notify,
        fig_prune, fig_http, fig_sandbox,
    ]
    only = set(sys.argv[1:])
    # scripts/bench --against REV: start and throughput of that release too, in this run.
    baseline, baseline_name = os.environ.get("AGENTCTL_BASELINE"), os.environ.get("AGENTCTL_BASELINE_NAME")
    # Homes, pueue's data and the logs live in the system's temp directory, as a user's state
    # would, not in the checkout: a tool watching a source tree can slow each file operation
    # there tenfold, and that would be measured instead of the tools.
    with tempfile.TemporaryDirectory(prefix="agentctl-bench-") as tmp:
        tmp = pathlib.Path(tmp)
        ag = Agentctl(tmp)
        with Pueue(tmp) as pq:
            for i, fig in enumerate(figures, 1):
                if not only or str(i) in only:
                    fig(ag, pq, tmp)
                    if baseline and fig in (fig_start, fig_throughput):
                        # This tree, the baseline twice, this tree again: a machine whose speed
                        # drifts over the minutes of a run favours neither.
                        base = Agentctl(tmp, f"baseline-home-{i}", binary=baseline)
                        for who, label in ((base, baseline_name), (base, baseline_name), (ag, "again")):
                            fig(who, pq, tmp)
                            figure, *rest = ROWS[-1]
                            ROWS[-1] = (f"{figure}, {label}", *rest)
        # Anything still running under agentctl (a failed figure) is halted before cleanup.
        # (Figures 9 to 11 use homes of their own: this one may never have been used.)
        used = (ag.home / "agentctl.db").exists()
        running = json.loads(ag.run("--json", "list", "--status", "running"))["tasks"] if used else []
        for t in running:
            ag.run("halt", t["token"], "--grace", "0.1s")
    lines = [
        f"Machine: {machine()}",
        "",
        "| figure | agentctl | peers | ratio | target |",
        "|---|---|---|---|---|",
        *[f"| {f} | {o} | {p} | {r} | {t} |" for f, o, p, r, t in ROWS],
    ]
    table = "\n".join(lines)
    (BUILD / "table.md").write_text(table + "\n")
    print("\n" + table)


if __name__ == "__main__":
    main()
