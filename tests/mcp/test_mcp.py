"""`agentctl mcp` driven by the official MCP Python SDK (2.x) over stdio."""

import json
import os
from pathlib import Path
import signal
import statistics
import time

import anyio
import pytest
from conftest import FAKE, alive, cli, connect, open_fds, record, wait_until

pytestmark = pytest.mark.anyio

BASE_TOOLS = {"ask", "await", "halt", "list", "logs", "wait_for_event", "notify", "reply", "send", "usage"}


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_tools_are_listed_with_schemas_and_annotations(home, mode):
    async with connect(home, mode=mode) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert set(tools) == BASE_TOOLS
        # A role for a new task, or `to` for a follow-up: the question alone is required.
        assert tools["ask"].input_schema["required"] == ["question"]
        assert {"async", "wait_secs", "role", "to"} <= set(tools["ask"].input_schema["properties"])
        assert set(tools["await"].input_schema["properties"]) >= {"token", "timeout_secs"}
        for name in BASE_TOOLS:
            assert tools[name].output_schema["type"] == "object", name
        for name in ("list", "logs", "await", "usage"):
            assert tools[name].annotations.read_only_hint is True, name
        # Hints a client assumes anyway are left out: destructive is the default.
        assert tools["halt"].annotations.destructive_hint in (True, None)
        assert tools["halt"].annotations.idempotent_hint is True
    async with connect(home, "--allow-run", mode=mode) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert set(tools) == BASE_TOOLS | {"run"}
        assert tools["run"].input_schema["properties"]["command"]["type"] == "array"


async def test_server_identity_and_instructions(home):
    async with connect(home) as c:
        assert c.server_info.name == "agentctl"
        assert "await" in c.instructions and "halt" in c.instructions


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_ask_answers_quick_tasks_in_the_call(home, mode):
    async with connect(home, mode=mode) as c:
        t0 = time.monotonic()
        r = await c.call_tool("ask", {"role": "reviewer", "question": "quick one"})
        assert time.monotonic() - t0 < 8
        assert not r.is_error
        s = r.structured_content
        assert s["status"] == "completed" and s["exit_code"] == 0
        assert s["summary"] == "Final answer: [reviewer] quick one\nSecond line of the final answer."
        assert "Final answer: [reviewer] quick one" in r.content[0].text


async def test_ask_hands_back_a_token_after_the_wait_and_at_once_with_async(home):
    async with connect(home) as c:
        t0 = time.monotonic()
        r = await c.call_tool("ask", {"role": "reviewer", "question": "sleep 60"})
        waited = time.monotonic() - t0
        assert 10 <= waited < 30, waited  # the upper bound is a hang guard
        s = r.structured_content
        assert not r.is_error and s["status"] == "running" and len(s["token"]) == 6
        assert "`await`" in s["next"] and s["session"]

        t0 = time.monotonic()
        r2 = await c.call_tool("ask", {"role": "reviewer", "question": "sleep 60", "async": True})
        assert time.monotonic() - t0 < 30  # `starting` below shows it did not wait; a hang guard
        assert r2.structured_content["status"] == "starting"
        for t in (s["token"], r2.structured_content["token"]):
            await c.call_tool("halt", {"token": t, "grace_secs": 0.5})


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_await_times_out_without_error_then_returns_promptly(home, tmp_path, mode):
    async with connect(home, "--allow-run", mode=mode) as c:
        r = await c.call_tool("run", {"command": [FAKE, "tick", "30", "0.1"], "async": True})
        token = r.structured_content["token"]
        t0 = time.monotonic()
        w = await c.call_tool("await", {"token": token, "timeout_secs": 1})
        assert time.monotonic() - t0 >= 1
        assert not w.is_error
        assert w.structured_content["timed_out"] is True
        assert w.structured_content["status"] == "running"
        assert f"call `await` with token {token}" in w.structured_content["next"]
        assert w.structured_content["next"] in w.content[0].text

        slack = []
        for i in range(3):
            stamp = tmp_path / f"stamp{i}"
            r = await c.call_tool("run", {"command": [FAKE, "stamp", str(stamp), "1"], "async": True})
            w = await c.call_tool("await", {"token": r.structured_content["token"]})
            returned = time.time_ns()
            assert w.structured_content["status"] == "completed"
            assert w.structured_content["summary"] == "stamped"
            slack.append((returned - int(stamp.read_text())) / 1e6)
        # Far below any polling period; 500 ms is a loose guard for noisy machines.
        assert statistics.median(slack) < 500, slack


