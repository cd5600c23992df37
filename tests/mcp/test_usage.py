"""What agents spend and do, over MCP: a running claude task's step and spend in an `await`
that times out and in progress notifications."""

import pathlib
import time

import pytest
from conftest import ROOT, cli, connect, wait_until

pytestmark = pytest.mark.anyio

CLAUDE = str(ROOT / "fixtures" / "stream" / "claude")


async def test_a_running_tasks_step_and_spend_show_in_a_timed_out_await_and_in_progress(home, tmp_path):
    gate = tmp_path / "gate"
    async with connect(home, "--allow-run") as c:
        r = await c.call_tool("run", {"command": [CLAUDE, "steps", str(gate)], "async": True})
        token = r.structured_content["token"]
        log = next(pathlib.Path(home).glob(f"subagents/run/data/history/{token}.log"))
        await wait_until("the Bash call in the log", lambda: "toolu_1" in log.read_text())
        written = time.monotonic()
        while True:
            a = await c.call_tool("await", {"token": token, "timeout_secs": 0.1})
            s = a.structured_content
            if s.get("step") == "Bash: sleep 5":
                break
            assert time.monotonic() - written < 20, s  # a hang guard
        shown = time.monotonic() - written
        assert s["status"] == "running" and s["timed_out"], s
        assert s["usage"]["cost_estimated"] and s["usage"]["turns"] == 1, s
        text = a.content[0].text
        assert "now: Bash: sleep 5; spent ~$0.0009" in text, text
        # About 0.25 s here (the supervisor looks at a followed log four times a second); 2 s is
        # a loose guard for noisy machines.
        assert shown < 2, shown

        progress = []

        async def on_progress(value, total, message):
            progress.append(message)
            gate.touch()

        done = await c.call_tool("await", {"token": token, "timeout_secs": 30}, progress_callback=on_progress)
        assert progress and "now: Bash: sleep 5" in progress[0], progress
        s = done.structured_content
        assert s["status"] == "completed" and "step" not in s, s
        assert s["usage"]["cost_usd"] == 0.0123 and "usage: $0.0123 · 320 tokens · 2 turns" in done.content[0].text, s
        # Its end's event says what it spent too.
        e = await c.call_tool("wait_for_event", {"timeout_secs": 10})
        assert e.structured_content["type"] == "task_finished", e.structured_content
        assert e.structured_content["usage"]["cost_usd"] == 0.0123, e.structured_content
        assert "usage: $0.0123 · 320 tokens · 2 turns" in e.content[0].text, e.content[0].text


def summed(home, tasks):
    """Group totals from each task's own `status --json`, the cost in billionths of a dollar."""
    groups = {}
    for token, role in tasks:
        u = cli(home, "status", token).get("usage")
        for g in (role, "total"):
            t = groups.setdefault(g, {"tasks": 0, "unknown": 0})
            t["tasks"] += 1
            t["unknown"] += u is None
            for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "turns"):
                if u and k in u:
                    t[k] = t.get(k, 0) + u[k]
            if u and "cost_usd" in u:
                t["cost_nano_usd"] = t.get("cost_nano_usd", 0) + round(u["cost_usd"] * 1e9)
    return groups


async def test_usage_by_role_over_mcp_adds_up_exactly_to_the_tasks_own_figures(home):
    tasks = []
    for i in range(20):
        if i % 3 == 0:
            role, argv = "priced", [CLAUDE, "figures", str(1000 + i), str(7 * i), str(i), "3", "2", f"0.{i + 1:02}12345678"]
        elif i % 3 == 1:
            role, argv = "estimated", [CLAUDE, "figures", str(200 + i), "9", "0", str(i), "1"]
        else:
            role, argv = "plain", ["sh", "-c", f"echo {i}"]
        tasks.append((cli(home, "run", "--sync", "--role", role, "--", *argv)["token"], role))
    want = summed(home, tasks)
    async with connect(home) as c:
        r = await c.call_tool("usage", {"by": "role"})
        assert not r.is_error, r.content[0].text
        s = r.structured_content
        keys = ["tasks", "unknown", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "turns",
                "cost_nano_usd"]
        got = {g["group"]: {k: g[k] for k in keys if k in g} for g in s["groups"]}
        got["total"] = {k: s["total"][k] for k in keys if k in s["total"]}
        assert got == want, (got, want)
        assert s == cli(home, "usage", "--by", "role"), "the CLI says the same"
        text = r.content[0].text
        assert text.splitlines()[-1].startswith("total: 20 tasks (6 unknown) · ~$"), text
        assert "plain: 6 tasks (6 unknown)" in text, text
        r = await c.call_tool("usage", {"since_secs": 0})
        assert r.structured_content["total"]["tasks"] == 0, r.structured_content
        r = await c.call_tool("usage", {"by": "model"})
        assert r.is_error, r.content[0].text
