"""`after` over MCP: a task waits `queued` for others, then starts with their answers in its
question (`{after}`); one whose prerequisite failed never runs."""

import anyio
import pytest
from conftest import cli, connect

pytestmark = pytest.mark.anyio


async def test_a_task_after_another_starts_with_its_answer_or_never_runs(home):
    gate = home / "gate"
    wait = f"while [ ! -e '{gate}' ]; do sleep 0.05; done"
    home.mkdir(parents=True, exist_ok=True)
    (home / "agents.toml").write_text('[agents.rev]\ncommand = ["sh", "-c", "echo \\"> $1\\"", "sh", "{question}"]\n')
    async with connect(home, "--allow-run") as c:
        async def run(args):
            r = await c.call_tool("run", {"async": True, **args})
            assert not r.is_error, r.content[0].text
            return r.structured_content["token"]

        plan = await run({"command": ["sh", "-c", f"{wait}; echo '> use a queue'"]})
        broken = await run({"command": ["sh", "-c", f"{wait}; exit 3"]})
        echo = ["sh", "-c", 'echo "> $1"', "sh"]
        asked = await c.call_tool("ask", {"role": "rev", "question": "Check: {after}", "after": [plan], "async": True})
        review = asked.structured_content["token"]
        never = await run({"command": echo + ["x"], "after": [plan, broken]})
        anyway = await run({"command": echo + ["ran"], "after": [broken], "after_any_end": True})
        waiting = cli(home, "status", never)
        assert waiting["status"] == "queued" and waiting["waiting_for"] == [plan, broken], waiting
        # What each pool can take now: two running, three waiting for them.
        listed = (await c.call_tool("list", {})).structured_content
        assert listed["pools"] == [{"pool": "default", "places": 16, "running": 2, "queued": 3}], listed
        unknown = await c.call_tool("run", {"command": ["true"], "after": ["abc123"]})
        assert unknown.is_error and "abc123" in unknown.content[0].text, unknown.content[0].text
        gate.write_text("")
        done = {}
        for t in (review, never, anyway):
            done[t] = (await c.call_tool("await", {"token": t, "timeout_secs": 30})).structured_content
        assert done[review]["summary"] == f"Check: ── task {plan} (run), completed ──\nuse a queue", done[review]
        assert done[never]["status"] == "cancelled" and f"task {broken}" in done[never]["note"], done[never]
        assert done[anyway]["summary"] == "ran", done[anyway]


async def test_hooks_and_memory_admission_through_mcp(home):
    """A hook runs for a task started over MCP; a pool short of memory holds its task, and
    `list` shows it waiting."""
    ends = home / "ends"
    home.mkdir(parents=True, exist_ok=True)
    (home / "agents.toml").write_text(
        f'[hooks]\non_end = ["sh", "-c", "echo $AGENTCTL_TOKEN $AGENTCTL_STATUS >> {ends}"]\n'
        '[pools.mem]\nmin_available_memory = "100T"\n'
    )
    async with connect(home, "--allow-run") as c:
        done = (await c.call_tool("run", {"command": ["true"], "wait_secs": 30})).structured_content
        assert done["status"] == "completed", done
        for _ in range(600):
            if ends.exists() and ends.read_text().strip():
                break
            await anyio.sleep(0.05)
        assert ends.read_text() == f"{done['token']} completed\n"
        held = cli(home, "run", "--async", "--pool", "mem", "--", "true")["token"]
        for _ in range(600):
            if "waiting for memory" in (cli(home, "status", held).get("summary") or ""):
                break
            await anyio.sleep(0.05)
        listed = (await c.call_tool("list", {})).structured_content
        assert {"pool": "mem", "places": 16, "running": 0, "queued": 1} in listed["pools"], listed
        assert "waiting for memory" in cli(home, "status", held)["summary"]
        await c.call_tool("halt", {"token": held})