async def test_progress_arrives_and_cancelling_stops_waiting_but_not_the_task(home):
    async with connect(home, "--allow-run") as c:
        r = await c.call_tool("run", {"command": [FAKE, "tick", "200", "0.1"], "async": True})
        token = r.structured_content["token"]
        await wait_until("the task to run", lambda: record(home, token)["started"] is not None)
        sup = record(home, token)["started"]["supervisor_pid"]
        # The server has threads, so it executes the supervisor rather than forking it; the
        # supervisor names itself all the same.
        assert Path(f"/proc/{sup}/comm").read_text() == "agentctl-sv\n"
        assert Path(f"/proc/{sup}/cmdline").read_bytes().split(b"\0")[0] == b"agentctl"
        assert b"__supervise" in Path(f"/proc/{sup}/cmdline").read_bytes().split(b"\0")
        idle_fds = open_fds(sup)
        progress = []

        async def on_progress(value, total, message):
            progress.append((value, message))

        t_cancel = None
        with anyio.move_on_after(7):
            try:
                await c.call_tool("await", {"token": token, "timeout_secs": 60}, progress_callback=on_progress)
            finally:
                t_cancel = time.monotonic()
        assert time.monotonic() - t_cancel < 5, "cancelling did not return control at once"  # a hang guard
        assert len(progress) >= 1, progress
        assert progress[0][0] > 0 and "line(s) of output" in progress[0][1]
        # The server dropped its wait on the supervisor; the task goes on.
        await wait_until("the server to stop waiting", lambda: open_fds(sup) <= idle_fds, limit=10)
        s = await c.call_tool("await", {"token": token, "timeout_secs": 0.2})
        assert s.structured_content["status"] == "running"
        await c.call_tool("halt", {"token": token, "grace_secs": 0.5})


async def test_halt_ends_a_stubborn_agent_and_its_descendants(home, tmp_path):
    pidfile = tmp_path / "pids"
    async with connect(home, "--allow-run") as c:
        r = await c.call_tool("run", {"command": [FAKE, "grandchild", str(pidfile)], "async": True})
        token = r.structured_content["token"]
        await wait_until("the agent's pids", lambda: pidfile.exists() and pidfile.read_text().endswith("\n"))
        pids = [int(p) for p in pidfile.read_text().split()]
        t0 = time.monotonic()
        h = await c.call_tool("halt", {"token": token, "grace_secs": 1})
        took = time.monotonic() - t0
        assert 1 <= took < 10, took  # SIGKILL after the grace period; the upper bound is a hang guard
        assert not h.is_error
        assert h.structured_content["status"] == "cancelled"
        assert h.structured_content["summary"] == "partial: started a grandchild"
        assert not any(alive(p) for p in pids)
        again = await c.call_tool("halt", {"token": token})
        assert not again.is_error and again.structured_content["status"] == "cancelled"
        assert "already ended" in again.structured_content["note"]


async def test_tasks_survive_a_killed_server(home, tmp_path):
    pidfile = tmp_path / "server.pid"
    token = None
    with pytest.raises(BaseException):
        async with connect(home, "--allow-run", pidfile=pidfile) as c:
            r = await c.call_tool("run", {"command": [FAKE, "sleep", "2", "outlived the server"], "async": True})
            token = r.structured_content["token"]
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
            await c.call_tool("await", {"token": token, "timeout_secs": 30})
    assert token is not None
    listed = cli(home, "list")
    assert [t["token"] for t in listed["tasks"]] == [token]
    async with connect(home) as c:
        w = await c.call_tool("await", {"token": token, "timeout_secs": 30})
        assert w.structured_content["status"] == "completed"
        assert w.structured_content["summary"] == "outlived the server"


async def test_a_flooding_child_never_corrupts_the_stream(home):
    async with connect(home, "--allow-run") as c:
        r = await c.call_tool("run", {"command": [FAKE, "flood", "100000"], "wait_secs": 60})
        assert r.structured_content["status"] == "completed", r.content[0].text
        assert r.structured_content["summary"] == "flooded"
        assert r.structured_content["line_count"] == 200001
        listed = await c.call_tool("list", {})
        assert listed.structured_content["count"] == 1


