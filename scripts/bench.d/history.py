"""A home's history at scale: what a long-used home holds, made fast, and how each command's time
there compares with an empty home's.

`fill` clones real finished tasks and events (run by agentctl, read back from its database)
under fresh tokens, sessions and times spread over months, straight into the database, in a few
big transactions; the database itself (schema, WAL) is agentctl's own. Each task also gets the
files a real home keeps: `tasks/<token>/lock` and `supervisor.err`, and its log and summary.
"""

import itertools
import json
import math
import os
import random
import subprocess
import threading
import time

from common import Agentctl, fmt, quiet, row, stats, wall_ms

DAY_MS = 86_400_000
# Roles and how often each is asked.
ROLES = {"run": 30, "coder": 30, "reviewer": 20, "tester": 15, "writer": 5}
OUTCOMES = {"completed": 80, "failed": 15, "cancelled": 5}
QUESTIONS = [
    "Fix the flaky test in tests/cli/listing.rs and say what caused it",
    "Review the diff of branch store for missing fsyncs",
    "Write the section of the README on retention",
    "cargo test --release -- --test-threads 2",
    "Find why prune is slow on a big home; measure before changing anything",
    "Summarise the open issues about MCP timeouts",
]
SUMMARIES = [
    "All 214 tests pass. The flake came from a fixed sleep in `wait_until_listed`; it now waits on the "
    "condition with a deadline.",
    "Two findings: `record_end` fsyncs the summary before the record (fine), but `remove_task` leaves the "
    "summary's temp file when the rename failed. Suggested fix attached as a patch in the log.",
    "Done: README section *Retention* (42 lines) covers --older-than, --keep, --dry-run and what happens to "
    "running tasks.",
    "error: 2 tests failed: faults::scale::thousand_tasks, cli::events::notify_reads_stdin",
]


def rfc3339(ms):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


def preview(summary):
    s = summary.strip()
    return s if len(s) <= 300 else s[:300] + "…"


def take_seeds(ag):
    """Real tasks of each outcome and real events, as agentctl stored them: the templates."""
    ag.run("run", "--sync", "--", "sh", "-c", "echo working; echo '> All tests pass.'")
    subprocess.run(ag.cmd("run", "--sync", "--", "sh", "-c", "echo oops >&2; exit 3"), env=ag.env, capture_output=True)
    ag.run("halt", ag.start("sleep", "600"), "--grace", "0.1s")
    notify = ag.cmd("notify")
    ag.run("run", "--sync", "--", *notify, "3 of 12 files done")
    ag.run("run", "--sync", "--", *notify, "--question", "Which branch should I rebase on?")
    ag.run("notify", "--session", "lead", "Stop after the tests pass")
    seeds = {"task": {}, "event": {}}
    with ag.db() as db:
        for status, rec, spec in db.execute(
            "SELECT status, record, coalesce((SELECT spec FROM specs WHERE specs.token = tasks.token), spec) "
            "FROM tasks ORDER BY created_at_ms"
        ):
            seeds["task"].setdefault(status, (json.loads(rec), json.loads(spec)))
        for kind, token, body in db.execute("SELECT kind, token, body FROM events ORDER BY seq"):
            body = json.loads(body)
            key = body["status"] if kind == "task_finished" else (kind, token is not None)
            seeds["event"].setdefault(key, body)
    return seeds


def log_text(rng, summary):
    lines = [f"[{i:03d}] step {i}: {rng.choice(QUESTIONS)}" for i in range(rng.randint(3, 40))]
    return ("\n".join(lines) + f"\n> {summary}\n").encode()


