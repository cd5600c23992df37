"""`agentctl mcp`'s own options: the agent templates it uses (--agents) and the longest it
blocks in one call (--max-wait)."""

import subprocess
import time

import pytest
from conftest import BIN, FAKE, connect, server_env, wait_until

pytestmark = pytest.mark.anyio


def agents_file(path, role, text):
    path.write_text(f'[agents.{role}]\ncommand = ["{FAKE}", "sleep", "0", "{text}: {{question}}"]\n')
    return path


@pytest.mark.parametrize("where", ["--agents", "home", "xdg"])
async def test_ask_uses_the_same_agent_templates_as_the_cli(home, tmp_path, where):
    flags = []
    if where == "--agents":
        flags = ["--agents", str(agents_file(tmp_path / "agents.toml", "helper", "from --agents"))]
    elif where == "home":
        home.mkdir(mode=0o700)
        agents_file(home / "agents.toml", "helper", "from home")
    else:
        (home / "config" / "agentctl").mkdir(parents=True)
        agents_file(home / "config" / "agentctl" / "agents.toml", "helper", "from xdg")
    expected = {"--agents": "from --agents", "home": "from home", "xdg": "from xdg"}[where]
    async with connect(home, *flags) as c:
        r = await c.call_tool("ask", {"role": "helper", "question": "which template?"})
        assert not r.is_error, r.content[0].text
        assert r.structured_content["summary"] == f"{expected}: which template?"


async def test_ask_names_the_roles_and_refuses_a_misspelled_one(home, tmp_path):
    file = agents_file(tmp_path / "agents.toml", "reviewer", "reviewed")
    async with connect(home, "--agents", str(file)) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        roles = "Roles: reviewer, and built-in claude, codex, gemini, copilot, opencode, kiro (each runs that agent CLI)"
        assert f"{roles}; others run `kiro-cli`." in tools["ask"].description
        r = await c.call_tool("ask", {"role": "reviwer", "question": "typo?"})
        text = r.content[0].text
        assert r.is_error and "did you mean `reviewer`?" in text and "call `ask` again with one of them" in text, text
        assert str(tmp_path) not in text
        assert (await c.call_tool("list", {})).structured_content["tasks"] == []


@pytest.mark.parametrize("content,says", [(None, "does not exist"), ("command = [", "is not valid")])
def test_a_missing_or_broken_agents_file_is_refused_at_start(home, tmp_path, content, says):
    file = tmp_path / "agents.toml"
    if content is not None:
        file.write_text(content)
    out = subprocess.run(
        [BIN, "--home", str(home), "--agents", str(file), "mcp"],
        input="",
        capture_output=True,
        text=True,
        env=server_env(home),
        timeout=30,
    )
    assert out.returncode == 2, out
    assert out.stdout == ""
    assert str(file) in out.stderr and says in out.stderr, out.stderr


