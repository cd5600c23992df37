"""Follow-ups over MCP: `ask` with `to` goes on with an ended task's conversation as its next
turn, across a restart of the server; a pruned token is refused naming `list`."""

import pytest
from conftest import ROOT, cli, connect

pytestmark = pytest.mark.anyio

CLAUDE = str(ROOT / "fixtures" / "stream" / "claude")


async def test_a_follow_up_goes_on_after_the_server_restarted(home):
    home.mkdir(parents=True, exist_ok=True)
    (home / "agents.toml").write_text(f'[agents.chat]\ncommand = ["{CLAUDE}", "echo", "{{question}}"]\n')
    async with connect(home) as c:
        r = await c.call_tool("ask", {"role": "chat", "question": "read the repo", "wait_secs": 30})
        first = r.structured_content
        assert first["status"] == "completed" and first["summary"] == "heard: read the repo", first
        token = first["token"]
        # An ended agent's result names the call that goes on with its conversation.
        assert f"`ask` with to: {token}" in r.content[0].text, r.content[0].text
    # Another server, as after a restart: the task and its agent's session are in the home.
    async with connect(home) as c:
        r = await c.call_tool("ask", {"to": token, "question": "now summarise it", "wait_secs": 30})
        s = r.structured_content
        assert not r.is_error and s["token"] == token and s["status"] == "completed", s
        assert s["summary"].startswith("heard: now summarise it (resumed "), s
        assert cli(home, "status", token)["turn"] == 2
        both = await c.call_tool("ask", {"to": token, "role": "chat", "question": "again"})
        assert both.is_error and "not both" in both.content[0].text, both.content[0].text
        # A fork: a new task from a copy of the conversation; the original stays at turn 2.
        f = await c.call_tool("ask", {"to": token, "fork": True, "question": "the other way", "wait_secs": 30})
        forked = f.structured_content
        assert forked["token"] != token and forked["summary"].startswith("heard: the other way (resumed "), forked
        assert cli(home, "status", token)["turn"] == 2
        alone = await c.call_tool("ask", {"role": "chat", "fork": True, "question": "x"})
        assert alone.is_error and "give `to` too" in alone.content[0].text, alone.content[0].text
    cli(home, "prune", "--keep", "0")
    async with connect(home) as c:
        gone = await c.call_tool("ask", {"to": token, "question": "still there?"})
        text = gone.content[0].text
        assert gone.is_error and token in text and "`list`" in text, text


async def test_send_steers_a_running_agent_that_reads_its_stdin(home):
    """A role whose agent reads user messages on its stdin: `send` puts the message into its
    conversation (`to: agent`), and the agent takes it within its running turn."""
    home.mkdir(parents=True, exist_ok=True)
    gate = home / "gate"
    (home / "agents.toml").write_text(
        f'[agents.steer]\ncommand = ["{CLAUDE}", "--input-format", "stream-json", "steer", "{gate}"]\n'
    )
    async with connect(home) as c:
        token = (await c.call_tool("ask", {"role": "steer", "question": "review it", "async": True})).structured_content["token"]
        sent = await c.call_tool("send", {"token": token, "message": "stop and report"})
        assert not sent.is_error and sent.structured_content == {"to": "agent"}, sent
        assert "conversation" in sent.content[0].text, sent.content[0].text
        gate.write_text("")
        done = (await c.call_tool("await", {"token": token, "timeout_secs": 30})).structured_content
        assert (done["status"], done["summary"]) == ("completed", "stopped: stop and report"), done
        late = await c.call_tool("send", {"token": token, "message": "too late"})
        assert late.is_error and "already ended" in late.content[0].text, late.content[0].text