def fill(ag, seeds, tasks, events, now_ms, span_days=180, sessions=1000, rng_seed=1):
    """Put `tasks` finished tasks and `events` events (each task's `task_finished`, messages and
    questions from tasks, messages from leads) into the home of `ag`, which agentctl has made.
    Returns the tokens, oldest first."""
    rng = random.Random(rng_seed)
    with ag.db() as db:
        taken = {t for (t,) in db.execute("SELECT token FROM tasks")}
        first_seq = db.execute("SELECT coalesce(max(seq), 0) + 1 FROM events").fetchone()[0]
    tokens = []
    while len(tokens) < tasks:
        t = f"{rng.getrandbits(24):06x}"
        # Like agentctl's own: a letter other than `e`, so no client reads it as a number.
        if t not in taken and any(c in "abcdf" for c in t):
            taken.add(t)
            tokens.append(t)
    created = sorted(rng.sample(range(now_ms - span_days * DAY_MS, now_ms - DAY_MS), tasks))
    names = [f"lead-{i:04d}" for i in range(sessions)]
    texts = [(s, log_text(rng, s)) for s in SUMMARIES]
    pick = lambda weights: rng.choices(list(weights), list(weights.values()))[0]  # noqa: E731
    rows, ends, task_info = [], set(), []
    old_boot = f"{rng.getrandbits(128):032x}"
    for i, tok in enumerate(tokens):
        role, outcome, session = pick(ROLES), pick(OUTCOMES), rng.choice(names)
        started = created[i] + rng.randint(3, 12)
        ended = started + min(4 * 3_600_000, max(500, int(rng.lognormvariate(math.log(60_000), 1.2))))
        while ended in ends:
            ended += 1
        ends.add(ended)
        summary, log = rng.choice(texts)
        rec, spec = (json.loads(json.dumps(x)) for x in seeds["task"][outcome])
        pid = rng.randint(1000, 4_000_000)
        rec.update(token=tok, role=role, session=session, preview=rng.choice(QUESTIONS)[:80], created_at_ms=created[i])
        rec["started"].update(pid=pid + 1, supervisor_pid=pid, sid=pid, at_ms=started)
        rec["ended"].update(at_ms=ended, line_count=log.count(b"\n"))
        spec["env"].update(AGENTCTL_TOKEN=tok, AGENTCTL_SESSION=session, AGENTCTL_HOME=str(ag.home))
        compact = (",", ":")
        rows.append((tok, created[i], ended, outcome, role, json.dumps(rec, separators=compact, ensure_ascii=False),
                     json.dumps(spec, separators=compact, ensure_ascii=False)))
        task_info.append((tok, role, session, outcome, summary, started, ended))
        write_files(ag.home, tok, role, f"{pid} {pid} {rng.randint(10**5, 10**8)} {old_boot}\n", log, summary)
    with ag.db() as db:
        db.execute("BEGIN")
        db.executemany("INSERT INTO tasks (token, created_at_ms, ended_at_ms, status, role, record, summary) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?)", [(*r[:6], task_info[i][4]) for i, r in enumerate(rows)])
        db.executemany("INSERT INTO specs (token, spec) VALUES (?, ?)", [(r[0], r[6]) for r in rows])
        db.execute("COMMIT")
    del rows
    # The events, in time order as they would have come: (at_ms, kind, task index or session).
    timeline = [(info[6] + 1, 0, i) for i, info in enumerate(task_info)]
    from_tasks = round(0.8 * (events - tasks))
    for _ in range(from_tasks):
        i = rng.randrange(tasks)
        timeline.append((rng.randint(task_info[i][5], task_info[i][6]), 2 if rng.random() < 0.15 else 1, i))
    for _ in range(events - tasks - from_tasks):
        timeline.append((rng.randint(created[0], now_ms - DAY_MS), 3, rng.randrange(sessions)))
    timeline.sort()
    ev = seeds["event"]

    def event_rows():
        for n, (at, kind, who) in enumerate(timeline):
            if kind == 3:
                body = dict(ev[("message", False)], session=names[who], text=rng.choice(QUESTIONS))
                token = None
            else:
                tok, role, session, outcome, summary = task_info[who][:5]
                if kind == 0:
                    body = dict(ev[outcome], session=session, token=tok, role=role, summary=preview(summary))
                else:
                    template = ev[("question" if kind == 2 else "message", True)]
                    body = dict(template, session=session, token=tok, role=role, text=rng.choice(QUESTIONS))
                token = tok
            body.update(seq=first_seq + n, time=rfc3339(at))
            # Nearly all delivered; a few were never waited for.
            state = 0 if rng.random() < 0.01 else 2
            yield (first_seq + n, body["session"], body["type"], token, at, json.dumps(body, ensure_ascii=False), state)

    with ag.db() as db:
        db.execute("PRAGMA cache_size = -400000")
        rows = event_rows()
        for _ in range(0, events, 250_000):
            db.execute("BEGIN")
            db.executemany("INSERT INTO events (seq, session, kind, token, at_ms, body, state) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?)", itertools.islice(rows, 250_000))
            db.execute("COMMIT")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return tokens


def write_files(home, tok, role, lock, log, summary):
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    d = home / "tasks" / tok
    os.mkdir(d, 0o700)
    history = home / "subagents" / role / "data" / "history"
    history.mkdir(mode=0o700, parents=True, exist_ok=True)
    for path, data in [(d / "lock", lock.encode()), (d / "supervisor.err", b""),
                       (history / f"{tok}.log", log), (history / f"{tok}.summary.md", summary.encode())]:
        fd = os.open(path, flags, 0o600)
        os.write(fd, data)
        os.close(fd)


