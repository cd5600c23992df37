"""Figure 14: events posted in bulk. `notify` calls pipelined over one MCP connection (every
request written at once, raw JSON-RPC over stdio, so that the client costs next to nothing),
and 8 CLI processes posting at once: `notify --lines` fed a burst each, and `notify` run once
per event in 8 shell loops, beside the same loops running `/bin/true` (what a process costs
here). Then every event is looked for in the store: each text exactly once."""

import json
import shutil
import subprocess
import time

from common import Agentctl, row

PROCS = 8


def stored_once(ag, session, expected):
    """Whether the store holds each of `expected` texts of `session` exactly once."""
    with ag.db() as db:
        texts = [json.loads(b)["text"] for (b,) in db.execute("SELECT body FROM events WHERE session = ?", (session,))]
    return sorted(texts) == sorted(expected)


def mcp_pipelined(ag, n):
    server = subprocess.Popen(
        ag.cmd("mcp"), env=ag.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    send = lambda m: server.stdin.write(json.dumps({"jsonrpc": "2.0", **m}) + "\n")
    send({"id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
    server.stdin.flush()
    server.stdout.readline()
    send({"method": "notifications/initialized"})
    calls = "".join(
        json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                    "params": {"name": "notify", "arguments": {"message": f"m{i}", "session": "mcp"}}}) + "\n"
        for i in range(1, n + 1)
    )
    t = time.perf_counter()
    server.stdin.write(calls)
    server.stdin.flush()
    answered = 0
    while answered < n:
        reply = json.loads(server.stdout.readline())
        assert "result" in reply and not reply["result"].get("isError"), reply
        answered += 1
    rate = n / (time.perf_counter() - t)
    server.stdin.close()
    server.wait(timeout=60)
    return rate, stored_once(ag, "mcp", [f"m{i}" for i in range(1, n + 1)])


def cli_lines(ag, per):
    bursts = ["".join(f"l{p}-{i}\n" for i in range(per)) for p in range(PROCS)]
    t = time.perf_counter()
    procs = [
        subprocess.Popen(ag.cmd("notify", "--session", "lines", "--lines"), env=ag.env, stdin=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, text=True)
        for _ in range(PROCS)
    ]
    for p, burst in zip(procs, bursts):
        p.stdin.write(burst)
        p.stdin.close()
    assert all(p.wait() == 0 for p in procs)
    rate = PROCS * per / (time.perf_counter() - t)
    return rate, stored_once(ag, "lines", [f"l{p}-{i}" for p in range(PROCS) for i in range(per)])


def loops(argv_of, per, env):
    """`PROCS` shell loops, each running `argv_of(p, i)` `per` times: runs a second."""
    scripts = [" ; ".join(" ".join(argv_of(p, i)) + " >/dev/null" for i in range(per)) for p in range(PROCS)]
    t = time.perf_counter()
    procs = [subprocess.Popen(["sh", "-c", s], env=env) for s in scripts]
    assert all(p.wait() == 0 for p in procs)
    return PROCS * per / (time.perf_counter() - t)


def fig_notify(ag, pq, tmp, n=5000, per=1000, once=100):
    ag = Agentctl(tmp, "notify-home", binary=ag.binary)
    ag.run("notify", "--session", "warm", "up")
    mcp, mcp_ok = mcp_pipelined(ag, n)
    lines, lines_ok = cli_lines(ag, per)
    one_each = loops(lambda p, i: [ag.binary, "notify", "--session", "once", f"o{p}-{i}"], once, ag.env)
    once_ok = stored_once(ag, "once", [f"o{p}-{i}" for p in range(PROCS) for i in range(once)])
    # The program, not the shell's builtin: a process per event, as with notify.
    floor = loops(lambda p, i: [shutil.which("true")], once, ag.env)
    ok = lambda b: "each stored once" if b else "NOT each stored once"
    row(
        "14. notify in bulk (events a second)",
        f"MCP, {n} calls pipelined on one connection: {mcp:.0f}/s ({ok(mcp_ok)}); "
        f"{PROCS} processes of notify --lines, {per} lines each: {lines:.0f}/s ({ok(lines_ok)}); "
        f"{PROCS} shell loops of one notify per event: {one_each:.0f}/s ({ok(once_ok)})",
        f"the same loops running /bin/true: {floor:.0f}/s",
        f"one notify per event at {one_each / floor:.2f}× the loops of /bin/true",
        "≥ 5 000/s over MCP, ≥ 2 000/s from 8 processes",
    )