async def test_max_wait_caps_and_defaults_every_wait_and_says_so(home):
    async with connect(home, "--allow-run", "--max-wait", "1s") as c:
        r = await c.call_tool("run", {"command": [FAKE, "sleep", "60"], "async": True})
        token = r.structured_content["token"]

        # Above the cap: clamped, not refused, and the answer says so.
        t0 = time.monotonic()
        w = await c.call_tool("await", {"token": token, "timeout_secs": 300})
        took = time.monotonic() - t0
        assert 1 <= took < 30, took  # the upper bound is a hang guard
        assert not w.is_error and w.structured_content["timed_out"] is True
        note = w.structured_content["note"]
        assert "timeout_secs 300" in note and "max-wait of 1 s" in note, note
        assert note in w.content[0].text and "call `await`" in w.content[0].text

        # No timeout_secs: the cap is the default too.
        t0 = time.monotonic()
        w = await c.call_tool("await", {"token": token})
        assert 1 <= time.monotonic() - t0 < 30
        assert w.structured_content["timed_out"] is True and "note" not in w.structured_content

        t0 = time.monotonic()
        e = await c.call_tool("wait_for_event", {"session": "nobody", "timeout_secs": 120})
        assert 1 <= time.monotonic() - t0 < 30
        assert not e.is_error and e.structured_content["type"] == "timeout"
        assert "timeout_secs 120" in e.structured_content["note"] and "timeout_secs 120" in e.content[0].text

        # The hybrid wait of ask/run is capped as well (its 10 s default is above 1 s here).
        for args in ({"wait_secs": 90}, {}):
            t0 = time.monotonic()
            r = await c.call_tool("run", {"command": [FAKE, "sleep", "60"], **args})
            assert 1 <= time.monotonic() - t0 < 30
            assert r.structured_content["status"] == "running"
            if args:
                assert "wait_secs 90" in r.structured_content["note"], r.structured_content
            assert "1 s" in r.structured_content["next"]
            await c.call_tool("halt", {"token": r.structured_content["token"], "grace_secs": 0.1})

        # A wait below the cap is what was asked for, with nothing to note.
        w = await c.call_tool("await", {"token": token, "timeout_secs": 0.2})
        assert w.structured_content["timed_out"] is True and "note" not in w.structured_content
        await c.call_tool("halt", {"token": token, "grace_secs": 0.1})

        # A halt blocks for its grace period: capped the same way.
        r = await c.call_tool("run", {"command": ["sh", "-c", "trap '' TERM; echo trapped; sleep 60"], "async": True})
        # The start hands the task back before its agent runs: halt it once TERM is trapped.
        log = home / "subagents" / "run" / "data" / "history" / f"{r.structured_content['token']}.log"
        await wait_until("the trap to be set", lambda: log.exists() and "trapped" in log.read_text())
        t0 = time.monotonic()
        h = await c.call_tool("halt", {"token": r.structured_content["token"], "grace_secs": 120})
        assert 1 <= time.monotonic() - t0 < 30
        assert not h.is_error and h.structured_content["status"] == "cancelled"
        assert "grace_secs 120" in h.structured_content["note"], h.structured_content


async def test_a_wait_that_did_not_run_out_has_no_cap_to_note(home):
    async with connect(home, "--allow-run", "--max-wait", "1s") as c:
        tokens = []
        for _ in range(2):
            r = await c.call_tool("run", {"command": [FAKE, "sleep", "0", "done"], "async": True})
            tokens.append(r.structured_content["token"])
        for token in tokens:
            for _ in range(60):  # a hang guard: each call waits at most the 1 s cap
                w = await c.call_tool("await", {"token": token})
                if w.structured_content["status"] != "running":
                    break
            assert w.structured_content["status"] == "completed", w.structured_content

        # Already ended: nothing was waited for, so nothing was cut short by the cap.
        for args in ({"token": tokens[0]}, {"tokens": tokens}):
            w = await c.call_tool("await", {**args, "timeout_secs": 300})
            assert not w.is_error, w.content[0].text
            assert "max-wait" not in w.content[0].text and "max-wait" not in str(w.structured_content)

        # An event already queued: the wait did not run out either.
        await c.call_tool("notify", {"message": "hello", "session": "s"})
        e = await c.call_tool("wait_for_event", {"session": "s", "timeout_secs": 300})
        assert e.structured_content["type"] == "message" and "note" not in e.structured_content


@pytest.mark.parametrize("flags,cap", [((), "55 s"), (("--max-wait", "20s"), "20 s")])
async def test_descriptions_and_instructions_state_the_real_cap(home, flags, cap):
    async with connect(home, *flags) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        for name in ("await", "wait_for_event"):
            text = tools[name].description + str(tools[name].input_schema)
            assert cap in text and "300" not in text, (name, text)
        assert cap in tools["ask"].description
        assert cap in c.instructions and "300" not in c.instructions


def test_a_bad_max_wait_is_refused_at_start(home):
    out = subprocess.run(
        [BIN, "--home", str(home), "mcp", "--max-wait", "soon"],
        input="",
        capture_output=True,
        text=True,
        env=server_env(home),
        timeout=30,
    )
    assert out.returncode == 2 and out.stdout == "" and "invalid duration" in out.stderr, out
