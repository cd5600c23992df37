"""What agents spend and do, over MCP: a running claude task's step and spend in an `await`
that times out and in progress notifications."""

import pathlib
import time

import pytest
from conftest import ROOT, connect, wait_until

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
