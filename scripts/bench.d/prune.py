"""Figure 15: `prune` of the 5 000 oldest tasks of a 20 000-task, 200 000-event home (made as
figure 9 makes its big one) while one busy loop per core keeps the machine's cores busy."""

import os
import subprocess
import time

from common import Agentctl
from history import fill, prune_oldest, take_seeds


def fig_prune(ag, pq, tmp, tasks=20_000, events=200_000, n=5_000):
    home = Agentctl(tmp, "prune-home", binary=ag.binary)
    fill(home, take_seeds(home), tasks, events, time.time_ns() // 1_000_000)
    busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(os.cpu_count())]
    try:
        prune_oldest(home, n, figure="15. prune with every core busy", target="< 5 s")
    finally:
        for p in busy:
            p.kill()
            p.wait()
