"""What the tools answer at their edges: numbers out of range, halting what already ended,
refusals that name the next tool (never a command line), and tokens sent as numbers."""

import json
import subprocess

import anyio
import pytest
from conftest import BIN, FAKE, cli, connect, server_env

pytestmark = pytest.mark.anyio


async def test_a_token_sent_as_a_number_is_accepted(home):
    # Clients that coerce `key=value` arguments send an all-digit token (as older versions
    # made them) as a number; it is read as the zero-padded token it was.
    async with connect(home) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        for name in ("await", "halt", "logs"):
            assert tools[name].input_schema["properties"]["token"]["type"] == "string", name
            r = await c.call_tool(name, {"token": 4217})
            assert r.is_error and "no task 004217" in r.content[0].text, (name, r.content[0].text)
        for bad in (-1, 1234567, 4.5, True, None):
            r = await c.call_tool("await", {"token": bad})
            assert r.is_error and "no task" not in r.content[0].text, (bad, r.content[0].text)


# Every numeric seconds parameter of every tool, with the other arguments it needs.
SECONDS = [
    ("ask", "wait_secs", {"role": "reviewer", "question": "x"}),
    ("ask", "wait_secs", {"role": "reviewer", "question": "x", "async": True}),
    ("ask", "timeout_secs", {"role": "reviewer", "question": "x", "async": True}),
    ("run", "wait_secs", {"command": ["true"]}),
    ("run", "timeout_secs", {"command": ["true"], "async": True}),
    ("await", "timeout_secs", {"token": "abcdef"}),
    ("halt", "grace_secs", {"token": "abcdef"}),
    ("wait_for_event", "timeout_secs", {"session": "s"}),
]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_huge_number_is_an_error_result_and_the_server_keeps_serving(home, mode):
    async def call(c, tool, args):
        # A server that died leaves the call unanswered: fail instead of hanging.
        with anyio.fail_after(30):
            return await c.call_tool(tool, args)

    async with connect(home, "--allow-run", mode=mode) as c:
        for tool, param, args in SECONDS:
            r = await call(c, tool, {**args, param: 1e19})
            assert r.is_error, (tool, param, r)
            assert param in r.content[0].text and "too long" in r.content[0].text, (tool, r.content[0].text)
            listed = await call(c, "list", {})
            assert not listed.is_error and listed.structured_content["count"] == 0
        for param in ("tail_lines", "offset", "limit"):
            r = await call(c, "logs", {"token": "abcdef", param: 1e19})
            assert r.is_error, (param, r)
        assert not (await call(c, "list", {})).is_error


async def test_halting_a_task_that_already_ended_returns_its_end(home):
    async with connect(home, "--allow-run") as c:
        r = await c.call_tool("run", {"command": [FAKE, "fail", "3"]})
        token = r.structured_content["token"]
        assert r.structured_content["status"] == "failed"
        for _ in range(2):
            h = await c.call_tool("halt", {"token": token})
            assert h.is_error is False, h.content[0].text
            s = h.structured_content
            assert (s["token"], s["status"], s["exit_code"]) == (token, "failed", 3)
            assert "already ended" in s["note"] and "nothing was stopped" in s["note"], s["note"]
            assert s["note"] in h.content[0].text
        unknown = await c.call_tool("halt", {"token": "abcdef"})
        assert unknown.is_error and "no task abcdef" in unknown.content[0].text
    # The command line answers the same.
    out = subprocess.run([BIN, "--home", str(home), "halt", token], capture_output=True, text=True, env=server_env(home))
    assert out.returncode == 0 and "had already ended (failed); nothing was stopped" in out.stdout, out


def texts(result):
    """Everything a client sees of a result: its text and its structured content."""
    return " ".join(b.text for b in result.content) + json.dumps(result.structured_content)


async def test_refusals_name_the_tool_to_call_never_a_command_line(home):
    async with connect(home, "--allow-run") as c:
        r = await c.call_tool("run", {"command": [FAKE, "fail", "3"]})
        failed = r.structured_content["token"]
        answers = {
            "unknown token": await c.call_tool("await", {"token": "abcdef"}),
            "unknown token (halt)": await c.call_tool("halt", {"token": "abcdef"}),
            "unknown token (logs)": await c.call_tool("logs", {"token": "abcdef"}),
            "invalid token": await c.call_tool("await", {"token": "../etc"}),
            "invalid token (logs)": await c.call_tool("logs", {"token": "ABCDEF"}),
            "failed task": await c.call_tool("await", {"token": failed}),
            "finished halt": await c.call_tool("halt", {"token": failed}),
            "bad role": await c.call_tool("ask", {"role": "no/such", "question": "x"}),
            "bad status": await c.call_tool("list", {"status": "sleeping"}),
        }
        for what, a in answers.items():
            seen = texts(a)
            assert "agentctl " not in seen and "--home" not in seen, (what, seen)
        assert "`list`" in answers["unknown token"].content[0].text
        assert "`list`" in answers["invalid token"].content[0].text
    # The command line still gives its own advice.
    out = subprocess.run([BIN, "--home", str(home), "await", "abcdef"], capture_output=True, text=True, env=server_env(home))
    assert out.returncode == 2 and "`agentctl list`" in out.stderr and "--home" in out.stderr


async def test_list_pages_newest_first_and_stays_small(home):
    # 60 tasks with long questions and roles: one page is 50 at most and within the result
    # budget (8 KB, both copies), and the
    # cursor leads through the rest without repeating or skipping any.
    long_role = "r" * 64
    for i in range(60):
        out = subprocess.run(
            [BIN, "--home", str(home), "--json", "run", "--async", "--role", long_role, "--", FAKE, "sleep", "0", "q" * 500 + str(i)],
            capture_output=True, text=True, env=server_env(home),
        )
        assert out.returncode == 0, out.stderr
    async with connect(home) as c:
        seen, cursor, pages = [], None, 0
        while True:
            args = {} if cursor is None else {"cursor": cursor}
            r = await c.call_tool("list", args)
            assert not r.is_error, r.content[0].text
            size = len(json.dumps(r.structured_content, separators=(",", ":"), ensure_ascii=False).encode())
            assert size + len(r.content[0].text.encode()) <= 8192, size
            page = r.structured_content
            assert page["count"] == len(page["tasks"]) <= 50
            seen += [t["token"] for t in page["tasks"]]
            pages += 1
            cursor = page.get("next_cursor")
            if cursor is None:
                break
            assert cursor in r.content[0].text
        assert len(seen) == len(set(seen)) == 60 and pages >= 2
        # The same order as the command line's.
        assert seen == [t["token"] for t in cli(home, "list")["tasks"]]
        first = (await c.call_tool("list", {"limit": 1})).structured_content["tasks"][0]
        assert first["token"] == seen[0] and first["question"].endswith("…")
        bad = await c.call_tool("list", {"cursor": "../x"})
        assert bad.is_error and "leave it out for the first page" in bad.content[0].text
