"""A pool's line, long against short: how fast it drains, what one more task costs to queue, and
what a task waiting in line holds, with 3 000 tasks in line against 250. Both lines stand at
once, in homes of their own; the launches alternate between them."""

import json
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from common import Agentctl, fmt, private_kib, row, stats, wall_ms

PLACES = 4
DRAINED = 200


class Line:
    """A home whose pool `line` (of `PLACES` places) is held by `sleep` tasks, with `n` tasks of
    `true` waiting behind them."""

    def __init__(self, tmp, n):
        self.ag = Agentctl(tmp, f"line-{n}")
        (self.ag.home / "agents.toml").write_text(f"[pools.line]\nparallel = {PLACES}\n")
        self.holders = [self.queue("sleep", "3600") for _ in range(PLACES)]
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda _: self.queue("true"), range(n)))
        self.n = n

    def queue(self, *argv):
        return json.loads(self.ag.run("--json", "run", "--async", "--pool", "line", "--", *argv))["token"]

    def waiting_kib(self, count=10):
        """Private memory of the supervisors of the last `count` tasks in line."""
        with self.ag.db() as db:
            rows = db.execute(
                "SELECT token FROM tasks WHERE status = 'queued' ORDER BY queue_seq DESC LIMIT ?", (count,)
            ).fetchall()
        pids = [int((self.ag.home / "tasks" / t / "lock").read_text().split()[0]) for (t,) in rows]
        return statistics.median(private_kib(p) for p in pids)

    def drain(self):
        """Free the places; tasks per second until `DRAINED` of the line have ended."""
        t0 = time.monotonic()
        halts = [threading.Thread(target=self.ag.run, args=("halt", t, "--grace", "0.1s")) for t in self.holders]
        for h in halts:
            h.start()
        with self.ag.db() as db:
            while db.execute("SELECT count(*) FROM tasks WHERE status = 'completed'").fetchone()[0] < DRAINED:
                time.sleep(0.02)
            rate = DRAINED / (time.monotonic() - t0)
            for h in halts:
                h.join()
            while db.execute("SELECT count(*) FROM tasks WHERE ended_at_ms IS NULL").fetchone()[0]:
                time.sleep(0.2)
        return rate


def fig_line(ag, pq, tmp, short=250, long=3000, reps=10):
    lines = {n: Line(tmp, n) for n in (short, long)}
    launches = {n: [] for n in lines}
    for rep in range(reps):
        for n in (short, long) if rep % 2 == 0 else (long, short):
            line = lines[n]
            cmd = line.ag.cmd("run", "--async", "--pool", "line", "--", "true")
            launches[n].append(wall_ms(cmd, env=line.ag.env)[0])
    kib = {n: line.waiting_kib() for n, line in lines.items()}
    drains = {n: line.drain() for n, line in lines.items()}
    s, l = (stats(launches[n]) for n in (short, long))
    many = f"{long:,}".replace(",", " ")
    row(
        f"11. a pool's line of {many} against {short} (drain of {DRAINED}, one more queued, memory of one in line)",
        f"{drains[long]:.0f} tasks/s; {fmt(l, 'ms', 1)}; {kib[long]:.0f} KiB",
        f"at {short}: {drains[short]:.0f} tasks/s; {fmt(s, 'ms', 1)}; {kib[short]:.0f} KiB",
        f"{drains[long] / drains[short]:.2f}× drain, {l['median'] / s['median']:.2f}× queue, "
        f"{kib[long] / kib[short]:.2f}× memory",
        "≥ 0.8× drain, ≤ 1.25× queue and memory",
    )
