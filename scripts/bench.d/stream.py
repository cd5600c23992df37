"""What reading an agent's structured stream costs its supervisor: a 1 GiB Claude Code stream
(`stream-json` events in its real shapes: a tool call, its output, a text block, each call's
usage) captured by a task whose agent kind is read (`claude`) against the same bytes captured as
plain output (`cat`), in CPU time (user + system, from the exited supervisor's own counters) and
peak memory."""

import json
import os
import pathlib
import time

from common import GIB, private_kib, row, stats

SESSION = "5e0c4a52-7d1f-4a43-9d0b-3c4fb0d3e001"


def compact(obj):
    """One event as Claude Code writes it: compact JSON."""
    return json.dumps(obj, separators=(",", ":"))


def stream_file(path, size=GIB):
    """Write `size` bytes of Claude Code's stream, its events in the shapes and key order
    Claude Code 2.1.197 wrote them (fixtures/transcripts/claude-stream.jsonl): per model call a
    1.5 KB text block and a tool call, one event each with the call's id and usage, then the
    tool's 6 KB output; the run's result at the end."""
    output = ("line of tool output " * 300)[:6000]
    text = ("Some reasoning about the change. " * 50)[:1500]
    with open(path, "w") as f:
        f.write(compact({"type": "system", "subtype": "init", "session_id": SESSION, "model": "claude-opus-4-8"}) + "\n")
        written, i = 0, 0
        while written < size:
            i += 1
            usage = {"input_tokens": 100 + i % 7, "cache_creation_input_tokens": 20, "cache_read_input_tokens": 3000, "output_tokens": 1}
            msg = lambda content: compact({  # noqa: E731
                "type": "assistant",
                "message": {"id": f"msg_{i:024x}", "type": "message", "role": "assistant", "model": "claude-opus-4-8",
                            "stop_reason": None, "stop_sequence": None, "content": [content], "usage": usage,
                            "context_management": None},
                "parent_tool_use_id": None, "session_id": SESSION, "uuid": f"{i:08x}-2fa0-4e51-9c5e-14968363af83",
            })
            lines = [
                msg({"type": "text", "text": text}),
                msg({"type": "tool_use", "id": f"toolu_{i:024x}", "name": "Bash",
                     "input": {"command": f"make test-{i}", "description": f"Run make test-{i}"}}),
                compact({"type": "user", "message": {"role": "user", "content": [
                    {"tool_use_id": f"toolu_{i:024x}", "type": "tool_result", "content": output, "is_error": False}]},
                    "parent_tool_use_id": None, "session_id": SESSION}),
            ]
            chunk = "\n".join(lines) + "\n"
            f.write(chunk)
            written += len(chunk)
        f.write(compact({"type": "result", "subtype": "success", "num_turns": i, "result": "done",
                            "session_id": SESSION, "total_cost_usd": 12.5,
                            "usage": {"input_tokens": 1, "output_tokens": 1}}) + "\n")


def adopt_orphans():
    """Become the subreaper of what we start: an exited supervisor stays a zombie until we wait
    for it, so its own CPU counters can be read."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_CHILD_SUBREAPER = 36
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def supervisor_costs(pid):
    """Follow supervisor `pid` until it exits: its own CPU seconds (user + system, not its
    agent's) and the most private memory it held (KiB, looked at every 10 ms)."""
    stat = pathlib.Path(f"/proc/{pid}/stat")
    end = time.monotonic() + 300
    peak = 0
    while True:
        fields = stat.read_text().rsplit(")", 1)[1].split()
        if fields[0] == "Z":
            break
        try:
            peak = max(peak, private_kib(pid))
        except (FileNotFoundError, ProcessLookupError):
            pass
        if time.monotonic() > end:
            raise TimeoutError(f"supervisor {pid} did not exit")
        time.sleep(0.01)
    # Its time on a CPU in nanoseconds (schedstat, user and system alike), else its user and
    # system ticks (fields 14 and 15 of stat, here 11 and 12, after the state): ticks are
    # 10 ms, too coarse for a difference of a few percent.
    try:
        secs = int(pathlib.Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (FileNotFoundError, IndexError, ValueError):
        secs = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    os.waitpid(pid, 0)
    return secs, peak


def fig_stream(ag, pq, tmp, n=5):
    adopt_orphans()
    log = tmp / "stream.jsonl"
    stream_file(log)
    # The same program under two names: `claude` is read as Claude Code's stream.
    bin_dir = tmp / "stream-bin"
    bin_dir.mkdir(exist_ok=True)
    claude = bin_dir / "claude"
    if not claude.exists():
        claude.symlink_to("/bin/cat")
    cpu = {"plain": [], "read": []}
    peak = {"plain": [], "read": []}
    usage = None
    for _ in range(n):
        for kind, program in (("plain", "/bin/cat"), ("read", str(claude))):
            token = ag.start(program, str(log))
            secs, kib = supervisor_costs(ag.record(token)["started"]["supervisor_pid"])
            out = json.loads(ag.run("--json", "await", token))
            cpu[kind].append(secs * 1000)
            peak[kind].append(kib)
            pathlib.Path(out["log_path"]).unlink()
            if kind == "read":
                usage = out.get("usage")
    assert usage and usage.get("cost_usd") == 12.5, usage
    p, r = stats(cpu["plain"]), stats(cpu["read"])
    mp, mr = stats(peak["plain"]), stats(peak["read"])
    row(
        "12. reading a 1 GiB Claude Code stream (supervisor CPU, peak memory)",
        f"{r['median']:.0f} ms CPU ({r['min']:.0f}–{r['max']:.0f}), {mr['median']:.0f} KiB peak",
        f"plain capture of the same bytes: {p['median']:.0f} ms CPU ({p['min']:.0f}–{p['max']:.0f}), {mp['median']:.0f} KiB peak",
        f"{r['median'] / p['median']:.2f}× the CPU, {mr['median'] - mp['median']:+.0f} KiB",
        "≤ 1.10×, ≤ +64 KiB",
    )