def blocked(pid, limit=10.0):
    """Wait until process `pid`'s main thread sleeps in epoll: a `wait` that has looked and found
    nothing, and now waits to be woken."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        with open(f"/proc/{pid}/wchan") as f:
            if f.read() == "do_epoll_wait":
                return
        time.sleep(0.0005)
    raise TimeoutError(f"process {pid} never blocked")


def wake(ag, session):
    """A waiter blocked on `session`, then `notify` to it: (notify start to the waiter's line,
    notify's own time), in ms."""
    waiter = subprocess.Popen(ag.cmd("wait", "--session", session, "--timeout", "60s"), env=ag.env,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    blocked(waiter.pid)
    woke = {}
    reader = threading.Thread(target=lambda: woke.update(line=waiter.stdout.readline(), at=time.perf_counter()))
    reader.start()
    t = time.perf_counter()
    quiet(ag.cmd("notify", "--session", session, "wake up"), env=ag.env)
    notified = time.perf_counter()
    reader.join(60)
    assert waiter.wait(60) == 0 and "wake up" in woke["line"], woke
    return (woke["at"] - t) * 1000, (notified - t) * 1000


def db_mib(ag):
    files = [ag.home / f"agentctl.db{suffix}" for suffix in ("", "-wal")]
    return sum(f.stat().st_size for f in files if f.exists()) / (1 << 20)


def fig_history(ag, pq, tmp, tasks=100_000, events=1_000_000, reps=60, prune=10_000):
    empty, big = Agentctl(tmp, "history-empty"), Agentctl(tmp, "history-big")
    # The same few real tasks in both; they are the templates of the big one's history.
    seeds = {h: take_seeds(h) for h in (empty, big)}
    t = time.perf_counter()
    fill(big, seeds[big], tasks, events, time.time_ns() // 1_000_000)
    print(f"  (filled the big home in {time.perf_counter() - t:.0f} s: {db_mib(big):.0f} MiB of database)", flush=True)
    # Completed ones: `await` exits with a failed task's code.
    with big.db() as db:
        history = [t for (t,) in db.execute("SELECT token FROM tasks WHERE status = 'completed'")]
    rng = random.Random(2)
    finished = {empty: lambda: seeds[empty]["task"]["completed"][0]["token"], big: lambda: rng.choice(history)}
    ratios(empty, big, finished, reps)
    list_pages(empty, big)
    prune_oldest(big, prune)


def alternately(empty, big, reps, warmup, measure):
    """`measure(home)` for each home in turn, `warmup` + `reps` times, which home goes first
    alternating so that neither gets the quieter moments; each home's results after warming up."""
    results = {empty: [], big: []}
    for rep in range(-warmup, reps):
        for h in (empty, big) if rep % 2 == 0 else (big, empty):
            got = measure(h, rep + warmup)
            if rep >= 0:
                results[h].append(got)
    return results


def ratios(empty, big, finished, reps):
    commands = {
        "start (`run --async -- true` until it returns)": lambda h: ["run", "--async", "--", "true"],
        "task end (`run --sync -- true`)": lambda h: ["run", "--sync", "--", "true"],
        "`status` of a finished task": lambda h: ["status", finished[h]()],
        "`await` of a finished task": lambda h: ["await", finished[h]()],
    }

    def measure(h, i):
        times = {name: wall_ms(h.cmd(*args(h)), env=h.env)[0] for name, args in commands.items()}
        woke, notified = wake(h, f"bench-{i}")
        return {**times, "`wait` wake latency (`notify` start to the blocked waiter's line)": woke, "`notify`": notified}

    results = alternately(empty, big, reps, 3, measure)
    for name in results[big][0]:
        b, e = (stats([r[name] for r in results[h]]) for h in (big, empty))
        row(f"9. history: {name}", f"big home {fmt(b, 'ms', 2)}", f"empty home {fmt(e, 'ms', 2)}",
            f"{b['median'] / e['median']:.2f}× empty", "≤ 1.5× empty")


def list_pages(empty, big, reps=21):
    pages = {"": ["list"], "--json ": ["--json", "list"], "--status running ": ["list", "--status", "running"]}
    results = alternately(empty, big, reps, 2, lambda h, _: {
        name: wall_ms(h.cmd(*args, "--limit", "50"), env=h.env)[0] for name, args in pages.items()
    })
    shown = {h: ", ".join(f"{name}{fmt(stats([r[name] for r in results[h]]), 'ms', 2)}" for name in pages)
             for h in (empty, big)}
    plain = {h: stats([r[""] for r in results[h]])["median"] for h in (empty, big)}
    row("9. history: a `list --limit 50` page", f"big home {shown[big]}", f"empty home {shown[empty]}",
        f"{plain[big] / plain[empty]:.2f}× empty", "< 50 ms")


def prune_oldest(big, n, figure="9. history", target="< 10 s"):
    with big.db() as db:
        (cutoff,) = db.execute("SELECT ended_at_ms FROM tasks WHERE ended_at_ms IS NOT NULL "
                               "ORDER BY ended_at_ms LIMIT 1 OFFSET ?", (n - 1,)).fetchone()
    before = db_mib(big)
    # Whole milliseconds, so that the cutoff agentctl computes a moment later is not earlier.
    age = time.time_ns() // 1_000_000 - cutoff
    ms, out = wall_ms(big.cmd("--json", "prune", "--older-than", f"{age // 1000}.{age % 1000:03d}"), env=big.env)
    pruned = json.loads(out)
    row(f"{figure}: `prune` of the {pruned['count']} oldest tasks and their {pruned['events_removed']} events",
        f"{ms / 1000:.2f} s", f"database {before:.0f} MiB before, {db_mib(big):.0f} MiB after", "-", target)
