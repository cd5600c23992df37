"""A worker asks, the lead answers through MCP, the worker goes on: through await, through
wait_for_event, and across a restart of the lead's server."""

import pytest
from conftest import BIN, connect

pytestmark = pytest.mark.anyio


def asker(question, choices="main,dev"):
    """A worker that asks its lead, then answers with what it was told."""
    return ["sh", "-c", f"a=$({BIN} ask-lead '{question}' --choices {choices} --timeout 120s) && echo \"> chose $a\""]


async def test_await_returns_the_question_and_reply_lets_the_worker_go_on(home):
    async with connect(home, "--allow-run") as c:
        token = (await c.call_tool("run", {"command": asker("which branch?"), "async": True})).structured_content["token"]
        w = await c.call_tool("await", {"token": token, "timeout_secs": 30})
        s = w.structured_content
        assert not w.is_error and s["status"] == "running" and "timed_out" not in s, s
        assert s["question"]["text"] == "which branch?" and s["question"]["choices"] == ["main", "dev"]
        assert "`reply`" in s["next"], s
        listed = (await c.call_tool("list", {})).structured_content["tasks"][0]
        assert listed["asks"].startswith("which branch?"), listed
        r = await c.call_tool("reply", {"token": token, "answer": "dev"})
        assert not r.is_error and r.structured_content["state"] == "answered", r.content[0].text
        done = (await c.call_tool("await", {"token": token, "timeout_secs": 30})).structured_content
        assert (done["status"], done["summary"]) == ("completed", "chose dev"), done
        again = await c.call_tool("reply", {"question_id": s["question"]["id"], "answer": "main"})
        assert again.is_error and "answered already" in again.content[0].text


async def test_wait_for_event_brings_the_question_with_its_id(home):
    async with connect(home, "--allow-run") as c:
        await c.call_tool("run", {"command": asker("deploy now?", "yes,no"), "async": True})
        e = (await c.call_tool("wait_for_event", {"timeout_secs": 30})).structured_content
        assert e["type"] == "question" and e["text"] == "deploy now?" and e["choices"] == ["yes", "no"], e
        assert e["question_id"] in e["next"] and "`reply`" in e["next"], e
        await c.call_tool("reply", {"question_id": e["question_id"], "answer": "no"})
        done = (await c.call_tool("wait_for_event", {"timeout_secs": 30})).structured_content
        assert (done["type"], done["summary"]) == ("task_finished", "chose no"), done


async def test_a_reply_after_the_leads_server_restarts_still_reaches_the_worker(home):
    async with connect(home, "--allow-run") as c:
        token = (await c.call_tool("run", {"command": asker("keep going?", "yes,no"), "async": True, "session": "lead"}))
        token = token.structured_content["token"]
        e = (await c.call_tool("wait_for_event", {"session": "lead", "timeout_secs": 30})).structured_content
        assert e["type"] == "question", e
    # A new server process, a new connection: the question is in the store.
    async with connect(home, "--allow-run") as c:
        r = await c.call_tool("reply", {"question_id": e["question_id"], "answer": "yes"})
        assert not r.is_error, r.content[0].text
        done = (await c.call_tool("await", {"token": token, "timeout_secs": 30})).structured_content
        assert (done["status"], done["summary"]) == ("completed", "chose yes"), done


async def test_send_reaches_a_worker_waiting_in_its_inbox(home):
    script = f"m=$({BIN} inbox --wait 30s) && echo \"> got $m\""
    async with connect(home, "--allow-run") as c:
        token = (await c.call_tool("run", {"command": ["sh", "-c", script], "async": True})).structured_content["token"]
        sent = await c.call_tool("send", {"token": token, "message": "use the dev branch"})
        assert not sent.is_error and sent.structured_content["session"] == f"inbox-{token}"
        assert sent.structured_content["to"] == "inbox" and "inbox" in sent.content[0].text, sent
        done = (await c.call_tool("await", {"token": token, "timeout_secs": 30})).structured_content
        assert done["summary"] == "got use the dev branch", done