async def test_logs_pages_a_large_log_within_the_asked_window(home):
    async with connect(home, "--allow-run") as c:
        r = await c.call_tool("run", {"command": ["seq", "1", "100000"], "wait_secs": 30})
        token = r.structured_content["token"]
        assert r.structured_content["line_count"] == 100000

        tail = (await c.call_tool("logs", {"token": token, "tail_lines": 50})).structured_content
        assert tail["lines"] == [str(i) for i in range(99951, 100001)]
        assert tail["offset"] == 99950 and "next_offset" not in tail

        page = (await c.call_tool("logs", {"token": token, "offset": 1000, "limit": 100})).structured_content
        assert page["lines"] == [str(i) for i in range(1001, 1101)]
        assert page["next_offset"] == 1100 and page["line_count"] == 100000

        # A page holds what the result budget (8 KB, both copies) allows, and says where to go on.
        big = await c.call_tool("logs", {"token": token, "offset": 0, "limit": 100000})
        lines = big.structured_content["lines"]
        n = len(lines)
        assert 300 < n < 1000 and lines[:-1] == [str(i) for i in range(1, n)]
        # It may end inside its last line: then the next page goes on from that character.
        column = big.structured_content.get("next_column")
        assert (big.structured_content["next_offset"], column) in [(n, None), (n - 1, len(lines[-1]))]
        assert str(n).startswith(lines[-1])
        assert len(json.dumps(big.structured_content, separators=(",", ":"))) + len(big.content[0].text) <= 8192

        bad = await c.call_tool("logs", {"token": "../etc"})
        assert bad.is_error and "invalid token" in bad.content[0].text
        unknown = await c.call_tool("await", {"token": "abcdef"})
        assert unknown.is_error and "no task abcdef" in unknown.content[0].text


async def test_failures_are_error_results_and_malformed_requests_protocol_errors(home):
    async with connect(home, "--allow-run") as c:
        r = await c.call_tool("run", {"command": [FAKE, "fail", "3"]})
        assert r.is_error
        assert r.structured_content["status"] == "failed" and r.structured_content["exit_code"] == 3
        negative = await c.call_tool("ask", {"role": "reviewer", "question": "x", "wait_secs": -1})
        assert negative.is_error and "wait_secs" in negative.content[0].text
        # Arguments that do not fit the schema come back as an error result the model can fix
        # (MCP 2025-11-25: input validation errors are tool execution errors)...
        bad_args = await c.call_tool("await", {"timeout_secs": 1})
        assert bad_args.is_error and "`await` needs `token`" in bad_args.content[0].text
        # ...while a request for a tool that does not exist is a protocol error.
        with pytest.raises(Exception, match="tool not found"):
            await c.call_tool("no_such_tool", {})


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_wait_for_event_returns_tasks_in_the_order_they_finish(home, mode):
    async with connect(home, mode=mode) as c:
        tokens = {}
        for secs in ("3", "1", "2"):
            r = await c.call_tool("ask", {"role": "worker", "question": f"sleep {secs}", "async": True, "session": "m"})
            tokens[secs] = r.structured_content["token"]
        for secs in ("1", "2", "3"):
            r = await c.call_tool("wait_for_event", {"session": "m", "timeout_secs": 30})
            e = r.structured_content
            assert not r.is_error
            assert (e["type"], e["token"], e["status"]) == ("task_finished", tokens[secs], "completed"), e
            assert e["summary"] == f"slept {secs}"
            assert e["token"] in r.content[0].text
        t0 = time.monotonic()
        r = await c.call_tool("wait_for_event", {"session": "m", "timeout_secs": 1})
        assert time.monotonic() - t0 >= 1
        assert not r.is_error and r.structured_content["type"] == "timeout"


async def test_notify_and_a_cancelled_wait_lose_no_event(home):
    async with connect(home) as c:
        with anyio.move_on_after(1):
            await c.call_tool("wait_for_event", {"session": "q", "types": ["question"], "timeout_secs": 30})
        posted = await c.call_tool("notify", {"session": "q", "message": "which branch?", "question": True})
        assert posted.structured_content["type"] == "question" and posted.structured_content["seq"] >= 1
        other = await c.call_tool("wait_for_event", {"session": "q", "types": ["message"], "timeout_secs": 0.3})
        assert other.structured_content["type"] == "timeout"
        got = await c.call_tool("wait_for_event", {"session": "q", "types": ["question"], "timeout_secs": 5})
        assert got.structured_content["text"] == "which branch?"
        bad = await c.call_tool("wait_for_event", {"types": ["everything"]})
        assert bad.is_error and "unknown event type" in bad.content[0].text


async def test_notify_calls_in_flight_together_are_each_posted_and_delivered_once(home):
    n = 300
    async with connect(home) as c:
        posted = {}

        async def post(i):
            r = await c.call_tool("notify", {"session": "bulk", "message": f"m{i}"})
            assert not r.is_error, r.content
            posted[i] = r.structured_content["seq"]

        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(post, i)
        assert len(posted) == n and len(set(posted.values())) == n, "each call got a seq of its own"
        taken = []
        for _ in range(n):
            r = await c.call_tool("wait_for_event", {"session": "bulk", "timeout_secs": 10})
            assert r.structured_content["type"] == "message", r.structured_content
            taken.append(r.structured_content["text"])
        assert sorted(taken) == sorted(f"m{i}" for i in range(n)), "each delivered once"
        left = await c.call_tool("wait_for_event", {"session": "bulk", "timeout_secs": 0.3})
        assert left.structured_content["type"] == "timeout"
