"""What every figure of scripts/bench shares: paths, timing, statistics, the table's rows, and
agentctl with a home of its own."""

import contextlib
import json
import os
import pathlib
import sqlite3
import statistics
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = ROOT / "target" / "bench"
# Built by scripts/bench as scripts/install builds it (statically linked on Linux with glibc).
RELEASE = pathlib.Path(os.environ.get("AGENTCTL_RELEASE", ROOT / "target" / "release"))
AGENTCTL = str(RELEASE / "agentctl")
SUMMARIZE = str(RELEASE / "examples" / "summarize")
HELPER = str(BUILD / "helper")
PUEUE = str(BUILD / "tools" / "bin" / "pueue")
PUEUED = str(BUILD / "tools" / "bin" / "pueued")
GIB = 1 << 30

ROWS = []


def quiet(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True, **kw)


def wall_ms(cmd, **kw):
    t = time.perf_counter()
    out = quiet(cmd, **kw)
    return (time.perf_counter() - t) * 1000, out.stdout


def stats(xs):
    xs = sorted(xs)
    p99 = xs[min(len(xs) - 1, int(len(xs) * 0.99))]
    return {"median": statistics.median(xs), "min": xs[0], "max": xs[-1], "p99": p99}


def fmt(s, unit, digits=1):
    return f"{s['median']:.{digits}f} {unit} ({s['min']:.{digits}f}–{s['max']:.{digits}f})"


def row(figure, ours, peers, ratio, target):
    ROWS.append((figure, ours, peers, ratio, target))
    print(f"  {figure}: {ours} | {peers} | {ratio} | {target}", flush=True)


def private_kib(pid):
    """Private memory of a process (clean + dirty), from smaps_rollup."""
    total = 0
    for line in pathlib.Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith(("Private_Clean:", "Private_Dirty:", "Private_Hugetlb:")):
            total += int(line.split()[1])
    return total


class Agentctl:
    """The release binary (or `binary`) with the home `tmp/name`."""

    def __init__(self, tmp, name="agentctl-home", binary=AGENTCTL):
        self.binary = binary
        self.home = tmp / name
        self.env = dict(os.environ, AGENTCTL_HOME=str(self.home))
        self.env.pop("AGENTCTL_SESSION", None)
        self.env.pop("AGENTCTL_TOKEN", None)
        # The figures count tasks running side by side, as pueue's `parallel` lets them: one
        # pool that holds them all (agentctl's default pool runs 16 at once). An older release
        # (--against) has no pools, and reads agents.toml only for `ask`, which no figure uses.
        self.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        (self.home / "agents.toml").write_text("[pools.default]\nparallel = 100000\n")

    def cmd(self, *args):
        return [self.binary, *args]

    def run(self, *args):
        return quiet(self.cmd(*args), env=self.env).stdout

    def start(self, *argv):
        return json.loads(self.run("--json", "run", "--async", "--", *argv))["token"]

    def db(self):
        """The home's database (agentctl made it: its schema, WAL); closed on leaving `with`."""
        return contextlib.closing(sqlite3.connect(self.home / "agentctl.db", timeout=60, isolation_level=None))

    def record(self, token):
        with self.db() as db:
            (text,) = db.execute("SELECT record FROM tasks WHERE token = ?", (token,)).fetchone()
        return json.loads(text)
